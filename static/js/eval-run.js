// An eval run's page while it runs: ask the API every second and reload the (server-rendered)
// page when an attempt changed, so the matrix and checks fill in as attempts end.
import { apiFetch } from "./http.js";

const page = JSON.parse(document.getElementById("page-data").textContent);

async function watch() {
  if (page.status !== "running") return;
  let last = null;
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    let run;
    try { run = await apiFetch(`/api/evals/runs/${page.runId}/`); } catch { continue; }
    const fingerprint = JSON.stringify([run.status, run.attempts.map((a) => a.status)]);
    if ((last !== null && fingerprint !== last) || run.status !== "running") { location.reload(); return; }
    last = fingerprint;
  }
}

watch();
