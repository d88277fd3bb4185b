// The candidate's code editor: CodeMirror 6 with Python, autosave and Ctrl/Cmd-Enter to run.
//
// Nothing typed is lost: every change is kept in localStorage until the server confirms
// it saved, and saves are retried with back-off while the network is down. On load, an
// unsaved local copy newer than the server's revision is restored and saved.
import { EditorView, basicSetup } from "codemirror";
import { keymap } from "@codemirror/view";
import { indentWithTab } from "@codemirror/commands";
import { python } from "@codemirror/lang-python";

const SAVE_DELAY_MS = 500;

function csrfToken() {
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

function setup(host) {
  const input = document.getElementById("code-input");
  const status = document.getElementById("save-status");
  const form = document.getElementById("run-form");
  const saveUrl = host.dataset.saveUrl;
  const storageKey = host.dataset.storageKey;
  const serverRevision = Number(host.dataset.revision || 0);
  let code = JSON.parse(document.getElementById("initial-code").textContent);

  const pending = readPending();
  if (pending && pending.basedOn >= serverRevision && pending.code !== code) {
    code = pending.code; // typed before a reload or while offline: keep it
  }

  let timer = null;
  let retryMs = 1000;
  let lastSaved = JSON.parse(document.getElementById("initial-code").textContent);
  let revision = serverRevision;

  function readPending() {
    try { return JSON.parse(localStorage.getItem(storageKey) || "null"); } catch { return null; }
  }
  function remember(text) {
    try { localStorage.setItem(storageKey, JSON.stringify({ code: text, basedOn: revision })); } catch {}
  }
  function show(text) { if (status) status.textContent = text; }

  async function save() {
    timer = null;
    const text = view.state.doc.toString();
    if (text === lastSaved) { show("Saved"); return; }
    show("Saving…");
    try {
      const response = await fetch(saveUrl, {
        method: "POST",
        headers: { "X-CSRFToken": csrfToken(), "Content-Type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ code: text }),
      });
      if (response.status === 410) { show("The interview has ended"); return; }
      if (!response.ok) { show(await response.text()); return; }
      lastSaved = text;
      revision = Number(response.headers.get("X-Revision") || revision);
      retryMs = 1000;
      if (view.state.doc.toString() === text) { localStorage.removeItem(storageKey); show("Saved"); }
    } catch {
      show("Offline: your code is kept here and will be saved when the connection is back");
      timer = setTimeout(save, retryMs);
      retryMs = Math.min(retryMs * 2, 15000);
    }
  }

  function changed(text) {
    input.value = text;
    remember(text);
    show("Editing…");
    if (timer) clearTimeout(timer);
    timer = setTimeout(save, SAVE_DELAY_MS);
  }

  const runKeys = keymap.of([{
    key: "Mod-Enter",
    preventDefault: true,
    run: () => { form.requestSubmit(); return true; },
  }, indentWithTab]);

  const view = new EditorView({
    doc: code,
    parent: host,
    extensions: [
      runKeys,
      basicSetup,
      python(),
      EditorView.lineWrapping,
      // CodeMirror injects its theme as a <style>: the CSP lets it in with the page's nonce.
      EditorView.cspNonce.of(document.querySelector('meta[name="csp-nonce"]')?.content || ""),
      EditorView.updateListener.of((update) => {
        if (update.docChanged) changed(update.state.doc.toString());
      }),
    ],
  });
  input.value = code;
  if (code !== lastSaved) changed(code);
  window.overlapEditor = view;
}

document.addEventListener("DOMContentLoaded", () => {
  const host = document.getElementById("editor");
  if (host) setup(host);
});
