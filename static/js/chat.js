// The chat view: renders stored messages, applies live WebSocket events, mounts App widgets.
//
// The database is the source of truth. The first connection loads the newest page of the
// conversation; every reconnection loads only what came after the last message the page has
// (`?after=<seq>`), and everything is reconciled by id, so the page never misses or duplicates
// a message; live events only fill in between. Older messages load on request, page by page.
//
// Tool calls have one JSON shape everywhere (tools/events.py): events and the API carry a
// summary. A live tool_call.result also carries the full result unless it is big; then it, and
// any result the page learns of from the API, is fetched over HTTP only when the user opens it
// (or a view needs it).
import { apiFetch, liveSocket, pretty } from "./http.js";
import { renderChatMarkdown } from "./markdown-images.js";
import { renderContentText } from "./rich-content.js";
import { adoptAppView, mountAppView, runViewToolCall, unmountAppView } from "./app-view.js";
import { displayJson, fetchFullResultText, formatBytes, keepPushedResult } from "./tool-result.js";
import { appendLog, showProgress, showServerRequest, showTask } from "./server-requests.js";
import { formatSeconds, showElapsed } from "./elapsed.js";

const page = JSON.parse(document.getElementById("page-data").textContent);
const cid = page.conversationId;
const list = document.getElementById("messages");
const messages = new Map();   // id -> message
const calls = new Map();      // tool call id -> tool call json
const asking = new Set();     // ids of server requests on this page that wait for the user
const cards = new Map();      // tool call id -> card element
const streamed = new Map();   // LLM tool-call id -> {id, turn, step} while the model writes the call; null once adopted
const endedTurns = new Set();
let streaming = null;         // {el, text}
let running = false;
// Bumped by whatever tells the turn's state live (its events, a sent message): a load() that read
// the conversation before such news must not undo it (its "idle", read before the POST that
// started a turn, hid Stop while the turn ran: a CI failure).
let turnNews = 0;
// The loaded messages are the seqs [oldestSeq, lastSeq] with no gap: a reconnection asks for
// what came after lastSeq. Live messages move lastSeq on only while they are contiguous
// (seqs are dense), so an event missed while the socket was away is never skipped.
let oldestSeq = null, lastSeq = null, hasOlder = false;
const liveSeqs = new Set();
const FINAL = new Set(["succeeded", "failed", "timed_out", "cancelled"]);

function el(tag, cls, text) {
  const n = document.createElement(tag);
  if (cls) n.className = cls;
  if (text !== undefined) n.textContent = text;
  return n;
}

function nearBottom() { return list.scrollHeight - list.scrollTop - list.clientHeight < 120; }
function scrollDown(force) { if (force || nearBottom()) list.scrollTop = list.scrollHeight; }

// ---- messages -------------------------------------------------------------------------

function renderMessage(m) {
  if (m.role === "tool") {
    if (m.tool_call_id) return toolCard(m.tool_call_id, m);
    const note = el("div", "msg tool-note");
    note.dataset.seq = m.seq;
    note.textContent = m.text;
    return note;
  }
  const node = el("div", `msg ${m.role}`);
  node.dataset.id = m.id; node.dataset.seq = m.seq;
  if (m.from_view) {
    // Sent by an App view (ui/message), not typed by the person: say which view.
    node.classList.add("from-view");
    node.append(el("div", "role", `App view · ${m.from_view.tool}`));
  } else node.append(el("div", "role", m.role));
  const body = el("div", "body");
  body.replaceChildren(renderChatMarkdown(m.text || ""));
  node.append(body);
  if (m.role === "assistant" && m.tool_calls?.length && !m.text) node.hidden = true;
  return node;
}

function insertBySeq(node) {
  const seq = Number(node.dataset.seq);
  // Moving a card that holds an App view would reload the view's iframe: leave it where it
  // is when it already sits in order (a card shown while the model streamed the call).
  if (node.isConnected) {
    const prev = node.previousElementSibling, next = node.nextElementSibling;
    const fits = (!prev || !prev.dataset.seq || Number(prev.dataset.seq) <= seq)
      && (!next || !next.dataset.seq || Number(next.dataset.seq) > seq);
    if (fits) return;
  }
  const after = [...list.children].find(c => c.dataset.seq && Number(c.dataset.seq) > seq);
  if (after) list.insertBefore(node, after); else list.append(node);
}

