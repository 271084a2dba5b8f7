// The JSON-RPC log page: expand a frame on click, and prepend live frames as they arrive.
import { liveSocket, pretty } from "./http.js";
const params = new URLSearchParams(location.search);
const names = JSON.parse(document.getElementById("server-names").textContent);
const tbody = document.querySelector("#frames tbody");
tbody.addEventListener("click", (ev) => {
  const row = ev.target.closest("tr.frame");
  if (row) row.nextElementSibling.hidden = !row.nextElementSibling.hidden;
});
function matches(f) {
  return (!params.get("server") || String(f.server_id) === params.get("server")) &&
    (!params.get("method") || f.method === params.get("method")) &&
    (!params.get("direction") || f.direction === params.get("direction"));
}
// The same rule as tools/rpclog.py: an error answer to the 2026-07-28 version probe is not a fault.
const PROBE_LABEL = "version probe — server uses the initialize handshake";
function isVersionProbe(f) { return f.method === "server/discover" && f.kind === "error"; }
function probeCell() {
  const td = document.createElement("td"); const span = document.createElement("span");
  span.className = "probe-label"; span.textContent = PROBE_LABEL; td.append(span); return td;
}
function cell(text) { const td = document.createElement("td"); td.textContent = text; return td; }
liveSocket("/ws/rpc-log/", {
  onState: (s) => { document.getElementById("live-state").textContent = s; },
  onEvent(ev) {
    if (ev.type !== "rpc.frames") return;
    tbody.querySelector("tr.empty")?.remove();
    for (const f of ev.frames.filter(matches)) {
      const row = document.createElement("tr"); row.className = "frame new"; row.dataset.id = f.id;
    const probe = isVersionProbe(f);
    if (probe) row.classList.add("probe"); else if (f.kind === "error") row.classList.add("rpc-error");
      const code = document.createElement("code"); code.textContent = f.method;
      const m = document.createElement("td"); m.append(code);
      row.append(cell(f.at.slice(11, 23)), cell(names[f.server_id] || f.server_id), cell(f.direction), probe ? probeCell() : cell(f.kind), m, cell(f.rpc_id), cell(f.size_bytes), cell(f.latency_ms != null ? `${f.latency_ms.toFixed(1)} ms` : ""));
      const detail = document.createElement("tr"); detail.className = "frame-json"; detail.hidden = true;
      const td = document.createElement("td"); td.colSpan = 8; const pre = document.createElement("pre"); pre.textContent = pretty(f.payload); td.append(pre); detail.append(td);
      tbody.prepend(row, detail);
    }
  },
});
