"""An MCP server that notes the W3C trace context of every request it receives, for the tracing
tests (issue 26.6): `_meta.traceparent`/`tracestate` and, over HTTP, the `traceparent` header.

Run: ``python tests/mcp_servers/traced.py [--transport stdio|http|sse] [--port N] [--legacy]``

A middleware notes each request before it is handled; the tool ``seen`` answers the notes so far
as JSON (its own request included, last), ``echo`` just answers.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import serve  # noqa: E402
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext  # noqa: E402
from mcp.server.mcpserver import MCPServer  # noqa: E402

SEEN: list[dict[str, Any]] = []


async def note_trace(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    if ctx.request_id is not None:  # requests only, not notifications
        params = ctx.params if isinstance(ctx.params, dict) else {}
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        http = getattr(ctx, "request", None)
        headers = getattr(http, "headers", None)
        SEEN.append({
            "method": ctx.method, "name": params.get("name"), "arguments": params.get("arguments"),
            "meta_traceparent": meta.get("traceparent"), "meta_tracestate": meta.get("tracestate"),
            "meta_baggage": meta.get("baggage"),
            "header_traceparent": headers.get("traceparent") if headers is not None else None,
            "header_tracestate": headers.get("tracestate") if headers is not None else None,
        })
    return await call_next(ctx)


mcp: MCPServer[Any] = MCPServer("traced", version="1.0.0", middleware=[note_trace])


@mcp.tool(structured_output=False)
def echo(text: str = "") -> str:
    """Answers its text."""
    return text


@mcp.tool(structured_output=False)
def seen() -> str:
    """Every request's trace context so far, as a JSON list (this request last)."""
    return json.dumps(SEEN)


if __name__ == "__main__":
    serve(mcp)
