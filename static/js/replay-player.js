// The replay player: a stored conversation, one step at a time (buttons and keyboard).
// It never starts a tool call or an LLM request: it reads /api/conversations/{id}/player/,
// fetches a call's full result from its result_url when the player reaches it, and mounts App
// views with the STORED full result; the view gets no tools/call, resources/read, ui/message or
// model-context capability (the host answers "not supported").
import { apiFetch, pretty } from "./http.js";
import { displayJson, fetchFullResult, fetchFullResultText, formatBytes } from "./tool-result.js";
import { renderContentText } from "./rich-content.js";
import { mountWidget } from "./widget-host.js";

const page = JSON.parse(document.getElementById("page-data").textContent);
const stage = document.getElementById("stage");
const timeline = document.getElementById("timeline");
const position = document.getElementById("position");

let steps = [];        // flat: {turn, step, turnIndex, stepIndex}
let turns = [];
let current = -1;
const rendered = new Map();   // flat index -> element
const widgets = [];
// The player's keys that still step while a view has the focus (a click in it puts the focus there).
const VIEW_KEYS = ["ArrowRight", "ArrowLeft", "ArrowDown", "ArrowUp", "PageDown", "PageUp", "Home", "End"];

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value == null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children) if (child != null) node.append(child);
  return node;
}

function ms(value) {
  if (value == null) return "";
  return value >= 1000 ? `${(value / 1000).toFixed(2)} s` : `${Math.round(value)} ms`;
}

function usageText(usage) {
  if (!usage) return "";
  const parts = [];
  if (usage.prompt_tokens != null) parts.push(`${usage.prompt_tokens} prompt`);
  if (usage.completion_tokens != null) parts.push(`${usage.completion_tokens} completion`);
  return parts.length ? `${parts.join(" + ")} tokens` : "";
}

function buildTimeline() {
  timeline.replaceChildren();
  turns.forEach((turn, ti) => {
    const list = el("ol", { class: "plain" });
    turn.steps.forEach((step, si) => {
      const flat = steps.findIndex((s) => s.turnIndex === ti && s.stepIndex === si);
      const label = step.kind === "tool" && step.tool_call
        ? `${step.tool_call.server_name}/${step.tool_call.tool}`
        : (step.text || (step.requested_tool_calls?.length ? `calls ${step.requested_tool_calls.map((c) => c.name).join(", ")}` : "(empty)"));
      const button = el("button", { type: "button", class: `step-link ${step.kind}`, "data-flat": String(flat) },
        el("span", { class: "role", text: step.kind }), " ", el("span", { class: "label", text: label.slice(0, 60) }));
      button.addEventListener("click", () => go(flat));
      list.append(el("li", {}, button));
    });
    const status = turn.status ? ` · ${turn.status}` : "";
    timeline.append(el("section", { class: "turn" },
      el("h3", { text: `Turn ${ti + 1}${status}` }),
      el("p", { class: "help", text: [ms(turn.duration_ms), turn.tokens.prompt || turn.tokens.completion
        ? `${turn.tokens.prompt} + ${turn.tokens.completion} tokens` : ""].filter(Boolean).join(" · ") }),
      list));
  });
}

function renderStep(flat) {
  const { step, turnIndex } = steps[flat];
  const figures = [];
  if (step.since_previous_ms != null) figures.push(`+${ms(step.since_previous_ms)}`);
  if (step.role === "assistant") {
    if (step.model) figures.push(step.model);
    const usage = usageText(step.usage);
    if (usage) figures.push(usage);
  }
  const head = el("div", { class: "step-head" },
    el("span", { class: "role", text: step.kind === "note" ? "tool note" : step.kind }),
    el("span", { class: "help", text: `turn ${turnIndex + 1} · #${step.seq}` }),
    el("span", { class: "help push-right step-figures", text: figures.join(" · ") }));
  if (step.kind === "tool") return el("article", { class: "replay-step tool", "data-flat": String(flat) }, head, toolBody(step));
  const body = el("div", { class: "body plain-text", text: step.text || "" });
  const node = el("article", { class: `replay-step msg ${step.kind}`, "data-flat": String(flat) }, head, body);
  if (step.requested_tool_calls?.length) {
    const list = el("ul", { class: "requested" });
    for (const call of step.requested_tool_calls) {
      list.append(el("li", {}, el("code", { text: call.name }), " ", el("code", { class: "muted", text: call.arguments })));
    }
    node.append(el("p", { class: "help", text: "Asked for tool calls:" }), list);
  }
  return node;
}

