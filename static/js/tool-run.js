// Run a tool from the inspector: create a manual tool call, then watch its WebSocket for the
// result and show the full result next to what the model sees.
import { apiFetch, liveSocket, pretty } from "./http.js";

export async function runToolCall({ serverId, tool, args }) {
  const status = document.getElementById("run-status");
  const button = document.getElementById("run-tool");
  button.disabled = true;
  document.getElementById("result-panel").hidden = true;
  status.className = "status queued"; status.textContent = "queued…";
  let call;
  try {
    call = await apiFetch(`/api/servers/${serverId}/tools/${encodeURIComponent(tool)}/call/`, { method: "POST", body: { arguments: args } });
  } catch (err) {
    status.className = "status failed"; status.textContent = err.message; button.disabled = false;
    return;
  }
  const sock = liveSocket(`/ws/tool-calls/${call.id}/`, {
    onEvent(ev) {
      if (ev.type === "tool_call.status") { status.className = `status ${ev.status}`; status.textContent = `${ev.status}…`; }
      if (ev.type === "tool_call.result") { show(ev); sock.close(); button.disabled = false; }
    },
  });
}

function show(ev) {
  const status = document.getElementById("run-status");
  status.className = `status ${ev.status}`;
  status.textContent = ev.status + (ev.error ? `: ${ev.error}` : "");
  document.getElementById("result-panel").hidden = false;
  const p = ev.projection || {};
  const saved = Math.max((ev.tokens_full || 0) - (p.tokens || 0), 0);
  document.getElementById("result-summary").textContent =
    `${ev.duration_ms != null ? Math.round(ev.duration_ms) + " ms · " : ""}full ≈${ev.tokens_full} tokens · model ≈${p.tokens ?? 0} tokens · saved ≈${saved}`;
  const schema = document.getElementById("schema-status");
  if (ev.schema_valid === true) { schema.className = "badge ok"; schema.textContent = "structuredContent matches the outputSchema"; }
  else if (ev.schema_valid === false) { schema.className = "badge danger"; schema.textContent = `Output schema validation failed: ${ev.schema_error}`; }
  else if (ev.result?.isError || !ev.result) { schema.className = "muted"; schema.textContent = "Not validated: the call did not return a successful result."; }
  else { schema.className = "muted"; schema.textContent = "No outputSchema to validate against."; }
  document.getElementById("full-result").textContent = ev.result ? pretty(ev.result) : "(no result: the call did not complete)";
  document.getElementById("projection-text").textContent = p.text ?? "";
  document.getElementById("projection-policy").textContent = p.policy || "";
  document.getElementById("projection-removed").textContent = pretty(p.removed || []);
}
