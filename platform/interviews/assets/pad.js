// The live pad: one document shared by the candidate and the interviewers, edited at once.
//
// CodeMirror 6 with @codemirror/collab; the server is the authority (it keeps the text and
// the ordered list of updates). Local changes are sent with the version they were made on;
// when someone else got there first, the server's updates arrive, collab rebases ours on
// top and we send again. Nothing acknowledged is lost, and nothing typed either: changes
// not yet confirmed are kept in localStorage (per tab) and sent after a reload or when the
// connection comes back. Run waits until the server has every change, and refuses offline.
import { EditorView, basicSetup } from "codemirror";
import { Decoration, keymap } from "@codemirror/view";
import { ChangeSet, Compartment, EditorState, StateEffect, StateField } from "@codemirror/state";
import { indentWithTab } from "@codemirror/commands";
import { indentUnit } from "@codemirror/language";
import { python } from "@codemirror/lang-python";
import { collab, getSyncedVersion, receiveUpdates, sendableUpdates } from "@codemirror/collab";
import { integritySignals } from "./parts/integrity.js";
import { editorComforts } from "./parts/comforts.js";
import { colorFor, peerJumps, peerWithRole, peersField, presenceLine, setPeer } from "./parts/peers.js";

const PRESENCE_EVERY_MS = 60;
const FOLLOW_PAUSE_MS = 4000; // following waits this long after the interviewer's own edit

// ---- only text the server can store ---------------------------------------------------
// PostgreSQL cannot store a NUL or half of a surrogate pair, and the server refuses a
// change that holds one (it would be sent again and again, and everything typed after it
// would wait behind it). Pasted or typed, each becomes U+FFFD here, before it is sent: one
// UTF-16 unit for one, so every position and the selection stay where they were.
const UNSTORABLE = /[\0\p{Cs}]/gu;

const storableText = EditorState.transactionFilter.of((tr) => {
  if (!tr.docChanged) return tr;
  const fixes = [];
  tr.changes.iterChanges((fromA, toA, fromB, toB, inserted) => {
    for (const match of inserted.toString().matchAll(UNSTORABLE)) {
      fixes.push({ from: fromB + match.index, to: fromB + match.index + match[0].length, insert: "\ufffd" });
    }
  });
  return fixes.length ? [tr, { changes: fixes, sequential: true }] : tr;
});

const setErrorLine = StateEffect.define();

const errorLineField = StateField.define({
  create: () => Decoration.none,
  update(deco, tr) {
    deco = deco.map(tr.changes);
    for (const effect of tr.effects) {
      if (!effect.is(setErrorLine)) continue;
      const line = effect.value;
      if (!line || line > tr.state.doc.lines) { deco = Decoration.none; continue; }
      const start = tr.state.doc.line(line).from;
      deco = Decoration.set([Decoration.line({ class: "cm-error-line", attributes: { title: "The error is on this line" } }).range(start)]);
    }
    return deco;
  },
  provide: (field) => EditorView.decorations.from(field),
});

// Transactions made by the person at this keyboard (typing, deleting, moving the cursor).
const OWN_EVENTS = ["input", "delete", "select", "move", "undo", "redo"];

// ---- small helpers -----------------------------------------------------------------------
function randomId() {
  const bytes = new Uint8Array(9);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text != null) node.textContent = text;
  return node;
}