function toolBody(step) {
  const call = step.tool_call;
  const proj = call.projection || {};
  const stats = el("dl", { class: "kv stats" },
    el("dt", { text: "Status" }), el("dd", {}, el("span", { class: `status ${call.status}`, text: call.status }),
      call.error ? el("span", { class: "error", text: ` ${call.error}` }) : null),
    el("dt", { text: "Duration" }), el("dd", { text: ms(call.duration_ms) || "—" }),
    el("dt", { text: "Full result" }), el("dd", { text: call.has_result ? `${formatBytes(call.size_full)} · ${call.tokens_full} tokens` : "none" }),
    el("dt", { text: "What the model saw" }), el("dd", { text: `${formatBytes(call.size_projection)} · ${call.tokens_projection} tokens · policy ${call.policy || "—"}${proj.truncated ? " · truncated" : ""}` }),
  );
  const fullBox = el("pre", { class: "full-result", text: call.has_result ? "Loading the full result…" : "(no result)" });
  const rendered = el("div", { class: "rich-content" }); rendered.hidden = true;
  const projBox = el("pre", { class: "projection-text", text: proj.text ?? "" });
  const removed = (proj.removed || []).map((r) => el("li", {}, el("code", { text: r.path }), ` ${r.reason || ""}`));
  const body = el("div", { class: "body" },
    el("div", { class: "row" }, el("strong", { text: `${call.server_name}/${call.tool}` }),
      call.is_app ? el("span", { class: "badge app", text: "App" }) : null,
      el("span", { class: "badge muted", text: call.origin })),
    el("h3", { text: "Arguments" }), el("pre", { class: "arguments", text: pretty(call.arguments || {}) }),
    stats,
    el("div", { class: "cols side-by-side" },
      el("div", {}, el("h3", { text: "Full result (browser and App view)" }), rendered, fullBox),
      el("div", {}, el("h3", { text: "Projection (all the model saw)" }), projBox,
        removed.length ? el("div", {}, el("p", { class: "help", text: "Removed for the model:" }), el("ul", { class: "removed-list" }, ...removed)) : null)),
  );
  if (step.model_context) {
    body.append(el("h3", { text: "Model context from the view" }), el("pre", { text: pretty(step.model_context) }));
  }
  if (call.has_result) {
    fetchFullResultText(call.id).then((text) => { fullBox.textContent = displayJson(text); renderContentText(rendered, text, { serverId: call.server_id }); })
      .catch((err) => { fullBox.textContent = `Could not load the full result: ${err.message}`; fullBox.classList.add("error"); });
  }
  if (call.has_view && call.has_result) {
    const slot = el("div", { class: "widget-slot" });
    body.append(el("h3", { text: "App view (from the stored result; no tool is called)" }), slot);
    mountStoredView(slot, call);
  }
  return body;
}

async function mountStoredView(slot, call) {
  let view, result;
  try {
    [view, result] = await Promise.all([
      apiFetch(`/api/conversations/${page.conversationId}/player/views/${call.id}/`),
      fetchFullResult(call.id),
    ]);
  } catch (err) {
    slot.append(el("p", { class: "error", text: `Could not show the view: ${err.message}` }));
    return;
  }
  if (view.warning) slot.append(el("p", { class: "help", text: view.warning }));
  const holder = el("div");
  slot.append(holder);
  const handle = mountWidget(holder, {
    sandboxUrl: page.sandboxUrl,
    sandboxOrigin: page.sandboxOrigin,
    html: view.html, csp: view.csp, permissions: view.permissions, prefersBorder: view.prefersBorder,
    toolDefinition: view.tool, toolCallId: call.id, toolInput: call.arguments || {},
    openai: view.openai, widgetState: view.widget_state,
    hostInfo: { name: "mcp-inspector-replay", version: "0.1.0" },
    hostContext: {
      theme: "light", displayMode: "inline", availableDisplayModes: ["inline"], locale: navigator.language,
      timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
      containerDimensions: { maxHeight: 800, width: slot.clientWidth || 700 },
    },
    // No onCallTool / onReadResource / onMessage / onUpdateModelContext: a replay runs nothing.
    forwardKeys: VIEW_KEYS,
    onOpenLink: () => false,
    onRequestDisplayMode: async () => "inline",
    onLog: (params) => console.info(`[replayed app ${call.tool}]`, params?.level || "info", params?.data),
    onError: (err) => slot.append(el("p", { class: "error", text: `App view error: ${err.message || err}` })),
  });
  widgets.push(handle);
  refuseToolCalls(handle, slot);
  handle.sendToolInput(call.arguments || {});
  handle.sendToolResult(result);
}

/** A view's tools/call gets an error that says why (not a bare "Method not found"), and the
 * player shows it beside the view: the player never calls tools. */
