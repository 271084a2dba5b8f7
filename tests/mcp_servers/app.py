"""An MCP Apps test server (extension ``io.modelcontextprotocol/ui``, spec 2026-01-26).

Run: ``python tests/mcp_servers/app.py [--transport stdio|http|sse] [--port N] [--legacy]``

Tools:

The marker view registers one tool of its own, ``marker_echo(text)`` (``tools/list`` and
``tools/call`` from the host, answered ``VIEW-TOOL-<text>``).

* ``show_marker(label)`` - visibility ["model", "app"], bound to
  ``ui://app/marker.html``. Its result carries three *distinct* markers so tests
  can see exactly which part reached the model and which the widget:
  content text ``CONTENT-MARKER-<label>``, ``structuredContent.secret``
  ``STRUCTURED-MARKER-<label>`` and result ``_meta.note`` ``META-MARKER-<label>``.
* ``app_only_increment(n)`` - visibility ["app"]: callable from the widget,
  hidden from the model; returns n + 1.
* ``model_only()`` - visibility ["model"]: a widget's tools/call must be refused.
* ``big_view(size_mb)`` - an App tool (same view) whose ``structuredContent.data`` is a string
  of ``size_mb`` MiB (``big_data``: deterministic, ending in ``END<length>``) with a short
  content text ``BIG-VIEW-<length>``: the view must get all of it, pushed or (above
  WS_INLINE_RESULT_MAX_BYTES) over HTTP.
* ``csp_probe()`` - an App tool whose own view (``ui://app/csp-probe.html``, CSP declaring only
  example.com) fetches an undeclared address and reports a 5000 px width.
* ``big_text(size_mb)`` - not an App tool: a text content block of ``size_mb`` MiB (``big_data``).

The view is a self-contained page speaking the MCP Apps postMessage JSON-RPC by
hand (no library); element ids are part of the test contract:
``#status #tool-input #tool-input-partial (count and last arguments) #content #secret #meta #call #call-result #context
#context-result #message #message-result #hidden #hidden-result #cookie
#parent-dom #host-context #view-calls #download #download-result``, and for a ``structuredContent.data`` string ``#data-length``
``#data-sum`` (the sum of its character codes) ``#data-tail`` (its last 16 characters); ``#meta`` shows the
result's ``_meta.note``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import serve  # noqa: E402
from mcp_types import CallToolResult, TextContent  # noqa: E402

from mcp.server.apps import Apps, ResourceCsp  # noqa: E402
from mcp.server.mcpserver import MCPServer  # noqa: E402

VIEW_URI = "ui://app/marker.html"

VIEW_HTML = r"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Marker App</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 12px; }
  dt { font-weight: 600; margin-top: 6px; }
  dd { margin: 0 0 0 12px; font-family: ui-monospace, monospace; word-break: break-all; }
  button { margin: 6px 6px 0 0; }
</style>
</head>
<body>
<h1>Marker app</h1>
<dl>
  <dt>Status</dt><dd id="status">starting</dd>
  <dt>Tool input</dt><dd id="tool-input"></dd>
  <dt>Partial input</dt><dd id="tool-input-partial"></dd>
  <dt>Content</dt><dd id="content"></dd>
  <dt>Secret (structuredContent.secret)</dt><dd id="secret"></dd>
  <dt>Note (result _meta.note)</dt><dd id="meta"></dd>
  <dt>document.cookie</dt><dd id="cookie"></dd>
  <dt>window.parent.document.title</dt><dd id="parent-dom"></dd>
  <dt>Host context</dt><dd id="host-context"></dd>
  <dt>Calls of its own tool (count, last text)</dt><dd id="view-calls"></dd>
  <dt>Data (length, sum of character codes, tail)</dt><dd><span id="data-length"></span> <span id="data-sum"></span> <span id="data-tail"></span></dd>
</dl>
<div><button id="call" type="button">Call app_only_increment</button> <span id="call-result"></span></div>
<div><button id="context" type="button">Update model context</button> <span id="context-result"></span></div>
<div><button id="message" type="button">Send message</button> <span id="message-result"></span></div>
<div><button id="hidden" type="button">Call model_only</button> <span id="hidden-result"></span></div>
<div><button id="download" type="button">Download a file</button> <span id="download-result"></span></div>
<script>
(function () {
  "use strict";
  var nextId = 1;
  var pending = {};
  var partials = 0;
  var counter = 0;
  var viewCalls = 0;

  function $(id) { return document.getElementById(id); }
  function post(message) { window.parent.postMessage(message, "*"); }
  function notify(method, params) { post({ jsonrpc: "2.0", method: method, params: params || {} }); }
  function request(method, params) {
    var id = nextId++;
    return new Promise(function (resolve, reject) {
      pending[id] = { resolve: resolve, reject: reject };
      post({ jsonrpc: "2.0", id: id, method: method, params: params || {} });
    });
  }
  function textOf(result) {
    var blocks = (result && result.content) || [];
    return blocks.filter(function (b) { return b && b.type === "text"; })
                 .map(function (b) { return b.text; }).join("\n");
  }
  function describeError(error) {
    if (!error) { return "unknown error"; }
    if (typeof error === "string") { return error; }
    var text = (error.code !== undefined ? error.code + " " : "") + (error.message || JSON.stringify(error));
    return text;
  }

  function renderResult(result) {
    result = result || {};
    $("content").textContent = textOf(result);
    var structured = result.structuredContent || {};
    $("secret").textContent = structured.secret === undefined ? "" : String(structured.secret);
    $("meta").textContent = String(((result._meta || {}).note) || "");
    if (typeof structured.data === "string") {
      var data = structured.data, sum = 0;
      for (var i = 0; i < data.length; i++) { sum += data.charCodeAt(i); }
      $("data-length").textContent = String(data.length);
      $("data-sum").textContent = String(sum);
      $("data-tail").textContent = data.slice(-16);
    }
  }

  window.addEventListener("message", function (event) {
    if (event.source !== window.parent) { return; }
    var msg = event.data;
    if (!msg || typeof msg !== "object" || msg.jsonrpc !== "2.0") { return; }
    var isResponse = msg.method === undefined && msg.id !== undefined && msg.id !== null;
    if (isResponse) {
      var waiter = pending[msg.id];
      if (!waiter) { return; }
      delete pending[msg.id];
      if (msg.error !== undefined) { waiter.reject(msg.error); } else { waiter.resolve(msg.result); }
      return;
    }
    switch (msg.method) {
      case "ui/notifications/tool-input":
        $("tool-input").textContent = JSON.stringify((msg.params && msg.params.arguments) || {});
        break;
      case "ui/notifications/tool-input-partial":
        partials += 1;
        $("tool-input-partial").textContent = partials + " " + JSON.stringify((msg.params && msg.params.arguments) || {});
        break;
      case "ui/notifications/tool-result":
        renderResult(msg.params);
        break;
      case "ui/notifications/tool-cancelled":
        $("status").textContent = "cancelled: " + ((msg.params && msg.params.reason) || "");
        break;
      case "ui/notifications/host-context-changed":
        $("host-context").textContent = JSON.stringify(msg.params || {});
        break;
      case "ui/resource-teardown":
      case "ping":
        if (msg.id !== undefined && msg.id !== null) { post({ jsonrpc: "2.0", id: msg.id, result: {} }); }
        break;
      // Its own tool, which the host may list and call (the view's `tools` capability).
      case "tools/list":
        post({ jsonrpc: "2.0", id: msg.id, result: { tools: [{
          name: "marker_echo", description: "Echo a text from inside the marker view",
          inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] } }] } });
        break;
      case "tools/call":
        var args = (msg.params && msg.params.arguments) || {};
        if (msg.params && msg.params.name === "marker_echo") {
          viewCalls += 1;
          $("view-calls").textContent = viewCalls + " " + String(args.text);
          post({ jsonrpc: "2.0", id: msg.id, result: { content: [{ type: "text", text: "VIEW-TOOL-" + String(args.text) }],
                                                       structuredContent: { echo: String(args.text), calls: viewCalls } } });
        } else {
          post({ jsonrpc: "2.0", id: msg.id, error: { code: -32602, message: "Unknown tool " + (msg.params && msg.params.name) } });
        }
        break;
      default:
        if (msg.id !== undefined && msg.id !== null) {
          post({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: "Method not found" } });
        }
    }
  });

  // Sandbox probes: what can this view reach outside its iframe?
  try { $("cookie").textContent = String(document.cookie); }
  catch (e) { $("cookie").textContent = "blocked: " + e.name + ": " + e.message; }
  try { $("parent-dom").textContent = "READ: " + String(window.parent.document.title); }
  catch (e) { $("parent-dom").textContent = "blocked: " + e.name + ": " + e.message; }

  function reportSize() {
    var el = document.documentElement;
    notify("ui/notifications/size-changed", { width: el.scrollWidth, height: el.scrollHeight });
  }

  $("call").addEventListener("click", function () {
    $("call-result").textContent = "calling";
    request("tools/call", { name: "app_only_increment", arguments: { n: counter } }).then(function (result) {
      if (result && result.isError) { $("call-result").textContent = "ERROR: " + textOf(result); return; }
      counter = (result && result.structuredContent && result.structuredContent.value) || counter + 1;
      $("call-result").textContent = textOf(result) || JSON.stringify(result);
    }, function (error) { $("call-result").textContent = "ERROR: " + describeError(error); });
  });

  $("context").addEventListener("click", function () {
    request("ui/update-model-context", {
      content: [{ type: "text", text: "WIDGET-CONTEXT-MARKER" }]
    }).then(function () { $("context-result").textContent = "ok"; },
            function (error) { $("context-result").textContent = "ERROR: " + describeError(error); });
  });

  $("message").addEventListener("click", function () {
    request("ui/message", {
      role: "user",
      content: [{ type: "text", text: "WIDGET-MESSAGE-MARKER" }]
    }).then(function (result) {
      $("message-result").textContent = result && result.isError ? "ERROR: rejected" : "ok";
    }, function (error) { $("message-result").textContent = "ERROR: " + describeError(error); });
  });

  $("download").addEventListener("click", function () {
    request("ui/download-file", { contents: [{ type: "resource", resource: {
      uri: "file:///report.txt", mimeType: "text/plain", text: "DOWNLOAD-MARKER" } }] }).then(function (result) {
      $("download-result").textContent = result && result.isError ? "ERROR: refused" : "ok";
    }, function (error) { $("download-result").textContent = "ERROR: " + describeError(error); });
  });

  $("hidden").addEventListener("click", function () {
    request("tools/call", { name: "model_only", arguments: {} }).then(function (result) {
      if (result && result.isError) { $("hidden-result").textContent = "ERROR: " + textOf(result); }
      else { $("hidden-result").textContent = "UNEXPECTED: " + (textOf(result) || JSON.stringify(result)); }
    }, function (error) { $("hidden-result").textContent = "ERROR: " + describeError(error); });
  });

  request("ui/initialize", {
    appInfo: { name: "marker-app", version: "1.0.0" },
    appCapabilities: { availableDisplayModes: ["inline"], tools: {} },
    protocolVersion: "2026-01-26"
  }).then(function (result) {
    $("status").textContent = "initialized";
    $("host-context").textContent = JSON.stringify((result && result.hostContext) || {});
    notify("ui/notifications/initialized", {});
    reportSize();
    if (window.ResizeObserver) { new ResizeObserver(reportSize).observe(document.body); }
  }, function (error) {
    $("status").textContent = "initialize failed: " + describeError(error);
  });
})();
</script>
</body>
</html>
"""

