// The App workbench: one stored tool call's view, mounted through the same sandbox and host
// code as in the chat, under host conditions the author switches live (each change goes to the
// view as ui/notifications/host-context-changed), with every message in a console and the
// checks an App author needs. The conditions live in the page's URL, so a link reproduces them.
// Without a call (a `ui://` resource's *Preview*), the view gets a tool input and result the
// author writes or fills from a stored call.
import { apiFetch, pretty } from "./http.js";
import { fetchFullResult, fetchFullResultText } from "./tool-result.js";
import { mountWidget } from "./widget-host.js";
import { renderSchemaForm } from "./schema-form.js";
import { ViewConsole } from "./view-console.js";
import { ViewChecks, INIT_LIMIT_MS } from "./view-checks.js";

const data = JSON.parse(document.getElementById("workbench-data").textContent);
const call = data.call;        // null in a preview
const preview = data.preview;  // {uri, tools, calls} in a preview
const form = document.getElementById("conditions");
const deviceBox = document.getElementById("wb-device");
const screenBox = document.getElementById("wb-screen");
const stage = document.querySelector(".wb-stage");
const errorBox = document.getElementById("wb-error");

export const DEVICES = {
  desktop: { w: 1280, h: 800, touch: false, hover: true, insets: false },
  tablet: { w: 820, h: 1180, touch: true, hover: false, insets: false },
  phone: { w: 390, h: 844, touch: true, hover: false, insets: true },
};
const PHONE_INSETS = { top: 47, right: 0, bottom: 34, left: 0 };
const NO_INSETS = { top: 0, right: 0, bottom: 0, left: 0 };
const PIP = { width: 360, height: 240 };
const NOTE_CHARS = 600;  // of a view's ui/message, in the console's note (the row's message has it all)
const MODES = ["inline", "fullscreen", "pip"];
const FRAME = 10;  // the device's border, px a side (workbench.css)
// Page-only settings in the address: not host conditions, so never sent to the view.
const PAGE_ONLY = ["mode", "fit"];

// The host's style variables (MCP Apps hostContext.styles.variables), one palette per theme.
const PALETTES = {
  light: {
    "--color-background-primary": "#ffffff", "--color-background-secondary": "#f4f5f7",
    "--color-text-primary": "#16181d", "--color-text-secondary": "#4b5563",
    "--color-border-primary": "#d7dbe0", "--color-ring-primary": "#2563eb",
  },
  dark: {
    "--color-background-primary": "#1d1f24", "--color-background-secondary": "#15171b",
    "--color-text-primary": "#f3f4f6", "--color-text-secondary": "#a9b0bb",
    "--color-border-primary": "#3a3f48", "--color-ring-primary": "#60a5fa",
  },
};
const COMMON_VARIABLES = {
  "--font-sans": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif",
  "--font-mono": "ui-monospace, SFMono-Regular, Menlo, monospace",
  "--border-radius-sm": "4px", "--border-radius-md": "8px",
};

// --- conditions <-> URL --------------------------------------------------------------------

function readConditions() {
  const q = new URLSearchParams(location.search);
  const device = DEVICES[q.get("device")] ? q.get("device") : (q.has("w") || q.has("h") ? "custom" : "desktop");
  const base = DEVICES[device] || DEVICES.desktop;
  const flag = (name, fallback) => (q.has(name) ? q.get(name) === "1" : fallback);
  const size = (name, fallback) => { const n = Number(q.get(name)); return Number.isFinite(n) && n >= 120 && n <= 4000 ? Math.round(n) : fallback; };
  return {
    theme: q.get("theme") === "dark" ? "dark" : "light",
    locale: q.get("locale") || navigator.language || "en-US",
    tz: q.get("tz") || Intl.DateTimeFormat().resolvedOptions().timeZone,
    mode: MODES.includes(q.get("mode")) ? q.get("mode") : "inline",
    device,
    w: size("w", base.w), h: size("h", base.h),
    touch: flag("touch", base.touch), hover: flag("hover", base.hover), insets: flag("insets", base.insets),
    fit: flag("fit", true),
  };
}

