// Host side of MCP Apps (extension io.modelcontextprotocol/ui) for one widget
// in a web page.
//
// Double-iframe design (spec "Sandbox proxy"):
//
//   host page (this module, origin A)
//     └─ outer iframe: static/sandbox/proxy.html on the sandbox origin B
//          └─ inner iframe: the view's HTML (srcdoc, opaque origin, CSP meta)
//
// 1. We connect an AppBridge to the outer iframe over an origin-pinned
//    postMessage transport, then point the iframe at the proxy.
// 2. The proxy announces `ui/notifications/sandbox-proxy-ready`; we answer
//    once with `ui/notifications/sandbox-resource-ready {html, csp, permissions}`.
// 3. The view inside speaks MCP Apps JSON-RPC; the proxy relays it. The view
//    sends `ui/initialize` (answered by AppBridge with our hostContext) and
//    `ui/notifications/initialized`. Only then do we deliver the queued
//    tool-input / tool-result / host-context notifications.
//
// Usage:
//   import { mountWidget } from "/static/js/widget-host.js";
//   const widget = mountWidget(container, { sandboxUrl, html, csp, ... });
//   widget.sendToolResult(fullCallToolResult);
//   await widget.teardown();

import {
  AppBridge,
  JSONRPCMessageSchema,
} from "../vendor/ext-apps-app-bridge.js";

