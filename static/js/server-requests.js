// What a server asks during a call, as cards next to the call (chat tool card, inspector tool page):
// elicitation (a form built from the requested schema, or a URL to open), sampling (messages to
// approve and edit, then the model's answer to check before it goes back). Also the call's live
// progress bar and its server log lines.
//
// Events carry a small summary (tools/server_requests.py); an open request's details (schema,
// messages) are fetched over HTTP. Answers go to POST /api/server-requests/{id}/answer/. When the
// page closes with a request open, it is answered `cancel` so the server is not left waiting.
import { apiFetch, csrfToken } from "./http.js";

const OPEN = new Set(["pending", "generating", "generated"]);
const openRequests = new Set();

function el(tag, cls, text) {
  const n = document.createElement(tag);
  if (cls) n.className = cls;
  if (text !== undefined) n.textContent = text;
  return n;
}

function button(label, cls, onclick) {
  const b = el("button", cls, label);
  b.type = "button";
  b.onclick = onclick;
  return b;
}

const LABELS = { elicitation: "The server asks", sampling: "The server asks the model", roots: "Roots requested" };

/** Show (or update) the card of one server request inside `container`. */
export function showServerRequest(container, summary, options = {}) {
  if (!container) return;
  container.hidden = false;
  let card = container.querySelector(`[data-server-request="${summary.id}"]`);
  if (!card) {
    card = el("section", "server-request");
    card.dataset.serverRequest = summary.id;
    container.append(card);
  }
  if (card.dataset.status === summary.status && card.dataset.rendered) return;
  card.dataset.status = summary.status;
  card.className = `server-request ${summary.kind} ${summary.status}`;
  if (OPEN.has(summary.status)) openRequests.add(summary.id); else openRequests.delete(summary.id);
  const head = el("header");
  head.append(el("strong", "", LABELS[summary.kind] || summary.method), el("span", `status ${summary.status}`, summary.status));
  card.replaceChildren(head);
  card.dataset.rendered = "1";
  if (!OPEN.has(summary.status)) { renderEnded(card, summary); return; }
  const body = el("div", "body", "loading…");
  card.append(body);
  apiFetch(`/api/server-requests/${summary.id}/`).then((detail) => {
    if (card.dataset.status !== detail.status) return;  // a newer event re-rendered it
    body.replaceChildren();
    if (detail.kind === "elicitation" && detail.mode === "url") renderUrl(body, detail);
    else if (detail.kind === "elicitation") renderForm(body, detail);
    else if (detail.kind === "sampling") renderSampling(body, detail, options);
  }).catch((err) => { body.textContent = `Could not load the request: ${err.message}`; });
}

function renderEnded(card, s) {
  const line = el("p", "muted");
  const what = s.kind === "elicitation" ? (s.message ? `“${s.message}”` : "") : s.kind === "sampling" ? "sampling" : "roots/list";
  let outcome = s.status;
  if (s.action) outcome += ` · ${s.action}`;
  line.textContent = `${what} — ${outcome}`;
  card.append(line);
  if (s.error) card.append(el("p", "error", s.error));
}

async function answer(id, body, errorEl) {
  errorEl.textContent = "";
  try { return await apiFetch(`/api/server-requests/${id}/answer/`, { method: "POST", body }); }
  catch (err) { errorEl.textContent = err.message; return null; }
}

function choices(prop) {
  if (Array.isArray(prop.enum)) return prop.enum.map((v, i) => ({ value: v, label: (prop.enumNames || [])[i] || String(v) }));
  const options = prop.oneOf || prop.anyOf;
  if (Array.isArray(options)) return options.map((o) => ({ value: o.const, label: o.title || String(o.const) }));
  return null;
}

