// The interviewer's pages: copy the candidate link, print, phase countdowns.
function copyButtons() {
  document.querySelectorAll("[data-copy]").forEach((button) => {
    button.addEventListener("click", async () => {
      const input = document.getElementById(button.dataset.copy);
      if (!input) return;
      try {
        await navigator.clipboard.writeText(input.value);
      } catch {
        input.select(); // no clipboard permission: leave it selected for Ctrl+C
        document.execCommand && document.execCommand("copy");
      }
      const label = button.textContent;
      button.textContent = "Copied";
      setTimeout(() => { button.textContent = label; }, 1500);
    });
  });
  // data-print and data-confirm are handled site-wide (static/overlap/behaviours.js).
  document.querySelectorAll("input[data-select-on-focus]").forEach((input) => input.addEventListener("focus", () => input.select()));
}
document.addEventListener("DOMContentLoaded", copyButtons);

// The run panel (#runs) is fetched every second. An answer identical to what is shown is
// not swapped in, and a section opened by hand ("Output", "Errors") stays open when a
// changed answer is.
function keepRunPanel() {
  let shown = null;
  let opened = [];
  const key = (details) => {
    const run = details.closest(".run");
    const summary = details.querySelector("summary");
    return `${run ? run.id : ""}|${summary ? summary.textContent.trim() : ""}`;
  };
  document.body.addEventListener("htmx:beforeSwap", (event) => {
    const target = event.detail.target;
    if (!target || target.id !== "runs") return;
    const answer = event.detail.serverResponse;
    if (answer === shown) { event.detail.shouldSwap = false; return; }
    shown = answer;
    opened = Array.from(target.querySelectorAll("details[open]"), key);
  });
  document.body.addEventListener("htmx:afterSwap", () => {
    const panel = document.getElementById("runs");
    if (!panel || !opened.length) return;
    panel.querySelectorAll("details").forEach((details) => {
      if (opened.includes(key(details))) details.open = true;
    });
  });
}

// Switching phase opens that phase's section of the guide (and folds the one left).
function openPhaseGuide() {
  let before = null;
  const current = () => {
    const button = document.querySelector("#phases [aria-current=step]");
    return button ? button.dataset.phase : null;
  };
  document.body.addEventListener("htmx:beforeSwap", (event) => {
    if (event.detail.target && event.detail.target.id === "phases") before = current();
  });
  document.body.addEventListener("htmx:afterSettle", () => {
    const phase = current();
    if (!phase || before === null || phase === before) return;
    const left = document.querySelector(`details[data-guide-phase="${before}"]`);
    const section = document.querySelector(`details[data-guide-phase="${phase}"]`);
    before = null;
    if (left) left.open = false;
    if (section) {
      section.open = true;
      section.scrollIntoView({ block: "nearest" });
    }
  });
}
document.addEventListener("DOMContentLoaded", keepRunPanel);
document.addEventListener("DOMContentLoaded", openPhaseGuide);