function refuseToolCalls(handle, slot) {
  let note = null;
  let asked = 0;
  handle.bridge.oncalltool = async (params) => {
    const name = params?.name || "a tool";
    asked += 1;
    note ??= slot.appendChild(el("p", { class: "notice view-refused" }));
    note.textContent = `The view asked to call ${name}${asked > 1 ? ` (${asked} requests)` : ""}: the replay player never ` +
      "calls tools, so it got an error. It shows the stored result of the recorded call; Re-runs calls the tools again.";
    const error = new Error(`The replay player never calls tools: ${name} was not called. This view shows the stored result of ` +
      "a recorded call; re-run the conversation to call tools.");
    error.code = -32601;
    throw error;
  };
}

function go(flat) {
  if (!steps.length) return;
  flat = Math.max(0, Math.min(steps.length - 1, flat));
  for (let i = 0; i <= flat; i++) {
    if (!rendered.has(i)) {
      const node = renderStep(i);
      rendered.set(i, node);
      // Keep document order even when jumping back and forth.
      const after = [...rendered.keys()].filter((k) => k > i).sort((a, b) => a - b)[0];
      if (after !== undefined) stage.insertBefore(node, rendered.get(after)); else stage.append(node);
    }
  }
  for (const [i, node] of rendered) {
    node.hidden = i > flat;
    node.classList.toggle("current", i === flat);
  }
  current = flat;
  const { turnIndex, stepIndex } = steps[flat];
  position.textContent = `Step ${flat + 1} of ${steps.length} · turn ${turnIndex + 1} of ${turns.length}, step ${stepIndex + 1} of ${turns[turnIndex].steps.length}`;
  for (const b of timeline.querySelectorAll(".step-link")) b.classList.toggle("current", Number(b.dataset.flat) === flat);
  document.getElementById("prev").disabled = document.getElementById("first").disabled = flat === 0;
  document.getElementById("next").disabled = document.getElementById("last").disabled = flat === steps.length - 1;
  rendered.get(flat).scrollIntoView({ block: "nearest" });
  history.replaceState(null, "", `#step-${flat + 1}`);
}

function turnStart(turnIndex) {
  return steps.findIndex((s) => s.turnIndex === turnIndex);
}

function nextTurn() {
  if (current < 0) return go(0);
  const t = steps[current].turnIndex;
  if (t + 1 < turns.length) go(turnStart(t + 1)); else go(steps.length - 1);
}

function prevTurn() {
  if (current < 0) return;
  const t = steps[current].turnIndex;
  const start = turnStart(t);
  go(current > start ? start : turnStart(Math.max(0, t - 1)));
}

document.getElementById("first").addEventListener("click", () => go(0));
document.getElementById("prev").addEventListener("click", () => go(current - 1));
document.getElementById("next").addEventListener("click", () => go(current + 1));
document.getElementById("last").addEventListener("click", () => go(steps.length - 1));
document.getElementById("next-turn").addEventListener("click", nextTurn);
document.getElementById("prev-turn").addEventListener("click", prevTurn);
document.addEventListener("keydown", (ev) => {
  if (ev.target.closest?.("input, textarea, select") || ev.altKey || ev.ctrlKey || ev.metaKey) return;
  const keys = {
    ArrowRight: () => go(current + 1), " ": () => go(current + 1), j: () => go(current + 1),
    ArrowLeft: () => go(current - 1), k: () => go(current - 1),
    ArrowDown: nextTurn, PageDown: nextTurn, ArrowUp: prevTurn, PageUp: prevTurn,
    Home: () => go(0), End: () => go(steps.length - 1),
  };
  const action = keys[ev.key];
  if (action) { ev.preventDefault(); action(); }
});
window.addEventListener("pagehide", () => {
  for (const handle of widgets) { try { handle.teardown("the page was closed"); } catch { /* going away */ } }
});

async function load() {
  let data;
  try {
    data = await apiFetch(`/api/conversations/${page.conversationId}/player/`);
  } catch (err) {
    stage.replaceChildren(el("p", { class: "error", text: `Could not load the conversation: ${err.message}` }));
    return;
  }
  turns = data.turns;
  steps = [];
  turns.forEach((turn, ti) => turn.steps.forEach((step, si) => steps.push({ step, turnIndex: ti, stepIndex: si })));
  stage.replaceChildren();
  if (data.conversation.system_prompt) {
    stage.append(el("article", { class: "replay-step msg system" }, el("div", { class: "step-head" }, el("span", { class: "role", text: "system prompt" })),
      el("div", { class: "body plain-text", text: data.conversation.system_prompt })));
  }
  buildTimeline();
  if (!steps.length) { stage.append(el("p", { class: "muted", text: "This conversation has no messages." })); return; }
  const wanted = Number((location.hash.match(/^#step-(\d+)$/) || [])[1]);
  go(wanted ? wanted - 1 : 0);
  stage.focus({ preventScroll: true });
}

load();
