// Integrity signals from the candidate's page, as CoderPad and CodeSignal record them: a
// paste into the editor (its length, and where the text came from: copied or cut inside
// the pad or already in it, the task's text, or outside) and leaving the page (another
// window or tab), with its end. The server stores each with its own time and orders them
// itself; this side only says what happened. The page tells the candidate up front.
import { EditorView } from "@codemirror/view";

const REMEMBERED_COPIES = 20;
const QUEUE = 50;            // kept while offline, sent when the socket is back
const BLINK_MS = 120;        // a focus loss shorter than this (a dialog flashing) is nothing

const squash = (text) => text.replace(/\s+/g, " ").trim();

function copiedText(state) {
  const ranges = state.selection.ranges;
  if (ranges.some((r) => !r.empty)) {
    return ranges.filter((r) => !r.empty).map((r) => state.sliceDoc(r.from, r.to)).join(state.lineBreak);
  }
  // With nothing selected CodeMirror copies (or cuts) the cursor's whole lines.
  return ranges.map((r) => state.doc.lineAt(r.head).text).join(state.lineBreak);
}

export function integritySignals({ send, taskElement }) {
  const copies = [];
  const queue = [];
  let taskText = null;
  let away = false;
  let leaving = null;

  function flush() { while (queue.length && send(queue[0])) queue.shift(); }
  function report(signal) {
    queue.push({ type: "signal", ...signal });
    if (queue.length > QUEUE) queue.shift();
    flush();
  }
  function sourceOf(text, state) {
    const plain = squash(text);
    if (!plain) return "pad";
    if (copies.some((c) => c === plain) || squash(state.doc.toString()).includes(plain)) return "pad";
    if (taskText === null) taskText = taskElement ? squash(taskElement.textContent || "") : "";
    if (taskText && taskText.includes(plain)) return "task";
    return "outside";
  }
  function remember(view) {
    const text = squash(copiedText(view.state));
    if (!text) return;
    copies.push(text);
    if (copies.length > REMEMBERED_COPIES) copies.shift();
  }
  function inserted(text, view) {
    if (!text) return;
    const signal = { kind: "paste", chars: Array.from(text).length, source: sourceOf(text, view.state) };
    // Sent just after the editor has applied (and sent) the paste itself, so the server
    // stores the change first and playback's marker lands on the pasted text.
    setTimeout(() => report(signal), 0);
  }

  // ---- leaving the page: window blur or a hidden tab, and coming back ----
  function leave() {
    if (away) {
      if (document.hidden) report({ kind: "away", reason: "hidden" }); // says more than blur
      return;
    }
    if (leaving) return;
    leaving = setTimeout(() => {
      leaving = null;
      away = true;
      report({ kind: "away", reason: document.hidden ? "hidden" : "blur" });
    }, BLINK_MS);
  }
  function back() {
    if (leaving) { clearTimeout(leaving); leaving = null; return; }
    if (!away) return;
    away = false;
    report({ kind: "back" });
  }
  window.addEventListener("blur", leave);
  window.addEventListener("focus", back);
  document.addEventListener("visibilitychange", () => (document.hidden ? leave() : back()));

  const extension = EditorView.domEventHandlers({
    copy: (event, view) => { remember(view); return false; },
    cut: (event, view) => { remember(view); return false; },
    paste: (event, view) => { inserted(event.clipboardData ? event.clipboardData.getData("text/plain") : "", view); return false; },
    drop: (event, view) => { inserted(event.dataTransfer ? event.dataTransfer.getData("text/plain") : "", view); return false; },
  });
  // A reload (or a tab restored) ends whatever absence the last page reported.
  function connected() {
    if (!away && document.visibilityState === "visible" && !queue.some((s) => s.kind === "back")) {
      queue.unshift({ type: "signal", kind: "back" });
    }
    flush();
  }
  return { extension, connected };
}
