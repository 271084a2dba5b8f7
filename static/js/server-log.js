// A server's log panel: every notifications/message it sent, across calls, live over the
// server's socket (`server.log`), coloured by level and filtered by least level and text; and
// the level control (POST /api/servers/{id}/log-level/: logging/setLevel on the live connection,
// or the per-request level on 2026-07-28), which never reconnects the server.
import { apiFetch, liveSocket } from "./http.js";

const data = JSON.parse(document.getElementById("log-data").textContent);
const LEVELS = data.levels;
const body = document.querySelector("#server-log tbody");
const empty = document.getElementById("log-empty");
const liveState = document.getElementById("log-state");
const filterLevel = document.getElementById("log-filter-level");
const filterText = document.getElementById("log-filter-text");
let lastId = 0;

function cell(text, cls) {
  const td = document.createElement("td");
  if (cls) td.className = cls;
  td.textContent = text;
  return td;
}

function visible(row) {
  const least = LEVELS.indexOf(filterLevel.value);
  const words = filterText.value.trim().toLowerCase();
  return LEVELS.indexOf(row.dataset.level) >= least && (!words || row.dataset.search.includes(words));
}

function add(log) {
  if (log.id <= lastId) return;  // a catch-up and the socket may both bring it
  lastId = log.id;
  const row = document.createElement("tr");
  row.className = `log-row level-${log.level}`;
  row.dataset.level = log.level;
  row.dataset.search = `${log.logger} ${log.text}`.toLowerCase();
  const at = new Date(log.at);
  const time = cell(at.toLocaleTimeString(), "log-time");
  time.title = log.at;
  const level = cell("", "");
  const badge = document.createElement("span");
  badge.className = "level";
  badge.textContent = log.level;
  level.append(badge);
  const call = cell("", "log-call");
  if (log.tool_call_id) {
    const link = document.createElement("a");
    link.href = `/api/tool-calls/${log.tool_call_id}/`;
    link.textContent = `call ${log.tool_call_id.slice(0, 8)}`;
    link.title = log.tool_call_id;
    call.append(link);
  } else {
    call.textContent = "between calls";
    call.classList.add("muted");
  }
  const message = cell(log.complete ? log.text : `${log.text}…`, "log-text");
  row.append(time, level, cell(log.logger, "log-logger"), message, call);
  row.hidden = !visible(row);
  const scroller = document.getElementById("log-scroll");
  const atBottom = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 40;
  body.append(row);
  if (atBottom) scroller.scrollTop = scroller.scrollHeight;  // follow the newest, unless you scrolled up to read
  empty.hidden = true;
}

function applyFilters() {
  for (const row of body.rows) row.hidden = !visible(row);
}

filterLevel.addEventListener("change", applyFilters);
filterText.addEventListener("input", applyFilters);
data.logs.forEach(add);

liveSocket(`/ws/servers/${data.serverId}/`, {
  onEvent: (event) => { if (event.type === "server.log") add(event.log); },
  onOpen: async () => {
    // Back after a drop: what came meanwhile is in the database.
    try { (await apiFetch(`/api/servers/${data.serverId}/logs/?after=${lastId}`)).logs.forEach(add); } catch { /* next time */ }
  },
  onState: (state) => { liveState.textContent = state; liveState.className = `badge ${state === "live" ? "ok" : "warn"}`; },
});

const levelSelect = document.getElementById("log-level");
const levelState = document.getElementById("log-level-state");
document.getElementById("set-log-level").addEventListener("click", async (ev) => {
  ev.target.disabled = true;
  levelState.className = "muted";
  levelState.textContent = "Setting…";
  try {
    const answer = await apiFetch(`/api/servers/${data.serverId}/log-level/`, { method: "POST", body: { level: levelSelect.value } });
    levelState.className = "ok";
    levelState.textContent = `Done: ${answer.applied}.`;
  } catch (err) {
    levelState.className = "error";
    levelState.textContent = err.message;
  } finally {
    ev.target.disabled = false;
  }
});
