// MCP Apps sandbox proxy (the outer iframe of the double-iframe design).
//
// Served from the sandbox origin as proxy.html?host=<host origin>. It:
//   1. announces `ui/notifications/sandbox-proxy-ready` to its parent (the host),
//   2. accepts `ui/notifications/sandbox-resource-ready {html, csp, permissions}`
//      once, and only from the expected host origin,
//   3. renders the view in an inner iframe: srcdoc = the view's HTML with a CSP
//      <meta> built only from the declared csp domains; sandbox without
//      allow-same-origin, so the view gets a unique opaque origin,
//   4. relays every other JSON-RPC message between the host and that inner view,
//      and nothing else (methods `ui/notifications/sandbox-*` are never relayed).
//
// For OpenAI Apps SDK widgets (`openai: true`) it also injects openai-shim.js,
// which implements `window.openai` on top of the same MCP Apps JSON-RPC. A host
// that asks for probes (`probes: ["contrast"]`, the workbench) gets their scripts
// injected too (contrast-probe.js): they report what they measure as log messages.
(function () {
  "use strict";

  // The shim sits next to this script, wherever the page itself is served from.
  var SHIM_URL = new URL("openai-shim.js", document.currentScript ? document.currentScript.src : location.href).href;
  var PROBE_URLS = {
    contrast: new URL("contrast-probe.js", document.currentScript ? document.currentScript.src : location.href).href,
  };

  var PROXY_READY = "ui/notifications/sandbox-proxy-ready";
  var RESOURCE_READY = "ui/notifications/sandbox-resource-ready";
  var SANDBOX_PREFIX = "ui/notifications/sandbox-";

  // Inner iframe sandbox. No allow-same-origin: srcdoc would otherwise run on
  // THIS origin, shared by every view of every server; the view could then
  // script this proxy (rewrite its own sandbox attribute and reload, post as
  // the proxy), reach sibling proxies' views and share storage with them. An
  // opaque origin isolates each view; the cost is no cookies/localStorage/
  // IndexedDB in views (they throw SecurityError), which views must not rely on.
  // (The reference basic-host uses allow-same-origin + document.write for WebGL;
  // we choose isolation.)
  var INNER_SANDBOX = "allow-scripts allow-forms";
  // Tokens a host-supplied `sandbox` override may use. Never allow-same-origin
  // or top navigation. (Popups etc. also need the outer iframe to allow them.)
  var SANDBOX_OVERRIDE_ALLOWED = [
    "allow-scripts", "allow-forms", "allow-popups", "allow-modals", "allow-downloads", "allow-pointer-lock",
  ];

  // Spec default when the resource declares no csp (plus frame-src/base-uri as
  // the sandbox requirements demand, and form-action 'none': a form post is a
  // connection to an undeclared domain too).
  var DEFAULT_CSP = [
    "default-src 'none'",
    "script-src 'self' 'unsafe-inline'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "media-src 'self' data:",
    "connect-src 'none'",
    "object-src 'none'",
    "frame-src 'none'",
    "base-uri 'self'",
    "form-action 'none'",
  ].join("; ");

  // A CSP host-source: optional scheme, host (optionally "*." wildcard
  // subdomain), optional port, optional path. Rejects keywords ('unsafe-eval'),
  // bare "*" or "https:", and anything that could break out of the directive
  // (";", ",", quotes, whitespace).
  var HOST_SOURCE = /^(?:(?:https?|wss?):\/\/)?(?:\*\.)?[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*(?::(?:\d{1,5}|\*))?(?:\/[^\s;,'"\\]*)?$/i;

  var hostOrigin = readHostOrigin();
  var inner = null; // the view's iframe, created once
  var innerLoads = 0;
  var innerGone = false; // the view navigated away from the srcdoc we gave it

  function fail(message) {
    console.error("[sandbox-proxy] " + message);
    var p = document.createElement("p");
    p.className = "proxy-error";
    p.textContent = "Sandbox proxy error: " + message;
    document.body.appendChild(p);
  }

  function readHostOrigin() {
    var raw = new URLSearchParams(location.search).get("host");
    if (!raw) return null;
    try {
      var url = new URL(raw);
      if (url.protocol !== "http:" && url.protocol !== "https:") return null;
      return url.origin;
    } catch (e) {
      return null;
    }
  }

  function isJsonRpc(data) {
    return !!data && typeof data === "object" && data.jsonrpc === "2.0";
  }

  function isSandboxMethod(data) {
    return typeof data.method === "string" && data.method.indexOf(SANDBOX_PREFIX) === 0;
  }

  function sanitizeDomains(list, label) {
    if (!Array.isArray(list)) return [];
    var out = [];
    for (var i = 0; i < list.length; i++) {
      var d = list[i];
      if (typeof d === "string" && HOST_SOURCE.test(d)) out.push(d);
      else console.warn("[sandbox-proxy] ignoring invalid " + label + " entry:", d);
    }
    return out;
  }

  // Build the view's CSP from the resource's declared domains (spec "Content
  // Security Policy Enforcement"): connectDomains -> connect-src;
  // resourceDomains -> script/style/img/font/media-src; frameDomains ->
  // frame-src (else 'none'); baseUriDomains -> base-uri (else 'self').
  function buildCsp(csp) {
    if (!csp || typeof csp !== "object") return DEFAULT_CSP;
    var connect = sanitizeDomains(csp.connectDomains, "connectDomains");
    var resource = sanitizeDomains(csp.resourceDomains, "resourceDomains");
    var frame = sanitizeDomains(csp.frameDomains, "frameDomains");
    var baseUri = sanitizeDomains(csp.baseUriDomains, "baseUriDomains");
    var r = resource.length ? " " + resource.join(" ") : "";
    return [
      "default-src 'none'",
      "script-src 'self' 'unsafe-inline'" + r,
      "style-src 'self' 'unsafe-inline'" + r,
      "img-src 'self' data:" + r,
      "font-src 'self' data:" + r,
      "media-src 'self' data:" + r,
      "connect-src " + (connect.length ? "'self' " + connect.join(" ") : "'none'"),
      "frame-src " + (frame.length ? frame.join(" ") : "'none'"),
      "object-src 'none'",
      "base-uri " + (baseUri.length ? baseUri.join(" ") : "'self'"),
      "form-action 'none'",
    ].join("; ");
  }

  // Permission Policy for the inner iframe. "*" is the allowlist because the
  // view's origin is opaque (the default 'src' would not match it); the outer
  // iframe's `allow` (set by the host to the same features) still caps it.
  function buildAllow(permissions) {
    if (!permissions || typeof permissions !== "object") return "";
    var features = [];
    if (permissions.camera) features.push("camera *");
    if (permissions.microphone) features.push("microphone *");
    if (permissions.geolocation) features.push("geolocation *");
    if (permissions.clipboardWrite) features.push("clipboard-write *");
    return features.join("; ");
  }

  function buildSandbox(override) {
    if (typeof override !== "string") return INNER_SANDBOX;
    var tokens = override.split(/\s+/).filter(function (t) {
      if (!t) return false;
      if (SANDBOX_OVERRIDE_ALLOWED.indexOf(t) === -1) {
        console.warn("[sandbox-proxy] ignoring sandbox token", t);
        return false;
      }
      return true;
    });
    return tokens.join(" ");
  }

  function escapeAttr(s) {
    return s.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;");
  }

  // JSON that is safe inside an inline <script>: no "</script", no "<!--",
  // no line separators that old parsers treat as newlines.
  function scriptJson(value) {
    return JSON.stringify(value === undefined ? null : value)
      .replace(/</g, "\\u003c")
      .replace(/\u2028/g, "\\u2028")
      .replace(/\u2029/g, "\\u2029");
  }

  // Put the CSP <meta> (and any injected scripts) before anything of the
  // view's own, right after its doctype if it has one, so the policy applies
  // to the view's first script and the doctype still selects standards mode.
  // A <meta> ahead of <html>/<head> is parsed into an implied <head>.
  function buildSrcdoc(html, csp, headInjection) {
    var prefix = '<meta http-equiv="Content-Security-Policy" content="' + escapeAttr(csp) + '">' + keyForwarder(forwardKeys) +
      headInjection;
    var m = /^\uFEFF?\s*<!doctype[^>]*>/i.exec(html);
    return m ? m[0] + prefix + html.slice(m[0].length) : prefix + html;
  }

  // Runs first in the view's document: a request the view's CSP blocked is reported to the host
  // as a log message (logger "sandbox.csp"), so the workbench can name the domain the view
  // would have to declare. The view could forge one; it would only fail its own check.
  var CSP_REPORTER = "<script>document.addEventListener(\"securitypolicyviolation\",function(e){try{parent.postMessage(" +
    "{jsonrpc:\"2.0\",method:\"notifications/message\",params:{level:\"warning\",logger:\"sandbox.csp\"," +
    "data:{blockedURI:e.blockedURI,directive:e.effectiveDirective||e.violatedDirective,sourceFile:e.sourceFile,line:e.lineNumber}}},\"*\")}catch(_){}});</script>";

  // Keys the host asked for (`forwardKeys`: the replay player's arrows, Home, End…). Pressed in
  // the view outside a text field and not handled by the view, they go back to the host page as
  // `ui/notifications/sandbox-key {key}`: a click in the view would otherwise take the host's
  // keyboard shortcuts away. Only those keys, named by the host; the view can send no others.
  var KEY_NOTICE = "ui/notifications/sandbox-key";
  var KEY_NAME = /^[A-Za-z]{1,12}$/;
  var forwardKeys = [];

  function sanitizeKeys(list) {
    if (!Array.isArray(list)) return [];
    return list.filter(function (k) { return typeof k === "string" && KEY_NAME.test(k); }).slice(0, 20);
  }

  function keyForwarder(keys) {
    if (!keys.length) return "";
    return "<script>(function(k){window.addEventListener(\"keydown\",function(e){var t=e.target;" +
      "if(e.defaultPrevented||e.altKey||e.ctrlKey||e.metaKey||k.indexOf(e.key)<0)return;" +
      "if(t&&t.closest&&t.closest(\"input,textarea,select,[contenteditable]\"))return;" +
      "try{parent.postMessage({jsonrpc:\"2.0\",method:\"" + KEY_NOTICE + "\",params:{key:e.key}},\"*\")}catch(_){}})})(" +
      JSON.stringify(keys) + ");</script>";
  }

  function loadShim(params) {
    var config = {
      parentOrigin: location.origin,
      widgetState: params.widgetState === undefined ? null : params.widgetState,
      globals: params.openaiGlobals && typeof params.openaiGlobals === "object" ? params.openaiGlobals : {},
    };
    return fetch(SHIM_URL, { credentials: "omit", cache: "no-cache" })
      .then(function (response) {
        if (!response.ok) throw new Error("openai-shim.js: HTTP " + response.status);
        return response.text();
      })
      .then(function (source) {
        source = source.replace("/*__MCP_OPENAI_SHIM_CONFIG__*/ null", function () {
          return scriptJson(config);
        });
        return "<script>" + source.replace(/<\/script/gi, "<\\/script") + "</script>";
      });
  }

  // The probes the host asked for, as inline scripts (unknown names are ignored).
  function loadProbes(params) {
    var names = Array.isArray(params.probes) ? params.probes : [];
    var urls = [];
    names.forEach(function (name) {
      if (Object.prototype.hasOwnProperty.call(PROBE_URLS, name) && urls.indexOf(PROBE_URLS[name]) < 0) urls.push(PROBE_URLS[name]);
    });
    return Promise.all(urls.map(function (url) {
      return fetch(url, { credentials: "omit", cache: "no-cache" }).then(function (response) {
        if (!response.ok) throw new Error(url + ": HTTP " + response.status);
        return response.text();
      }).then(function (source) {
        return "<script>" + source.replace(/<\/script/gi, "<\\/script") + "</script>";
      });
    })).then(function (scripts) { return scripts.join(""); });
  }

  function loadResource(params) {
    if (!params || typeof params.html !== "string") {
      fail("sandbox-resource-ready without html");
      return;
    }
    var csp = buildCsp(params.csp);
    forwardKeys = sanitizeKeys(params.forwardKeys);
    // Audit trail (spec: hosts SHOULD log CSP configurations).
    console.info("[sandbox-proxy] view CSP:", csp);

    inner = document.createElement("iframe");
    inner.setAttribute("sandbox", buildSandbox(params.sandbox));
    var allow = buildAllow(params.permissions);
    if (allow) inner.setAttribute("allow", allow);
    inner.setAttribute("title", "MCP App view");
    inner.addEventListener("load", function () {
      innerLoads += 1;
      // The first load is our srcdoc. Any later load means the view navigated
      // itself (or reloaded); messages sent with targetOrigin "*" (unavoidable
      // for an opaque origin) must not follow it to whatever it loaded.
      if (innerLoads > 1 && !innerGone) {
        innerGone = true;
        console.warn("[sandbox-proxy] the view navigated away; relay stopped");
      }
    });

    var injection = Promise.all([
      params.openai ? loadShim(params) : Promise.resolve(""),
      loadProbes(params).catch(function (error) {
        console.warn("[sandbox-proxy] probes not loaded:", error.message);
        return "";
      }),
    ]);
    injection.then(
      function (parts) {
        inner.srcdoc = buildSrcdoc(params.html, csp, CSP_REPORTER + parts[1] + parts[0]);
        document.body.appendChild(inner);
      },
      function (error) {
        fail("could not load the OpenAI Apps SDK shim: " + error.message);
      }
    );
  }

  function onMessage(event) {
    var data = event.data;
    if (event.source === window.parent && window.parent !== window) {
      if (event.origin !== hostOrigin) {
        console.warn("[sandbox-proxy] ignoring message from unexpected origin", event.origin);
        return;
      }
      if (!isJsonRpc(data)) return;
      if (data.method === RESOURCE_READY) {
        if (inner) console.warn("[sandbox-proxy] resource already loaded; ignoring a second sandbox-resource-ready");
        else loadResource(data.params);
        return;
      }
      if (isSandboxMethod(data)) return;
      if (inner && inner.contentWindow && !innerGone) {
        // The view's origin is opaque ("null"), so "*" is the only target that
        // reaches it; innerGone guards against it having navigated elsewhere.
        inner.contentWindow.postMessage(data, "*");
      }
      return;
    }
    if (inner && event.source === inner.contentWindow) {
      // Sandboxed without allow-same-origin, the view always posts as "null".
      if (innerGone || event.origin !== "null") return;
      if (isJsonRpc(data) && data.method === KEY_NOTICE) {
        var key = data.params && data.params.key;
        if (forwardKeys.indexOf(key) >= 0) window.parent.postMessage({ jsonrpc: "2.0", method: KEY_NOTICE, params: { key: key } }, hostOrigin);
        return;
      }
      if (!isJsonRpc(data) || isSandboxMethod(data)) return;
      window.parent.postMessage(data, hostOrigin);
    }
    // Anything else (the view's own nested frames, other windows) is ignored.
  }

  function start() {
    if (window.parent === window) {
      fail("this page only works inside the host's iframe");
      return;
    }
    if (!hostOrigin) {
      fail("missing or invalid ?host= origin");
      return;
    }
    if (hostOrigin === location.origin) {
      fail("the host and the sandbox must be different origins");
      return;
    }
    // Defence in depth where the browser tells us who embeds us.
    var ancestors = location.ancestorOrigins;
    if (ancestors && ancestors.length && ancestors[0] !== hostOrigin) {
      fail("embedded by " + ancestors[0] + ", expected " + hostOrigin);
      return;
    }
    window.addEventListener("message", onMessage);
    // targetOrigin pinned: if someone else embeds us with a forged ?host=, the
    // browser drops this message instead of handing it to them.
    window.parent.postMessage({ jsonrpc: "2.0", method: PROXY_READY, params: {} }, hostOrigin);
  }

  start();
})();
