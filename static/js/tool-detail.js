// The tool page: the arguments form (generated or raw JSON) and the Run button.
import { renderSchemaForm } from "./schema-form.js";
import { runToolCall } from "./tool-run.js";
const tool = JSON.parse(document.getElementById("tool-data").textContent);
const form = renderSchemaForm(document.getElementById("schema-form"), tool.input_schema || {});
const raw = document.getElementById("raw-args");
let mode = "form";
document.querySelectorAll("[data-mode]").forEach(a => a.addEventListener("click", ev => {
  ev.preventDefault();
  const next = a.dataset.mode;
  if (next === mode) return;
  try {
    document.getElementById("args-error").textContent = "";
    if (next === "json") raw.value = JSON.stringify(form.getValue({ lenient: true }), null, 2);
    else form.setValue(JSON.parse(raw.value || "{}"));
  } catch (err) { document.getElementById("args-error").textContent = String(err.message || err); return; }
  mode = next;
  document.querySelectorAll("[data-mode]").forEach(b => b.classList.toggle("active", b.dataset.mode === mode));
  raw.hidden = mode !== "json"; document.getElementById("schema-form").hidden = mode === "json";
}));
document.getElementById("run-tool").addEventListener("click", async () => {
  const errorEl = document.getElementById("args-error");
  errorEl.textContent = "";
  let args;
  try { args = mode === "json" ? JSON.parse(raw.value || "{}") : form.getValue(); }
  catch (err) {
    errorEl.textContent = `Arguments: ${err.message || err}`;
    const status = document.getElementById("run-status"); status.textContent = ""; status.className = "status";
    document.getElementById("result-panel").hidden = true;
    return;
  }
  // Blank: the server's timeout. The API checks the range and says so (shown as the run's status).
  const timeoutText = document.getElementById("run-timeout").value.trim();
  const timeout = timeoutText === "" ? null : Number(timeoutText);
  const asTask = document.getElementById("run-as-task")?.checked || false;
  await runToolCall({ serverId: Number(document.getElementById("tool-page").dataset.serverId), tool: tool.name, args, timeout, asTask });
});