function writeConditions(c) {
  const q = new URLSearchParams(location.search);
  for (const [key, value] of Object.entries(c)) q.set(key, typeof value === "boolean" ? (value ? "1" : "0") : String(value));
  history.replaceState(null, "", `${location.pathname}?${q}`);
}

function fillForm(c) {
  for (const [key, value] of Object.entries(c)) {
    const input = form.elements[key];
    if (!input) continue;
    if (input.type === "checkbox") input.checked = value; else input.value = value;
  }
}

function formConditions() {
  const e = form.elements;
  return {
    theme: e.theme.value, locale: e.locale.value.trim() || "en-US", tz: e.tz.value.trim() || "UTC", mode: e.mode.value,
    device: e.device.value, w: Math.round(Number(e.w.value) || 0), h: Math.round(Number(e.h.value) || 0),
    touch: e.touch.checked, hover: e.hover.checked, insets: e.insets.checked, fit: e.fit.checked,
  };
}

function validTimeZone(tz) {
  try { new Intl.DateTimeFormat("en", { timeZone: tz }); return true; } catch { return false; }
}

function validLocale(locale) {
  try { return Intl.getCanonicalLocales(locale).length === 1; } catch { return false; }
}

function dimensionsFor(c, mode = c.mode) {
  if (mode === "fullscreen") return { width: c.w, height: c.h };
  if (mode === "pip") return { ...PIP };
  return { width: c.w, maxHeight: c.h };
}

function hostContextOf(c) {
  return {
    theme: c.theme,
    locale: c.locale,
    timeZone: c.tz,
    platform: c.device === "phone" || c.device === "tablet" ? "mobile" : "web",
    deviceCapabilities: { touch: c.touch, hover: c.hover },
    safeAreaInsets: c.insets ? { ...PHONE_INSETS } : { ...NO_INSETS },
    styles: { variables: { ...COMMON_VARIABLES, ...PALETTES[c.theme] } },
  };
}

/** How much the device is scaled down to fit the stage's width (1: not at all). The view still
 *  lays out at the device's size; only its picture is smaller. */
function fitScale(c) {
  const room = stage.clientWidth;
  return c.fit && room > 0 ? Math.min(1, room / (c.w + 2 * FRAME)) : 1;
}

function styleDevice(c) {
  deviceBox.style.width = `${c.w}px`;
  deviceBox.style.height = `${c.h}px`;
  deviceBox.dataset.theme = c.theme;
  deviceBox.classList.toggle("insets", c.insets);
  const scale = fitScale(c);
  const scaled = scale < 1;
  // The transform also keeps the device the containing block of a fullscreen or pip view.
  deviceBox.style.transform = scaled ? `scale(${scale})` : "";
  screenBox.classList.toggle("scaled", scaled);
  screenBox.style.width = scaled ? `${(c.w + 2 * FRAME) * scale}px` : "";
  screenBox.style.height = scaled ? `${(c.h + 2 * FRAME) * scale}px` : "";
  document.getElementById("wb-dimensions").textContent =
    `${c.device} · ${c.w}×${c.h} px${scaled ? ` (scaled to ${Math.round(scale * 100)}% to fit)` : ""} · ${c.mode} · ${c.theme} · ${c.locale} · ${c.tz}${c.touch ? " · touch" : ""}${c.hover ? " · hover" : ""}${c.insets ? " · safe-area insets" : ""}`;
  checks.backdrop(getComputedStyle(deviceBox).backgroundColor);
}

// --- the view ------------------------------------------------------------------------------

