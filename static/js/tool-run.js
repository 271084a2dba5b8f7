// Run a tool from the inspector: create a manual tool call, then watch it on the page's one
// WebSocket (call-socket.js) for the result and show the full result next to what the model sees.
//
// The POST asks `?wait=QUICK_WAIT_SECONDS`: a call that ends that soon (most do) comes back in
// the POST's own answer, with its full result when small enough (the one-round-trip path scripts
// use, tools/api.py), and the page skips subscribing, a round trip through the socket's
// consumer, and the result's relay (bench/hot_path.py --browser times the difference). A longer
// call is followed on the socket as before: the subscription sends its current state, so its
// progress, logs and server requests come from the state and the catch-up, only later.
//
// The socket's events are summaries (tools/events.py): sizes, tokens, status and the start of
// what the model saw; tool_call.result also carries the full result unless it is over
// WS_INLINE_RESULT_MAX_BYTES. Of a result over AUTO_SHOW_BYTES the page shows, on request, its
// first RESULT_PREVIEW_BYTES (GET …/result/preview/) and links the whole as a streamed download:
// a 40 MB result would stall the page for a text nobody can read in it.
import { apiFetch, pretty } from "./http.js";
import { watchCall } from "./call-socket.js";
import { displayJson, fetchFullResultText, formatBytes, keepPushedResult } from "./tool-result.js";
import { appendLog, showProgress, showServerRequest, showTask } from "./server-requests.js";
import { showElapsed } from "./elapsed.js";
import { mountAppView, unmountAppView } from "./app-view.js";
import { renderContentText } from "./rich-content.js";

const AUTO_SHOW_BYTES = 256 * 1024;
const QUICK_WAIT_SECONDS = 0.5;
const FINAL = new Set(["succeeded", "failed", "timed_out", "cancelled"]);
let shownView = null;  // the tool call id whose App view is under the result

export async function runToolCall({ serverId, tool, args, timeout, asTask = false }) {
  const status = document.getElementById("run-status");
  const elapsed = document.getElementById("run-elapsed");
  const button = document.getElementById("run-tool");
  const cancel = document.getElementById("cancel-tool");
  const requests = document.getElementById("server-requests");
  const progress = document.getElementById("run-progress");
  const taskLine = document.getElementById("run-task");
  const logs = document.getElementById("run-logs");
  button.disabled = true;
  requests.replaceChildren(); requests.hidden = true;
  progress.replaceChildren(); progress.hidden = true;
  taskLine.replaceChildren(); taskLine.hidden = true;
  logs.querySelector("ul").replaceChildren(); logs.hidden = true;
  document.getElementById("result-panel").hidden = true;
  hideView();
  status.className = "status queued"; status.textContent = "queued…";
  let call;
  try {
    const body = { arguments: args };
    if (timeout != null) body.timeout = timeout;
    if (asTask) body.task = true;
    call = await apiFetch(`/api/servers/${serverId}/tools/${encodeURIComponent(tool)}/call/?wait=${QUICK_WAIT_SECONDS}`,
                          { method: "POST", body });
  } catch (err) {
    status.className = "status failed"; status.textContent = err.message; button.disabled = false;
    return;
  }
  if (FINAL.has(call.status)) {  // it ended within the wait: the answer is the finished call
    if (call.full !== undefined) keepPushedResult({ type: "tool_call.result", tool_call_id: call.id, tool_call: call, result: call.full });
    showElapsed(elapsed, call);
    show(call); button.disabled = false;
    showTask(taskLine, call.task);
    if (call.progress) showProgress(progress, call.progress);
    catchUp(call.id, requests, logs, call);  // what it logged or asked on the way (shown after the result)
    return;
  }
  cancel.hidden = false; cancel.disabled = false;
  cancel.onclick = async () => {
    cancel.disabled = true;
    try { await apiFetch(`/api/tool-calls/${call.id}/cancel/`, { method: "POST" }); }
    catch (err) { status.textContent = err.message; }
  };
  const sock = watchCall(call.id, {
    onEvent(ev) {
      if (ev.type === "tool_call.status") {
        const waiting = ev.tool_call.status === "input_required";  // the server asked: answer below
        status.className = `status ${ev.tool_call.status}`;
        status.textContent = waiting ? "waiting for your input…" : `${ev.tool_call.status}…`;
        showElapsed(elapsed, ev.tool_call);
        if (ev.tool_call.progress) showProgress(progress, ev.tool_call.progress);
        showTask(taskLine, ev.tool_call.task);
      }
      if (ev.type === "tool_call.progress") showProgress(progress, ev.progress);
      if (ev.type === "tool_call.log") appendLog(logs, ev.log);
      if (ev.type === "server_request.created" || ev.type === "server_request.updated") {
        showServerRequest(requests, ev.server_request, { defaultModel: localStorage.getItem("sampling-model") || "" });
      }
      if (ev.type === "tool_call.result") {
        keepPushedResult(ev);
        showElapsed(elapsed, ev.tool_call);
        show(ev.tool_call); sock.close(); button.disabled = false; cancel.hidden = true;
        showTask(taskLine, ev.tool_call.task);
        if (ev.tool_call.progress) showProgress(progress, ev.tool_call.progress);
      }
    },
    // (Re)connected: what happened while the socket was away comes from the database.
    onOpen: () => catchUp(call.id, requests, logs),
  });
}

