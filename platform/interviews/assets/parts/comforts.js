// Editor comforts: font size and a light or dark theme, through CodeMirror's own theme
// extensions in compartments (switched without rebuilding the editor), kept in
// localStorage for the next session. The controls are optional: a page without them
// still gets the saved settings.
import { EditorView } from "@codemirror/view";
import { Compartment } from "@codemirror/state";
import { HighlightStyle, syntaxHighlighting } from "@codemirror/language";
import { tags as t } from "@lezer/highlight";

const KEY = "overlap:editor-settings";
const SIZES = [12, 13, 14, 15, 16, 18, 20, 22, 24];
const DEFAULTS = { fontSize: 14, theme: "light" };

// On a phone-sized screen the default is smaller: about 47 columns instead of 39 on a
// 390-px screen. A size the person chose is always kept.
const NARROW = "(max-width: 600px)";
const NARROW_FONT_SIZE = 12;
function defaultFontSize() {
  return window.matchMedia && window.matchMedia(NARROW).matches ? NARROW_FONT_SIZE : DEFAULTS.fontSize;
}

function saved() {
  try {
    const value = JSON.parse(localStorage.getItem(KEY) || "{}");
    return value && typeof value === "object" ? value : {};
  } catch { return {}; }
}
function settingsFrom(chosen) {
  const fontSize = SIZES.includes(chosen.fontSize) ? chosen.fontSize : defaultFontSize();
  const theme = chosen.theme === "dark" ? "dark" : "light";
  return { ...chosen, fontSize, theme };
}
export function loadSettings() { return settingsFrom(saved()); }
// Only what the person chose is kept (a theme picked on a phone does not make the phone's
// default size theirs on a desktop).
export function saveSettings(changes) {
  const chosen = { ...saved(), ...changes };
  try { localStorage.setItem(KEY, JSON.stringify(chosen)); } catch { /* private mode: this page only */ }
  return settingsFrom(chosen);
}

const darkColors = { background: "#1e2127", text: "#dfe3ea", gutter: "#262a31", muted: "#8a93a3", selection: "#3a4a66", cursor: "#f5f7fa" };
const darkTheme = EditorView.theme({
  "&": { color: darkColors.text, backgroundColor: darkColors.background },
  ".cm-content": { caretColor: darkColors.cursor },
  ".cm-cursor, .cm-dropCursor": { borderLeftColor: darkColors.cursor },
  "&.cm-focused > .cm-scroller > .cm-selectionLayer .cm-selectionBackground, .cm-selectionBackground, ::selection": { backgroundColor: darkColors.selection },
  ".cm-gutters": { backgroundColor: darkColors.gutter, color: darkColors.muted, borderRight: "1px solid #343a44" },
  ".cm-activeLine": { backgroundColor: "#ffffff0d" },
  ".cm-activeLineGutter": { backgroundColor: "#ffffff14", color: darkColors.text },
  ".cm-matchingBracket, .cm-nonmatchingBracket": { backgroundColor: "#4b5a7a", outline: "none" },
  ".cm-searchMatch": { backgroundColor: "#72531f" },
  ".cm-panels": { backgroundColor: darkColors.gutter, color: darkColors.text },
  ".cm-tooltip": { backgroundColor: darkColors.gutter, color: darkColors.text, border: "1px solid #343a44" },
  ".cm-error-line": { backgroundColor: "#4a1f22", boxShadow: "inset 3px 0 0 #ff8a80" },
}, { dark: true });
// Contrast of each colour on the background is at least 4.5:1 (WCAG AA).
const darkHighlight = HighlightStyle.define([
  { tag: [t.keyword, t.controlKeyword, t.definitionKeyword, t.moduleKeyword, t.operatorKeyword], color: "#c792ea" },
  { tag: [t.string, t.special(t.string)], color: "#a5d6a7" },
  { tag: [t.number, t.bool, t.null, t.atom], color: "#f7b267" },
  { tag: [t.comment, t.lineComment, t.blockComment], color: "#98a2b3", fontStyle: "italic" },
  { tag: [t.function(t.variableName), t.function(t.propertyName)], color: "#82b1ff" },
  { tag: [t.definition(t.variableName), t.className], color: "#ffd580" },
  { tag: [t.propertyName, t.attributeName], color: "#80deea" },
  { tag: [t.self, t.special(t.variableName)], color: "#ff9e80" },
  { tag: t.invalid, color: "#ff8a80" },
]);

function fontTheme(px) {
  return EditorView.theme({ "&": { fontSize: `${px}px` }, ".cm-gutters": { fontSize: `${px}px` } });
}
function colourTheme(theme) {
  return theme === "dark" ? [darkTheme, syntaxHighlighting(darkHighlight)] : [];
}

export function editorComforts() {
  const font = new Compartment();
  const colours = new Compartment();
  const settings = loadSettings();
  const extension = [font.of(fontTheme(settings.fontSize)), colours.of(colourTheme(settings.theme))];

  function apply(view, next) {
    view.dispatch({ effects: [font.reconfigure(fontTheme(next.fontSize)), colours.reconfigure(colourTheme(next.theme))] });
    view.dom.classList.toggle("editor-dark", next.theme === "dark");
    document.body.dataset.editorTheme = next.theme;
  }

  // Wire the page's controls (#editor-font-size, #editor-theme), when it has them.
  function bind(view) {
    const current = loadSettings();
    apply(view, current);
    const size = document.getElementById("editor-font-size");
    const theme = document.getElementById("editor-theme");
    if (size) {
      size.value = String(current.fontSize);
      size.addEventListener("change", () => apply(view, saveSettings({ fontSize: Number(size.value) })));
    }
    if (theme) {
      theme.value = current.theme;
      theme.addEventListener("change", () => apply(view, saveSettings({ theme: theme.value })));
    }
  }
  return { extension, bind };
}