function upsertMessage(m) {
  if (messages.has(m.id)) {
    const existing = list.querySelector(`[data-seq="${m.seq}"]`);
    if (existing && m.role !== "tool") {
      existing.replaceWith(renderMessage(m));
    }
    messages.set(m.id, m);
    return;
  }
  messages.set(m.id, m);
  noteSeq(m.seq);
  settleStreamed(m);
  if (m.role === "assistant" && streaming) { streaming.el.remove(); streaming = null; }
  const node = renderMessage(m);
  node.dataset.seq = m.seq;
  insertBySeq(node);
  scrollDown(m.role === "user");
}

// `offset` is where the piece starts in the step's text: a page that joined mid-stream got a
// snapshot that may already hold it (the snapshot and the live deltas race).
function onDelta(text, replace, offset) {
  if (streaming && !replace && typeof offset === "number" && offset < streaming.text.length) {
    text = text.slice(streaming.text.length - offset);
    if (!text) return;
  }
  if (!streaming) {
    const node = el("div", "msg assistant streaming");
    node.append(el("div", "role", "assistant"), el("div", "body"));
    node.dataset.seq = "999999999";
    list.append(node);
    streaming = { el: node, text: "" };
  }
  streaming.text = replace ? text : streaming.text + text;
  streaming.el.querySelector(".body").replaceChildren(renderChatMarkdown(streaming.text));
  scrollDown();
}

// ---- tool calls -------------------------------------------------------------------------

function toolCard(id, message) {
  let card = cards.get(id);
  if (card) return card;
  card = el("article", "tool-card");
  card.dataset.toolCall = id;
  if (message) card.dataset.seq = message.seq;
  const head = el("header");
  head.append(el("code", "name", "…"), el("span", "badge app", "App"), el("span", "status", "queued"),
    el("span", "duration muted"), el("span", "saved"));
  head.querySelector(".app").hidden = true;
  const toggle = el("span", "toggle");
  const full = el("button", "", "Full result"); full.type = "button";
  const seen = el("button", "", "What the model saw"); seen.type = "button";
  toggle.append(full, seen);
  head.append(toggle);
  // An App call's view, with host conditions, console and checks, in a tab of its own.
  const bench = el("a", "workbench-link small", "Workbench"); bench.hidden = true; bench.target = "_blank";
  head.append(bench);
  const body = el("div", "body");
  const args = el("details", "args"); args.append(el("summary", "", "Arguments"), el("pre", "args-json"));
  const fullPre = el("pre", "full-json"); fullPre.hidden = true;
  const seenPre = el("pre", "projection-text"); seenPre.hidden = true;
  const error = el("p", "error");
  const progress = el("div", "call-progress"); progress.hidden = true;
  const taskLine = el("div", "call-task"); taskLine.hidden = true;
  const requests = el("div", "server-requests"); requests.hidden = true;
  const logs = el("details", "server-logs"); logs.hidden = true;
  logs.append(el("summary", "", "Server log"), el("ul"));
  const rendered = el("div", "rich-content full-rendered"); rendered.hidden = true;
  body.append(args, error, taskLine, progress, requests, logs, rendered, fullPre, seenPre, el("div", "widget-slot"));
  card.append(head, body);
  // Cards start folded: the full result is fetched (over HTTP) only when the user opens it.
  // Clicking the active tab again folds it away.
  const show = (which) => {
    const again = which.classList.contains("active");
    for (const b of [full, seen]) b.classList.toggle("active", b === which && !again);
    fullPre.hidden = !(which === full && !again);
    card.querySelector(".full-rendered").hidden = fullPre.hidden || !card.querySelector(".full-rendered").childElementCount;
    seenPre.hidden = !(which === seen && !again);
    fillOpen(card);
  };
  full.onclick = () => show(full);
  seen.onclick = () => show(seen);
  cards.set(id, card);
  if (calls.has(id)) updateCard(calls.get(id));
  return card;
}