// The call's server requests and logs from the database. A ?wait answer says whether it has any
// (`has_server_requests`, `has_logs`): most calls have neither, and two reads would each cost the
// web process an authenticated request.
function catchUp(callId, requests, logs, answer = null) {
  if (answer?.has_server_requests !== false) {
    apiFetch(`/api/server-requests/?tool_call=${callId}`).then((data) => {
      for (const r of data.server_requests) showServerRequest(requests, r, { defaultModel: localStorage.getItem("sampling-model") || "" });
    }).catch(() => {});
  }
  if (answer?.has_logs !== false) {
    apiFetch(`/api/tool-calls/${callId}/logs/`).then((data) => { for (const entry of data.logs) appendLog(logs, entry); }).catch(() => {});
  }
}

function show(call) {
  const status = document.getElementById("run-status");
  status.className = `status ${call.status}`;
  status.textContent = call.status + (call.error ? `: ${call.error}` : "");
  document.getElementById("result-panel").hidden = false;
  const p = call.projection || {};
  const saved = Math.max((call.tokens_full || 0) - (p.tokens || 0), 0);
  document.getElementById("result-summary").textContent =
    `${call.duration_ms != null ? Math.round(call.duration_ms) + " ms · " : ""}full ${formatBytes(call.size_full)} ≈${call.tokens_full} tokens · model ≈${p.tokens ?? 0} tokens · saved ≈${saved}`;
  document.getElementById("result-trace").textContent = call.trace_id || "";  // W3C trace id, for a tracing backend
  document.getElementById("result-trace-line").hidden = !call.trace_id;
  const schema = document.getElementById("schema-status");
  if (call.schema_valid === true) { schema.className = "badge ok"; schema.textContent = "structuredContent matches the outputSchema"; }
  else if (call.schema_valid === false) { schema.className = "badge danger"; schema.textContent = `Output schema validation failed: ${call.schema_error}`; }
  else if (call.schema_error) { schema.className = "badge warn"; schema.textContent = call.schema_error; }  // e.g. too large to check
  else if (!call.has_result || call.status !== "succeeded") { schema.className = "muted"; schema.textContent = "Not validated: the call did not return a successful result."; }
  else { schema.className = "muted"; schema.textContent = "No outputSchema to validate against."; }
  showFull(call);
  showView(call);
  document.getElementById("projection-text").textContent = p.text ?? "";
  document.getElementById("projection-policy").textContent = p.policy || "";
  document.getElementById("projection-removed").textContent = "";
  // The complete projection (its text may be longer than a summary carries, and what was removed):
  // a ?wait answer is the call's detail and has it; a socket event's summary does not.
  const complete = (detail) => {
    document.getElementById("projection-text").textContent = detail.projection?.text ?? "";
    document.getElementById("projection-removed").textContent = pretty(detail.projection?.removed || []);
    if (detail.schema_valid === false) schema.textContent = `Output schema validation failed: ${detail.schema_error}`;
  };
  if (!p.policy || "removed" in p) { complete(call); return; }
  apiFetch(`/api/tool-calls/${call.id}/?full=0`).then(complete)
    .catch((err) => { document.getElementById("projection-removed").textContent = `Could not load: ${err.message}`; });
}

