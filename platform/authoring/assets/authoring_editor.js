// The authoring pages' editors: CodeMirror 6 for the code files (the candidates' editor,
// with Python, indentation and Ctrl/Cmd-S to save), live Markdown previews rendered by
// the server's sanitizer, and a warning before leaving a page with unsaved changes.
//
// Without JavaScript every page still works: the code is a plain textarea, and previews
// are refreshed when the form is saved.
import { EditorView, basicSetup } from "codemirror";
import { keymap } from "@codemirror/view";
import { indentWithTab } from "@codemirror/commands";
import { python } from "@codemirror/lang-python";

const PREVIEW_DELAY_MS = 400;

function csrfToken(form) {
  const input = form && form.querySelector("input[name=csrfmiddlewaretoken]");
  if (input) return input.value;
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

function trackDirty(form) {
  const note = form.querySelector("[data-dirty-note]");
  let dirty = false;
  const mark = () => {
    dirty = true;
    if (note) note.hidden = false;
  };
  form.addEventListener("input", mark);
  form.addEventListener("submit", () => { dirty = false; });
  window.addEventListener("beforeunload", (event) => {
    if (dirty) { event.preventDefault(); event.returnValue = ""; }
  });
  return mark;
}

function setupCodeEditor(host) {
  const input = document.getElementById(host.dataset.input);
  const form = input.form;
  const markDirty = trackDirty(form);
  const saveKeys = keymap.of([{
    key: "Mod-s",
    preventDefault: true,
    run: () => { form.requestSubmit(); return true; },
  }, indentWithTab]);
  const view = new EditorView({
    doc: input.value,
    parent: host,
    extensions: [
      saveKeys,
      basicSetup,
      python(),
      EditorView.lineWrapping,
      // CodeMirror injects its theme as a <style>: the CSP lets it in with the page's nonce.
      EditorView.cspNonce.of(document.querySelector('meta[name="csp-nonce"]')?.content || ""),
      EditorView.updateListener.of((update) => {
        if (update.docChanged) {
          input.value = update.state.doc.toString();
          markDirty();
        }
      }),
    ],
  });
  input.hidden = true;
  window.overlapEditors = window.overlapEditors || {};
  window.overlapEditors[input.id] = view;
}

function setupPreviews(form) {
  const url = form.dataset.previewUrl;
  form.querySelectorAll("textarea[data-preview]").forEach((textarea) => {
    const box = textarea.parentElement.querySelector(".md-preview");
    if (!box) return;
    let timer = null;
    let sent = 0;
    textarea.addEventListener("input", () => {
      if (timer) clearTimeout(timer);
      timer = setTimeout(async () => {
        const mine = ++sent;
        try {
          const response = await fetch(url, {
            method: "POST",
            headers: { "X-CSRFToken": csrfToken(form) },
            body: new URLSearchParams({ text: textarea.value }),
          });
          // Sanitized by the server (Markdown, then nh3): the same HTML readers get.
          if (response.ok && mine === sent) box.innerHTML = await response.text();
        } catch {
          // Offline: the preview catches up on the next keystroke or on save.
        }
      }, PREVIEW_DELAY_MS);
    });
  });
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll(".code-editor[data-input]").forEach(setupCodeEditor);
  document.querySelectorAll("form[data-preview-url]").forEach((form) => {
    setupPreviews(form);
    trackDirty(form);
  });
});