function updateCard(call) {
  const card = toolCard(call.id);
  // A call of a view's own tool runs in the view, not on the server.
  card.querySelector(".name").textContent = call.origin === "view" ? `App view · ${call.tool}` : `${call.server_name || call.server_id}/${call.tool}`;
  card.querySelector(".app").hidden = !call.is_app;
  card.querySelector(".toggle").hidden = !!call.pending;  // no result yet: nothing to toggle
  const bench = card.querySelector(".workbench-link");
  bench.hidden = !!call.pending || !(call.has_view || call.is_app);
  if (!bench.hidden) bench.href = `/tool-calls/${call.id}/workbench/`;
  const status = card.querySelector(".status");
  status.className = `status ${call.status}`;
  status.textContent = call.status === "input_required" ? "waiting for input" : call.status;
  // A running call ticks its elapsed time (and shows its timeout); an ended one its duration.
  const duration = card.querySelector(".duration");
  if (!showElapsed(duration, call)) duration.textContent = call.duration_ms != null ? `${Math.round(call.duration_ms)} ms` : "";
  card.querySelector(".args-json").textContent = pretty(call.arguments || {});
  card.querySelector(".error").textContent = call.error || "";
  if (call.progress) showProgress(card.querySelector(".call-progress"), call.progress);
  showTask(card.querySelector(".call-task"), call.task);
  if (call.projection) {
    const saved = Math.max((call.tokens_full || 0) - (call.projection.tokens || 0), 0);
    card.querySelector(".saved").textContent = call.has_result
      ? `${formatBytes(call.size_full)} ≈${call.tokens_full} → ≈${call.projection.tokens} tokens (saved ≈${saved})` : "";
  }
  fillOpen(card);
  if (call.has_view || call.is_app) mountAppView(card.querySelector(".widget-slot"), call, page, { onChanged: refreshLlmView });
}

/** Fill the open tab of a card: the full result or the model's text, fetched once when needed. */
function fillOpen(card) {
  const call = calls.get(card.dataset.toolCall);
  if (!call || call.pending || !FINAL.has(call.status)) return;
  const fullPre = card.querySelector(".full-json"), seenPre = card.querySelector(".projection-text");
  if (!fullPre.hidden && card.fullFor !== call.result_url) {
    card.fullFor = call.result_url;
    if (!call.has_result) { fullPre.textContent = "(no result)"; }
    else {
      fullPre.textContent = `loading ${formatBytes(call.size_full)}…`;
      fetchFullResultText(call.id).then(text => {
        fullPre.textContent = displayJson(text);
        const rendered = card.querySelector(".full-rendered");
        renderContentText(rendered, text, { serverId: call.server_id });
        rendered.hidden = rendered.hidden || fullPre.hidden;
      })
        .catch(err => { card.fullFor = undefined; fullPre.textContent = `Could not load the full result: ${err.message}`; });
    }
  }
  if (!seenPre.hidden && card.seenFor !== call.status && call.projection) {
    card.seenFor = call.status;
    seenPre.textContent = call.projection.text;
    if (!call.projection.text_complete) {  // summaries carry the start of it: the detail has all
      apiFetch(`/api/tool-calls/${call.id}/?full=0`).then(d => { seenPre.textContent = d.projection.text; })
        .catch(err => { card.seenFor = undefined; seenPre.textContent += `\n[could not load the rest: ${err.message}]`; });
    }
  }
}

/** Merge a newer summary in. A page loaded before a live event may be older than it: a call
 * never goes back from an end state. */
function mergeCall(data) {
  const prev = calls.get(data.id) || {};
  if (FINAL.has(prev.status) && data.status && !FINAL.has(data.status)) return prev;
  const call = { ...prev, ...data };
  calls.set(call.id, call);
  return call;
}

function upsertCall(data) {
  // A view's own request has no card; a model's call of a view's own tool (origin "view") has
  // one like any call of the model, and this page runs it if it shows that view.
  if (data.view_call_id && data.origin === "widget") { showViewCall(mergeCall(data)); return; }
  updateCard(mergeCall(data));
  if (data.origin === "view") runViewToolCall(data);
  showTurnState();
}