// ---- elicitation, form mode: one input per (flat, primitive) property ----------------------------
function renderForm(body, detail) {
  const schema = detail.params.requestedSchema || {};
  const required = new Set(schema.required || []);
  body.append(el("p", "message", detail.message));
  const form = el("form", "elicitation-form");
  const readers = [];
  for (const [name, prop] of Object.entries(schema.properties || {})) {
    const field = el("label", "field");
    field.append(el("span", "label", (prop.title || name) + (required.has(name) ? " *" : "")));
    if (prop.description) field.append(el("span", "help", prop.description));
    const opts = choices(prop);
    let input, read;
    if (prop.type === "boolean") {
      input = el("input"); input.type = "checkbox"; input.checked = prop.default === true;
      read = () => input.checked;
    } else if (prop.type === "array") {
      input = el("span", "checks");
      const items = choices(prop.items || {}) || [];
      const boxes = items.map((o) => { const l = el("label"); const c = el("input"); c.type = "checkbox"; c.value = o.value; l.append(c, ` ${o.label}`); input.append(l); return c; });
      read = () => boxes.filter((c) => c.checked).map((c) => c.value);
    } else if (opts) {
      input = el("select");
      if (!required.has(name)) input.append(el("option", "", ""));
      for (const o of opts) { const option = el("option", "", o.label); option.value = o.value; input.append(option); }
      if (prop.default !== undefined) input.value = prop.default;
      read = () => input.value === "" ? undefined : input.value;
    } else {
      input = el("input");
      const numeric = prop.type === "integer" || prop.type === "number";
      input.type = numeric ? "number" : ({ email: "email", uri: "url", date: "date", "date-time": "datetime-local" }[prop.format] || "text");
      if (prop.type === "integer") input.step = "1";
      if (numeric && prop.minimum !== undefined) input.min = prop.minimum;
      if (numeric && prop.maximum !== undefined) input.max = prop.maximum;
      if (prop.default !== undefined) input.value = prop.default;
      read = () => {
        if (input.value === "") return undefined;
        return numeric ? Number(input.value) : input.value;
      };
    }
    input.name = name;
    if (required.has(name) && input.tagName !== "SPAN" && input.type !== "checkbox") input.required = true;
    field.append(input);
    form.append(field);
    readers.push([name, read]);
  }
  const error = el("p", "error");
  const accept = el("button", "primary", "Accept"); accept.type = "submit";
  const row = el("div", "actions");
  row.append(accept,
    button("Decline", "", () => answer(detail.id, { action: "decline" }, error)),
    button("Cancel", "", () => answer(detail.id, { action: "cancel" }, error)));
  form.append(row, error);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const content = {};
    for (const [name, read] of readers) { const v = read(); if (v !== undefined) content[name] = v; }
    answer(detail.id, { action: "accept", content }, error);
  });
  body.append(form);
}

// ---- elicitation, URL mode: the URL as text; a link only for http(s) (the server checked it) -------
function renderUrl(body, detail) {
  body.append(el("p", "message", detail.message));
  const where = el("p", "url");
  where.append(el("code", "", detail.params.url || ""));
  body.append(where);
  const error = el("p", "error");
  const row = el("div", "actions");
  if (detail.url) {
    const link = el("a", "button", "Open in a new tab");
    link.href = detail.url; link.target = "_blank"; link.rel = "noopener noreferrer";
    row.append(link);
  }
  row.append(button("Accept", "primary", () => answer(detail.id, { action: "accept" }, error)),
    button("Decline", "", () => answer(detail.id, { action: "decline" }, error)),
    button("Cancel", "", () => answer(detail.id, { action: "cancel" }, error)));
  body.append(row, error);
}

// ---- sampling: approve (editable) → the model answers → check → return ---------------------------
function textOf(content) {
  const blocks = Array.isArray(content) ? content : [content];
  return blocks.map((b) => (b && b.type === "text" ? b.text : `[${(b && b.type) || "content"} not shown]`)).join("\n");
}