function showFull(call) {
  const pre = document.getElementById("full-result");
  const button = document.getElementById("show-full");
  const download = document.getElementById("download-full");
  const rendered = document.getElementById("full-rendered");
  rendered.replaceChildren(); rendered.hidden = true;
  document.getElementById("full-size").textContent = call.has_result ? formatBytes(call.size_full) : "";
  download.hidden = !call.has_result;
  if (call.has_result) download.href = call.result_url;
  if (!call.has_result) {
    button.hidden = true; pre.hidden = false;
    pre.textContent = "(no result: the call did not complete)";
    return;
  }
  const load = async () => {
    button.disabled = true; pre.hidden = false;
    pre.textContent = `loading ${formatBytes(call.size_full)}…`;
    try {
      const text = await fetchFullResultText(call.id);
      pre.textContent = displayJson(text); button.hidden = true;
      renderContentText(rendered, text, { serverId: call.server_id });
    }
    catch (err) { pre.textContent = `Could not load the full result: ${err.message}`; }
    finally { button.disabled = false; }
  };
  const preview = async () => {
    button.disabled = true; pre.hidden = false;
    pre.textContent = "loading…";
    try {
      const shown = await apiFetch(`/api/tool-calls/${call.id}/result/preview/`);
      if (shown.complete) { pre.textContent = displayJson(shown.text); renderContentText(rendered, shown.text, { serverId: call.server_id }); }
      else {
        pre.textContent = `${shown.text}\n… the first ${formatBytes(new Blob([shown.text]).size)} of ` +
          `${formatBytes(shown.size_bytes)}, as stored: “Download JSON” has all of it.`;
      }
      button.hidden = true;
    }
    catch (err) { pre.textContent = `Could not load the result: ${err.message}`; }
    finally { button.disabled = false; }
  };
  button.textContent = `Show the start of the full result (${formatBytes(call.size_full)})`;
  button.onclick = preview;
  if (call.size_full <= AUTO_SHOW_BYTES) { button.hidden = true; load(); }
  else { button.hidden = false; pre.hidden = true; pre.textContent = ""; }
}

// An App tool's view, first in the result (before the JSON): the same host code and sandbox
// as in the chat. What the view sends (a message, a log line, model context, a link) is listed
// under it: on this page nothing else would show it.
function showView(call) {
  hideView();
  if (!call.has_view) return;
  const page = JSON.parse(document.getElementById("page-data").textContent);
  document.getElementById("run-view-panel").hidden = false;
  document.getElementById("open-workbench").href = `/tool-calls/${call.id}/workbench/`;
  shownView = call.id;
  mountAppView(document.getElementById("run-view"), call, page, { onActivity: showActivity });
}

function showActivity(kind, text) {
  const item = document.createElement("li");
  item.className = `view-sent-${kind}`;
  const time = document.createElement("span");
  time.className = "muted";
  time.textContent = `${new Date().toLocaleTimeString()} `;
  item.append(time, text);
  document.getElementById("run-view-activity").append(item);
  document.getElementById("run-view-sent").hidden = false;
}

function hideView() {
  if (shownView) unmountAppView(shownView);
  shownView = null;
  document.getElementById("run-view-panel").hidden = true;
  document.getElementById("run-view").replaceChildren();
  document.getElementById("run-view-activity").replaceChildren();
  document.getElementById("run-view-sent").hidden = true;
}