// Calls an App view made (origin "widget") have no card of their own: they are listed, folded,
// under the card of the call whose view made them, with their status.
function showViewCall(call) {
  const card = cards.get(call.view_call_id);
  if (!card) return;
  let box = card.querySelector(".view-calls");
  if (!box) {
    box = el("details", "view-calls");
    box.append(el("summary"), el("ul"));
    card.querySelector(".body").append(box);
  }
  let row = box.querySelector(`li[data-id="${call.id}"]`);
  if (!row) {
    row = el("li"); row.dataset.id = call.id;
    row.append(el("code", "", call.tool), " ", el("span", "status"), " ", el("span", "muted duration"), " ", el("span", "error"));
    box.querySelector("ul").append(row);
  }
  const status = row.querySelector(".status");
  status.className = `status ${call.status}`; status.textContent = call.status;
  row.querySelector(".duration").textContent = call.duration_ms != null ? `${Math.round(call.duration_ms)} ms` : "";
  row.querySelector(".error").textContent = call.error || "";
  const count = box.querySelectorAll("li").length;
  box.querySelector("summary").textContent = `Calls from this view (${count})`;
}

// While the model streams a tool call: a card (and, for an App tool, its view, which gets
// tool-input-partial) appears before the call exists. The call's row adopts it (by the LLM's
// tool-call id, from tool_call.created or the stored tool message); anything the step did not
// turn into a call is removed when the step's answer is stored or the turn ends.
function onToolStreaming(ev) {
  if (!ev.llm_tool_call_id || endedTurns.has(ev.turn_id)) return;  // late events of a stopped turn
  let entry = streamed.get(ev.llm_tool_call_id);
  if (entry === null) return;  // already adopted
  if (!entry) {
    entry = { id: `streaming-${ev.llm_tool_call_id}`, turn: ev.turn_id, step: ev.step };
    streamed.set(ev.llm_tool_call_id, entry);
    const card = toolCard(entry.id);
    card.dataset.seq = String(999999990 + Math.min(ev.index || 0, 8));
    insertBySeq(card);
  }
  upsertCall({ id: entry.id, pending: true, server_id: ev.server_id, server_name: ev.server_name, tool: ev.tool,
    arguments: ev.arguments, is_app: ev.is_app && ev.server_id != null, status: "streaming" });
  scrollDown();
}

function adoptStreamed(llmId, callId) {
  const entry = streamed.get(llmId);
  if (!entry) return;
  streamed.set(llmId, null);
  if (cards.has(callId)) { dropOne(entry); return; }  // the real card came first: keep that one
  const card = cards.get(entry.id);
  cards.delete(entry.id); calls.delete(entry.id);
  card.dataset.toolCall = callId;
  cards.set(callId, card);
  adoptAppView(entry.id, callId);
}

function dropOne(entry) {
  unmountAppView(entry.id);
  cards.get(entry.id)?.remove();
  cards.delete(entry.id); calls.delete(entry.id);
}

/** Remove streamed cards that never became calls: all of them, or those of one step. */
function dropStreamed(keep = () => false) {
  for (const [llmId, entry] of streamed) {
    if (entry && keep(llmId, entry)) continue;
    if (entry) dropOne(entry);
    streamed.delete(llmId);
  }
}

/** A stored message settles the streamed cards of its step. */
function settleStreamed(m) {
  if (m.role === "tool" && m.llm_tool_call_id && streamed.get(m.llm_tool_call_id)) {
    if (m.tool_call_id) adoptStreamed(m.llm_tool_call_id, m.tool_call_id);
    else { dropOne(streamed.get(m.llm_tool_call_id)); streamed.delete(m.llm_tool_call_id); }  // unknown tool, bad JSON
  } else if (m.role === "assistant" && m.turn_id != null) {
    const requested = new Set((m.tool_calls || []).map(tc => tc.id));
    dropStreamed((llmId, entry) => entry.turn !== m.turn_id || entry.step !== m.step || requested.has(llmId));
  }
}

// ---- turn state ---------------------------------------------------------------------------

function setRunning(on) {
  running = on;
  document.getElementById("send").disabled = on;
  document.getElementById("stop").hidden = !on;
  showTurnState();
}

