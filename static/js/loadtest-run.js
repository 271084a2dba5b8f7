// The load-test run page: polls GET /api/load-tests/{id}/ while the run is active and fills in
// its progress and figures, beside those of a compared run.
import { apiFetch } from "./http.js";

const root = document.getElementById("loadtest-run");
const runId = root.dataset.runId;
const select = document.getElementById("compare-run");
const ACTIVE = new Set(["queued", "running"]);

function show(value) {
  if (value === null || value === undefined) return "—";
  if (typeof value === "object" && "p50" in value) {
    return value.n ? `${value.p50} / ${value.p95} / ${value.p99} (n=${value.n})` : "—";
  }
  if (typeof value === "object") {
    const entries = Object.entries(value);
    return entries.length ? entries.map(([k, n]) => `${k}: ${n}`).join("; ") : "none";
  }
  return String(value);
}

function fill(data) {
  document.getElementById("run-status").textContent = data.status;
  document.getElementById("run-status").className = `status ${data.status}`;
  document.getElementById("run-progress").textContent = `${data.done}/${data.calls}`;
  document.getElementById("run-errors").textContent = String(data.errors);
  document.getElementById("run-bar").value = data.done;
  for (const cell of root.querySelectorAll("[data-k]")) cell.textContent = show(data.figures[cell.dataset.k]);
  const other = data.compare_to ? data.compare_to.figures : null;
  for (const cell of root.querySelectorAll("[data-c]")) cell.textContent = other ? show(other[cell.dataset.c]) : "";
  const cancel = document.getElementById("cancel-form");
  if (cancel && !ACTIVE.has(data.status)) cancel.hidden = true;
  root.dataset.status = data.status;
}

async function poll() {
  const compare = select && select.value ? `?compare=${encodeURIComponent(select.value)}` : "";
  try {
    const data = await apiFetch(`/api/load-tests/${runId}/${compare}`);
    fill(data);
    if (ACTIVE.has(data.status)) setTimeout(poll, 500);
  } catch (err) {
    setTimeout(poll, 2000);
  }
}

fill(JSON.parse(document.getElementById("loadtest-data").textContent));
if (select) select.addEventListener("change", poll);
poll();
