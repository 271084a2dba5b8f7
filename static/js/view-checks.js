// The checks an MCP App author needs, each with the spec rule behind it. The workbench feeds
// them what it learns (the view's resource, the call, the messages on the wire, CSP violations
// the sandbox reports) and the list redraws itself: pass, warn, fail, or still waiting.

const APP_MIME = "text/html;profile=mcp-app";
const SKYBRIDGE_MIME = "text/html+skybridge";
export const INIT_LIMIT_MS = 5000;

const RULES = {
  resource: ["The tool's _meta.ui.resourceUri resolves",
    "MCP Apps: an App tool names its view in _meta.ui.resourceUri, a ui:// resource the host reads with resources/read."],
  mime: ["The view's MIME type is the MCP App one",
    `MCP Apps: a view resource has mimeType ${APP_MIME}.`],
  csp: ["The view stays inside its declared CSP",
    "MCP Apps: the host enforces _meta.ui.csp (connectDomains, resourceDomains, frameDomains); without it a view gets no network at all."],
  schema: ["structuredContent matches the outputSchema",
    "MCP: when a tool declares an outputSchema, its structuredContent must conform to it."],
  init: ["The view initialised within 5 s",
    "MCP Apps: the view sends ui/initialize, then ui/notifications/initialized; the host holds tool input and result until then."],
  size: ["The view's size fits the container",
    "MCP Apps: the view reports its size with ui/notifications/size-changed and should fit hostContext.containerDimensions."],
  contrast: ["Text is readable on the host's background",
    "WCAG 2.2 (1.4.3): text needs a contrast ratio of at least 4.5:1, 3:1 at the least for large text. A view follows hostContext.theme and styles.variables, or paints its own background."],
  visibility: ["Visibility fits how the tool is used",
    "MCP Apps: _meta.ui.visibility \"model\" lists the tool for the model; \"app\" lets views call it. Default: both."],
};

const READABLE = 4.5;   // WCAG AA, normal text
const UNREADABLE = 3;   // below even large text's minimum

/** `top` ([r, g, b, a], 0-255 and 0-1) painted over `bottom` (source-over). */
function over(top, bottom) {
  const a = top[3] + bottom[3] * (1 - top[3]);
  if (a <= 0) return [0, 0, 0, 0];
  const mix = (i) => (top[i] * top[3] + bottom[i] * bottom[3] * (1 - top[3])) / a;
  return [mix(0), mix(1), mix(2), a];
}