let turnTimer = null;  // ticks the header's elapsed time while one of the turn's tool calls runs

/** The turn's tool calls still queued or running (not a view's own calls, which have no card). */
function activeCalls() {
  return [...calls.values()].filter(c => (c.status === "queued" || c.status === "running") && c.origin !== "widget");
}

/** What the running turn waits for: the model, a tool call (which one, for how long), or you
 * when one of its calls asks for input. */
function showTurnState() {
  const s = document.getElementById("turn-state");
  const waits = running && (asking.size > 0 || [...calls.values()].some(c => c.status === "input_required" && c.origin !== "widget"));
  const active = running && !waits ? activeCalls() : [];
  s.className = `status${running ? " running" : ""}${waits ? " input_required" : ""}`;
  s.title = "";
  if (!running) s.textContent = "";
  else if (waits) s.textContent = "waiting for your input…";
  else if (!active.length) s.textContent = "thinking…";
  else {
    const names = active.map(c => `${c.server_name}/${c.tool}`);
    const shown = names.length > 3 ? `${names.slice(0, 3).join(", ")} and ${names.length - 3} more` : names.join(", ");
    const runs = active.filter(c => c.status === "running" && c.started_at);
    const since = Math.min(...(runs.length ? runs : active).map(c => Date.parse(runs.length ? c.started_at : c.queued_at)));
    const verb = runs.length ? "running" : "queued";
    s.textContent = `${verb} ${shown}${Number.isNaN(since) ? "" : ` · ${formatSeconds((Date.now() - since) / 1000)}`}`;
    s.title = active.map(c => `${c.server_name}/${c.tool}: ${c.status}`).join("\n");
  }
  // Four ticks a second: a late tick on a busy machine must not skip a second of the counter.
  if (active.length && !turnTimer) turnTimer = setInterval(showTurnState, 250);
  else if (!active.length && turnTimer) { clearInterval(turnTimer); turnTimer = null; }
}

function endTurn(turnId) {
  turnNews += 1;
  if (turnId != null) endedTurns.add(turnId);
  setRunning(false);
  if (streaming) { streaming.el.remove(); streaming = null; }
  dropStreamed();
}

function notice(text, isError) {
  const n = document.getElementById("turn-notice");
  n.hidden = !text; n.textContent = text || ""; n.className = `notice${isError ? " error" : ""}`;
}

// ---- loading and live events ----------------------------------------------------------------

/** Note a stored message's seq; lastSeq follows only while the seqs are contiguous. */
function noteSeq(seq) {
  if (lastSeq == null) return;  // before the first page: that page sets the range
  if (seq > lastSeq) liveSeqs.add(seq);
  while (liveSeqs.has(lastSeq + 1)) { liveSeqs.delete(lastSeq + 1); lastSeq += 1; }
}

function applyPage(data) {
  for (const call of data.tool_calls) mergeCall(call);
  for (const m of data.messages) upsertMessage(m);
  for (const call of data.tool_calls) if (cards.has(call.id)) updateCard(calls.get(call.id));
  for (const call of data.tool_calls) if (call.view_call_id && call.origin === "widget") showViewCall(calls.get(call.id));
  for (const call of data.tool_calls) if (call.origin === "view") runViewToolCall(call);
  if (typeof data.confirm_view_messages === "boolean") confirmBox.checked = data.confirm_view_messages;
  if (typeof data.offer_view_tools === "boolean") offerBox.checked = data.offer_view_tools;
  if (typeof data.use_tasks === "boolean") tasksBox.checked = data.use_tasks;
  const { first_seq: first, last_seq: last } = data.page;
  if (first != null && (oldestSeq == null || first < oldestSeq)) { oldestSeq = first; hasOlder = data.page.has_older; }
  if (oldestSeq == null) hasOlder = data.page.has_older;
  if (last != null && (lastSeq == null || last > lastSeq)) { lastSeq = last; noteSeq(last); }
  if (lastSeq == null) lastSeq = 0;  // an empty conversation: everything is "after 0"
  olderButton();
}

