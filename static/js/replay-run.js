// A run page while its run is running: ask the API every second and reload the (server-rendered)
// page when something changed, so the diffs appear as the calls end.
import { apiFetch } from "./http.js";

const page = JSON.parse(document.getElementById("page-data").textContent);

async function watch() {
  if (page.status !== "running") return;
  let last = null;
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    let run;
    try { run = await apiFetch(`/api/replays/${page.runId}/`); } catch { continue; }
    const fingerprint = JSON.stringify([run.status, run.summary, (run.items || []).map((i) => i.verdict)]);
    if (last !== null && fingerprint !== last || run.status !== "running") { location.reload(); return; }
    last = fingerprint;
  }
}

watch();
