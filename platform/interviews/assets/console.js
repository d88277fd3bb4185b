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
