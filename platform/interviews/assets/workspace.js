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
