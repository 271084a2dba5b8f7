// MCP App views inside tool cards: fetch the view (a worker reads the ui:// resource), mount it
// in the double-iframe sandbox, and feed it the FULL result: the one its tool_call.result event
// pushed, or, for a big one or one the page learnt of from the API, fetched over HTTP first.
// Requests from the view go back to the server through the tool-call pipeline (origin
// "widget") and other endpoints of ours.
import { apiFetch } from "./http.js";
import { fetchFullResult } from "./tool-result.js";
import { mountWidget } from "./widget-host.js";

// This page's id when it claims a call of a view's own tool (only one open page runs it); kept
// for the tab's session, so a reload can finish a call it had claimed.
const PAGE_ID = sessionStorage.getItem("inspector-page-id") || crypto.randomUUID?.() || `${Date.now()}-${Math.random().toString(16).slice(2)}`;
sessionStorage.setItem("inspector-page-id", PAGE_ID);
const runViewCalls = new Set();
const waitingViewCalls = new Map();  // view's tool call id -> calls of its tools asked before the view was mounted

// Tool call id -> entry. A view can be mounted while the model is still writing the call
// (call.pending, keyed by a temporary id): it gets tool-input-partial until the call row
// exists, then adoptAppView() re-keys it to the real tool call id.
const mounted = new Map();

function displayModesFor(slot) {
  return {
    inline: () => slot.classList.remove("fullscreen", "pip"),
    fullscreen: () => { slot.classList.remove("pip"); slot.classList.add("fullscreen"); },
    pip: () => { slot.classList.remove("fullscreen"); slot.classList.add("pip"); },
  };
}

/** Mount `call`'s view in `slot`. `onActivity(kind, text)`, when given, is told what the view
 *  sends the host (messages, logs, model context, links) so the page can show it. */
export function mountAppView(slot, call, page, { onChanged, onActivity } = {}) {
  let entry = mounted.get(call.id);
  if (entry?.failed && !call.pending) {
    // The early fetch failed while the model was still writing the call: try again now.
    mounted.delete(call.id);
    entry = null;
  }
  if (!entry) {
    entry = { handle: null, slot, callId: call.pending ? null : call.id, sentInput: false, sentResult: false, sentCancel: false };
    entry.adopted = new Promise((resolve) => { entry.adopt = resolve; });
    if (entry.callId) entry.adopt(entry.callId);
    mounted.set(call.id, entry);
    start(slot, call, page, entry, onChanged, onActivity);
    return;
  }
  deliver(entry, call);
}

/** The streamed call now has its row: the view keeps running, under the real id. */
export function adoptAppView(pendingId, callId) {
  const entry = mounted.get(pendingId);
  if (!entry) return;
  mounted.delete(pendingId);
  mounted.set(callId, entry);
  entry.callId = callId;
  entry.adopt(callId);
  entry.handle?.setHostContext({ toolInfo: { ...(entry.handle.getHostContext?.().toolInfo || {}), id: callId } });
}

/** A streamed call that never got a row (the turn was stopped or failed): remove its view. */
export function unmountAppView(id) {
  const entry = mounted.get(id);
  if (!entry) return;
  mounted.delete(id);
  try { entry.handle?.teardown("the tool call was not made"); } catch { /* it is going away anyway */ }
}

function deliver(entry, call) {
  if (!entry.handle) { entry.pending = call; return; }
  if (call.pending) {
    if (call.arguments) entry.handle.sendToolInputPartial(call.arguments);
    return;
  }
  if (!entry.sentInput) {
    entry.sentInput = true;
    entry.handle.sendToolInput(call.arguments || {});
  }
  if (call.has_result && !entry.sentResult) {
    entry.sentResult = true;  // before the fetch: a second update must not fetch it again
    const handle = entry.handle;
    fetchFullResult(call.id).then((result) => handle.sendToolResult(result)).catch((err) => {
      entry.sentResult = false;  // the next update of the call tries again
      const p = document.createElement("p"); p.className = "error";
      p.textContent = `Could not load the full result for the view: ${err.message}`;
      entry.slot.append(p);
    });
  } else if (!call.has_result && ["failed", "timed_out", "cancelled"].includes(call.status) && !entry.sentCancel) {
    entry.sentCancel = true;
    entry.handle.sendToolCancelled(call.error || call.status);
  }
}

