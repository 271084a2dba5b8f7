// The full result of a tool call, from one place. A `tool_call.result` event carries it
// (`result`) when it is at most WS_INLINE_RESULT_MAX_BYTES (tools/events.py): pages hand such
// events to keepPushedResult() and nothing is fetched. A bigger one is fetched over HTTP:
// GET /api/tool-calls/{id}/result/ streams the stored CallToolResult JSON as it is (a result can
// be tens of MB; daphne closes a socket at 1 MiB).
import { csrfToken, pretty } from "./http.js";

// Pushed results by call id, up to PUSHED_KEEP_BYTES in all: a long chat must not keep every
// result it was sent. The oldest go first; one that is needed again is then fetched.
const PUSHED_KEEP_BYTES = 32 * 1024 * 1024;
const pushed = new Map();  // call id -> {result, size}
let pushedBytes = 0;

function forgetPushed(callId) {
  const entry = pushed.get(callId);
  if (!entry) return;
  pushed.delete(callId);
  pushedBytes -= entry.size;
}

/** Keep the full result a `tool_call.result` event carries, if it carries one. */
export function keepPushedResult(ev) {
  if (ev.type !== "tool_call.result" || ev.result === undefined) return;
  const size = ev.tool_call?.size_full || 0;
  forgetPushed(ev.tool_call_id);
  pushed.set(ev.tool_call_id, { result: ev.result, size });
  pushedBytes += size;
  for (const id of pushed.keys()) {
    if (pushedBytes <= PUSHED_KEEP_BYTES || id === ev.tool_call_id) break;
    forgetPushed(id);
  }
}

// Above this, the JSON is shown as stored rather than pretty-printed (parsing and re-indenting
// tens of MB would stall the page for a view nobody can read anyway).
const PRETTY_LIMIT = 2 * 1024 * 1024;

/** The stored CallToolResult of `callId` as JSON text: the pushed one, else fetched. */
export async function fetchFullResultText(callId) {
  if (pushed.has(callId)) return JSON.stringify(pushed.get(callId).result);
  const res = await fetch(`/api/tool-calls/${callId}/result/`, {
    credentials: "same-origin",
    headers: { "X-CSRFToken": csrfToken() },
  });
  const text = await res.text();
  if (!res.ok) {
    let message = `${res.status} ${res.statusText}`;
    try { message = JSON.parse(text).error || message; } catch { /* not JSON: keep the status */ }
    const err = new Error(message);
    err.status = res.status;
    throw err;
  }
  return text;
}

/** The stored CallToolResult of `callId`, parsed: what an App view gets in ui/notifications/tool-result. */
export async function fetchFullResult(callId) {
  if (pushed.has(callId)) return pushed.get(callId).result;
  return JSON.parse(await fetchFullResultText(callId));
}

/** Text to show for a full result: indented when it is small enough to be worth it. */
export function displayJson(text) {
  if (text.length > PRETTY_LIMIT) return text;
  try { return pretty(JSON.parse(text)); } catch { return text; }
}

export function formatBytes(n) {
  if (n == null) return "";
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}
