// What a server asks during a call, as cards next to the call (chat tool card, inspector tool page):
// elicitation (a form built from the requested schema, or a URL to open), sampling (messages to
// approve and edit, then the model's answer to check before it goes back; or an answer typed by
// hand, with no model). Also the call's live
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
  if (s.action) outcome += ` · ${s.action.replace("_", " ")}`;
  line.textContent = `${what} — ${outcome}`;
  card.append(line);
  if (s.error) card.append(el("p", "error", s.error));
}

// `form`: an elicitation form whose fields show the server's per-field problems (`fields` in a 400).
async function answer(id, body, errorEl, form) {
  errorEl.textContent = "";
  for (const f of form ? form.querySelectorAll(".field.invalid") : []) { f.classList.remove("invalid"); f.querySelector(".field-error").textContent = ""; }
  try {
    const row = await apiFetch(`/api/server-requests/${id}/answer/`, { method: "POST", body });
    // The answer's own response updates the card: its status event may come late, or never (a
    // socket that reconnected meanwhile), and the card must not stay pending once answered.
    const card = document.querySelector(`[data-server-request="${CSS.escape(String(id))}"]`);
    if (card && row?.status) showServerRequest(card.parentElement, row);
    return row;
  } catch (err) {
    errorEl.textContent = err.message;
    for (const [name, said] of Object.entries((form && err.data?.fields) || {})) {
      const f = form.querySelector(`[data-field="${CSS.escape(name)}"]`);
      if (f) { f.classList.add("invalid"); f.querySelector(".field-error").textContent = said; }
    }
    form?.querySelector(".field.invalid input, .field.invalid select")?.focus();
    return null;
  }
}

function choices(prop) {
  if (Array.isArray(prop.enum)) return prop.enum.map((v, i) => ({ value: v, label: (prop.enumNames || [])[i] || String(v) }));
  const options = prop.oneOf || prop.anyOf;
  if (Array.isArray(options)) return options.map((o) => ({ value: o.const, label: o.title || String(o.const) }));
  return null;
}