const viewConsole = new ViewConsole({
  table: document.getElementById("console"), count: document.getElementById("console-count"),
  filter: document.getElementById("console-filter"), direction: document.getElementById("console-dir"),
  sandbox: document.getElementById("console-sandbox"), exportButton: document.getElementById("console-export"),
  clearButton: document.getElementById("console-clear"), filename: call ? `view-console-${call.tool}-${call.id.slice(0, 8)}.json` : "view-console-preview.json",
});
const checks = new ViewChecks(document.getElementById("checks"));
if (call) checks.call(call, data.tool); else checks.preview(data.tool);
checks.render();

let conditions = readConditions();
let handle = null;
let view = null;
let input = call ? call.arguments || {} : {};
let result;  // the stored full result (fetched once), or the preview's
const base = call ? `/api/tool-calls/${call.id}/widget` : `/api/servers/${data.serverId}/preview`;

function showError(text) { errorBox.hidden = !text; errorBox.textContent = text || ""; }

async function loadView() {
  try {
    view = await apiFetch(call ? `/api/tool-calls/${call.id}/view/` : `${base}/view/?uri=${encodeURIComponent(preview.uri)}`);
  } catch (err) {
    checks.view(data.tool, null, err.message, preview?.uri);
    showError(`Could not load the view: ${err.message}`);
    return false;
  }
  checks.view(data.tool, view, null, preview?.uri);
  if (call?.has_result) {
    try { result = await fetchFullResult(call.id); }
    catch (err) { showError(`Could not load the stored result: ${err.message}`); }
  }
  if (preview && !readPreviewData()) return false;
  return true;
}

function mount() {
  const slot = document.getElementById("wb-view");
  slot.replaceChildren();
  const holder = document.createElement("div");
  slot.append(holder);
  const started = performance.now();
  viewConsole.start = started;  // the console's times count from the frame's creation
  checks.mounted();
  const initTimer = setTimeout(() => checks.initTimeout(), INIT_LIMIT_MS);
  const c = conditions;
  handle = mountWidget(holder, {
    sandboxUrl: data.sandboxUrl,
    sandboxOrigin: data.sandboxOrigin,
    html: view.html,
    csp: view.csp,
    permissions: view.permissions,
    prefersBorder: view.prefersBorder,
    toolDefinition: view.tool,
    toolCallId: call?.id,
    toolInput: input,
    toolResult: result,
    openai: view.openai,
    widgetState: view.widget_state,
    hostContext: {
      ...hostContextOf(c),
      displayMode: "inline",
      availableDisplayModes: [...MODES],
      containerDimensions: dimensionsFor(c, "inline"),
    },
    // Fullscreen fills the simulated device's screen, not the browser window.
    fullscreenDimensions: () => dimensionsFor(conditions, "fullscreen"),
    probes: ["contrast"],
    onTrace: (dir, message) => viewConsole.record(dir, message),
    onInitialized: ({ appCapabilities }) => {
      clearTimeout(initTimer);
      checks.initialized(performance.now() - started);
      const declared = appCapabilities?.availableDisplayModes;
      for (const option of form.elements.mode.options) option.disabled = !!declared && !declared.includes(option.value);
      if (declared && !declared.includes(c.mode)) {
        viewConsole.note(`display mode ${c.mode} not applied: the view declares only ${declared.join(", ")}`);
        conditions = { ...conditions, mode: "inline" };
        form.elements.mode.value = "inline";
        writeConditions(conditions); styleDevice(conditions);
      } else if (c.mode !== "inline") applyMode(c.mode);
      if (appCapabilities?.tools) listViewTools();
    },
    onSizeChanged: (size) => checks.size(size, handle?.getHostContext().containerDimensions || dimensionsFor(conditions)),
    onCallTool: async (name, args) => {
      try {
        return await apiFetch(`${base}/tools-call/`, { method: "POST", body: { name, arguments: args || {} } });
      } catch (err) {
        if (err.status === 403 && /not visible to apps/.test(err.message)) checks.refusedCall(name, err.message);
        throw err;
      }
    },
    onReadResource: (uri) => apiFetch(`${base}/resources-read/`, { method: "POST", body: { uri } }),
    onMessage: async (params) => {
      const text = (params?.content || []).map((b) => (b?.type === "text" ? b.text : `[${b?.type}]`)).join(" ");
      const shown = text.length > NOTE_CHARS ? `${text.slice(0, NOTE_CHARS)}…` : text;
      viewConsole.note(`ui/message from the view (${params?.role || "user"}): “${shown}”. In a chat it is sent as the user's message; nothing is sent here.`);
      return {};
    },
    onUpdateModelContext: async (params) => {
      document.getElementById("model-context-card").hidden = false;
      document.getElementById("model-context").textContent = pretty(params || {});
      return {};
    },
    onOpenLink: () => true,
    onDownloadFile: (files) => { viewConsole.note(`ui/download-file: ${files.map((f) => f.name).join(", ")} saved`); return true; },
    onRequestDisplayMode: async (mode) => {
      // Granted when the view declared it (widget-host checks that); the device frame sizes it.
      setTimeout(() => { form.elements.mode.value = mode; conditions = { ...conditions, mode }; afterModeChange(); }, 0);
      return mode;
    },
    onLog: (params) => {
      if (params?.logger === "sandbox.csp") checks.violation(params.data);
      else if (params?.logger === "sandbox.contrast") checks.contrast(params.data);
    },
    onError: (err) => showError(`View error: ${err.message || err}`),
  });
  if (call && !call.has_result && ["failed", "timed_out", "cancelled"].includes(call.status)) {
    handle.sendToolCancelled(call.error || call.status);
  }
  setTimeout(() => handle && checks.noSize(), INIT_LIMIT_MS + 3000);
}

