// The other people in the pad: their cursors and selections, each with its owner's name,
// and, for anyone whose cursor is out of sight, a button under the editor that says where
// they are ("↓ Lin Chen · line 57") and scrolls there. Nobody has to hunt for the person
// they are talking to.
import { Decoration, EditorView, ViewPlugin, WidgetType } from "@codemirror/view";
import { StateEffect, StateField } from "@codemirror/state";

const COLORS = 6; // .peer-0 … .peer-5 in site.css (classes, not inline styles: CSP)

export const setPeer = StateEffect.define();

export function colorFor(name) {
  let hash = 0;
  for (const ch of name) hash = (hash * 31 + ch.charCodeAt(0)) >>> 0;
  return hash % COLORS;
}

// The name shows when its owner moves, then fades (site.css) so that it does not cover the
// code above it for long: a new `moved` stamp makes a new label, which starts the fade over.
class CursorWidget extends WidgetType {
  constructor(name, color, moved) { super(); this.name = name; this.color = color; this.moved = moved; }
  eq(other) { return other.name === this.name && other.color === this.color && other.moved === this.moved; }
  // The name is drawn by CSS (::after { content: attr(data-name) }): no text node, so text
  // committed through the browser's input path (IME, dictation) can never take it along
  // into the document, and the widget is not editable.
  toDOM() {
    const wrap = document.createElement("span");
    wrap.className = `remote-cursor peer-${this.color}`;
    wrap.contentEditable = "false";
    wrap.setAttribute("aria-hidden", "true");
    const label = document.createElement("span");
    label.className = "remote-cursor-name";
    label.dataset.name = this.name;
    wrap.appendChild(label);
    return wrap;
  }
  ignoreEvent() { return true; }
}

export const peersField = StateField.define({
  create: () => new Map(),
  update(peers, tr) {
    let next = peers;
    // A peer's positions come from its own copy of the text, which may be ahead of ours:
    // clamp them before mapping them through our changes.
    const before = tr.startState.doc.length, after = tr.newDoc.length;
    if (tr.docChanged && peers.size) {
      next = new Map();
      for (const [id, p] of peers) {
        next.set(id, { ...p, anchor: tr.changes.mapPos(Math.min(p.anchor, before)),
                       head: tr.changes.mapPos(Math.min(p.head, before)) });
      }
    }
    for (const effect of tr.effects) {
      if (!effect.is(setPeer)) continue;
      if (next === peers) next = new Map(peers);
      const p = effect.value;
      if (p.anchor == null) next.delete(p.peer);
      else next.set(p.peer, { ...p, anchor: Math.min(p.anchor, after), head: Math.min(p.head, after), moved: Date.now() });
    }
    return next;
  },
  provide: (field) => EditorView.decorations.compute([field], (state) => {
    const length = state.doc.length;
    const ranges = [];
    for (const p of state.field(field).values()) {
      const anchor = Math.min(p.anchor, length), head = Math.min(p.head, length);
      const from = Math.min(anchor, head), to = Math.max(anchor, head);
      if (from < to) {
        ranges.push(Decoration.mark({ class: `remote-selection peer-${p.color}` }).range(from, to));
      }
      ranges.push(Decoration.widget({ widget: new CursorWidget(p.name, p.color, p.moved), side: 1 }).range(head));
    }
    return Decoration.set(ranges, true);
  }),
});

/** The latest known cursor of the first peer with this role, or null. */
export function peerWithRole(state, role) {
  for (const p of state.field(peersField).values()) if (p.role === role) return p;
  return null;
}

// ---- who is out of sight, and a way to get there ------------------------------------------
// The editor scrolls inside its pane and the page scrolls too: what the person sees is the
// editor's box cut by every box that clips it, and by the window.
function visibleBand(view) {
  let top = 0, bottom = window.innerHeight;
  for (let node = view.scrollDOM; node && node !== document.body; node = node.parentElement) {
    const style = getComputedStyle(node);
    if (node === view.scrollDOM || style.overflowY !== "visible") {
      const box = node.getBoundingClientRect();
      top = Math.max(top, box.top);
      bottom = Math.min(bottom, box.bottom);
    }
  }
  return { top, bottom };
}