// ---- elicitation, form mode: one input per (flat, primitive) property ----------------------------
// Every default the server's schema gives is filled in (SEP-1034), so the form can be accepted as it
// comes; a field is named by its title, else by its property name.
function renderForm(body, detail) {
  const schema = detail.params.requestedSchema || {};
  const required = new Set(schema.required || []);
  body.append(el("p", "message", detail.message));
  const form = el("form", "elicitation-form");
  const readers = [];
  for (const [name, prop] of Object.entries(schema.properties || {})) {
    const multi = prop.type === "array";
    const field = el(multi ? "div" : "label", "field");
    field.dataset.field = name;
    field.append(el("span", "label", (prop.title || name) + (required.has(name) ? " *" : "")));
    if (prop.description) field.append(el("span", "help", prop.description));
    const opts = choices(prop);
    let input, read;
    if (prop.type === "boolean") {
      input = el("input"); input.type = "checkbox"; input.checked = prop.default === true;
      read = () => input.checked;
    } else if (multi) {
      input = el("span", "checks");
      const ticked = new Set(Array.isArray(prop.default) ? prop.default : []);
      const boxes = (choices(prop.items || {}) || []).map((o) => {
        const l = el("label"); const c = el("input");
        c.type = "checkbox"; c.name = name; c.value = o.value; c.checked = ticked.has(o.value);
        l.append(c, ` ${o.label}`); input.append(l); return c;
      });
      read = () => boxes.filter((c) => c.checked).map((c) => c.value);
    } else if (opts) {
      input = el("select");
      input.append(el("option", "", ""));
      for (const o of opts) { const option = el("option", "", o.label); option.value = o.value; input.append(option); }
      if (prop.default !== undefined) input.value = prop.default;
      read = () => input.value === "" ? undefined : input.value;
    } else {
      input = el("input");
      const numeric = prop.type === "integer" || prop.type === "number";
      input.type = numeric ? "number" : ({ email: "email", uri: "url", date: "date", "date-time": "datetime-local" }[prop.format] || "text");
      if (numeric) input.step = prop.type === "integer" ? "1" : "any";  // a number may be 3.14
      if (numeric && prop.minimum !== undefined) input.min = prop.minimum;
      if (numeric && prop.maximum !== undefined) input.max = prop.maximum;
      if (prop.default !== undefined) input.value = prop.default;
      read = () => {
        if (input.value === "") return undefined;
        return numeric ? Number(input.value) : input.value;
      };
    }
    if (!multi) input.name = name;
    if (required.has(name) && !multi && input.type !== "checkbox") input.required = true;
    field.append(input, el("span", "field-error"));
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
    answer(detail.id, { action: "accept", content }, error, form);
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
    const row = el("div", "actions");
    row.append(button("Reject", "", () => answer(detail.id, { action: "reject" }, error)));
    body.append(row);
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
  const ways = el("div", "sampling-ways");
  ways.append(byModel(detail, options, system, editors, error), byHand(detail));
  const row = el("div", "actions");
  row.append(button("Reject", "", () => answer(detail.id, { action: "reject" }, error)));
  body.append(ways, row, error);
}

// Way 1: the (edited) messages go through litellm; the answer is shown for checking before it returns.
function byModel(detail, options, system, editors, error) {
  const box = el("section", "sampling-way sampling-by-model");
  box.append(el("h4", "", "Run through litellm"));
  const model = el("input", "sampling-model"); model.placeholder = "model, e.g. openai/gpt-4o-mini";
  const apiBase = el("input", "sampling-api-base"); apiBase.placeholder = "API base (optional)";
  if (detail.conversation_model) box.append(el("p", "muted", `Runs on this conversation's model: ${detail.conversation_model}`));
  else {
    model.value = options.defaultModel || "";
    box.append(model, apiBase);
    if (!model.value) box.append(el("p", "muted", "No model is configured: type a litellm model name, or answer by hand."));
  }
  const actions = el("div", "actions");
  actions.append(button("Run through litellm", "primary", () => (!detail.conversation_model && model.value && localStorage.setItem("sampling-model", model.value), answer(detail.id, {
    action: "approve", model: model.value, api_base: apiBase.value, system_prompt: system.value,
    messages: editors.map(([role, t]) => ({ role, text: t.value })),
  }, error))));
  box.append(actions);
  return box;
}

// Way 2: a person writes the CreateMessageResult (role, text, model name, stop reason); no model runs.
function byHand(detail) {
  const box = el("section", "sampling-way sampling-by-hand");
  box.append(el("h4", "", "Answer by hand"));
  const labelled = (label, input) => { const l = el("label", "field"); l.append(el("span", "label", label), input); box.append(l); return input; };
  const role = labelled("Role", el("select"));
  role.name = "role";
  for (const r of ["assistant", "user"]) { const o = el("option", "", r); o.value = r; role.append(o); }
  const text = labelled("Text", el("textarea"));
  text.name = "text"; text.rows = 3;
  const line = el("div", "row");
  const model = el("input"); model.name = "model"; model.value = "human";
  const stop = el("input"); stop.name = "stopReason"; stop.value = "endTurn";
  const reasons = el("datalist"); reasons.id = `stop-reasons-${detail.id}`; stop.setAttribute("list", reasons.id);
  for (const r of ["endTurn", "stopSequence", "maxTokens"]) { const o = el("option"); o.value = r; reasons.append(o); }
  const m = el("label", "field"); m.append(el("span", "label", "Model name"), model);
  const s = el("label", "field"); s.append(el("span", "label", "Stop reason"), stop, reasons);
  line.append(m, s); box.append(line);
  const error = el("p", "error");
  const actions = el("div", "actions");
  actions.append(button("Send to server", "primary", () => answer(detail.id, {
    action: "by_hand", role: role.value, text: text.value, model: model.value, stopReason: stop.value,
  }, error)));
  box.append(actions, error);
  return box;
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