// The view asked for a mode and widget-host granted it (sized by fullscreenDimensions): the
// form and the address follow. A no-op for the view: it was already told this size.
function afterModeChange() {
  writeConditions(conditions);
  styleDevice(conditions);
  handle?.setHostContext({ containerDimensions: dimensionsFor(conditions) });
}

// The author switched the mode: one host-context-changed with the mode and the device's size.
function applyMode(mode) {
  handle?.setHostContext({ displayMode: mode, containerDimensions: dimensionsFor(conditions, mode) });
  writeConditions(conditions);
  styleDevice(conditions);
}

async function listViewTools() {
  const box = document.getElementById("view-tools");
  document.getElementById("view-tools-card").hidden = false;
  let listed;
  try { listed = await handle.bridge.listTools({}); }
  catch (err) { box.textContent = `tools/list to the view failed: ${err.message}`; return; }
  const tools = listed?.tools || [];
  if (!tools.length) { box.textContent = "The view declares the tools capability but lists no tools."; return; }
  box.replaceChildren(...tools.map((tool) => {
    const wrap = document.createElement("details");
    wrap.className = "view-tool";
    const summary = document.createElement("summary");
    summary.textContent = tool.name + (tool.description ? ` — ${tool.description}` : "");
    const formBox = document.createElement("div");
    const toolForm = renderSchemaForm(formBox, tool.inputSchema || {});
    const run = document.createElement("button"); run.type = "button"; run.textContent = `Call ${tool.name}`;
    const out = document.createElement("pre");
    run.addEventListener("click", async () => {
      out.textContent = "calling…";
      try { out.textContent = pretty(await handle.bridge.callTool({ name: tool.name, arguments: toolForm.getValue() })); }
      catch (err) { out.textContent = `Error: ${err.message || err}`; }
    });
    wrap.append(summary, formBox, run, out);
    return wrap;
  }));
}

async function reload(reason) {
  if (handle) {
    const old = handle; handle = null;
    await old.teardown(reason);
  }
  viewConsole.note(`view ${reason}`);
  mount();
}

// --- the preview's data ----------------------------------------------------------------------

