// The candidate's page around the pad: reload when the session moves on (lobby → live →
// ended), fetch a revealed hint at once and say so, and show times in the local zone.
function onReady() {
  // On a phone the task starts folded, so the editor is in reach; one tap opens it.
  const task = document.querySelector(".prompt-details");
  if (task && window.matchMedia("(max-width: 600px)").matches) task.open = false;
  document.addEventListener("overlap:state", (event) => {
    const state = event.detail.state;
    if (state && state !== document.body.dataset.sessionState) window.location.reload();
  });
  document.addEventListener("overlap:hint", (event) => {
    const number = event.detail.number;
    const notice = document.getElementById("hint-notice");
    document.body.dispatchEvent(new CustomEvent("overlap-hint"));
    document.body.addEventListener("htmx:afterSettle", function shown() {
      const hint = document.getElementById(`hint-${number}`);
      if (!hint) return;
      document.body.removeEventListener("htmx:afterSettle", shown);
      hint.classList.add("hint-new");
      hint.scrollIntoView({ behavior: "smooth", block: "center" });
      if (notice) {
        notice.hidden = false;
        notice.textContent = `Hint ${number} from your interviewer is shown in the task pane.`;
        setTimeout(() => { notice.hidden = true; }, 12000);
      }
    });
  });
  document.querySelectorAll("time[data-local-time]").forEach((node) => {
    const when = new Date(node.getAttribute("datetime"));
    if (isNaN(when)) return;
    const local = when.toLocaleString([], { dateStyle: "full", timeStyle: "short" });
    node.title = node.textContent;
    node.textContent = `${local} (your time)`;
  });
}
document.addEventListener("DOMContentLoaded", onReady);

// ---- a resizable split between the task, the editor and the results ----------------------
// Two dividers (role "separator": dragged with the mouse or a finger, or focused and moved
// with the arrow keys, Home/End), only where the three panes stand side by side. The split
// is kept in localStorage. Widths go through CSS custom properties (CSSOM, CSP-safe).
const SPLIT_KEY = "overlap:workspace-split";
const DEFAULT_SPLIT = [20, 54, 26]; // percent: the editor gets the most room
const MIN_PANE = 12;
const STEP = 2;

function loadSplit() {
  try {
    const saved = JSON.parse(localStorage.getItem(SPLIT_KEY) || "null");
    if (Array.isArray(saved) && saved.length === 3 && saved.every((n) => typeof n === "number" && n >= MIN_PANE)
        && Math.abs(saved.reduce((a, b) => a + b, 0) - 100) < 0.5) return saved;
  } catch { /* a broken value: the default */ }
  return DEFAULT_SPLIT.slice();
}

function resizablePanes() {
  const grid = document.querySelector(".workspace-grid");
  if (!grid) return;
  const panes = [grid.querySelector(".prompt-pane"), grid.querySelector(".editor-pane"), grid.querySelector(".results-pane")];
  if (panes.some((pane) => !pane)) return;
  let split = loadSplit();
  const names = ["the task and the editor", "the editor and the results"];
  const dividers = [0, 1].map((i) => {
    const divider = document.createElement("div");
    divider.className = "pane-divider";
    divider.setAttribute("role", "separator");
    divider.setAttribute("aria-orientation", "vertical");
    divider.setAttribute("aria-label", `Resize ${names[i]} (arrow keys)`);
    divider.setAttribute("aria-valuemin", String(MIN_PANE));
    divider.setAttribute("aria-valuemax", String(100 - MIN_PANE));
    divider.tabIndex = 0;
    panes[i].after(divider);
    return divider;
  });
  grid.classList.add("resizable");

  function apply(save) {
    grid.style.setProperty("--pane-task", `${split[0]}fr`);
    grid.style.setProperty("--pane-editor", `${split[1]}fr`);
    grid.style.setProperty("--pane-results", `${split[2]}fr`);
    dividers[0].setAttribute("aria-valuenow", String(Math.round(split[0])));
    dividers[1].setAttribute("aria-valuenow", String(Math.round(split[0] + split[1])));
    if (save) { try { localStorage.setItem(SPLIT_KEY, JSON.stringify(split)); } catch { /* this page only */ } }
  }
  // Move divider i to `at` percent of the grid's width (from its left edge), within bounds.
  function moveTo(i, at) {
    const left = i === 0 ? 0 : split[0];
    const right = i === 0 ? split[0] + split[1] : 100;
    const clamped = Math.max(left + MIN_PANE, Math.min(right - MIN_PANE, at));
    if (i === 0) split = [clamped, right - clamped, split[2]];
    else split = [split[0], clamped - left, 100 - clamped];
    apply(true);
  }
  dividers.forEach((divider, i) => {
    const position = () => (i === 0 ? split[0] : split[0] + split[1]);
    divider.addEventListener("keydown", (event) => {
      const moves = { ArrowLeft: -STEP, ArrowRight: STEP, ArrowUp: STEP, ArrowDown: -STEP };
      if (event.key in moves) moveTo(i, position() + moves[event.key]);
      else if (event.key === "Home") moveTo(i, 0);
      else if (event.key === "End") moveTo(i, 100);
      else return;
      event.preventDefault();
    });
    divider.addEventListener("dblclick", () => { split = DEFAULT_SPLIT.slice(); apply(true); });
    divider.addEventListener("pointerdown", (event) => {
      event.preventDefault();
      divider.setPointerCapture(event.pointerId);
      divider.classList.add("dragging");
      const box = grid.getBoundingClientRect();
      const move = (e) => moveTo(i, ((e.clientX - box.left) / box.width) * 100);
      const up = () => {
        divider.classList.remove("dragging");
        divider.removeEventListener("pointermove", move);
        divider.removeEventListener("pointerup", up);
        divider.removeEventListener("pointercancel", up);
      };
      divider.addEventListener("pointermove", move);
      divider.addEventListener("pointerup", up);
      divider.addEventListener("pointercancel", up);
    });
  });
  apply(false);
}

// ---- the candidate's earlier runs: the one opened is marked -------------------------------
function runHistory() {
  document.body.addEventListener("click", (event) => {
    const button = event.target.closest && event.target.closest(".run-open");
    if (!button) return;
    document.querySelectorAll(".run-open[aria-current]").forEach((b) => b.removeAttribute("aria-current"));
    button.setAttribute("aria-current", "true");
  });
}

document.addEventListener("DOMContentLoaded", () => { resizablePanes(); runHistory(); });
