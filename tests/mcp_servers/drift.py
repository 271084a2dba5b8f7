"""A test MCP server whose answers can change between a recording and its replay.

Run: ``DRIFT_STATE=/path/state.json DRIFT_CALL_LOG=/path/calls.log python tests/mcp_servers/drift.py
[--transport stdio|http|sse] [--port N]``

- ``DRIFT_STATE`` names a JSON file the test writes, e.g. ``{"price": 12}``; the server reads it
  on every call, so a test can change one ``structuredContent`` field between recording a
  conversation and replaying it, without restarting the server.
- ``DRIFT_CALL_LOG`` names a file the server appends one line to for every ``tools/call`` it
  receives (``<tool> <arguments JSON>``): the server's own record, to prove that something
  (the replay player) made no tool call.

Tools:

* ``quote(item)`` - content text ``Quote for <item>`` (never changes), structuredContent
  ``{"item", "price" (from the state file), "generated_at" (now), "request_id" (random)}``:
  the last two differ on every call (volatile paths).
* ``show_quote(item)`` - the same result, as an MCP App tool bound to ``ui://drift/quote.html``,
  whose view shows ``#price`` and ``#item`` from the full result it receives (ids are part of
  the test contract), and ``#status``.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import serve  # noqa: E402
from mcp_types import CallToolResult, TextContent  # noqa: E402

from mcp.server.apps import Apps  # noqa: E402
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext  # noqa: E402
from mcp.server.mcpserver import MCPServer  # noqa: E402

VIEW_URI = "ui://drift/quote.html"

VIEW_HTML = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Quote</title>
<style>body { font: 14px/1.4 system-ui, sans-serif; margin: 12px; } b { font-size: 20px; }</style></head>
<body>
<p>Status: <span id="status">starting</span></p>
<p>Item: <span id="item"></span> · Price: <b id="price"></b></p>
<p>Tools/call from the view: <span id="call-result">not tried</span></p>
<p><button id="again" type="button">Ask for a new quote</button> <span id="again-result"></span></p>
<p><label>Note <input id="note"></label></p>
<script>
(function () {
  "use strict";
  var nextId = 1, pending = {};
  function $(id) { return document.getElementById(id); }
  function post(m) { window.parent.postMessage(m, "*"); }
  function request(method, params) {
    var id = nextId++;
    return new Promise(function (resolve, reject) { pending[id] = { resolve: resolve, reject: reject };
      post({ jsonrpc: "2.0", id: id, method: method, params: params || {} }); });
  }
  window.addEventListener("message", function (event) {
    if (event.source !== window.parent) { return; }
    var msg = event.data;
    if (!msg || msg.jsonrpc !== "2.0") { return; }
    if (msg.id !== undefined && pending[msg.id] && !msg.method) {
      var p = pending[msg.id]; delete pending[msg.id];
      if (msg.error) { p.reject(msg.error); } else { p.resolve(msg.result); }
      return;
    }
    if (msg.method === "ui/notifications/tool-result") {
      var s = (msg.params && msg.params.structuredContent) || {};
      $("item").textContent = String(s.item);
      $("price").textContent = String(s.price);
      $("status").textContent = "result";
      // A replayed view must not be able to call tools: try once, show what the host said.
      request("tools/call", { name: "quote", arguments: { item: "from-view" } }).then(function () {
        $("call-result").textContent = "CALLED";
      }, function (error) { $("call-result").textContent = "REFUSED " + (error && error.code); });
    }
  });
  // A view's button that calls a tool (what a user presses in the replay player): shows the host's error message.
  var presses = 0;
  $("again").addEventListener("click", function () {
    presses += 1;
    request("tools/call", { name: "quote", arguments: { item: "again" } }).then(function () {
      $("again-result").textContent = presses + ": CALLED";
    }, function (error) { $("again-result").textContent = presses + ": ERROR " + (error && error.code) + " " + (error && error.message); });
  });
  request("ui/initialize", { appInfo: { name: "drift-quote", version: "1.0.0" },
    appCapabilities: { availableDisplayModes: ["inline"] }, protocolVersion: "2026-01-26" }).then(function () {
    $("status").textContent = "initialized";
    post({ jsonrpc: "2.0", method: "ui/notifications/initialized", params: {} });
    var el = document.documentElement;
    post({ jsonrpc: "2.0", method: "ui/notifications/size-changed", params: { width: el.scrollWidth, height: el.scrollHeight } });
  });
})();
</script>
</body></html>
"""


def _state() -> dict[str, Any]:
    path = os.environ.get("DRIFT_STATE")
    if not path or not os.path.exists(path):
        return {"price": 10}
    with open(path) as f:
        return json.load(f)


async def log_calls(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Write down every tools/call, before it runs: the server's own evidence."""
    if ctx.method == "tools/call" and os.environ.get("DRIFT_CALL_LOG"):
        params = ctx.params or {}
        with open(os.environ["DRIFT_CALL_LOG"], "a") as f:
            f.write(f"{params.get('name')} {json.dumps(params.get('arguments') or {}, sort_keys=True)}\n")
    return await call_next(ctx)


def _quote(item: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=f"Quote for {item}")],
        structured_content={
            "item": item, "price": _state().get("price"),
            "generated_at": datetime.now(timezone.utc).isoformat(), "request_id": uuid.uuid4().hex,
        },
    )


apps = Apps()


@apps.tool(resource_uri=VIEW_URI, visibility=["model", "app"], description="Show a price quote in an app view")
def show_quote(item: str) -> CallToolResult:
    return _quote(item)


apps.add_html_resource(VIEW_URI, VIEW_HTML, name="quote-view", description="The quote view")

mcp: MCPServer[Any] = MCPServer("drift-test-server", version="1.0.0", extensions=[apps], middleware=[log_calls])


@mcp.tool(description="A price quote; its structuredContent.price comes from the DRIFT_STATE file")
def quote(item: str) -> CallToolResult:
    return _quote(item)


if __name__ == "__main__":
    serve(mcp)
