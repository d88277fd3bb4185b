// Small page behaviours written as data attributes, because the Content-Security-Policy
// forbids inline handlers (onclick=, onsubmit=):
//   <form data-confirm="Really?">   asks before the form is submitted
//   <input data-select-on-click>     selects its whole text when clicked
//   <button data-print>              opens the print dialog
//   <button data-enlarge>            enlarges its <figure> to the window (again, or Esc: back)
(function () {
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