// ---- the pad -------------------------------------------------------------------------------
function setup(host) {
  const role = host.dataset.role;
  const storagePrefix = host.dataset.storageKey;
  const status = document.getElementById("pad-status");
  const tabKey = `${storagePrefix}:client`;
  let clientID = sessionStorage.getItem(tabKey);
  if (!clientID) { clientID = randomId(); sessionStorage.setItem(tabKey, clientID); }
  const pendingKey = `${storagePrefix}:pending:${clientID}`;

  let view = null;
  let restoring = false; // re-applying changes kept from before a reload: no push yet
  let socket = null;
  let online = false;
  let pushing = false;
  let retryMs = 500;
  let lastPresence = 0;
  let presenceTimer = null;
  let readonly = host.dataset.readonly === "true";
  let follow = role === "interviewer";
  let ownActivityAt = 0; // the last edit or cursor move made here, by this person
  let markErrorLine = null; // set below when the page shows run results
  const editable = new Compartment();
  const waiters = [];
  const comforts = editorComforts();
  // The candidate's pastes and absences go to the interviewer (the page says so).
  const signals = role === "candidate" ? integritySignals({
    send: (message) => { if (!online || !socket || socket.readyState !== WebSocket.OPEN) return false; send(message); return true; },
    taskElement: document.querySelector(".prompt-pane"),
  }) : null;

  function show(text, kind) {
    if (!status) return;
    status.textContent = text;
    status.dataset.kind = kind || "";
  }
  function readPending() {
    try { return JSON.parse(localStorage.getItem(pendingKey) || "null"); } catch { return null; }
  }
  function remember() {
    if (!view) return;
    const updates = sendableUpdates(view.state);
    try {
      if (!updates.length) localStorage.removeItem(pendingKey);
      else localStorage.setItem(pendingKey, JSON.stringify({
        version: getSyncedVersion(view.state), updates: updates.map((u) => u.changes.toJSON()),
      }));
    } catch { /* storage full or disabled: the in-memory copy still syncs */ }
  }
  function synced() { return !!view && online && sendableUpdates(view.state).length === 0; }
  function settle() {
    if (!view) return;
    const waiting = sendableUpdates(view.state).length;
    if (!online) show("Offline: your changes are kept here and will sync when the connection is back", "offline");
    else if (waiting) show("Syncing…", "busy");
    else show(readonly ? "Read-only" : "All changes saved", readonly ? "readonly" : "ok");
    if (synced()) while (waiters.length) waiters.shift()(true);
  }

  function send(message) {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
  }
  function push() {
    if (!view || pushing || !online || restoring) return;
    const updates = sendableUpdates(view.state);
    if (!updates.length) return;
    pushing = true;
    const sel = view.state.selection.main;
    send({
      type: "push", version: getSyncedVersion(view.state),
      updates: updates.map((u) => ({ clientID: u.clientID, changes: u.changes.toJSON() })),
      cursor: { anchor: sel.anchor, head: sel.head }, // our cursor rides along with the text
    });
    lastPresence = Date.now();
  }
  function receive(version, updates) {
    const local = getSyncedVersion(view.state);
    if (version > local) { send({ type: "pull", version: local }); return; }
    const fresh = updates.slice(local - version);
    if (!fresh.length) return;
    view.dispatch(receiveUpdates(view.state, fresh.map((u) => ({
      clientID: u.clientID, changes: ChangeSet.fromJSON(u.changes),
    }))));
    remember(); // confirmed changes leave the local copy
  }
  function sendPresence() {
    presenceTimer = null;
    if (!view || !online) return;
    lastPresence = Date.now();
    const sel = view.state.selection.main;
    send({ type: "presence", anchor: sel.anchor, head: sel.head });
  }
  function presenceSoon() {
    if (presenceTimer) return;
    presenceTimer = setTimeout(sendPresence, Math.max(0, PRESENCE_EVERY_MS - (Date.now() - lastPresence)));
  }
  function applyReadonly(value) {
    readonly = value;
    if (view) view.dispatch({ effects: editable.reconfigure([EditorState.readOnly.of(value), EditorView.editable.of(!value)]) });
    document.body.classList.toggle("pad-readonly", value);
    settle();
  }

  function createEditor(hello) {
    const pending = readPending();
    const form = document.getElementById("run-form");
    // Under the editor (outside the box that scrolls): who is out of sight, and where.
    const jumpBar = el("div", "peer-jumps");
    jumpBar.setAttribute("aria-label", "People whose cursors are out of sight");
    host.after(jumpBar);
    const people = document.getElementById("pad-people"); // the console's "who is here"
    const extensions = [
      keymap.of([{ key: "Mod-Enter", preventDefault: true, run: () => { if (form) form.requestSubmit(); return true; } }, indentWithTab]),
      basicSetup,
      python(),
      indentUnit.of("    "),
      EditorState.tabSize.of(4),
      EditorView.lineWrapping,
      // CodeMirror injects its theme as a <style>: the CSP lets it in with the page's nonce.
      EditorView.cspNonce.of(document.querySelector('meta[name="csp-nonce"]')?.content || ""),
      collab({ startVersion: hello.version, clientID }),
      storableText,
      peersField,
      peerJumps(jumpBar),
      people ? presenceLine(people, people.dataset.candidateName || "The candidate") : [],
      errorLineField,
      comforts.extension,
      signals ? signals.extension : [],
      editable.of([EditorState.readOnly.of(readonly), EditorView.editable.of(!readonly)]),
      EditorView.contentAttributes.of({ "aria-label": "Code editor (shared with your " + (role === "candidate" ? "interviewer" : "candidate") + ")" }),
      EditorView.updateListener.of((update) => {
        if (update.transactions.some((tr) => OWN_EVENTS.some((kind) => tr.isUserEvent(kind)))) {
          ownActivityAt = Date.now();
        }
        if (update.docChanged) { remember(); push(); settle(); }
        if (update.selectionSet && !update.docChanged) presenceSoon(); // typing: sent with the push
      }),
    ];
    host.textContent = "";
    view = new EditorView({ state: EditorState.create({ doc: hello.doc, extensions }), parent: host });
    window.overlapEditor = view;
    comforts.bind(view);
    // Changes typed before a reload (or while offline) that the server may not have yet.
    if (pending && pending.version === hello.version) {
      restoring = true;
      for (const changes of pending.updates) {
        try { view.dispatch({ changes: ChangeSet.fromJSON(changes) }); } catch { break; }
      }
      restoring = false;
    }
    setupFollow();
    if (markErrorLine) markErrorLine(); // a result shown with the page (after a reload)
  }

  function setupFollow() {
    const toggle = document.getElementById("follow-toggle");
    if (!toggle) return;
    toggle.checked = follow;
    toggle.addEventListener("change", () => { follow = toggle.checked; followNow(); });
    // Scrolling by hand always wins: following stops, nothing pulls the view back.
    const stop = () => { if (follow) { follow = false; toggle.checked = false; } };
    view.scrollDOM.addEventListener("wheel", stop, { passive: true });
    view.scrollDOM.addEventListener("touchmove", stop, { passive: true });
    view.scrollDOM.addEventListener("keydown", (e) => { if (["PageUp", "PageDown"].includes(e.key)) stop(); });
  }

  // Following never pulls the view away from where the interviewer is typing: it waits
  // until they have been still for a few seconds, then catches up with the candidate's
  // cursor (even if the candidate has stopped moving by then).
  let followTimer = null;
  function followNow() {
    if (followTimer) { clearTimeout(followTimer); followTimer = null; }
    if (!view || !follow) return;
    const still = Date.now() - ownActivityAt;
    if (still < FOLLOW_PAUSE_MS) { followTimer = setTimeout(followNow, FOLLOW_PAUSE_MS - still + 20); return; }
    const candidate = peerWithRole(view.state, "candidate");
    if (candidate) view.dispatch({ effects: EditorView.scrollIntoView(candidate.head, { y: "nearest" }) });
  }

  function onPresence(message) {
    if (!view || message.peer === (window.overlapPad.you || {}).peer) return;
    view.dispatch({ effects: setPeer.of({
      peer: message.peer, name: message.name, role: message.role,
      anchor: message.anchor, head: message.head, color: colorFor(message.name || "?"),
    }) });
    if (message.role === "candidate" && message.head != null) followNow();
  }

  function onMessage(event) {
    const message = JSON.parse(event.data);
    switch (message.type) {
      case "hello":
        window.overlapPad.you = message.you;
        if (!view) createEditor(message);
        applyReadonly(message.readonly);
        receive(message.version, message.updates);
        chat.reset(message.chat || []);
        if (message.head > getSyncedVersion(view.state)) send({ type: "pull", version: getSyncedVersion(view.state) });
        push();
        presenceSoon();
        if (signals) signals.connected();
        // A run may have finished while this socket was down: let the page look again.
        document.body.dispatchEvent(new CustomEvent("overlap-run", { detail: {} }));
        break;
      case "updates":
        receive(message.version, message.updates);
        if (message.cursor) onPresence(message.cursor);
        if (message.pushed) pushing = false; // our own, accepted
        push();
        break;
      case "pushed":
        pushing = false;
        if (message.refused) { show(message.refused, "error"); setTimeout(push, 2000); break; }
        if (!message.ok) send({ type: "pull", version: getSyncedVersion(view.state) });
        else push();
        break;
      case "presence": onPresence(message); break;
      case "joined": presenceSoon(); break; // a newcomer: tell them where we are
      case "chat": chat.add(message.message, true); break;
      case "refused": show(message.message, "error"); break;
      case "readonly":
        if (role === "interviewer" && message.interviewer_readonly != null) applyReadonly(message.interviewer_readonly);
        break;
      case "state":
        if (message.state === "ended") applyReadonly(true);
        document.dispatchEvent(new CustomEvent("overlap:state", { detail: message }));
        break;
      case "hint": document.dispatchEvent(new CustomEvent("overlap:hint", { detail: message })); break;
      // A run's status changed: the run panels (hx-trigger "overlap-run from:body") fetch it now.
      case "run": document.body.dispatchEvent(new CustomEvent("overlap-run", { detail: message })); break;
      // The time left changed, or (interviewers) a paste or an absence was recorded:
      // the panels listening for these (hx-trigger "… from:body") fetch what they show.
      case "clock": document.body.dispatchEvent(new CustomEvent("overlap-clock")); break;
      case "integrity": document.body.dispatchEvent(new CustomEvent("overlap-integrity", { detail: message })); break;
      case "revoked": show("This link is no longer valid; ask your interviewer for the new one.", "error"); break;
    }
    settle();
  }

  const RECONNECT_MAX_MS = 1000;
  let reconnectTimer = null;
  function connect() {
    reconnectTimer = null;
    if (socket && socket.readyState <= WebSocket.OPEN) return;
    const version = view ? getSyncedVersion(view.state) : (readPending() || {}).version;
    const url = new URL(host.dataset.wsUrl, window.location.href);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    if (version != null) url.search = `?v=${version}`;
    const ws = new WebSocket(url);
    socket = ws;
    ws.addEventListener("open", () => { online = true; retryMs = 500; });
    ws.addEventListener("message", onMessage);
    ws.addEventListener("close", (event) => {
      if (socket !== ws) return;
      online = false; pushing = false;
      settle();
      if (event.code === 4403 || event.code === 4410) { show("This link is no longer valid.", "error"); return; }
      if (!reconnectTimer) reconnectTimer = setTimeout(connect, retryMs);
      // At most a second between tries: when the server or its database comes back, both
      // sides are typing again within a second or so (a try is one cheap handshake).
      retryMs = Math.min(retryMs * 2, RECONNECT_MAX_MS);
    });
  }
  // The browser knows first: offline means no pretending (changes queue, Run refuses).
  window.addEventListener("offline", () => { if (socket) socket.close(); online = false; settle(); });
  window.addEventListener("online", () => {
    if (reconnectTimer) { clearTimeout(reconnectTimer); reconnectTimer = null; }
    retryMs = 500;
    // Whatever socket lived through the offline spell (one may hang connecting, or have
    // swallowed a push) is dropped: a fresh one resyncs and pushes what is pending.
    if (socket) {
      const stale = socket;
      socket = null;
      try { stale.close(); } catch (error) { /* already closing */ }
    }
    online = false;
    pushing = false;
    connect();
  });

  // ---- chat ----
  const chat = (() => {
    const log = document.getElementById("chat-log");
    const chatForm = document.getElementById("chat-form");
    const seen = new Set();
    // A message from the other side while the chat is out of sight (it sits below the
    // editor and the runs): a notice at the bottom of the window says who wrote what, and
    // takes you to the chat. It goes once the chat is in sight.
    const section = log && log.closest(".chat");
    let inSight = true, unread = 0, notice = null;
    function clearNotice() {
      unread = 0;
      if (notice) { notice.remove(); notice = null; }
    }
    if (section && "IntersectionObserver" in window) {
      new IntersectionObserver((entries) => {
        inSight = entries.some((entry) => entry.isIntersecting);
        if (inSight) clearNotice();
      }, { threshold: 0.25 }).observe(section);
    }
    function tell(m) {
      if (inSight || !section) return;
      unread += 1;
      if (!notice) {
        notice = el("button", "chat-unread");
        notice.type = "button";
        notice.addEventListener("click", () => {
          section.scrollIntoView({ block: "center" });
          const input = document.getElementById("chat-input");
          if (input) input.focus({ preventScroll: true });
          clearNotice();
        });
        document.body.appendChild(notice);
      }
      const text = m.text.length > 90 ? `${m.text.slice(0, 89)}…` : m.text;
      notice.textContent = `${unread === 1 ? "New message" : `${unread} new messages`} · ${m.author}: ${text}`;
    }
    function add(m, live) {
      if (!log || !m || seen.has(m.id)) return;
      seen.add(m.id);
      const item = el("li", `chat-message chat-${m.role}`);
      const when = new Date(m.at);
      item.append(el("strong", "chat-author", m.author), el("time", "muted small", when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })), el("p", "chat-text", m.text));
      log.appendChild(item);
      log.scrollTop = log.scrollHeight;
      if (m.role !== role) {
        document.dispatchEvent(new CustomEvent("overlap:chat", { detail: m }));
        if (live) tell(m);
      }
    }
    function reset(messages) { messages.forEach((m) => add(m, false)); }
    if (chatForm) {
      chatForm.addEventListener("submit", (e) => {
        e.preventDefault();
        const input = chatForm.querySelector("[name=text]");
        if (!input.value.trim()) return;
        if (!online) { show("Offline: the message was not sent", "offline"); return; }
        send({ type: "chat", text: input.value });
        input.value = "";
      });
    }
    return { add, reset };
  })();

  // ---- Run: only with every change on the server (it grades its own copy) ----
  document.body.addEventListener("htmx:confirm", (event) => {
    const form = event.target.closest && event.target.closest("#run-form, .run-current");
    if (!form) return;
    event.preventDefault();
    const refuse = document.getElementById("run-refused");
    if (refuse) refuse.textContent = "";
    if (!online) {
      if (refuse) refuse.textContent = "You are offline: your code is kept here, and Run works again when the connection is back.";
      return;
    }
    const versionInput = form.querySelector("[name=version]");
    const go = () => { if (versionInput) versionInput.value = getSyncedVersion(view.state); event.detail.issueRequest(true); };
    if (synced()) { go(); return; }
    show("Syncing before the run…", "busy");
    const timer = setTimeout(() => { if (refuse) refuse.textContent = "Your latest changes have not reached the server yet; try Run again in a moment."; }, 5000);
    waiters.push(() => { clearTimeout(timer); go(); });
  });

  // ---- the error line of the latest run, marked in the editor ----
  const results = document.getElementById("run-result") || document.getElementById("runs");
  if (results) {
    let shownRun = null;  // the run whose error line was last scrolled to
    const mark = () => {
      if (!view) return;
      const run = results.querySelector(".run[data-error-line]");
      const line = run ? Number(run.dataset.errorLine) : 0;
      const effects = [setErrorLine.of(line)];
      // "The error is on line N (marked in the editor)": bring it into view, once per run.
      const key = run ? (run.id || "") + ":" + line : null;
      if (line > 0 && line <= view.state.doc.lines && key !== shownRun) {
        effects.push(EditorView.scrollIntoView(view.state.doc.line(line).from, { y: "center" }));
        shownRun = key;
      }
      view.dispatch({ effects });
    };
    new MutationObserver(mark).observe(results, { childList: true, subtree: true });
    markErrorLine = mark;
  }

  window.overlapPad = {
    synced,
    version: () => (view ? getSyncedVersion(view.state) : -1),
    peers: () => (view ? Array.from(view.state.field(peersField).values()).map((p) => p.name) : []),
    setFollow: (value) => { follow = value; followNow(); },
  };
  connect();
}

document.addEventListener("DOMContentLoaded", () => {
  const host = document.getElementById("editor");
  if (host && host.dataset.wsUrl) setup(host);
});