/** The preview's tool input and result from its two editors; false (and says why) when not JSON. */
function readPreviewData() {
  const error = document.getElementById("preview-error");
  error.textContent = "";
  try {
    const parsedInput = JSON.parse(document.getElementById("preview-input").value || "{}");
    if (!parsedInput || typeof parsedInput !== "object" || Array.isArray(parsedInput)) throw new Error("toolInput must be a JSON object");
    const text = document.getElementById("preview-result").value.trim();
    const parsedResult = text ? JSON.parse(text) : undefined;
    if (parsedResult !== undefined && (typeof parsedResult !== "object" || !Array.isArray(parsedResult.content))) {
      throw new Error("toolResult must be a CallToolResult: an object with a content array");
    }
    input = parsedInput; result = parsedResult;
    return true;
  } catch (err) {
    error.textContent = err.message;
    return false;
  }
}

if (preview) {
  document.getElementById("preview-from").addEventListener("change", async (event) => {
    const chosen = preview.calls.find((c) => c.id === event.target.value);
    if (!chosen) return;
    document.getElementById("preview-input").value = pretty(chosen.arguments || {});
    try { document.getElementById("preview-result").value = pretty(JSON.parse(await fetchFullResultText(chosen.id))); }
    catch (err) { document.getElementById("preview-error").textContent = `Could not load that call's result: ${err.message}`; }
  });
  document.getElementById("preview-send").addEventListener("click", () => {
    if (!readPreviewData()) return;
    (view ? reload("reloaded with new data") : loadView().then((ok) => ok && mount())).catch((err) => showError(err.message));
  });
}

// --- the toolbar ---------------------------------------------------------------------------

form.addEventListener("change", (event) => {
  const previous = conditions;
  const next = formConditions();
  if (event.target.name === "device" && DEVICES[next.device]) Object.assign(next, DEVICES[next.device]);
  else if (["w", "h"].includes(event.target.name)) next.device = "custom";
  next.w = Math.min(Math.max(next.w || previous.w, 120), 4000);
  next.h = Math.min(Math.max(next.h || previous.h, 120), 4000);
  if (!validLocale(next.locale)) { showError(`“${next.locale}” is not a BCP 47 locale; kept ${previous.locale}.`); next.locale = previous.locale; }
  else if (!validTimeZone(next.tz)) { showError(`“${next.tz}” is not an IANA time zone; kept ${previous.tz}.`); next.tz = previous.tz; }
  else showError("");
  conditions = next;
  fillForm(conditions);
  writeConditions(conditions);
  styleDevice(conditions);
  if (!handle) return;
  if (next.mode !== previous.mode) applyMode(next.mode);
  const changed = Object.keys(next).filter((k) => !PAGE_ONLY.includes(k) && next[k] !== previous[k]);
  if (changed.length) {
    viewConsole.note(`host conditions changed: ${changed.join(", ")}`);
    handle.setHostContext({ ...hostContextOf(conditions), containerDimensions: dimensionsFor(conditions) });
  }
});
form.addEventListener("submit", (event) => event.preventDefault());
document.getElementById("reload-view").addEventListener("click", () => view && reload("reloaded").catch((err) => showError(err.message)));
document.getElementById("copy-link").addEventListener("click", async (event) => {
  try { await navigator.clipboard.writeText(location.href); event.target.textContent = "Copied"; }
  catch { event.target.textContent = "Copy the address bar"; }
  setTimeout(() => { event.target.textContent = "Copy link"; }, 1500);
});

fillForm(conditions);
writeConditions(conditions);
styleDevice(conditions);
// A narrower or wider window refits the device.
let stageWidth = stage.clientWidth;
new ResizeObserver(() => {
  if (stage.clientWidth === stageWidth) return;
  stageWidth = stage.clientWidth;
  styleDevice(conditions);
}).observe(stage);
try { if (await loadView()) mount(); } catch (err) { showError(`Could not show the view: ${err.message}`); }