async function load() {
  // First connection: the newest page. A reconnection: only what is new since the last message.
  let data;
  const news = turnNews;
  do {
    data = await apiFetch(`/api/conversations/${cid}/${lastSeq == null ? "" : `?after=${lastSeq}`}`);
    applyPage(data);
  } while (data.page.has_newer);
  if (turnNews === news) {  // else the live news is newer than what this read
    setRunning(data.status === "running");
    if (data.status !== "running") dropStreamed();  // the turn ended while the socket was away
  }
  const title = document.getElementById("conversation-title");
  if (data.title && !title.value && document.activeElement !== title) title.value = data.title;
  if (data.turn && data.turn.status === "failed") notice(data.turn.error, true);
  else if (data.turn && data.turn.error && !running) notice(data.turn.error, false);
  refreshLlmView();
}

// Older messages, a page at a time, on request; the reading position stays where it was.
function olderButton() {
  let button = document.getElementById("load-older");
  if (!button) {
    button = el("button", "small load-older", "Load older messages");
    button.id = "load-older"; button.type = "button";
    button.onclick = loadOlder;
    list.prepend(button);
  }
  button.hidden = !hasOlder;
}

async function loadOlder() {
  const button = document.getElementById("load-older");
  button.disabled = true;
  try {
    const data = await apiFetch(`/api/conversations/${cid}/?before=${oldestSeq}`);
    const fromBottom = list.scrollHeight - list.scrollTop;
    applyPage(data);
    list.scrollTop = list.scrollHeight - fromBottom;
  } catch (err) { notice(err.message, true); } finally { button.disabled = false; }
}

function onEvent(ev) {
  switch (ev.type) {
    case "stream.snapshot":
      if (ev.status === "running" && ev.text) onDelta(ev.text, true);
      break;
    case "message.delta": onDelta(ev.delta, false, ev.offset); break;
    case "message.completed": {
      upsertMessage(ev.message);
      const title = document.getElementById("conversation-title");
      if (ev.message.role === "user" && !title.value && document.activeElement !== title) {
        title.value = (ev.message.text.trim().split("\n")[0] || "").slice(0, 80);
      }
      break;
    }
    case "turn.started": turnNews += 1; setRunning(true); notice(""); break;
    case "tool_call.streaming": onToolStreaming(ev); break;
    case "tool_call.created":
      adoptStreamed(ev.tool_call.llm_tool_call_id, ev.tool_call_id);
      upsertCall(ev.tool_call);
      break;
    // Calls made by a view (origin "widget") have no card of their own: upsertCall lists them
    // under the card of the view's call.
    case "tool_call.status": if (calls.has(ev.tool_call_id) || ev.tool_call.view_call_id) upsertCall(ev.tool_call); break;
    case "tool_call.result":
      keepPushedResult(ev);  // before the card and its view look for the result
      if (calls.has(ev.tool_call_id) || ev.tool_call.view_call_id) upsertCall(ev.tool_call);
      refreshLlmView();
      break;
    case "tool_call.progress":
      if (cards.has(ev.tool_call_id)) showProgress(cards.get(ev.tool_call_id).querySelector(".call-progress"), ev.progress);
      break;
    case "tool_call.log":
      if (cards.has(ev.tool_call_id)) appendLog(cards.get(ev.tool_call_id).querySelector(".server-logs"), ev.log);
      break;
    case "server_request.created":
    case "server_request.updated":
      showRequestOnCard(ev.server_request);
      break;
    case "turn.completed": endTurn(ev.turn_id); notice(ev.notice || ""); refreshLlmView(); break;
    case "turn.failed": endTurn(ev.turn_id); notice(ev.error, true); break;
    case "turn.stopped": endTurn(ev.turn_id); notice("Stopped."); break;
  }
}

/** A server's request (elicitation, sampling) shows inside the card of the call that made it. */
function showRequestOnCard(request) {
  const card = cards.get(request.tool_call_id);
  if (card) showServerRequest(card.querySelector(".server-requests"), request);
  // A form to fill or a sampling answer to approve: the turn waits for you.
  if (card && ["pending", "generated"].includes(request.status)) asking.add(request.id); else asking.delete(request.id);
  showTurnState();
}

