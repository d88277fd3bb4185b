// Every element with data-since="<ISO time>" shows mm:ss elapsed (until data-until, if set).
// With data-budget="<seconds>" it counts down instead: "mm:ss left", then "+mm:ss over"
// (class "overtime") once the budget is spent. With data-now="<ISO time>" (the server's
// clock when it rendered the element) it counts on the server's clock, not the browser's,
// so every page showing the same timer shows the same time.
(function () {
  function clockNow(el) {
    if (!el.dataset.now) return Date.now();
    if (el.overlapSkew === undefined) {
      var server = Date.parse(el.dataset.now);
      el.overlapSkew = isNaN(server) ? 0 : server - Date.now();
    }
    return Date.now() + el.overlapSkew;
  }
  function format(seconds) {
    seconds = Math.max(0, Math.floor(seconds));
    var m = Math.floor(seconds / 60), s = seconds % 60;
    return (m < 10 ? "0" : "") + m + ":" + (s < 10 ? "0" : "") + s;
  }
  function tick() {
    document.querySelectorAll("[data-since]").forEach(function (el) {
      var since = Date.parse(el.dataset.since);
      if (isNaN(since)) return;
      var until = el.dataset.until ? Date.parse(el.dataset.until) : clockNow(el);
      var elapsed = (until - since) / 1000;
      if (el.dataset.budget) {
        var left = Number(el.dataset.budget) - elapsed;
        el.textContent = left >= 0 ? format(left) + " left" : "+" + format(-left) + " over";
        el.classList.toggle("overtime", left < 0);
      } else {
        el.textContent = format(elapsed);
      }
    });
  }
  document.addEventListener("DOMContentLoaded", tick);
  document.addEventListener("htmx:afterSettle", tick);
  setInterval(tick, 1000);
})();
