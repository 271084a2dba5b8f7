"""A hostile MCP server for the inspector's hostile-input tests (issue 10.6).

Run: ``python tests/mcp_servers/hostile.py [--transport stdio|http|sse] [--port N] [--legacy]``

* A tool whose name, title, description, input schema, ``_meta`` and results all carry
  script payloads (``PAYLOAD``; the name ``HOSTILE_NAME``): every page must show them as text.
  The SDK would not list such a name, so a middleware adds it to ``tools/list`` and answers
  its ``tools/call`` itself.
* ``garbage`` writes lines that are not JSON-RPC to stdout (the stdio protocol channel), then answers.
* ``flood(count)`` sends ``count`` log notifications during the call, then answers.
* ``hang`` never answers.
* ``crash`` kills the process mid-call.
"""

from __future__ import annotations

import asyncio
import os
import sys
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import serve  # noqa: E402

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext  # noqa: E402
from mcp.server.mcpserver import Context, MCPServer  # noqa: E402

# Markup that does something if a page renders it as HTML: an element the tests look for, a
# script, an inline handler. Under the app's CSP the last two are blocked anyway; the element
# is what proves escaping.
PAYLOAD = '<b class="pwned">PWNED</b><script>alert("xss")</script><img src=x onerror="alert(1)">'
HOSTILE_NAME = 'x<b class="pwned">t</b>"\'</script>'


def hostile_tool() -> dict[str, Any]:
    return {
        "name": HOSTILE_NAME,
        "title": f"Title {PAYLOAD}",
        "description": f"Description {PAYLOAD}",
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string", "description": f"Arg {PAYLOAD}",
                                                               "default": PAYLOAD}}},
        "_meta": {"note": PAYLOAD, PAYLOAD: "key"},
    }


def hostile_result() -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": f"Result {PAYLOAD}"}],
        "structuredContent": {"html": PAYLOAD, PAYLOAD: 1},
        "_meta": {"note": PAYLOAD},
    }


async def hostile_names(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    if ctx.method == "tools/call" and (ctx.params or {}).get("name") == HOSTILE_NAME:
        return hostile_result()
    result = await call_next(ctx)
    if ctx.method == "tools/list" and isinstance(result, dict):
        return {**result, "tools": [*result.get("tools", []), hostile_tool()]}
    return result


mcp: MCPServer[Any] = MCPServer(f"hostile {PAYLOAD}", version="1.0.0", instructions=f"Instructions {PAYLOAD}",
                                middleware=[hostile_names])


@mcp.tool(structured_output=False)
def garbage() -> str:
    """Print lines that are not JSON-RPC on stdout (the stdio protocol channel), then answer."""
    for line in ("this is not json", "{\"jsonrpc\": \"2.0\", \"broken", "\x00\x01\x02 binary", '{"jsonrpc": "2.0", "id": 999999, "result": {}}'):
        sys.stdout.write(line + "\n")
    sys.stdout.flush()
    return "answered after garbage"


@mcp.tool(structured_output=False)
async def flood(count: int, ctx: Context) -> str:
    """Send `count` log notifications during the call, then answer."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(count):
            await ctx.log("info", f"notification {i}")
    return f"sent {count} notifications"


@mcp.tool(structured_output=False)
async def hang() -> str:
    """Never answer."""
    await asyncio.Event().wait()
    return "unreachable"


@mcp.tool(structured_output=False)
def crash() -> str:
    """Kill the server process while the call is in flight."""
    sys.stdout.flush()
    os._exit(3)


if __name__ == "__main__":
    serve(mcp)
