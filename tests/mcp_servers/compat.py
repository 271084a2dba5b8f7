"""Test server for the other view flavours a host meets in the wild.

* ``openai_widget(label)`` - an OpenAI Apps SDK tool (``_meta["openai/outputTemplate"]``)
  whose view is ``text/html+skybridge`` and uses ``window.openai``; content, structuredContent
  and ``_meta`` carry distinct OPENAI-*-<label> markers.
* ``mcpui_view(label)`` - an MCP-UI result: a ``ui://`` embedded HTML resource inside
  ``content`` (MCPUI-MARKER-<label> only in the HTML).

Run: ``python tests/mcp_servers/compat.py [--transport stdio|http|sse] [--port N]``
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import serve  # noqa: E402
from mcp_types import CallToolResult, EmbeddedResource, TextContent, TextResourceContents  # noqa: E402

from mcp.server.mcpserver import MCPServer  # noqa: E402

OPENAI_URI = "ui://openai/widget.html"

OPENAI_HTML = r"""<!doctype html>
<html><head><meta charset="utf-8"><title>Apps SDK widget</title></head>
<body>
<h1>Apps SDK widget</h1>
<p>Output: <span id="output"></span></p>
<p>Meta: <span id="meta"></span></p>
<p>State: <span id="state"></span></p>
<button id="save" type="button">Save state</button>
<button id="call" type="button">Call tool</button> <span id="call-result"></span>
<script>
  function render() {
    var o = window.openai || {};
    document.getElementById("output").textContent = (o.toolOutput && o.toolOutput.secret) || "";
    document.getElementById("meta").textContent = (o.toolResponseMetadata && o.toolResponseMetadata.note) || "";
    document.getElementById("state").textContent = JSON.stringify(o.widgetState);
  }
  render();
  window.addEventListener("openai:set_globals", render);
  document.getElementById("save").onclick = function () {
    var state = window.openai.widgetState || {};
    Promise.resolve(window.openai.setWidgetState({ count: (state.count || 0) + 1 })).then(render);
  };
  document.getElementById("call").onclick = function () {
    window.openai.callTool("openai_widget", { label: "again" }).then(function (r) {
      document.getElementById("call-result").textContent = JSON.stringify(r.structuredContent || r);
    }, function (e) { document.getElementById("call-result").textContent = "ERROR " + (e && e.message || e); });
  };
</script>
</body></html>
"""

mcp: MCPServer[Any] = MCPServer("compat-test-server", version="1.0.0")


@mcp.tool(meta={"openai/outputTemplate": OPENAI_URI}, description="An OpenAI Apps SDK widget tool")
def openai_widget(label: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=f"OPENAI-CONTENT-{label}")],
        structured_content={"secret": f"OPENAI-STRUCTURED-{label}"},
        meta={"note": f"OPENAI-META-{label}"},
    )


@mcp.resource(OPENAI_URI, name="openai-widget", mime_type="text/html+skybridge")
def openai_widget_html() -> str:
    return OPENAI_HTML


@mcp.tool(description="Return an MCP-UI inline view", structured_output=False)
def mcpui_view(label: str) -> CallToolResult:
    html = f'<!doctype html><html><body><p id="mcpui">MCPUI-MARKER-{label}</p></body></html>'
    return CallToolResult(
        content=[
            TextContent(type="text", text=f"MCPUI-TEXT-{label}"),
            EmbeddedResource(type="resource", resource=TextResourceContents(uri=f"ui://mcpui/{label}", mime_type="text/html", text=html)),
        ]
    )


if __name__ == "__main__":
    serve(mcp)