/** On (re)connection: the requests still waiting for an answer, and their calls' log lines. */
async function catchUpRequests() {
  const data = await apiFetch(`/api/server-requests/?conversation=${cid}&open=1`);
  for (const request of data.server_requests) showRequestOnCard(request);
}

async function refreshLlmView() {
  const box = document.getElementById("llm-view");
  try {
    const req = await apiFetch(`/api/conversations/${cid}/llm-messages/`);
    box.replaceChildren();
    for (const m of req.messages) {
      const item = el("div", `llm-msg ${m.role}`);
      item.append(el("div", "role", m.role + (m.tool_call_id ? ` · ${m.tool_call_id}` : "")));
      if (m.content) item.append(el("pre", "", m.content));
      if (m.tool_calls) item.append(el("pre", "", m.tool_calls.map(t => `→ ${t.function.name}(${t.function.arguments})`).join("\n")));
      box.append(item);
    }
    const tools = el("details"); tools.append(el("summary", "", `${req.tools.length} tool${req.tools.length === 1 ? "" : "s"} offered`), el("pre", "", req.tools.map(t => t.function.name).join("\n")));
    box.append(tools);
  } catch (err) { box.textContent = err.message; }
}

document.getElementById("refresh-llm").onclick = refreshLlmView;

async function send(text, fromCall) {
  notice("");
  try {
    const body = fromCall ? { text, from_tool_call: fromCall } : { text };
    await apiFetch(`/api/conversations/${cid}/messages/`, { method: "POST", body });
    turnNews += 1;
    setRunning(true);
    return true;
  } catch (err) { notice(err.message, true); return false; }
}

// An App view's ui/message: sent as a user message marked with the view, after asking the
// person (unless they turned that off for this conversation). A refusal tells the view no.
const confirmBox = document.getElementById("confirm-view-messages");
confirmBox.addEventListener("change", async () => {
  try { await apiFetch(`/api/conversations/${cid}/`, { method: "PATCH", body: { confirm_view_messages: confirmBox.checked } }); }
  catch (err) { notice(err.message, true); confirmBox.checked = !confirmBox.checked; }
});
// The tools App views register are offered to the model only when asked (per conversation).
const offerBox = document.getElementById("offer-view-tools");
offerBox.addEventListener("change", async () => {
  try { await apiFetch(`/api/conversations/${cid}/`, { method: "PATCH", body: { offer_view_tools: offerBox.checked } }); refreshLlmView(); }
  catch (err) { notice(err.message, true); offerBox.checked = !offerBox.checked; }
});
// A tool that allows an MCP task (taskSupport "optional") is called as one only when asked (per conversation).
const tasksBox = document.getElementById("use-tasks");
tasksBox.addEventListener("change", async () => {
  try { await apiFetch(`/api/conversations/${cid}/`, { method: "PATCH", body: { use_tasks: tasksBox.checked } }); }
  catch (err) { notice(err.message, true); tasksBox.checked = !tasksBox.checked; }
});
window.inspectorSendMessage = async (text, { fromCall, tool } = {}) => {
  if (running) { notice(`The view of ${tool || "a tool"} wanted to send a message while the model is answering; it was refused.`, true); return false; }
  if (confirmBox.checked && !window.confirm(`The App view of “${tool || "a tool"}” wants to send this message to the model as you:\n\n${text}`)) {
    notice(`You declined the message from the view of ${tool || "a tool"}.`);
    return false;
  }
  return send(text, fromCall);
};

document.getElementById("composer").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const box = document.getElementById("composer-text");
  const text = box.value.trim();
  if (!text || running) return;
  if (await send(text)) box.value = "";
});
document.getElementById("composer-text").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); document.getElementById("composer").requestSubmit(); }
});
document.getElementById("stop").onclick = async () => {
  try { await apiFetch(`/api/conversations/${cid}/stop/`, { method: "POST" }); } catch (err) { notice(err.message, true); }
};

liveSocket(`/ws/conversations/${cid}/`, {
  onEvent,
  onOpen: () => load().then(catchUpRequests).catch(err => notice(err.message, true)),
  onState: (s) => { const b = document.getElementById("conn-state"); b.textContent = s; b.className = `badge ${s === "live" ? "ok" : "warn"}`; },
});
