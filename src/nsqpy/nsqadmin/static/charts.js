// Charts of a topic's or channel's history (from /api/history/...), drawn as
// plain SVG: one chart of rates in and out, one of depth, in flight and
// deferred. Redrawn at the sampling interval; figures above them updated too.
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  var COLOURS = ["#1f6feb", "#e8590c", "#2f9e44", "#ae3ec9"];
  var WIDTH = 600, HEIGHT = 180, LEFT = 56, BOTTOM = 22, TOP = 8, RIGHT = 8;

  function node(name, attributes, parent) {
    var element = document.createElementNS(SVG, name);
    Object.keys(attributes).forEach(function (key) { element.setAttribute(key, attributes[key]); });
    if (parent) { parent.appendChild(element); }
    return element;
  }

  function text(parent, x, y, content, anchor) {
    var label = node("text", { x: x, y: y, "font-size": 11, fill: "#6b7585", "text-anchor": anchor || "start" }, parent);
    label.textContent = content;
    return label;
  }

  function short(value) {
    if (value >= 1e9) { return (value / 1e9).toFixed(1) + "G"; }
    if (value >= 1e6) { return (value / 1e6).toFixed(1) + "M"; }
    if (value >= 1e3) { return (value / 1e3).toFixed(1) + "k"; }
    return value % 1 === 0 ? String(value) : value.toFixed(1);
  }

  function clock(seconds) {
    var date = new Date(seconds * 1000);
    return date.toTimeString().slice(0, 8);
  }

  function draw(figure, points) {
    var keys = figure.dataset.series.split(",");
    var labels = figure.dataset.labels.split(",");
    var old = figure.querySelector("svg");
    if (old) { old.remove(); }
    var oldLegend = figure.querySelector(".legend");
    if (oldLegend) { oldLegend.remove(); }
    var svg = node("svg", { viewBox: "0 0 " + WIDTH + " " + HEIGHT, preserveAspectRatio: "none", role: "img" }, figure);
    var plotWidth = WIDTH - LEFT - RIGHT, plotHeight = HEIGHT - TOP - BOTTOM;
    node("rect", { x: LEFT, y: TOP, width: plotWidth, height: plotHeight, fill: "#fbfcfe", stroke: "#dde2ea" }, svg);
    if (points.length < 2) {
      text(svg, LEFT + plotWidth / 2, TOP + plotHeight / 2, "collecting samples…", "middle");
      figure.dataset.drawn = "0";
      return;
    }
    var start = points[0].t, end = points[points.length - 1].t;
    var top = 0;
    points.forEach(function (point) { keys.forEach(function (key) { top = Math.max(top, point[key]); }); });
    top = top > 0 ? top * 1.1 : 1;
    function x(t) { return LEFT + (end > start ? (t - start) / (end - start) : 1) * plotWidth; }
    function y(v) { return TOP + plotHeight - (v / top) * plotHeight; }
    [0, 0.5, 1].forEach(function (fraction) {
      var value = top * fraction;
      node("line", { x1: LEFT, x2: LEFT + plotWidth, y1: y(value), y2: y(value), stroke: "#eef2f7" }, svg);
      text(svg, LEFT - 4, y(value) + 4, short(value), "end");
    });
    text(svg, LEFT, HEIGHT - 6, clock(start));
    text(svg, LEFT + plotWidth, HEIGHT - 6, clock(end), "end");
    keys.forEach(function (key, index) {
      var path = points.map(function (point, i) {
        return (i ? "L" : "M") + x(point.t).toFixed(1) + " " + y(point[key]).toFixed(1);
      }).join(" ");
      node("path", { d: path, fill: "none", stroke: COLOURS[index], "stroke-width": 2, "class": "series series-" + key,
                     "vector-effect": "non-scaling-stroke" }, svg);
    });
    var legend = document.createElement("div");
    legend.className = "legend";
    keys.forEach(function (key, index) {
      var item = document.createElement("span");
      var swatch = document.createElement("i");
      swatch.style.background = COLOURS[index];
      item.appendChild(swatch);
      item.appendChild(document.createTextNode(labels[index] + " " + short(points[points.length - 1][key])));
      legend.appendChild(item);
    });
    figure.appendChild(legend);
    figure.dataset.drawn = String(points.length);
  }

  function update(panel) {
    return fetch(panel.dataset.historyUrl, { cache: "no-store" })
      .then(function (response) { return response.json(); })
      .then(function (answer) {
        panel.querySelectorAll("figure.chart").forEach(function (figure) { draw(figure, answer.points || []); });
        var figures = { ".rate-in": answer.rate_in_label, ".rate-out": answer.rate_out_label, ".drain": answer.drain_label };
        Object.keys(figures).forEach(function (selector) {
          var element = panel.querySelector(selector);
          if (element) { element.textContent = figures[selector]; }
        });
        return answer.interval;
      });
  }

  document.querySelectorAll("section.history[data-history-url]").forEach(function (panel) {
    if (!panel.querySelector("figure.chart")) { return; }
    function loop() {
      update(panel).then(function (interval) {
        setTimeout(loop, Math.max(1, interval || 5) * 1000);
      }).catch(function () { setTimeout(loop, 5000); });
    }
    loop();
  });
})();
