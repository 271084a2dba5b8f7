"""An MCP server that sends cache hints (2026-07-28 `ttlMs`/`cacheScope`, SEP-2549) for the
inspector's cache tests (issue 26.6): its tools, prompts and resources lists and its resource
reads stay fresh for a minute (``--ttl-ms``), and it counts every list and read it answers, so a
test proves a refresh within the TTL did not reach it.

Run: ``python tests/mcp_servers/cached.py [--transport stdio|http|sse] [--port N] [--legacy] [--ttl-ms MS]``

Tools: ``counts()`` - JSON of how many times each cacheable method was answered.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import serve  # noqa: E402
from mcp.server.caching import CacheHint  # noqa: E402
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext  # noqa: E402
from mcp.server.mcpserver import MCPServer  # noqa: E402

TTL_MS = int(sys.argv[sys.argv.index("--ttl-ms") + 1]) if "--ttl-ms" in sys.argv else 60_000
if "--ttl-ms" in sys.argv:  # not one of serve()'s options
    del sys.argv[sys.argv.index("--ttl-ms"):sys.argv.index("--ttl-ms") + 2]
COUNTED = ("tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read")
ANSWERED: Counter[str] = Counter()


async def count(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    if ctx.method in COUNTED:
        ANSWERED[ctx.method] += 1
    return await call_next(ctx)


mcp: MCPServer[Any] = MCPServer(
    "cached", version="1.0.0", middleware=[count],
    cache_hints={"tools/list": CacheHint(TTL_MS, "public"), "prompts/list": CacheHint(TTL_MS, "public"),
                 "resources/list": CacheHint(TTL_MS, "public"), "resources/templates/list": CacheHint(TTL_MS, "public"),
                 "resources/read": CacheHint(TTL_MS, "private")},
)


@mcp.tool(structured_output=False)
def counts() -> str:
    """How many times each cacheable method was answered, as JSON."""
    return json.dumps(dict(ANSWERED))


@mcp.resource("note://today", mime_type="text/plain")
def today() -> str:
    """A note that does not change within the TTL."""
    return "nothing new"


@mcp.prompt()
def greet(name: str) -> str:
    """Say hello."""
    return f"Hello {name}"


if __name__ == "__main__":
    serve(mcp)
