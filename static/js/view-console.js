// The workbench's view console: every JSON-RPC message between an App view and the host, in
// order, with direction, method, timing and payload. Fed by widget-host.js's onTrace hook, so
// it sees exactly what went over postMessage (the sandbox proxy's set-up messages included,
// hidden unless asked for).
import { pretty } from "./http.js";
import { formatBytes } from "./tool-result.js";

const SANDBOX_PREFIX = "ui/notifications/sandbox-";
const CELL_CHARS = 160;
const SHOWN_CHARS = 200_000;

function summarize(message) {
  // The view's HTML rides in sandbox-resource-ready: say how big it is instead of printing it.
  if (message.method === `${SANDBOX_PREFIX}resource-ready` && typeof message.params?.html === "string") {
    return { ...message, params: { ...message.params, html: `<${formatBytes(message.params.html.length)} of HTML>` } };
  }
  return message;
}

function textOf(value, limit) {
  let text;
  try { text = JSON.stringify(value); } catch { text = String(value); }
  if (text === undefined) return "";
  return text.length > limit ? `${text.slice(0, limit)}…` : text;
}

export class ViewConsole {
  constructor({ table, count, filter, direction, sandbox, exportButton, clearButton, filename }) {
    this.body = table.tBodies[0];
    this.count = count;
    this.filter = filter;
    this.direction = direction;
    this.sandbox = sandbox;
    this.filename = filename;
    this.entries = [];
    this.expanded = new Set();  // numbers of the entries whose whole message is open (kept across renders)
    this.pending = new Map();  // "in:7" -> the entry of the request the view sent with id 7
    this.start = performance.now();
    for (const input of [filter, direction, sandbox]) input.addEventListener("input", () => this.render());
    exportButton.addEventListener("click", () => this.download());
    clearButton.addEventListener("click", () => { this.entries = []; this.pending.clear(); this.expanded.clear(); this.render(); });
  }

  /** widget-host.js onTrace: `dir` is "in" (from the view or proxy) or "out" (to them). */
  record(dir, message) {
    const at = performance.now() - this.start;
    const entry = { n: this.entries.length + 1, at, dir, message: summarize(message), took: null };
    const hasId = message.id !== undefined && message.id !== null;
    if (message.method) {
      entry.method = message.method;
      entry.kind = hasId ? "request" : "notification";
      if (message.method === "notifications/message") entry.level = message.params?.level || "info";
      // The sandbox's contrast probe reports through the same channel: set-up noise, hidden by default.
      if (message.method === "notifications/message" && message.params?.logger === "sandbox.contrast") entry.sandbox = true;
      if (hasId) this.pending.set(`${dir}:${message.id}`, entry);
    } else if (hasId) {
      // An answer travels the other way from its request.
      const request = this.pending.get(`${dir === "in" ? "out" : "in"}:${message.id}`);
      entry.kind = message.error ? "error" : "response";
      entry.method = request ? request.method : "(answer)";
      if (request) {
        this.pending.delete(`${request.dir}:${message.id}`);
        request.took = entry.took = at - request.at;
      }
    }
    this.entries.push(entry);
    this.render();
    return entry;
  }

  /** A line of the host's own (a reload, a condition change), not a message on the wire. */
  note(text) {
    this.entries.push({ n: this.entries.length + 1, at: performance.now() - this.start, dir: "note", kind: "note", method: text, message: null });
    this.render();
  }

  visible() {
    const needle = this.filter.value.trim().toLowerCase();
    const dir = this.direction.value;
    const sandbox = this.sandbox.checked;
    return this.entries.filter((e) => {
      if (!sandbox && (e.sandbox || e.method?.startsWith(SANDBOX_PREFIX))) return false;
      if (dir && e.dir !== dir && e.dir !== "note") return false;
      if (!needle) return true;
      e.search ??= `${e.method || ""} ${textOf(e.message, SHOWN_CHARS)}`.toLowerCase();
      return e.search.includes(needle);
    });
  }

  render() {
    // Rebuilt in full; a console holds hundreds of lines, not millions. An opened message stays
    // open when the next one arrives.
    const shown = this.visible();
    const rows = shown.flatMap((e) => (this.expanded.has(e.n) && e.message ? [this.row(e), this.detail(e)] : [this.row(e)]));
    this.body.replaceChildren(...rows);
    this.count.textContent = `${shown.length} of ${this.entries.length} messages`;
  }

  // One line a row (cells cut with an ellipsis, the whole message a click away), so a long
  // method or payload never widens the table past its card; a note spans the message columns
  // and wraps.
  row(e) {
    const tr = document.createElement("tr");
    tr.className = `console-row ${e.dir} ${e.kind}${e.level ? ` level-${e.level}` : ""}`;
    tr.dataset.method = e.method || "";
    const cell = (text, cls) => { const td = document.createElement("td"); td.textContent = text; if (cls) td.className = cls; tr.append(td); return td; };
    cell(String(e.n));
    cell(e.at.toFixed(0));
    if (e.kind === "note") {
      cell(e.method || "", "note-text").colSpan = 5;
      return tr;
    }
    cell(e.dir === "in" ? "view → host" : e.dir === "out" ? "host → view" : "", "dir");
    const method = cell(`${e.method || ""}${e.kind === "response" || e.kind === "error" ? (e.kind === "error" ? " ✗" : " ↩") : ""}`, "method");
    method.title = method.textContent;
    cell(e.message?.id ?? "");
    cell(e.took == null ? "" : `${e.took.toFixed(0)} ms`);
    const payload = cell("", "payload");
    if (e.message) {
      const body = e.message.params ?? e.message.result ?? e.message.error;
      payload.textContent = e.level ? `[${e.level}] ${textOf(e.message.params?.data, CELL_CHARS)}` : textOf(body, CELL_CHARS);
      payload.title = "Click the row for the whole message";
      tr.addEventListener("click", () => {
        const open = tr.nextElementSibling?.classList.contains("console-detail");
        if (open) { tr.nextElementSibling.remove(); this.expanded.delete(e.n); return; }
        this.expanded.add(e.n);
        tr.after(this.detail(e));
      });
    }
    return tr;
  }

  // The whole message of an entry, in a row under its own.
  detail(e) {
    const detail = document.createElement("tr");
    detail.className = "console-detail";
    const td = document.createElement("td"); td.colSpan = 7;
    const pre = document.createElement("pre");
    const text = pretty(e.message);
    pre.textContent = text.length > SHOWN_CHARS ? `${text.slice(0, SHOWN_CHARS)}\n… (${formatBytes(text.length)}; export to read it all)` : text;
    td.append(pre); detail.append(td);
    return detail;
  }

  download() {
    const data = this.entries.map(({ n, at, dir, kind, method, took, message }) => ({ n, at_ms: Math.round(at), dir, kind, method, took_ms: took == null ? null : Math.round(took), message }));
    const blob = new Blob([JSON.stringify({ messages: data }, null, 2)], { type: "application/json" });
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = this.filename;
    a.click();
    setTimeout(() => URL.revokeObjectURL(a.href), 1000);
  }
}
