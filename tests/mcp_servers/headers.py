"""An MCP server that lists tools with invalid `x-mcp-header` annotations (2026-07-28, SEP-2243),
for the inspector's set-aside tests (issue 26.4).

Run: ``python tests/mcp_servers/headers.py [--transport stdio|http|sse] [--port N] [--legacy]``

The SDK refuses to declare such tools, so a middleware adds them to ``tools/list`` (beside
``valid_header``, whose annotation is fine) and answers their ``tools/call`` itself, noting each
name it is called with (and the `Mcp-Param-Region` header that came with it); ``called()`` says
which (so a test proves a set-aside tool never reached the server, and the valid one got its header).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import serve  # noqa: E402
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext  # noqa: E402
from mcp.server.mcpserver import MCPServer  # noqa: E402


def _tool(name: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "description": f"{name} (added by the middleware)",
            "inputSchema": {"type": "object", "properties": properties}}


LISTED = [
    _tool("valid_header", {"region": {"type": "string", "x-mcp-header": "Region"}}),
    _tool("bad_number", {"score": {"type": "number", "x-mcp-header": "Score"}}),  # number: not allowed
    _tool("bad_duplicate", {"a": {"type": "string", "x-mcp-header": "Region"},
                            "b": {"type": "string", "x-mcp-header": "region"}}),  # same header, other case
    _tool("bad_empty", {"value": {"type": "string", "x-mcp-header": ""}}),  # not an RFC 9110 token
]
CALLED: list[str] = []


async def header_tools(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    name = (ctx.params or {}).get("name") if ctx.method == "tools/call" else None
    if name in {t["name"] for t in LISTED}:
        headers = getattr(ctx.request, "headers", None) or {}
        region = headers.get("mcp-param-region")  # mirrored from `region` (SEP-2243), if the client did
        CALLED.append(f"{name}(Mcp-Param-Region={region})" if region else name)
        return {"content": [{"type": "text", "text": f"{name} ran"}]}
    result = await call_next(ctx)
    if ctx.method == "tools/list" and isinstance(result, dict):
        return {**result, "tools": [*result.get("tools", []), *LISTED]}
    return result


mcp: MCPServer[Any] = MCPServer("headers", version="1.0.0", middleware=[header_tools])


@mcp.tool(structured_output=False)
def called() -> str:
    """The middleware's tools called so far, comma-separated."""
    return ",".join(CALLED) or "none"


if __name__ == "__main__":
    serve(mcp)
