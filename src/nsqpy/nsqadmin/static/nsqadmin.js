// nsqadmin pages: refresh the content while the page is open, filter the
// topic list, and send the action buttons, the create form and a channel's
// replay form to the JSON API.
// Data is only ever set as text (textContent) or taken from the server's
// escaped HTML, so nothing a client sent to nsqd can run here.
(function () {
  "use strict";
  var body = document.body;
  var refreshSeconds = parseFloat(body.dataset.refreshSeconds || "5");
  var refreshing = false;

  function flash(text, isError) {
    var box = document.getElementById("flash");
    box.textContent = text;
    box.className = isError ? "flash error" : "flash";
    box.hidden = false;
    clearTimeout(flash.timer);
    flash.timer = setTimeout(function () { box.hidden = true; }, isError ? 8000 : 3000);
  }

  function applyFilter() {
    var input = document.getElementById("filter");
    if (!input) { return; }
    var needle = input.value.trim().toLowerCase();
    document.querySelectorAll("table.filterable tbody tr").forEach(function (row) {
      var name = (row.dataset.name || "").toLowerCase();
      row.classList.toggle("hidden", needle !== "" && name.indexOf(needle) === -1);
    });
  }

  function refresh() {
    if (refreshing || document.hidden) { return Promise.resolve(); }
    refreshing = true;
    return fetch(window.location.href, { headers: { "Accept": "text/html" }, cache: "no-store" })
      .then(function (response) { return response.text(); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("content");
        var current = document.getElementById("content");
        if (fresh && current) {
          current.replaceChildren.apply(current, Array.prototype.slice.call(fresh.childNodes).map(function (node) {
            return document.importNode(node, true);
          }));
          applyFilter();
          document.dispatchEvent(new CustomEvent("nsqadmin:refreshed"));
        }
      })
      .catch(function () { /* nsqadmin itself is restarting: keep the last figures */ })
      .finally(function () { refreshing = false; });
  }

  function send(url, method, payload) {
    return fetch(url, {
      method: method,
      headers: { "Content-Type": "application/json" },
      body: payload === undefined ? undefined : JSON.stringify(payload),
    }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (answer) {
        if (!response.ok) { throw new Error(answer.message || (response.status + " " + response.statusText)); }
        return answer;
      });
    });
  }

  function report(answer, done) {
    if (answer.message) { flash(answer.message, true); } else { flash(done, false); }
  }

  // One action sent to the JSON API; the page says how it went, then shows
  // its result (or goes to ``after``, the page left when the thing is gone).
  function act(button, url, method, payload, after) {
    var label = button.textContent.trim();
    button.disabled = true;
    return send(url, method, payload)
      .then(function (answer) {
        report(answer, label + ": done");
        if (after) {
          window.location.assign(after);
        } else {
          return refresh();
        }
      })
      .catch(function (error) { flash(label + " failed: " + error.message, true); })
      .finally(function () { button.disabled = false; });
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("button.action");
    if (!button) { return; }
    var question = button.dataset.confirm;
    if (question && !window.confirm(question)) { return; }
    var payload = button.dataset.body ? JSON.parse(button.dataset.body) : undefined;
    act(button, button.dataset.url, button.dataset.method || "POST", payload, button.dataset.after);
  });

  // A retained topic's channel: replay its log from the point typed in.
  var replay = document.getElementById("replay");
  if (replay) {
    replay.addEventListener("submit", function (event) {
      event.preventDefault();
      var from = replay.elements.from.value.trim();
      if (!window.confirm(replay.dataset.confirm.replace("{from}", from))) { return; }
      act(replay.querySelector("button"), replay.dataset.url, "POST", { action: "replay", from: from });
    });
  }

  // The browser's own "Please match the requested format" does not say what a
  // name may be: an input whose pattern fails says the rule the page states
  // beside it (aria-describedby), so the rule is written once.
  function explainPattern(input) {
    var rule = document.getElementById(input.getAttribute("aria-describedby") || "");
    function check() {
      input.setCustomValidity("");
      if (rule && (input.validity.patternMismatch || input.validity.tooLong)) {
        input.setCustomValidity(rule.textContent.trim());
      }
    }
    input.addEventListener("input", check);
    check();
  }

  var form = document.getElementById("create");
  if (form) {
    form.querySelectorAll("input[pattern]").forEach(explainPattern);
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var payload = { topic: form.elements.topic.value.trim() };
      var channel = form.elements.channel.value.trim();
      if (channel) { payload.channel = channel; }
      send(form.dataset.url, "POST", payload)
        .then(function (answer) {
          report(answer, "created " + payload.topic + (channel ? " / " + channel : ""));
          form.reset();
          return refresh();
        })
        .catch(function (error) { flash("create failed: " + error.message, true); });
    });
  }

  // with --graphite-url: the rate Graphite computed from nsqd's statsd counters
  function graphiteRates() {
    document.querySelectorAll(".graphite-rate[data-url]").forEach(function (span) {
      fetch(span.dataset.url).then(function (response) { return response.json(); })
        .then(function (answer) { span.textContent = answer.rate || "N/A"; })
        .catch(function () { span.textContent = "N/A"; });
    });
  }
  graphiteRates();
  document.addEventListener("nsqadmin:refreshed", graphiteRates);

  var filter = document.getElementById("filter");
  if (filter) {
    filter.addEventListener("input", applyFilter);
    filter.value = new URLSearchParams(window.location.search).get("filter") || "";
    applyFilter();
  }

  if (refreshSeconds > 0) {
    setInterval(refresh, refreshSeconds * 1000);
    document.addEventListener("visibilitychange", function () { if (!document.hidden) { refresh(); } });
  }
  window.nsqadmin = { refresh: refresh, flash: flash };
})();
