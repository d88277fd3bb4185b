// Every element with data-since="<ISO time>" shows mm:ss elapsed (until data-until, if set).
(function () {
  function format(seconds) {
    seconds = Math.max(0, Math.floor(seconds));
    var m = Math.floor(seconds / 60), s = seconds % 60;
    return (m < 10 ? "0" : "") + m + ":" + (s < 10 ? "0" : "") + s;
  }
  function tick() {
    document.querySelectorAll("[data-since]").forEach(function (el) {
      var since = Date.parse(el.dataset.since);
      if (isNaN(since)) return;
      var until = el.dataset.until ? Date.parse(el.dataset.until) : Date.now();
      el.textContent = format((until - since) / 1000);
    });
  }
  document.addEventListener("DOMContentLoaded", tick);
  document.addEventListener("htmx:afterSettle", tick);
  setInterval(tick, 1000);
})();