function whereIs(view, pos, band) {
  // Exact coordinates where the line is drawn; the line's estimated block elsewhere.
  const coords = view.coordsAtPos(pos);
  let top, bottom;
  if (coords) ({ top, bottom } = coords);
  else {
    const block = view.lineBlockAt(pos);
    top = view.documentTop + block.top;
    bottom = view.documentTop + block.bottom;
  }
  if (bottom <= band.top + 2) return "above";
  if (top >= band.bottom - 2) return "below";
  return null;
}

/** Buttons under the editor for the peers whose cursors are out of sight. `bar` is an
 * element of the page (kept in the layout, so nothing below it jumps). */
export function peerJumps(bar) {
  return ViewPlugin.fromClass(class {
    constructor(view) {
      this.view = view;
      this.shown = "";
      this.schedule = () => view.requestMeasure({ key: this, read: () => this.read(), write: (out) => this.write(out) });
      // Any box that scrolls (the pane, the page) moves the view: scroll does not bubble,
      // so listen while it is captured on the way down.
      window.addEventListener("scroll", this.schedule, { capture: true, passive: true });
      window.addEventListener("resize", this.schedule, { passive: true });
      this.schedule();
    }
    update(update) {
      if (update.docChanged || update.viewportChanged || update.geometryChanged
          || update.startState.field(peersField) !== update.state.field(peersField)) this.schedule();
    }
    read() {
      const { view } = this;
      const peers = view.state.field(peersField);
      const out = [];
      if (!peers.size) return out; // alone: no layout to read on every keystroke
      const band = visibleBand(view);
      if (band.bottom <= band.top) return out; // the editor itself is out of sight
      // (peersField keeps every head inside the document.)
      for (const p of peers.values()) {
        const where = whereIs(view, p.head, band);
        if (where) out.push({ ...p, where, line: view.state.doc.lineAt(p.head).number });
      }
      return out;
    }
    write(out) {
      const key = JSON.stringify(out.map((p) => [p.peer, p.where, p.line]));
      if (key === this.shown) return;
      this.shown = key;
      bar.replaceChildren(...out.map((p) => {
        const button = document.createElement("button");
        button.type = "button";
        button.className = `peer-jump peer-${p.color} outline`;
        button.dataset.name = p.name;
        button.dataset.where = p.where;
        button.textContent = `${p.where === "above" ? "↑" : "↓"} ${p.name} · line ${p.line}`;
        button.title = `Show ${p.name}'s cursor (line ${p.line}, ${p.where})`;
        button.addEventListener("click", () => {
          const now = this.view.state.field(peersField).get(p.peer);
          if (now) this.view.dispatch({ effects: EditorView.scrollIntoView(now.head, { y: "center" }) });
        });
        return button;
      }));
    }
    destroy() {
      window.removeEventListener("scroll", this.schedule, { capture: true });
      window.removeEventListener("resize", this.schedule);
      bar.replaceChildren();
    }
  });
}

// ---- who is in the pad (the console) --------------------------------------------------
/** Keeps `element` saying whether the candidate has the pad open, and who else is here.
 * Everyone's page says where its cursor is when it connects and when someone else does,
 * and the server says when a page has gone, so this is known without anyone typing. */
export function presenceLine(element, candidateName) {
  const render = (state) => {
    const peers = Array.from(state.field(peersField).values());
    const here = peers.some((p) => p.role === "candidate");
    const others = [...new Set(peers.filter((p) => p.role !== "candidate").map((p) => p.name))];
    const text = `${candidateName} ${here ? "is in the pad" : "is not in the pad"}`
      + (others.length ? ` · also here: ${others.join(", ")}` : "");
    if (element.textContent === text) return; // read out once, not on every keystroke
    element.textContent = text;
    element.dataset.candidate = here ? "here" : "away";
  };
  return ViewPlugin.fromClass(class {
    constructor(view) { render(view.state); }
    update(update) {
      if (update.startState.field(peersField) !== update.state.field(peersField)) render(update.state);
    }
  });
}