apps = Apps()


@apps.tool(resource_uri=VIEW_URI, visibility=["model", "app"], description="Show a marker in the app view")
def show_marker(label: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=f"CONTENT-MARKER-{label}")],
        structured_content={"secret": f"STRUCTURED-MARKER-{label}", "label": label},
        meta={"note": f"META-MARKER-{label}"},
    )


@apps.tool(resource_uri=VIEW_URI, visibility=["app"], description="Increment a counter (widget only)")
def app_only_increment(n: int) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=str(n + 1))], structured_content={"value": n + 1})


@apps.tool(
    resource_uri=VIEW_URI, visibility=["model"], description="Only the model may call this", structured_output=False
)
def model_only() -> str:
    return "MODEL-ONLY-RAN"


def big_data(size_mb: float) -> str:
    """`size_mb` MiB of ASCII text, the same for the same size, ending in `END<length>`."""
    import random

    size = max(int(size_mb * 1024 * 1024), 32)
    block = "".join(random.Random(size).choices("abcdefghijklmnopqrstuvwxyz0123456789", k=4096))
    tail = f"END{size:013d}"
    return (block * (size // len(block) + 1))[: size - len(tail)] + tail


@apps.tool(resource_uri=VIEW_URI, visibility=["model", "app"], description="Show a big structured result in the app view")
def big_view(size_mb: float) -> CallToolResult:
    data = big_data(size_mb)
    return CallToolResult(
        content=[TextContent(type="text", text=f"BIG-VIEW-{len(data)}")],
        structured_content={"data": data, "length": len(data)},
    )


apps.add_html_resource(
    VIEW_URI,
    VIEW_HTML,
    name="marker-view",
    description="Marker app view",
    prefers_border=True,
)

# A view that reaches outside its declared CSP (connectDomains lists only example.com): the
# workbench's CSP check must name the blocked address. It also reports an oversized width.
PROBE_URI = "ui://app/csp-probe.html"
PROBE_HTML = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>CSP probe</title></head>
<body><p id="probe">probing</p>
<script>
(function () {
  var id = 1;
  function post(m) { window.parent.postMessage(m, "*"); }
  window.addEventListener("message", function (event) {
    var msg = event.data;
    if (!msg || msg.jsonrpc !== "2.0") { return; }
    if (msg.id === 1 && msg.result) {
      post({ jsonrpc: "2.0", method: "ui/notifications/initialized", params: {} });
      post({ jsonrpc: "2.0", method: "ui/notifications/size-changed", params: { width: 5000, height: 120 } });
      fetch("http://blocked.invalid:9/probe").catch(function () { document.getElementById("probe").textContent = "fetch refused"; });
    }
  });
  post({ jsonrpc: "2.0", id: id, method: "ui/initialize", params: {
    protocolVersion: "2026-01-26", appInfo: { name: "csp-probe", version: "1" }, appCapabilities: {} } });
})();
</script></body></html>
"""


@apps.tool(resource_uri=PROBE_URI, visibility=["model", "app"], description="A view that breaks its own CSP")
def csp_probe() -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text="PROBE")], structured_content={"probe": True})


apps.add_html_resource(PROBE_URI, PROBE_HTML, name="csp-probe", csp=ResourceCsp(connect_domains=["https://example.com"]))

mcp: MCPServer[Any] = MCPServer("app-test-server", version="1.0.0", extensions=[apps])


@mcp.tool(description="A big plain text result (not an App tool)", structured_output=False)
def big_text(size_mb: float) -> str:
    return big_data(size_mb)


if __name__ == "__main__":
    serve(mcp)