function textOf(blocks) {
  return (blocks || []).map((b) => (b?.type === "text" ? b.text : `[${b?.type || "?"}]`)).join(" ");
}

async function start(slot, call, page, entry, onChanged, onActivity = () => {}) {
  let view;
  try {
    view = await apiFetch(call.pending
      ? `/api/servers/${call.server_id}/tools/${encodeURIComponent(call.tool)}/view/`
      : `/api/tool-calls/${call.id}/view/`);
  } catch (err) {
    if (call.pending) { entry.failed = true; return; }
    slot.textContent = `Could not load the app view: ${err.message}`;
    slot.className = "widget-slot error";
    return;
  }
  if (![...mounted.values()].includes(entry)) return;  // unmounted while the view loaded
  if (view.warning) { const w = document.createElement("p"); w.className = "help"; w.textContent = view.warning; slot.append(w); }
  const modes = displayModesFor(slot);
  const holder = document.createElement("div");
  slot.append(holder);
  // A view's requests need the call's row; a view mounted early waits for it.
  const base = async () => `/api/tool-calls/${await entry.adopted}/widget`;
  entry.sentInput = !call.pending;
  entry.handle = mountWidget(holder, {
    sandboxUrl: page.sandboxUrl,
    sandboxOrigin: page.sandboxOrigin,
    html: view.html,
    csp: view.csp,
    permissions: view.permissions,
    prefersBorder: view.prefersBorder,
    toolDefinition: view.tool,
    toolCallId: entry.callId ?? undefined,  // set once the call has its row (maybe during the fetch)
    // Apps SDK widgets read window.openai.toolInput at load: give it at mount when known.
    toolInput: call.pending ? undefined : (call.arguments || {}),
    openai: view.openai,
    widgetState: view.widget_state,
    hostInfo: { name: "mcp-inspector", version: "0.1.0" },
    hostContext: {
      theme: "light",
      displayMode: "inline",
      availableDisplayModes: view.display_modes,
      locale: navigator.language,
      timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
      containerDimensions: { maxHeight: 800, width: slot.clientWidth || 700 },
    },
    onCallTool: async (name, args) => apiFetch(`${await base()}/tools-call/`, { method: "POST", body: { name, arguments: args || {} } }),
    onReadResource: async (uri) => apiFetch(`${await base()}/resources-read/`, { method: "POST", body: { uri } }),
    onMessage: async (params) => {
      const text = (params.content || []).filter(b => b.type === "text").map(b => b.text).join("\n");
      const said = `ui/message (${params.role || "user"}): “${textOf(params.content)}”`;
      if (!text) { onActivity("message", `${said}: refused, no text`); return { isError: true }; }
      // Only the chat page can send a message; elsewhere (the tool page) the view is told no.
      if (!window.inspectorSendMessage) { onActivity("message", `${said}: not sent, only a chat sends a view's message`); return { isError: true }; }
      const ok = await window.inspectorSendMessage(text, { fromCall: await entry.adopted, tool: call.tool });
      onActivity("message", `${said}: ${ok ? "sent" : "not sent"}`);
      return ok ? {} : { isError: true };
    },
    onUpdateModelContext: async (params) => {
      await apiFetch(`${await base()}/model-context/`, { method: "POST", body: params || {} });
      const content = params?.content ? `“${textOf(params.content)}”` : "";
      onActivity("context", `ui/update-model-context: ${content}${params?.structuredContent ? `${content ? " + " : ""}structuredContent` : ""} stored as the model context`);
      onChanged?.();
      return {};
    },
    onOpenLink: (url) => {
      const ok = /^https?:\/\//i.test(url);
      onActivity("link", `ui/open-link ${url}${ok ? "" : ": refused"}`);
      return ok;
    },
    onDownloadFile: (files) => window.confirm(`The App view of “${call.tool}” wants to save ${files.length === 1 ? "a file" : `${files.length} files`}:\n\n${
      files.map((f) => `${f.name}${f.size != null ? ` (${f.size} bytes)` : ""}${f.url ? ` from ${f.url}` : ""}`).join("\n")}`),
    onRequestDisplayMode: async (mode) => {
      const allowed = view.display_modes || ["inline"];
      const granted = allowed.includes(mode) ? mode : "inline";
      modes[granted]?.();
      entry.handle?.setHostContext({ displayMode: granted });
      return granted;
    },
    onLog: (params) => {
      console.info(`[app ${call.tool}]`, params?.level || "info", params?.data);
      const data = typeof params?.data === "string" ? params.data : JSON.stringify(params?.data);
      onActivity("log", `log [${params?.level || "info"}]${params?.logger ? ` ${params.logger}` : ""}: ${data}`);
    },
    onError: (err) => { const p = document.createElement("p"); p.className = "error"; p.textContent = `App view error: ${err.message || err}`; slot.append(p); },
    onInitialized: ({ appCapabilities }) => {
      // A view with tools of its own: tell the chat which, so the model can be offered them.
      if (appCapabilities?.tools && page.conversationId) recordViewTools(entry);
    },
  });
  deliver(entry, entry.pending || call);
  const waiting = waitingViewCalls.get(entry.callId) || [];
  waitingViewCalls.delete(entry.callId);
  for (const viewCall of waiting) runViewToolCall(viewCall);
}

