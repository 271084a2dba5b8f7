// The elapsed-time counter of a running tool call: "running 12 s of 60 s", ticking from the
// call's started_at (tools/events.py), with its timeout. Progress notifications give a call its
// timeout again (up to max_timeout_s), so past it the counter says why the call is still alive.
// A call sent as an MCP task is followed up to the hard maximum, whatever its timeout: it says so.
//
// One timer ticks every counter on the page, four times a second so that a late tick on a busy
// machine never skips a second; a counter stops when its call ends or its element leaves the page.

const ticking = new Map();  // element -> { start (ms), timeout (s), max (s), task (sent as an MCP task) }
let timer = null;

export function formatSeconds(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")} min`;
}

function render(element, t) {
  const elapsed = (Date.now() - t.start) / 1000;
  let text = `running ${formatSeconds(elapsed)}`;
  if (t.task) {  // an MCP task runs as long as the server works on it, up to the hard maximum
    text += t.max ? ` · a task, followed for at most ${formatSeconds(t.max)}` : " · a task";
  } else if (t.timeout) {
    text += elapsed <= t.timeout ? ` of ${formatSeconds(t.timeout)}`
      : ` · timeout ${formatSeconds(t.timeout)}, extended by progress${t.max ? ` (at most ${formatSeconds(t.max)})` : ""}`;
  }
  element.textContent = text;
}

function tick() {
  for (const [element, t] of ticking) {
    if (!element.isConnected) { ticking.delete(element); continue; }
    render(element, t);
  }
  if (!ticking.size) { clearInterval(timer); timer = null; }
}

/** Show (and keep ticking) the elapsed time of `call` in `element` while it runs; clear it otherwise.
 * Returns whether the call is running (the caller shows something else when it is not). */
export function showElapsed(element, call) {
  if (!element) return false;
  const start = call && call.status === "running" && call.started_at ? Date.parse(call.started_at) : NaN;
  if (Number.isNaN(start)) {
    if (ticking.delete(element)) element.textContent = "";
    return false;
  }
  const t = { start, timeout: call.timeout_s, max: call.max_timeout_s, task: !!(call.task && call.task.id) };
  ticking.set(element, t);
  render(element, t);
  if (!timer) timer = setInterval(tick, 250);
  return true;
}
