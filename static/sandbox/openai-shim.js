// window.openai for OpenAI Apps SDK widgets (mime text/html+skybridge),
// implemented on top of MCP Apps JSON-RPC over postMessage.
//
// proxy.js inlines this file as the first <script> of the widget's srcdoc
// (after the CSP meta) and replaces the CONFIG placeholder below with
// {parentOrigin, widgetState, globals}. The widget's own scripts therefore find
// window.openai already defined.
//
// Mapping:
//   toolInput              <- ui/notifications/tool-input .arguments
//   toolOutput             <- ui/notifications/tool-result .structuredContent
//   toolResponseMetadata   <- ui/notifications/tool-result ._meta
//   theme, displayMode, locale, maxHeight, safeArea, userAgent <- hostContext
//   callTool(name, args)   -> tools/call
//   sendFollowUpMessage({prompt}) -> ui/message {role: "user", content: [{type: "text", text}]}
//   setWidgetState(state)  -> ui/update-model-context {structuredContent: state}
//                             (the host persists it and passes it back as widgetState)
//   openExternal({href})   -> ui/open-link {url}
//   requestDisplayMode({mode}) -> ui/request-display-mode
//   notifyIntrinsicHeight(h)   -> ui/notifications/size-changed {height}
//   requestClose()             -> ui/notifications/request-teardown
// Every change of a global dispatches `openai:set_globals` on window with
// detail {globals: {changedKey: value}}, like the Apps SDK host does.
(function () {
  "use strict";

  var CONFIG = /*__MCP_OPENAI_SHIM_CONFIG__*/ null || {};
  var PROTOCOL_VERSION = "2026-01-26";
  var SET_GLOBALS = "openai:set_globals";
  var parentOrigin = CONFIG.parentOrigin || "*";
  var initial = CONFIG.globals || {};

  // String ids so they can never collide with numeric ids of an MCP Apps
  // client the widget might also run.
  var nextId = 1;
  var pending = {};
  var handshakeDone = false;
  var waiting = []; // calls made before the handshake finished
  var hostContext = {};

  function post(message) {
    window.parent.postMessage(message, parentOrigin);
  }

  function sendRequest(method, params) {
    var id = "openai-shim-" + nextId++;
    return new Promise(function (resolve, reject) {
      pending[id] = { resolve: resolve, reject: reject };
      post({ jsonrpc: "2.0", id: id, method: method, params: params || {} });
    });
  }

  function sendNotification(method, params) {
    post({ jsonrpc: "2.0", method: method, params: params || {} });
  }

  // Requests from the widget wait for ui/notifications/initialized to be sent.
  function whenReady(fn) {
    if (handshakeDone) return fn();
    return new Promise(function (resolve, reject) {
      waiting.push(function () {
        Promise.resolve().then(fn).then(resolve, reject);
      });
    });
  }

  function setGlobals(changes) {
    var changed = {};
    var any = false;
    for (var key in changes) {
      if (!Object.prototype.hasOwnProperty.call(changes, key) || changes[key] === undefined) continue;
      openai[key] = changes[key];
      changed[key] = changes[key];
      any = true;
    }
    if (any) window.dispatchEvent(new CustomEvent(SET_GLOBALS, { detail: { globals: changed } }));
  }

  function globalsFromContext(ctx) {
    var out = {};
    if (!ctx) return out;
    if (ctx.theme) out.theme = ctx.theme;
    if (ctx.displayMode) {
      out.displayMode = ctx.displayMode;
      out.view = { mode: ctx.displayMode };
    }
    if (ctx.locale) out.locale = ctx.locale;
    var dims = ctx.containerDimensions;
    if (dims && (dims.maxHeight != null || dims.height != null)) out.maxHeight = dims.maxHeight != null ? dims.maxHeight : dims.height;
    if (ctx.safeAreaInsets) out.safeArea = { insets: ctx.safeAreaInsets };
    if (ctx.platform || ctx.deviceCapabilities) {
      var caps = ctx.deviceCapabilities || {};
      out.userAgent = {
        device: { type: ctx.platform === "mobile" ? "mobile" : ctx.platform ? "desktop" : "unknown" },
        capabilities: { hover: !!caps.hover, touch: !!caps.touch },
      };
    }
    return out;
  }

  function textOf(result) {
    var parts = [];
    var content = (result && result.content) || [];
    for (var i = 0; i < content.length; i++) {
      if (content[i] && content[i].type === "text") parts.push(content[i].text);
    }
    return parts.join("\n");
  }

  var lastHeight = 0;
  function reportHeight(height) {
    height = Math.ceil(Number(height));
    if (!isFinite(height) || height === lastHeight) return;
    lastHeight = height;
    whenReady(function () {
      sendNotification("ui/notifications/size-changed", { height: height });
    });
  }

  var openai = {
    // globals
    toolInput: initial.toolInput || {},
    toolOutput: initial.toolOutput === undefined ? null : initial.toolOutput,
    toolResponseMetadata: initial.toolResponseMetadata === undefined ? null : initial.toolResponseMetadata,
    widgetState: CONFIG.widgetState === undefined ? null : CONFIG.widgetState,
    theme: initial.theme || "light",
    displayMode: initial.displayMode || "inline",
    view: { mode: initial.displayMode || "inline" },
    locale: initial.locale || navigator.language,
    maxHeight: initial.maxHeight,
    safeArea: { insets: { top: 0, right: 0, bottom: 0, left: 0 } },
    userAgent: { device: { type: "desktop" }, capabilities: { hover: true, touch: false } },

    // API
    callTool: function (name, args) {
      return whenReady(function () {
        return sendRequest("tools/call", { name: String(name), arguments: args || {} });
      }).then(function (result) {
        // Apps SDK's CallToolResponse has `result` (text); keep the full MCP result too.
        var out = {};
        for (var k in result) out[k] = result[k];
        if (out.result === undefined) out.result = textOf(result);
        return out;
      });
    },
    sendFollowUpMessage: function (args) {
      var prompt = args && typeof args === "object" ? args.prompt : args;
      return whenReady(function () {
        return sendRequest("ui/message", { role: "user", content: [{ type: "text", text: String(prompt) }] });
      }).then(function () {});
    },
    setWidgetState: function (state) {
      setGlobals({ widgetState: state });
      // ui/update-model-context takes an object; wrap anything else.
      var structured = state && typeof state === "object" && !Array.isArray(state) ? state : { widgetState: state };
      return whenReady(function () {
        return sendRequest("ui/update-model-context", { structuredContent: structured });
      }).then(function () {});
    },
    openExternal: function (payload) {
      var href = payload && typeof payload === "object" ? payload.href : payload;
      whenReady(function () {
        return sendRequest("ui/open-link", { url: String(href) });
      }).catch(function (error) {
        console.warn("[openai-shim] openExternal refused:", error.message);
      });
    },
    requestDisplayMode: function (args) {
      var mode = args && typeof args === "object" ? args.mode : args;
      return whenReady(function () {
        return sendRequest("ui/request-display-mode", { mode: mode });
      }).then(function (result) {
        return { mode: (result && result.mode) || openai.displayMode };
      });
    },
    notifyIntrinsicHeight: function (height) {
      reportHeight(height);
    },
    requestClose: function () {
      whenReady(function () {
        sendNotification("ui/notifications/request-teardown", {});
      });
    },
  };

  // A plain property: widgets that do `window.openai = window.openai || mock`
  // (even in strict-mode modules) must not throw.
  window.openai = openai;

  window.addEventListener("message", function (event) {
    if (event.source !== window.parent) return;
    var msg = event.data;
    if (!msg || typeof msg !== "object" || msg.jsonrpc !== "2.0") return;

    // Response to one of our requests.
    if (msg.id !== undefined && msg.method === undefined) {
      var entry = pending[msg.id];
      if (!entry) return; // not ours
      delete pending[msg.id];
      if (msg.error) entry.reject(new Error(msg.error.message || "JSON-RPC error " + msg.error.code));
      else entry.resolve(msg.result);
      return;
    }

    var params = msg.params || {};
    // Requests from the host.
    if (msg.id !== undefined) {
      if (msg.method === "ui/resource-teardown" || msg.method === "ping") {
        post({ jsonrpc: "2.0", id: msg.id, result: {} });
      } else {
        post({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: "Method not found: " + msg.method } });
      }
      return;
    }

    // Notifications from the host.
    switch (msg.method) {
      case "ui/notifications/tool-input":
        setGlobals({ toolInput: params.arguments || {} });
        break;
      case "ui/notifications/tool-result":
        setGlobals({
          toolOutput: params.structuredContent === undefined ? null : params.structuredContent,
          toolResponseMetadata: params._meta === undefined ? null : params._meta,
        });
        break;
      case "ui/notifications/host-context-changed":
        for (var key in params) hostContext[key] = params[key];
        setGlobals(globalsFromContext(params));
        break;
      default:
        break; // tool-input-partial, tool-cancelled: no Apps SDK equivalent
    }
  });

  // MCP Apps handshake: ui/initialize -> result (hostContext) -> initialized.
  sendRequest("ui/initialize", {
    protocolVersion: PROTOCOL_VERSION,
    appInfo: { name: "openai-apps-sdk-shim", version: "1.0.0" },
    appCapabilities: { availableDisplayModes: ["inline", "fullscreen", "pip"] },
  }).then(
    function (result) {
      hostContext = (result && result.hostContext) || {};
      setGlobals(globalsFromContext(hostContext));
      sendNotification("ui/notifications/initialized", {});
      handshakeDone = true;
      var queued = waiting.splice(0);
      for (var i = 0; i < queued.length; i++) queued[i]();
    },
    function (error) {
      console.error("[openai-shim] ui/initialize failed:", error);
    }
  );

  // ChatGPT sizes inline widgets to their content; do the same.
  if (typeof ResizeObserver === "function") {
    var observe = function () {
      // The <html> box is as tall as the content (not the viewport) in
      // standards mode, so it also shrinks when the content does.
      var ro = new ResizeObserver(function () {
        reportHeight(document.documentElement.getBoundingClientRect().height);
      });
      ro.observe(document.documentElement);
      if (document.body) ro.observe(document.body);
    };
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", observe);
    else observe();
  }
})();
