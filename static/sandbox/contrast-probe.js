// Contrast probe, injected by proxy.js into a view's document when the host asks for it (the
// App workbench). A view that ignores the host's theme can paint dark text on the host's dark
// background, and only the view's own document knows its colours: this reads them and tells
// the host, which knows what lies under a transparent view and judges the contrast.
//
// Report (a log message, logger "sandbox.contrast", sent when it changes):
//   {texts: N, pairs: [{color, background, text, count}]}
// `color` and `background` are [r, g, b, a]; `background` is what the view paints under the
// text, composited, and may be (partly) transparent: the host's background shows through.
// A view could forge a report; it would only mislead its own check.
(function () {
  "use strict";
  var MAX_ELEMENTS = 600;
  var MAX_PAIRS = 40;
  var DELAY_MS = 300;
  var SKIP = { SCRIPT: 1, STYLE: 1, NOSCRIPT: 1, TEMPLATE: 1, HEAD: 1, TITLE: 1, META: 1, LINK: 1 };
  var last = "";
  var timer = null;
  var canvasProbe = null;  // kept in the document: adding it each time would wake the observer

  function parse(value) {
    var m = /^rgba?\(([^)]*)\)$/.exec(value || "");
    if (m) {
      var p = m[1].split(/[\s,/]+/).filter(Boolean).map(parseFloat);
      return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
    }
    m = /^color\(srgb\s+([^)]*)\)$/.exec(value || "");
    if (m) {
      var q = m[1].split(/[\s/]+/).filter(Boolean).map(parseFloat);
      return [q[0] * 255, q[1] * 255, q[2] * 255, q.length > 3 ? q[3] : 1];
    }
    return null;
  }

  // `top` painted over `bottom` (source-over).
  function over(top, bottom) {
    var a = top[3] + bottom[3] * (1 - top[3]);
    if (a <= 0) return [0, 0, 0, 0];
    var mix = function (i) { return (top[i] * top[3] + bottom[i] * bottom[3] * (1 - top[3])) / a; };
    return [mix(0), mix(1), mix(2), a];
  }

  // What the browser paints under the whole document: nothing (the host shows through), unless
  // the view's used colour scheme is dark, which differs from its light embedder's: then the
  // frame gets its own opaque dark canvas.
  function canvas() {
    var root = document.documentElement;
    var scheme = (getComputedStyle(root).colorScheme || "normal").split(/\s+/);
    var prefersDark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
    var dark = scheme.indexOf("dark") >= 0 && (scheme.indexOf("light") < 0 || prefersDark);
    if (!dark) return [0, 0, 0, 0];
    if (!canvasProbe || !canvasProbe.isConnected) {
      canvasProbe = document.createElement("div");
      canvasProbe.setAttribute("aria-hidden", "true");
      canvasProbe.style.cssText = "position:absolute;width:0;height:0;overflow:hidden;background-color:Canvas";
      root.appendChild(canvasProbe);
    }
    return parse(getComputedStyle(canvasProbe).backgroundColor) || [18, 18, 18, 1];
  }

  // The background under `el`: its own and its ancestors' colours, composited over the canvas;
  // null when an image or gradient is in the way (not judged).
  function backgroundOf(el, base) {
    var layers = [];
    for (var node = el; node && node.nodeType === 1; node = node.parentElement) {
      var style = getComputedStyle(node);
      if (style.backgroundImage && style.backgroundImage !== "none") return null;
      var color = parse(style.backgroundColor);
      if (color && color[3] > 0) {
        layers.push(color);
        if (color[3] >= 1) break;
      }
    }
    var painted = layers.length && layers[layers.length - 1][3] >= 1 ? [0, 0, 0, 0] : base;
    for (var i = layers.length - 1; i >= 0; i--) painted = over(layers[i], painted);
    return painted;
  }

  function round(c) {
    return [Math.round(c[0]), Math.round(c[1]), Math.round(c[2]), Math.round(c[3] * 100) / 100];
  }

  function ownText(el) {
    var text = "";
    for (var child = el.firstChild; child; child = child.nextSibling) {
      if (child.nodeType === 3) text += child.nodeValue;
    }
    return text.replace(/\s+/g, " ").trim();
  }

  function measure() {
    if (!document.body) return null;
    var base = canvas();
    var pairs = {};
    var count = 0;
    var texts = 0;
    var all = document.body.getElementsByTagName("*");
    var list = [document.body];
    for (var k = 0; k < all.length && list.length < MAX_ELEMENTS * 4; k++) list.push(all[k]);
    for (var i = 0; i < list.length && texts < MAX_ELEMENTS; i++) {
      var el = list[i];
      if (SKIP[el.tagName]) continue;
      var text = ownText(el);
      if (!text) continue;
      if (!el.getClientRects().length) continue;
      var style = getComputedStyle(el);
      if (style.visibility !== "visible" || parseFloat(style.opacity) === 0) continue;
      var color = parse(style.color);
      var background = backgroundOf(el, base);
      if (!color || !background || color[3] === 0) continue;
      texts += 1;
      var fg = round(color), bg = round(background);
      var key = fg.join(",") + "|" + bg.join(",");
      if (pairs[key]) { pairs[key].count += 1; continue; }
      if (count >= MAX_PAIRS) continue;
      count += 1;
      pairs[key] = { color: fg, background: bg, text: text.slice(0, 60), count: 1 };
    }
    return { texts: texts, pairs: Object.keys(pairs).map(function (key) { return pairs[key]; }) };
  }

  function report() {
    timer = null;
    var data;
    try { data = measure(); } catch (error) { return; }
    if (!data) return;
    var text = JSON.stringify(data);
    if (text === last) return;
    last = text;
    try {
      parent.postMessage({ jsonrpc: "2.0", method: "notifications/message",
                           params: { level: "debug", logger: "sandbox.contrast", data: data } }, "*");
    } catch (_) { /* the host is gone */ }
  }

  function schedule() {
    if (timer === null) timer = setTimeout(report, DELAY_MS);
  }

  function start() {
    schedule();
    new MutationObserver(schedule).observe(document.documentElement, {
      subtree: true, childList: true, attributes: true, characterData: true,
    });
    // Host context (a theme) may change colours without touching the DOM (media queries).
    window.addEventListener("message", schedule);
    window.addEventListener("load", schedule);
    if (window.matchMedia) {
      var media = window.matchMedia("(prefers-color-scheme: dark)");
      if (media.addEventListener) media.addEventListener("change", schedule);
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
