// The counter page: the total of every channel's message count, counting up
// smoothly between polls of /api/counter.
(function () {
  "use strict";
  var display = document.getElementById("counter");
  var warning = document.getElementById("counter-warning");
  var shown = null, target = 0, from = 0, startedAt = 0, DURATION = 900;

  function render(value) { display.textContent = Math.round(value).toLocaleString("en-US"); }

  function animate(now) {
    var progress = Math.min(1, (now - startedAt) / DURATION);
    shown = from + (target - from) * progress;
    render(shown);
    if (progress < 1) { window.requestAnimationFrame(animate); }
  }

  function poll() {
    fetch(display.dataset.url, { cache: "no-store" })
      .then(function (response) { return response.json(); })
      .then(function (answer) {
        var total = 0;
        Object.keys(answer.stats || {}).forEach(function (key) { total += answer.stats[key].message_count; });
        warning.hidden = !answer.message;
        warning.textContent = answer.message || "";
        display.dataset.total = String(total);
        if (shown === null) { shown = total; target = total; render(total); return; }
        from = shown; target = total; startedAt = performance.now();
        window.requestAnimationFrame(animate);
      })
      .catch(function () { warning.hidden = false; warning.textContent = "nsqadmin does not answer"; });
  }
  poll();
  setInterval(poll, 1000);
})();
