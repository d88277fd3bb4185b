// Small page behaviours written as data attributes, because the Content-Security-Policy
// forbids inline handlers (onclick=, onsubmit=):
//   <form data-confirm="Really?">   asks before the form is submitted
//   <input data-select-on-click>     selects its whole text when clicked
//   <button data-print>              opens the print dialog
//   <button data-enlarge>            enlarges its <figure> to the window (again, or Esc: back)
// and one for every page: an htmx request the server could not answer (502/504 from a
// proxy while the web server restarts, or no answer at all) shows a banner saying the work
// is kept, instead of nothing; the next answered request takes it away. (A 503 carries the
// server's own "temporarily unavailable" page, which htmx swaps in: base.html's config.)
(function () {
  function unavailable(show) {
    var banner = document.getElementById("server-unavailable");
    if (!show) {
      if (banner) banner.remove();
      return;
    }
    if (banner) return;
    banner = document.createElement("p");
    banner.id = "server-unavailable";
    banner.className = "notice error server-unavailable";
    banner.setAttribute("role", "alert");
    banner.textContent = "The server is temporarily unavailable. Your work is kept: " +
      "try again in a moment.";
    document.body.prepend(banner);
  }
  document.addEventListener("htmx:responseError", function (event) {
    var status = event.detail && event.detail.xhr ? event.detail.xhr.status : 0;
    if (status === 502 || status === 503 || status === 504) unavailable(true);
  });
  document.addEventListener("htmx:sendError", function () { unavailable(true); });
  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail && event.detail.successful) unavailable(false);
  });
  document.addEventListener("submit", function (event) {
    var form = event.target.closest && event.target.closest("form[data-confirm]");
    if (form && !window.confirm(form.dataset.confirm)) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  }, true);
  document.addEventListener("click", function (event) {
    var target = event.target;
    if (!target.closest) return;
    var selectable = target.closest("[data-select-on-click]");
    if (selectable && selectable.select) selectable.select();
    if (target.closest("[data-print]")) window.print();
    var enlarge = target.closest("[data-enlarge]");
    if (enlarge) enlarged(enlarge.closest("figure"), !enlarge.closest(".enlarged"));
  });
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape") enlarged(document.querySelector("figure.enlarged"), false);
  });
  function enlarged(figure, on) {
    if (!figure) return;
    figure.classList.toggle("enlarged", on);
    var button = figure.querySelector("[data-enlarge]");
    if (button) {
      button.textContent = on ? "Back to the pane" : "Enlarge";
      button.setAttribute("aria-expanded", on ? "true" : "false");
      if (!on) button.focus();
    }
  }
})();
