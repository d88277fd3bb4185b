// Small page behaviours written as data attributes, because the Content-Security-Policy
// forbids inline handlers (onclick=, onsubmit=):
//   <form data-confirm="Really?">   asks before the form is submitted
//   <input data-select-on-click>     selects its whole text when clicked
//   <button data-print>              opens the print dialog
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
  });
})();