async function recordViewTools(entry) {
  try {
    const listed = await entry.handle.bridge.listTools({});
    const tools = (listed?.tools || []).map(({ name, description, inputSchema }) => ({ name, description, inputSchema }));
    await apiFetch(`/api/tool-calls/${await entry.adopted}/widget/view-tools/`, { method: "POST", body: { tools } });
  } catch (err) {
    console.warn("[app-view] could not record the view's tools:", err);
  }
}

/** The model called a tool a view registered (origin "view"): if this page shows that view,
 *  claim the call, run it in the view (tools/call over the bridge) and post the result. */
export async function runViewToolCall(call) {
  if (call.origin !== "view" || call.status !== "running" || runViewCalls.has(call.id)) return;
  const entry = mounted.get(call.view_call_id);
  if (!entry?.handle) {
    // The view is still loading (a page opened or reloaded while the call waits): run it once mounted.
    const waiting = waitingViewCalls.get(call.view_call_id) || [];
    if (!waiting.some((c) => c.id === call.id)) waiting.push(call);
    waitingViewCalls.set(call.view_call_id, waiting);
    return;
  }
  runViewCalls.add(call.id);
  try {
    await apiFetch(`/api/tool-calls/${call.id}/view-claim/`, { method: "POST", body: { page: PAGE_ID } });
  } catch { return; }  // another page runs it, or it ended
  await entry.handle.initialized.catch(() => {});
  let body;
  try {
    body = { page: PAGE_ID, result: await entry.handle.bridge.callTool({ name: call.tool, arguments: call.arguments || {} }) };
  } catch (err) {
    body = { page: PAGE_ID, error: err.message || String(err) };
  }
  try { await apiFetch(`/api/tool-calls/${call.id}/view-result/`, { method: "POST", body }); }
  catch (err) { console.warn("[app-view] could not post the view tool's result:", err); }
}

// host-context-changed when the page is resized; ui/resource-teardown when it goes away.
let resizeTimer = null;
window.addEventListener("resize", () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => {
    for (const { handle, slot } of mounted.values()) {
      if (handle && slot) handle.setHostContext({ containerDimensions: { maxHeight: 800, width: slot.clientWidth } });
    }
  }, 250);
});
window.addEventListener("pagehide", () => {
  for (const { handle } of mounted.values()) {
    try { handle?.teardown("the page was closed"); } catch { /* the page is going away anyway */ }
  }
});