/** WCAG relative luminance of an opaque [r, g, b]. */
function luminance([r, g, b]) {
  const channel = (v) => { const c = v / 255; return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
  return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
}

export function contrastRatio(fg, bg) {
  const [hi, lo] = [luminance(fg), luminance(bg)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
}

function cssColor(c) { return `rgb(${c.slice(0, 3).map((v) => Math.round(v)).join(", ")})`; }

/** "rgb(21, 23, 27)" or "rgba(…)" (a computed colour) as [r, g, b, a]. */
export function parseColor(text) {
  const m = /^rgba?\(([^)]*)\)$/.exec(text || "");
  if (!m) return null;
  const p = m[1].split(/[\s,/]+/).filter(Boolean).map(Number);
  return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
}

export class ViewChecks {
  constructor(list) {
    this.list = list;
    this.state = {};
    for (const key of Object.keys(RULES)) this.state[key] = { status: "pending", detail: "" };
  }

  set(key, status, detail) {
    this.state[key] = { status, detail };
    this.render();
  }

  get(key) { return this.state[key]; }

  render() {
    const items = Object.entries(RULES).map(([key, [label, rule]]) => {
      const { status, detail } = this.state[key];
      const li = document.createElement("li");
      li.className = `check ${status}`;
      li.dataset.check = key;
      const badge = document.createElement("span");
      badge.className = `badge check-${status}`;
      badge.textContent = status;
      const title = document.createElement("strong"); title.textContent = ` ${label}`;
      const what = document.createElement("div"); what.className = "check-detail"; what.textContent = detail;
      const why = document.createElement("div"); why.className = "help"; why.textContent = rule;
      li.append(badge, title, what, why);
      return li;
    });
    this.list.replaceChildren(...items);
  }

  // --- what the workbench learns ------------------------------------------------------------

  /** The view's resource as GET /api/tool-calls/{id}/view/ answered it (or its error). */
  view(tool, view, error, uri = tool?.ui_resource_uri || "") {
    if (error) this.set("resource", "fail", uri ? `Could not read ${uri}: ${error}` : error);
    else if (uri && !uri.startsWith("ui://")) this.set("resource", "fail", `${uri} is not a ui:// URI.`);
    else if (uri) this.set("resource", "pass", `${uri} read (${view.html.length.toLocaleString()} characters of HTML).`);
    else this.set("resource", "warn", "The view came inside the result (an MCP-UI embedded resource), not from the tool's _meta.ui.resourceUri.");
    if (error) {
      this.set("mime", "na", "No resource was read."); this.set("csp", "na", "No view."); this.set("init", "na", "No view.");
      this.set("size", "na", "No view."); this.set("contrast", "na", "No view.");
      return;
    }
    const mime = (view.mime_type || "").trim();
    if (mime.toLowerCase().replace(/\s+/g, "") === APP_MIME) this.set("mime", "pass", mime);
    else if (mime === SKYBRIDGE_MIME) this.set("mime", "warn", `${mime}: the older OpenAI Apps SDK type, shown through the window.openai layer.`);
    else this.set("mime", "fail", `${mime || "(none)"}: hosts may refuse to render it.`);
    const csp = view.csp;
    this.declared = csp && typeof csp === "object";
    if (this.declared) {
      const domains = Object.entries(csp).filter(([, v]) => Array.isArray(v) && v.length).map(([k, v]) => `${k}: ${v.join(" ")}`);
      this.set("csp", "pass", `Declared${domains.length ? ` (${domains.join("; ")})` : " with no domains"}; no request blocked so far.`);
    } else {
      this.set("csp", "warn", "No _meta.ui.csp declared: the view runs with the restrictive default (no network); no request blocked so far.");
    }
    this.violations = [];
  }

  /** Something the view's CSP blocked (reported by the sandbox, logger "sandbox.csp"). A request
   *  to an undeclared address fails the check; eval or an inline handler only warns (libraries
   *  such as zod probe for eval and fall back), since no request left the sandbox. */
  violation(data) {
    this.violations ??= [];
    this.blockedCode ??= [];
    const uri = data?.blockedURI || "inline";
    const text = `${uri} (${data?.directive || "?"})`;
    const isRequest = /^[a-z][a-z0-9+.-]*:/i.test(uri) && !/^(data|blob):/i.test(uri);
    const list = isRequest ? this.violations : this.blockedCode;
    if (!list.includes(text)) list.push(text);
    const code = this.blockedCode.length ? ` Also blocked (no request): ${this.blockedCode.join(", ")}.` : "";
    if (this.violations.length) {
      this.set("csp", "fail", `Blocked requests: ${this.violations.join(", ")}. Declare the domain in _meta.ui.csp${
        this.declared ? "" : " (none is declared)"}, or stop the request.${code}`);
    } else {
      this.set("csp", "warn", `No request blocked.${code} The sandbox never allows eval or inline event handlers.`);
    }
  }

  /** The call's stored result: schema validation and visibility. */
  call(call, tool) {
    if (call.schema_valid === true) this.set("schema", "pass", "Validated when the result was stored.");
    else if (call.schema_valid === false) this.set("schema", "fail", call.schema_error || "Did not validate.");
    else if (call.schema_error) this.set("schema", "warn", call.schema_error);  // e.g. too large to check
    else if (!call.has_result) this.set("schema", "na", `No result (${call.status}).`);
    else this.set("schema", "na", "The tool declares no outputSchema.");
    const visibility = tool?.visibility?.length ? tool.visibility : ["model", "app"];
    if (!tool) this.set("visibility", "na", "The tool is no longer listed by its server.");
    else if (call.origin === "llm" && !visibility.includes("model")) this.set("visibility", "fail", `The model called it, but its visibility is [${visibility.join(", ")}].`);
    else if (!visibility.includes("model") && !visibility.includes("app")) this.set("visibility", "fail", `Visibility [${visibility.join(", ")}] lets nobody call it.`);
    else this.set("visibility", "pass", `[${visibility.join(", ")}]: ${visibility.includes("model") ? "the model can call it" : "hidden from the model"}${visibility.includes("app") ? ", views can call it" : ", views cannot call it"}.`);
  }

  /** A preview: no call, so no stored result to validate; visibility from a tool naming the view. */
  preview(tool) {
    if (tool) this.call({ origin: "manual", has_result: false, status: "preview" }, tool);
    else this.set("visibility", "warn", "No tool of this server names this view in _meta.ui.resourceUri: nothing can show it.");
    this.set("schema", "na", "A preview: the result is written by hand, not stored from a call.");
  }

  /** The view's tools/call was refused because the tool is not visible to apps. */
  refusedCall(name, message) {
    this.set("visibility", "fail", `The view called ${name}, which views may not call: ${message}`);
  }

  mounted() {
    this.set("init", "pending", "Waiting for ui/notifications/initialized…");
    this.set("size", "pending", "Waiting for ui/notifications/size-changed…");
    this.texts = null;
    this.set("contrast", "pending", "Waiting for the sandbox to measure the view's text…");
  }

  /** The sandbox's contrast probe measured the view's text (logger "sandbox.contrast"). */
  contrast(report) {
    if (!report || !Array.isArray(report.pairs)) return;
    this.texts = report;
    this.judgeContrast();
  }

  /** What lies under a transparent view: the simulated device's background (a computed colour). */
  backdrop(color) {
    const parsed = parseColor(color);
    if (!parsed) return;
    this.under = over(parsed, [255, 255, 255, 1]);
    if (this.texts) this.judgeContrast();
  }

  judgeContrast() {
    const under = this.under || [255, 255, 255, 1];
    const judged = this.texts.pairs.map((pair) => {
      const bg = over(pair.background, under);
      const fg = over(pair.color, bg);
      return { ...pair, fg, bg, ratio: contrastRatio(fg, bg) };
    }).sort((a, b) => a.ratio - b.ratio);
    if (!judged.length) { this.set("contrast", "na", "The view shows no text."); return; }
    const say = (p) => `“${p.text}” ${cssColor(p.fg)} on ${cssColor(p.bg)}, ${p.ratio.toFixed(1)}:1`;
    const low = judged.filter((p) => p.ratio < READABLE);
    const more = low.length > 1 ? ` (${low.length - 1} more colour pair${low.length > 2 ? "s" : ""} below ${READABLE}:1)` : "";
    const worst = judged[0];
    const background = this.texts.pairs.every((p) => p.background[3] < 1) ? " The view paints no background of its own: the host's shows through." : "";
    if (worst.ratio < UNREADABLE) this.set("contrast", "fail", `Unreadable: ${say(worst)}${more}.${background} Follow hostContext.theme (and styles.variables), or paint a background that suits the text.`);
    else if (worst.ratio < READABLE) this.set("contrast", "warn", `Hard to read: ${say(worst)}${more}.${background}`);
    else this.set("contrast", "pass", `Lowest ${worst.ratio.toFixed(1)}:1 (“${worst.text}”) over ${this.texts.texts} text${this.texts.texts === 1 ? "" : "s"}.`);
  }

  initialized(ms) {
    if (ms <= INIT_LIMIT_MS) this.set("init", "pass", `Initialised ${Math.round(ms)} ms after the frame was created.`);
    else this.set("init", "warn", `Initialised, but only after ${Math.round(ms)} ms.`);
  }

  initTimeout() {
    if (this.state.init.status === "pending") this.set("init", "fail", `No ui/notifications/initialized within ${INIT_LIMIT_MS / 1000} s: the host never sends it the tool input or result.`);
  }

  size(reported, container) {
    const over = [];
    if (reported.width != null && container.width && reported.width > container.width) over.push(`width ${Math.ceil(reported.width)} > ${container.width} px`);
    const limit = container.maxHeight ?? container.height;
    if (reported.height != null && limit && reported.height > limit) over.push(`height ${Math.ceil(reported.height)} > ${limit} px`);
    const shown = `${reported.width != null ? Math.ceil(reported.width) : "?"}×${reported.height != null ? Math.ceil(reported.height) : "?"}`;
    if (over.length) this.set("size", "warn", `Reported ${shown}: ${over.join(", ")} (the frame is cut to the container).`);
    else this.set("size", "pass", `Reported ${shown}, within ${container.width ?? "?"}×${limit ?? "?"}.`);
  }

  noSize() {
    if (this.state.size.status === "pending") this.set("size", "warn", "The view never reported its size: the host keeps its frame at the default height.");
  }
}