function renderSampling(body, detail, options) {
  const error = el("p", "error", detail.error || "");
  if (detail.status === "generating") {
    body.append(el("p", "muted", `The model (${detail.answer?.model || "?"}) is answering…`), error);
    body.append(el("div", "actions")).append(button("Reject", "", () => answer(detail.id, { action: "reject" }, error)));
    return;
  }
  if (detail.status === "generated") {
    const result = detail.answer.result;
    body.append(el("p", "", `Answer from ${result.model} — check it before it goes back to the server:`));
    const text = el("textarea", "sampling-answer"); text.rows = 4; text.value = textOf(result.content);
    const row = el("div", "actions");
    row.append(button("Return to server", "primary", () => answer(detail.id, { action: "send", text: text.value }, error)),
      button("Reject", "", () => answer(detail.id, { action: "reject" }, error)));
    body.append(text, row, error);
    return;
  }
  const params = detail.params;
  const system = el("textarea", "sampling-system"); system.rows = 2; system.value = params.systemPrompt || "";
  if (params.systemPrompt) { body.append(el("span", "label", "System prompt")); body.append(system); }
  const editors = (params.messages || []).map((m) => {
    body.append(el("span", "label", m.role));
    const t = el("textarea", "sampling-message"); t.rows = 3; t.value = textOf(m.content);
    body.append(t);
    return [m.role, t];
  });
  if (params.maxTokens) body.append(el("p", "muted", `at most ${params.maxTokens} tokens`));
  const model = el("input", "sampling-model"); model.placeholder = "model, e.g. openai/gpt-4o-mini";
  const apiBase = el("input", "sampling-api-base"); apiBase.placeholder = "API base (optional)";
  if (detail.conversation_model) body.append(el("p", "muted", `Runs on this conversation's model: ${detail.conversation_model}`));
  else {
    model.value = options.defaultModel || "";
    const line = el("div", "row"); line.append(model, apiBase); body.append(line);
  }
  const row = el("div", "actions");
  row.append(button("Approve and run", "primary", () => (!detail.conversation_model && model.value && localStorage.setItem("sampling-model", model.value), answer(detail.id, {
    action: "approve", model: model.value, api_base: apiBase.value, system_prompt: system.value,
    messages: editors.map(([role, t]) => ({ role, text: t.value })),
  }, error))), button("Reject", "", () => answer(detail.id, { action: "reject" }, error)));
  body.append(row, error);
}

// ---- progress and log -----------------------------------------------------------------------------

/** Show a call's progress (`{progress, total, message}`) in `container`. */
export function showProgress(container, progress) {
  if (!container || !progress) return;
  container.hidden = false;
  let bar = container.querySelector("progress");
  if (!bar) { bar = el("progress"); container.append(bar, el("span", "progress-text")); }
  if (progress.total) { bar.max = progress.total; bar.value = progress.progress; } else bar.removeAttribute("value");
  const pct = progress.total ? ` (${Math.round((100 * progress.progress) / progress.total)}%)` : "";
  container.querySelector(".progress-text").textContent =
    `${progress.progress}${progress.total ? ` / ${progress.total}` : ""}${pct}${progress.message ? ` — ${progress.message}` : ""}`;
}

/** Show the MCP task a call was sent as (`{mode, id, status, message}`, or null) in `container`. */
export function showTask(container, task) {
  if (!container || !task) return;
  container.hidden = false;
  const status = task.status || "starting";
  const badge = el("span", `status task-${status}`, `task ${status.replace("_", " ")}`);
  badge.title = task.id ? `Task id ${task.id} (${task.mode === "required" ? "the tool requires a task" : "asked for"})` : "Sent as a task; the server has not answered yet";
  container.replaceChildren(badge);
  if (task.message) container.append(el("span", "task-message", ` ${task.message}`));
}

/** Add a server log line to `container` (a <details> with a list), once per id. */
export function appendLog(container, entry) {
  if (!container) return;
  container.hidden = false;
  const list = container.querySelector("ul");
  if (list.querySelector(`[data-log="${entry.id}"]`)) return;
  const item = el("li", `log ${entry.level}`);
  item.dataset.log = entry.id;
  item.append(el("span", "badge", entry.level), el("code", "muted", entry.logger || ""), el("span", "", ` ${entry.text}${entry.complete ? "" : " …"}`));
  list.append(item);
  container.querySelector("summary").textContent = `Server log (${list.children.length})`;
}

// A page closed with a request open answers `cancel`, so the waiting server and worker are released.
window.addEventListener("pagehide", () => {
  for (const id of openRequests) {
    fetch(`/api/server-requests/${id}/answer/`, {
      method: "POST", keepalive: true, credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
      body: JSON.stringify({ action: "cancel" }),
    }).catch(() => {});
  }
});