const HOST_INFO = { name: "mcp-inspector", version: "0.1.0" };
const DISPLAY_MODES = ["inline", "fullscreen", "pip"];
const CSP_KEYS = ["connectDomains", "resourceDomains", "frameDomains", "baseUriDomains"];
// OpenAI Apps SDK spells the CSP keys differently (`_meta["openai/widgetCSP"]`).
const OPENAI_CSP_KEYS = {
  connect_domains: "connectDomains",
  resource_domains: "resourceDomains",
  frame_domains: "frameDomains",
};
// Same rule as HOST_SOURCE in static/sandbox/proxy.js (keep in sync): the
// proxy enforces it; here it only keeps hostCapabilities.sandbox.csp honest
// about what is actually applied.
const HOST_SOURCE = /^(?:(?:https?|wss?):\/\/)?(?:\*\.)?[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*(?::(?:\d{1,5}|\*))?(?:\/[^\s;,'"\\]*)?$/i;
const PERMISSION_KEYS = ["camera", "microphone", "geolocation", "clipboardWrite"];
const PIP_SIZE = { width: 360, height: 240 };
const DEFAULT_INLINE_HEIGHT = 150;
const TEARDOWN_TIMEOUT_MS = 3000;
const PROXY_READY_TIMEOUT_MS = 15000;
// A key pressed in the view that the host asked for (`forwardKeys`), relayed by the proxy.
const KEY_NOTICE = "ui/notifications/sandbox-key";

/**
 * postMessage transport pinned to one window and one origin.
 *
 * The SDK's PostMessageTransport posts with targetOrigin "*" and only checks
 * event.source; here both directions are pinned to the sandbox origin, so a
 * message never reaches a document that replaced the proxy, and messages from
 * any other frame (including the view itself posting to window.top, which
 * arrives with origin "null") are dropped.
 */
class PinnedWindowTransport {
  constructor(targetWindow, targetOrigin, onTrace, onKey) {
    this._target = targetWindow;
    this._origin = targetOrigin;
    this._trace = onTrace;
    this._listener = (event) => {
      if (event.source !== this._target || event.origin !== this._origin) return;
      if (event.data?.jsonrpc === "2.0" && event.data.method === KEY_NOTICE) {
        onKey?.(event.data.params);  // the proxy's, not the view's protocol: not for the bridge
        return;
      }
      const parsed = JSONRPCMessageSchema.safeParse(event.data);
      if (parsed.success) {
        this._trace?.("in", event.data);
        this.onmessage?.(parsed.data);
      } else if (event.data?.jsonrpc === "2.0") {
        this.onerror?.(new Error(`Invalid JSON-RPC message from widget: ${parsed.error.message}`));
      }
    };
  }
  async start() {
    window.addEventListener("message", this._listener);
  }
  async send(message) {
    this._trace?.("out", message);
    this._target.postMessage(message, this._origin);
  }
  async close() {
    window.removeEventListener("message", this._listener);
    this.onclose?.();
  }
}

/** Error whose `code` becomes the JSON-RPC error code sent to the view. */
function rpcError(code, message) {
  const error = new Error(message);
  error.code = code;
  return error;
}

/**
 * Keep only valid host-source strings under the four spec keys (accepts the
 * Apps SDK's snake_case keys too). An empty object still means "declared":
 * the proxy then builds the declared-domains policy with no domains.
 */
function normalizeCsp(csp) {
  if (!csp || typeof csp !== "object") return undefined;
  const out = {};
  for (const [key, value] of Object.entries(csp)) {
    const name = CSP_KEYS.includes(key) ? key : OPENAI_CSP_KEYS[key];
    if (!name || !Array.isArray(value)) continue;
    out[name] = [...(out[name] || []), ...value.filter((d) => typeof d === "string" && HOST_SOURCE.test(d))];
  }
  return out;
}

function normalizePermissions(permissions) {
  if (!permissions || typeof permissions !== "object") return undefined;
  const out = {};
  for (const key of PERMISSION_KEYS) {
    if (permissions[key]) out[key] = {};
  }
  return out;
}

/** One item of ui/download-file as {name, size, url, save()}, or null if it cannot be saved. */
function downloadOf(item) {
  const nameOf = (uri, fallback) => {
    const tail = String(uri || "").split(/[/?#]/).filter(Boolean).pop();
    return (tail || fallback).replace(/[\\/:*?"<>|\u0000-\u001f]/g, "_").slice(0, 120);
  };
  if (item?.type === "resource" && item.resource && typeof item.resource === "object") {
    const r = item.resource;
    let bytes;
    if (typeof r.text === "string") bytes = new TextEncoder().encode(r.text);
    else if (typeof r.blob === "string") {
      try { bytes = Uint8Array.from(atob(r.blob), (c) => c.charCodeAt(0)); } catch { return null; }
    } else return null;
    const name = nameOf(r.uri, "download");
    return {
      name, size: bytes.length, url: null,
      save: () => {
        const a = document.createElement("a");
        a.href = URL.createObjectURL(new Blob([bytes], { type: r.mimeType || "application/octet-stream" }));
        a.download = name;
        a.click();
        setTimeout(() => URL.revokeObjectURL(a.href), 10000);
      },
    };
  }
  if (item?.type === "resource_link" && /^https?:\/\//i.test(item.uri || "")) {
    return { name: item.name || nameOf(item.uri, "link"), size: item.size, url: item.uri,
             save: () => window.open(item.uri, "_blank", "noopener,noreferrer") };
  }
  return null;
}

let stylesInjected = false;
function injectStyles() {
  if (stylesInjected || document.getElementById("mcp-widget-host-styles")) return;
  stylesInjected = true;
  const style = document.createElement("style");
  style.id = "mcp-widget-host-styles";
  style.textContent = `
.mcp-widget { position: relative; }
.mcp-widget--bordered { border: 1px solid rgba(127,127,127,.35); border-radius: 8px; overflow: hidden; }
.mcp-widget > iframe.mcp-widget__frame { display: block; width: 100%; border: 0; }
.mcp-widget__exit { display: none; }
.mcp-widget--fullscreen, .mcp-widget--pip { background: Canvas; color: CanvasText; z-index: 1000; }
.mcp-widget--fullscreen { position: fixed; inset: 0; border-radius: 0; }
.mcp-widget--fullscreen > iframe.mcp-widget__frame { height: 100% !important; }
.mcp-widget--pip { position: fixed; right: 16px; bottom: 16px; width: ${PIP_SIZE.width}px; height: ${PIP_SIZE.height}px;
  box-shadow: 0 8px 30px rgba(0,0,0,.3); border-radius: 8px; overflow: hidden; }
.mcp-widget--pip > iframe.mcp-widget__frame { height: 100% !important; }
.mcp-widget--fullscreen > .mcp-widget__exit, .mcp-widget--pip > .mcp-widget__exit {
  display: block; position: absolute; top: 6px; right: 6px; z-index: 1; font: 12px sans-serif;
  padding: 2px 8px; border-radius: 4px; border: 1px solid rgba(127,127,127,.5); background: Canvas; color: CanvasText; cursor: pointer; }
`;
  document.head.appendChild(style);
}

function defaultHostContext(container) {
  const ctx = {
    theme: window.matchMedia?.("(prefers-color-scheme: dark)").matches ? "dark" : "light",
    displayMode: "inline",
    availableDisplayModes: [...DISPLAY_MODES],
    locale: navigator.language,
    timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
    platform: "web",
    userAgent: `${HOST_INFO.name}/${HOST_INFO.version}`,
    deviceCapabilities: {
      hover: !!window.matchMedia?.("(hover: hover)").matches,
      touch: navigator.maxTouchPoints > 0,
    },
  };
  const width = container.clientWidth;
  if (width > 0) ctx.containerDimensions = { maxWidth: width };
  return ctx;
}

/**
 * Mount one MCP App view in `container`.
 *
 * @param {HTMLElement} container  element that will hold the outer iframe
 * @param {object} options
 *   sandboxUrl      URL of static/sandbox/proxy.html on the sandbox origin. `host=<our origin>`
 *                   is appended unless the URL already carries a `host` parameter.
 *   sandboxOrigin   origin of sandboxUrl (defaults to new URL(sandboxUrl).origin); must differ
 *                   from location.origin.
 *   html            the view's HTML (resources/read text, or decoded blob)
 *   csp             resource _meta.ui.csp {connectDomains, resourceDomains, frameDomains, baseUriDomains}
 *   permissions     resource _meta.ui.permissions {camera, microphone, geolocation, clipboardWrite}
 *   prefersBorder   resource _meta.ui.prefersBorder (undefined: host default = bordered)
 *   toolDefinition  the Tool (name, inputSchema, _meta...) -> hostContext.toolInfo.tool
 *   toolCallId      optional JSON-RPC id of the tools/call -> hostContext.toolInfo.id
 *   toolInput       arguments; when given, tool-input is queued at mount
 *   toolResult      full CallToolResult; when given, tool-result is queued at mount (replay)
 *   hostContext     partial McpUiHostContext merged over defaults (theme, displayMode,
 *                   availableDisplayModes, containerDimensions, locale, timeZone, styles, ...)
 *   openai          true for OpenAI Apps SDK widgets (text/html+skybridge): the proxy injects
 *                   the window.openai shim
 *   widgetState     saved Apps SDK widget state (openai mode), restored as window.openai.widgetState
 *   hostInfo        {name, version} reported to the view
 *   initialHeight   outer iframe height in px until the view reports its size (default 150)
 *   fullscreenDimensions() -> {width, height}  the fullscreen container's size (default: the
 *                   window's); the workbench gives its simulated device's screen
 *   probes          names of checks the sandbox runs inside the view and reports as log messages
 *                   (logger "sandbox.<name>"): ["contrast"] for the workbench's contrast check
 *   forwardKeys     keys (KeyboardEvent.key) that still reach the host page while the view has
 *                   the focus: pressed in the view outside a text field and not handled by it,
 *                   they are dispatched as keydown on the iframe element (the replay player's
 *                   ← → End…; a click in the view would otherwise trap them in its frame)
 *   onCallTool(name, args, params) -> Promise<CallToolResult>
 *   onReadResource(uri) -> Promise<ReadResourceResult>
 *   onMessage(params) -> Promise            ui/message {role, content: ContentBlock[]}
 *   onUpdateModelContext(params) -> Promise ui/update-model-context {content?, structuredContent?}
 *   onOpenLink(url) -> (Promise<)boolean|void(>)   veto hook; `false` refuses. Only http(s)
 *                   URLs get this far; the host then calls window.open(url, "_blank", "noopener,noreferrer").
 *   onDownloadFile(files) -> (Promise<)boolean|void(>)  ui/download-file, files = [{name, size, url}]
 *                   (url for http(s) resource links); `false` refuses. Without it the host does
 *                   not offer downloads.
 *   onRequestDisplayMode(mode) -> Promise<actualMode|undefined>  undefined = grant `mode`
 *   onLog(params)                           notifications/message from the view
 *   onSizeChanged({width, height})
 *   onInitialized({appInfo, appCapabilities})
 *   onRequestTeardown()                     the view asked to be closed
 *   onError(error)                          setup failures (e.g. proxy never became ready)
 *   onTrace(direction, message)             every JSON-RPC message on the wire, "in" (from the
 *                   view or the proxy) or "out" (to them), as it is sent or received: the
 *                   workbench's view console
 * @returns handle {sendToolInput, sendToolInputPartial, sendToolResult, sendToolCancelled,
 *   setHostContext, getHostContext, teardown, initialized (Promise), iframe, bridge}
 */
export function mountWidget(container, options) {
  if (!container) throw new Error("mountWidget: container is required");
  if (!options || typeof options.html !== "string") throw new Error("mountWidget: options.html (string) is required");
  if (!options.sandboxUrl) throw new Error("mountWidget: options.sandboxUrl is required");

  const proxyUrl = new URL(options.sandboxUrl, location.href);
  const sandboxOrigin = options.sandboxOrigin || proxyUrl.origin;
  if (proxyUrl.origin !== sandboxOrigin) {
    throw new Error(`mountWidget: sandboxUrl origin ${proxyUrl.origin} != sandboxOrigin ${sandboxOrigin}`);
  }
  // The spec requires different origins: on the host origin, the proxy (and so
  // anything that escaped the inner frame) could script the host page.
  if (sandboxOrigin === location.origin) {
    throw new Error("mountWidget: the sandbox proxy must be served from a different origin than the host page");
  }
  if (!proxyUrl.searchParams.has("host")) proxyUrl.searchParams.set("host", location.origin);

  const csp = normalizeCsp(options.csp);
  const permissions = normalizePermissions(options.permissions);

  injectStyles();
  container.classList.add("mcp-widget");
  if (options.prefersBorder !== false) container.classList.add("mcp-widget--bordered");

  // --- host context ------------------------------------------------------
  // AppBridge keeps a reference to this object and returns it from
  // ui/initialize; before initialization we mutate it in place so a late
  // setHostContext() still shows up in the initialize result.
  const hostContext = { ...defaultHostContext(container), ...(options.hostContext || {}) };
  if (options.toolDefinition) {
    hostContext.toolInfo = { tool: options.toolDefinition };
    if (options.toolCallId !== undefined) hostContext.toolInfo.id = options.toolCallId;
  }
  let currentContext = hostContext;
  // Remembered so leaving fullscreen/pip restores the caller's dimensions.
  let inlineDimensions = hostContext.containerDimensions;

  // --- DOM -----------------------------------------------------------------
  const iframe = document.createElement("iframe");
  iframe.className = "mcp-widget__frame";
  iframe.title = options.toolDefinition?.title || options.toolDefinition?.name || "MCP App";
  // The proxy needs scripts, and allow-same-origin so it keeps its real
  // (sandbox) origin (the spec requires both): our transport accepts only
  // messages whose event.origin is the sandbox origin, and an opaque proxy
  // would post as "null", like any other sandboxed frame. The sandbox origin
  // is not ours, so same-origin grants it nothing over the host page.
  // allow-forms is here only so the inner view can have it too (sandbox flags
  // of nested frames are intersected with their parent's).
  iframe.setAttribute("sandbox", "allow-scripts allow-same-origin allow-forms");
  // Permission Policy must be delegated at each level: outer (here) and inner (proxy).
  const allow = [];
  if (permissions?.camera) allow.push("camera");
  if (permissions?.microphone) allow.push("microphone");
  if (permissions?.geolocation) allow.push("geolocation");
  if (permissions?.clipboardWrite) allow.push("clipboard-write");
  if (allow.length) iframe.setAttribute("allow", allow.join("; "));
  iframe.setAttribute("referrerpolicy", "origin");
  iframe.style.height = `${options.initialHeight ?? DEFAULT_INLINE_HEIGHT}px`;

  const exitButton = document.createElement("button");
  exitButton.type = "button";
  exitButton.className = "mcp-widget__exit";
  exitButton.textContent = "Exit";
  exitButton.title = "Back to inline view";
  exitButton.addEventListener("click", () => applyDisplayMode("inline"));

  container.appendChild(exitButton);
  container.appendChild(iframe); // loads about:blank; the WindowProxy survives the later navigation

  // --- bridge ----------------------------------------------------------------
  const hostCapabilities = {
    openLinks: {},
    logging: {},
    sandbox: { csp: csp || {}, permissions: permissions || {} },
  };
  if (options.onCallTool) hostCapabilities.serverTools = {};
  if (options.onReadResource) hostCapabilities.serverResources = {};
  if (options.onMessage) hostCapabilities.message = { text: {}, image: {}, resource: {}, resourceLink: {} };
  if (options.onDownloadFile) hostCapabilities.downloadFile = {};
  if (options.onUpdateModelContext) {
    hostCapabilities.updateModelContext = { text: {}, image: {}, resource: {}, resourceLink: {}, structuredContent: {} };
  }

  const bridge = new AppBridge(null, options.hostInfo || HOST_INFO, hostCapabilities, { hostContext });

  const forwardKeys = Array.isArray(options.forwardKeys) ? options.forwardKeys.filter((k) => typeof k === "string") : [];
  // A key the view handed back: the host page gets it as if it had been typed on the view's frame.
  function forwardKey(params) {
    const key = params?.key;
    if (tornDown || !forwardKeys.includes(key)) return;
    iframe.dispatchEvent(new KeyboardEvent("keydown", { key, bubbles: true, cancelable: true }));
  }

  let initialized = false;
  let tornDown = false;
  let resourceSent = false;
  let toolInputSent = false;
  const queue = []; // notifications waiting for ui/notifications/initialized
  let resolveInitialized;
  let rejectInitialized;
  const initializedPromise = new Promise((resolve, reject) => {
    resolveInitialized = resolve;
    rejectInitialized = reject;
  });
  initializedPromise.catch(() => {}); // the caller may ignore it

  const reportError = (error) => {
    if (options.onError) options.onError(error);
    else console.error("[widget-host]", error);
  };

  bridge.onsandboxready = () => {
    // Sent once: a second "ready" would mean the proxy reloaded.
    if (resourceSent || tornDown) return;
    resourceSent = true;
    clearTimeout(proxyTimer);
    const params = { html: options.html };
    if (csp) params.csp = csp;
    if (forwardKeys.length) params.forwardKeys = forwardKeys;
    if (Array.isArray(options.probes) && options.probes.length) params.probes = options.probes;
    if (permissions) params.permissions = permissions;
    if (options.openai) {
      params.openai = true;
      params.widgetState = options.widgetState ?? null;
      // Apps SDK widgets often read window.openai.* synchronously at load, so
      // what the host already knows is baked into the shim's initial globals.
      params.openaiGlobals = {
        toolInput: options.toolInput ?? {},
        toolOutput: options.toolResult?.structuredContent ?? null,
        toolResponseMetadata: options.toolResult?._meta ?? null,
        theme: hostContext.theme,
        locale: hostContext.locale,
        displayMode: hostContext.displayMode,
        maxHeight: hostContext.containerDimensions?.maxHeight,
      };
    }
    bridge.sendSandboxResourceReady(params).catch(reportError);
  };

  bridge.oninitialized = () => {
    if (initialized || tornDown) return;
    initialized = true;
    // Order matters (tool-input before tool-result), so drain sequentially.
    const pending = queue.splice(0);
    (async () => {
      for (const send of pending) {
        try {
          await send();
        } catch (error) {
          reportError(error);
        }
      }
    })();
    options.onInitialized?.({ appInfo: bridge.getAppVersion(), appCapabilities: bridge.getAppCapabilities() });
    resolveInitialized();
  };

  bridge.onsizechange = ({ width, height }) => {
    if (height != null && currentContext.displayMode === "inline") {
      const maxHeight = currentContext.containerDimensions?.maxHeight;
      const h = maxHeight ? Math.min(height, maxHeight) : height;
      iframe.style.height = `${Math.max(0, Math.ceil(h))}px`;
    }
    options.onSizeChanged?.({ width, height });
  };

  bridge.onloggingmessage = (params) => {
    if (options.onLog) options.onLog(params);
    else console.debug("[widget-host] view log:", params);
  };

  bridge.onrequestteardown = () => options.onRequestTeardown?.();

  if (options.onCallTool) {
    bridge.oncalltool = (params) => options.onCallTool(params.name, params.arguments ?? {}, params);
  }
  if (options.onReadResource) {
    bridge.onreadresource = (params) => options.onReadResource(params.uri);
  }

  bridge.onmessage = async (params) => {
    if (!options.onMessage) throw rpcError(-32601, "ui/message is not supported by this host");
    const result = await options.onMessage(params);
    return result && typeof result === "object" ? result : {};
  };

  bridge.onupdatemodelcontext = async (params) => {
    if (!options.onUpdateModelContext) throw rpcError(-32601, "ui/update-model-context is not supported by this host");
    await options.onUpdateModelContext(params);
    return {};
  };

  bridge.onopenlink = async ({ url }) => {
    let parsed;
    try {
      parsed = new URL(url);
    } catch {
      throw rpcError(-32602, "Invalid URL");
    }
    // javascript:, data:, file:, blob: ... would run or load in a context the
    // view does not own; only plain web links leave the sandbox.
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
      throw rpcError(-32602, `Refused to open ${parsed.protocol} URL: only http(s) links are allowed`);
    }
    if (options.onOpenLink) {
      const verdict = await options.onOpenLink(parsed.href);
      if (verdict === false) throw rpcError(-32000, "Link opening denied");
    }
    window.open(parsed.href, "_blank", "noopener,noreferrer");
    return {};
  };

  // ui/download-file: embedded resources are saved from their own bytes (never fetched);
  // resource links only when they are plain web links. The caller may refuse (ask the person).
  bridge.ondownloadfile = async ({ contents }) => {
    if (!options.onDownloadFile) throw rpcError(-32601, "ui/download-file is not supported by this host");
    const files = (Array.isArray(contents) ? contents : []).map(downloadOf).filter(Boolean);
    if (!files.length) throw rpcError(-32602, "Nothing to download: give embedded resources or http(s) resource links");
    if ((await options.onDownloadFile(files.map(({ name, size, url }) => ({ name, size, url })))) === false) return { isError: true };
    for (const file of files) file.save();
    return {};
  };

  bridge.onrequestdisplaymode = async ({ mode }) => {
    const current = currentContext.displayMode || "inline";
    if (!isModeAllowed(mode)) return { mode: current };
    let actual = mode;
    if (options.onRequestDisplayMode) {
      const answer = await options.onRequestDisplayMode(mode);
      if (answer != null) actual = isModeAllowed(answer) ? answer : current;
    }
    applyDisplayMode(actual);
    return { mode: actual };
  };

  // --- display modes ---------------------------------------------------------
  function isModeAllowed(mode) {
    if (!DISPLAY_MODES.includes(mode)) return false;
    const hostModes = currentContext.availableDisplayModes || DISPLAY_MODES;
    if (!hostModes.includes(mode)) return false;
    // Spec: never switch to a mode the view did not declare (when it declared any).
    const appModes = bridge.getAppCapabilities()?.availableDisplayModes;
    if (appModes && !appModes.includes(mode)) return false;
    return true;
  }

  // `extra`: more host context sent in the same notification (the caller's own fullscreen
  // size, say), so the view is told the mode and its size once.
  function applyDisplayMode(mode, extra = {}) {
    if (tornDown) return;
    const previous = currentContext.displayMode || "inline";
    container.classList.toggle("mcp-widget--fullscreen", mode === "fullscreen");
    container.classList.toggle("mcp-widget--pip", mode === "pip");
    if (mode === "fullscreen") {
      window.addEventListener("resize", onWindowResize);
      document.addEventListener("keydown", onKeyDown);
    } else {
      window.removeEventListener("resize", onWindowResize);
      document.removeEventListener("keydown", onKeyDown);
    }
    if (mode === previous) {
      if (Object.keys(extra).length) updateContext(extra);
      return;
    }
    let containerDimensions = extra.containerDimensions;
    if (!containerDimensions) {
      if (mode === "fullscreen") containerDimensions = fullscreenDimensions();
      else if (mode === "pip") containerDimensions = { ...PIP_SIZE };
      else containerDimensions = inlineDimensions;
    }
    const partial = { ...extra, displayMode: mode };
    if (containerDimensions) partial.containerDimensions = containerDimensions;
    updateContext(partial);
  }

  function fullscreenDimensions() {
    return options.fullscreenDimensions?.() || { width: window.innerWidth, height: window.innerHeight };
  }

  // While fullscreen, the view's fixed dimensions follow the window (or the caller's screen).
  function onWindowResize() {
    updateContext({ containerDimensions: fullscreenDimensions() });
  }

  // Escape leaves fullscreen when the host page has focus (keys typed inside
  // the view stay in its frame; it has the Exit button and request-display-mode).
  function onKeyDown(event) {
    if (event.key === "Escape") applyDisplayMode("inline");
  }

  function updateContext(partial) {
    if (tornDown) return;
    if (!initialized) {
      Object.assign(hostContext, partial); // same object AppBridge will answer ui/initialize with
      currentContext = hostContext;
      return;
    }
    // AppBridge.setHostContext replaces the whole context and notifies the
    // view of the keys whose value changed, so always pass a merged copy.
    currentContext = { ...currentContext, ...partial };
    bridge.setHostContext(currentContext);
  }

  // --- queued delivery ---------------------------------------------------------
  function deliver(send) {
    if (tornDown) return Promise.resolve();
    if (initialized) return send();
    return new Promise((resolve, reject) => {
      queue.push(() => send().then(resolve, reject));
    });
  }

  function sendToolInput(args) {
    toolInputSent = true;
    // Drop partials that were queued but not yet delivered: the complete input supersedes them.
    for (let i = queue.length - 1; i >= 0; i--) if (queue[i].partial) queue.splice(i, 1);
    return deliver(() => bridge.sendToolInput({ arguments: args ?? {} }));
  }

  function sendToolInputPartial(args) {
    // Spec: partials stop once the complete tool-input was sent.
    if (toolInputSent || tornDown) return Promise.resolve();
    if (!initialized) {
      // Only the newest partial is worth delivering after initialization.
      for (let i = queue.length - 1; i >= 0; i--) if (queue[i].partial) queue.splice(i, 1);
      let settle;
      const promise = new Promise((resolve, reject) => (settle = { resolve, reject }));
      const job = () => bridge.sendToolInputPartial({ arguments: args ?? {} }).then(settle.resolve, settle.reject);
      job.partial = true;
      queue.push(job);
      return promise;
    }
    return bridge.sendToolInputPartial({ arguments: args ?? {} });
  }

  function sendToolResult(fullResult) {
    // The FULL CallToolResult as the server sent it (structuredContent, _meta, unknown fields).
    return deliver(() => bridge.sendToolResult(fullResult));
  }

  function sendToolCancelled(reason) {
    return deliver(() => bridge.sendToolCancelled(reason === undefined ? {} : { reason: String(reason) }));
  }

  function setHostContext(partial) {
    if (!partial || typeof partial !== "object") return;
    if (partial.containerDimensions && (partial.displayMode ?? currentContext.displayMode) === "inline") {
      inlineDimensions = partial.containerDimensions;
    }
    if (partial.displayMode && partial.displayMode !== currentContext.displayMode) {
      // Host-initiated mode change (e.g. the user left fullscreen): apply the CSS too, and
      // send the rest (the caller's container size) in the same notification.
      const { displayMode, ...rest } = partial;
      applyDisplayMode(displayMode, rest);
      return;
    }
    updateContext(partial);
  }

  async function teardown(reason = "host closed the view") {
    if (tornDown) return;
    // Spec: send ui/resource-teardown and wait (bounded) for the view's answer
    // so it can save state, then remove the frame.
    if (initialized) {
      try {
        await Promise.race([
          bridge.teardownResource({ reason }),
          new Promise((resolve) => setTimeout(resolve, TEARDOWN_TIMEOUT_MS)),
        ]);
      } catch (error) {
        console.debug("[widget-host] teardown request failed:", error);
      }
    }
    tornDown = true;
    clearTimeout(proxyTimer);
    window.removeEventListener("resize", onWindowResize);
    document.removeEventListener("keydown", onKeyDown);
    queue.length = 0;
    rejectInitialized(new Error("widget torn down"));
    try {
      await bridge.close();
    } catch {
      /* already closed */
    }
    iframe.remove();
    exitButton.remove();
    container.classList.remove("mcp-widget--fullscreen", "mcp-widget--pip", "mcp-widget--bordered", "mcp-widget");
  }

  // --- start -------------------------------------------------------------------
  const proxyTimer = setTimeout(() => {
    if (!resourceSent && !tornDown) {
      const error = new Error(`sandbox proxy at ${sandboxOrigin} did not become ready`);
      reportError(error);
      rejectInitialized(error);
    }
  }, PROXY_READY_TIMEOUT_MS);

  // Connect before navigating the iframe so the proxy's ready message cannot
  // be missed (transport.start() runs synchronously inside connect()).
  bridge
    .connect(new PinnedWindowTransport(iframe.contentWindow, sandboxOrigin, options.onTrace, forwardKey))
    .then(() => {
      if (!tornDown) iframe.src = proxyUrl.href;
    })
    .catch((error) => {
      reportError(error);
      rejectInitialized(error);
    });

  if (options.toolInput !== undefined) sendToolInput(options.toolInput);
  if (options.toolResult !== undefined) sendToolResult(options.toolResult);

  return {
    sendToolInput,
    sendToolInputPartial,
    sendToolResult,
    sendToolCancelled,
    setHostContext,
    getHostContext: () => ({ ...currentContext }),
    teardown,
    initialized: initializedPromise,
    iframe,
    bridge,
  };
}
