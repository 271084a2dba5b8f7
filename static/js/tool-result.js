// The full result of a tool call comes over HTTP, never over a WebSocket: events only say how
// big it is (a result can be tens of MB; daphne closes a socket at 1 MiB). One place fetches it:
// GET /api/tool-calls/{id}/result/ returns the stored CallToolResult JSON as it is.
import { csrfToken, pretty } from "./http.js";

// Above this, the JSON is shown as stored rather than pretty-printed (parsing and re-indenting
// tens of MB would stall the page for a view nobody can read anyway).
const PRETTY_LIMIT = 2 * 1024 * 1024;

/** The stored CallToolResult of `callId` as JSON text. */
export async function fetchFullResultText(callId) {
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
