"""A deliberately awkward MCP server for integration tests of the inspector.

Run: ``python tests/mcp_servers/basic.py [--transport stdio|http|sse] [--port N] [--legacy]
[--require-token TOKEN] [--require-basic USER:PASSWORD]`` (the last two, over http, refuse
requests without those credentials in the URL: 401).

Tools: echo, add (structured output), whoami (server pid, proves connection
reuse), slow, crash (kills the process mid-call), bad_output (structuredContent
violates the declared outputSchema), unknown_fields (result carries an extra
top-level ``x-extra`` field), add_tool_now (adds a tool and announces
tools/list_changed), request_headers (HTTP headers of the call, to check config headers). Resources: text, JSON, PNG blob, template ``greeting://{name}``.
Prompt: ``greet(name, style)``.

The high-level API validates outputs and drops unknown result fields, so
``bad_output`` and ``unknown_fields`` are rewritten on the way out by a server
middleware (which sees the wire dict after the SDK's own serialisation).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import serve  # noqa: E402
from mcp_types import (  # noqa: E402
    Annotations, AudioContent, BlobResourceContents, CallToolResult, EmbeddedResource, ImageContent, ResourceLink,
    TextContent, TextResourceContents,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS  # noqa: E402

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext  # noqa: E402
from mcp.server.mcpserver import Context, MCPServer  # noqa: E402

# A valid 1x1 transparent PNG.
PIXEL_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


class AddResult(BaseModel):
    sum: int


class Counter(BaseModel):
    count: int


async def rewrite_results(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Produce results the high-level API refuses to: schema violations and unknown fields."""
    result = await call_next(ctx)
    if ctx.method != "tools/call" or not isinstance(result, dict):
        return result
    name = (ctx.params or {}).get("name")
    if name == "bad_output":
        return {**result, "structuredContent": {"count": "not-a-number"}}
    if name == "unknown_fields":
        return {**result, "x-extra": {"keep": "me"}}
    return result


mcp: MCPServer[Any] = MCPServer(
    "basic-test-server",
    version="1.0.0",
    instructions="A test server for the MCP inspector.",
    middleware=[rewrite_results],
)


@mcp.tool(structured_output=False)
def echo(text: str) -> str:
    """Echo the text back as a text content block."""
    return text


@mcp.tool()
def add(a: int, b: int) -> AddResult:
    """Add two integers; returns content and structuredContent."""
    return AddResult(sum=a + b)


@mcp.tool(structured_output=False)
def whoami() -> str:
    """The server process id (proves which process answered)."""
    return str(os.getpid())


INVOCATIONS: dict[str, int] = {}


@mcp.tool(structured_output=False)
async def slow(seconds: float, tag: str = "") -> str:
    """Sleep, then answer. Counts its invocations per `tag` (see `invocations`)."""
    INVOCATIONS[tag] = INVOCATIONS.get(tag, 0) + 1
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@mcp.tool(structured_output=False)
def invocations(tag: str) -> str:
    """How many times `slow` was called with this tag: the server's own count, for fault tests."""
    return str(INVOCATIONS.get(tag, 0))


@mcp.tool(structured_output=False)
def big_text(megabytes: float) -> str:
    """A text result of this many megabytes (for size and memory tests)."""
    return "0123456789abcdef" * int(megabytes * 1024 * 1024 / 16)


@mcp.tool()
def big_structured(megabytes: float) -> CallToolResult:
    """A short content text and a structuredContent of this many megabytes (memory tests)."""
    rows = [{"id": i, "label": "row-%08d" % i, "value": i * 0.5} for i in range(int(megabytes * 1024 * 1024 / 48))]
    return CallToolResult(content=[TextContent(type="text", text=f"{len(rows)} rows")], structured_content={"rows": rows})


MIXED_UNIT = 'héllo "wörld" \\ 日本語 😀\n\t'  # tests/tools/test_wire_result.py builds the same text


@mcp.tool()
def big_mixed(megabytes: float, error: bool = False) -> CallToolResult:
    """A long non-ASCII text (escapes, emoji) and a structuredContent with a NUL and a float
    Python's json writes otherwise (1e-07): a large result read lean (tools/mcp/wire_result.py)."""
    text = MIXED_UNIT * int(megabytes * 1024 * 1024 / len(MIXED_UNIT.encode()))
    rows = [{"id": i, "label": "row-%08d" % i} for i in range(int(megabytes * 1024 * 1024 / 40))]
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=error,
                          structured_content={"tiny": 1e-7, "nul": "a\x00b", "rows": rows}, _meta={"note": "META-MARKER"})


@mcp.tool(structured_output=False)
def crash() -> str:
    """Kill the server process while the call is in flight."""
    sys.stdout.flush()
    os._exit(3)


@mcp.tool()
def bad_output() -> Counter:
    """Declares {count: int} but the middleware sends a string."""
    return Counter(count=1)


@mcp.tool(structured_output=False)
def unknown_fields() -> str:
    """The result gets an extra top-level "x-extra" field on the wire."""
    return "has extra fields"


@mcp.tool(structured_output=False)
def request_headers(ctx: Context) -> str:
    """The HTTP request headers of this call as JSON ("null" on stdio)."""
    headers = ctx.headers
    return json.dumps({k.lower(): v for k, v in headers.items()} if headers is not None else None)


_added = 0


@mcp.tool(structured_output=False)
async def add_tool_now(ctx: Context) -> str:
    """Register a new tool and announce tools/list_changed (legacy: notification; 2026: listen stream)."""
    global _added
    _added += 1
    name = f"dynamic_{_added}"

    def dynamic() -> str:
        return name

    mcp.add_tool(dynamic, name=name, description="Added at runtime", structured_output=False)
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        await ctx.notify_tools_changed()
    else:
        await ctx.session.send_tool_list_changed()
    return name


def tiny_wav() -> bytes:
    """A valid 8 kHz mono 8-bit WAV of 80 samples (10 ms of silence)."""
    import struct

    samples = bytes([128]) * 80
    return b"RIFF" + struct.pack("<I", 36 + len(samples)) + b"WAVEfmt " + struct.pack(
        "<IHHIIHH", 16, 1, 1, 8000, 8000, 1, 8) + b"data" + struct.pack("<I", len(samples)) + samples


@mcp.tool(description="One item of every content type, with annotations")
def rich() -> CallToolResult:
    """What a result can hold besides text: the pages must render each kind, not print base64."""
    return CallToolResult(content=[
        TextContent(type="text", text="RICH-TEXT", annotations=Annotations(audience=["user"], priority=0.9)),
        ImageContent(type="image", data=base64.b64encode(PIXEL_PNG).decode(), mime_type="image/png"),
        AudioContent(type="audio", data=base64.b64encode(tiny_wav()).decode(), mime_type="audio/wav",
                     annotations=Annotations(audience=["assistant"], priority=0.2)),
        ResourceLink(type="resource_link", uri="text://hello", name="hello", mime_type="text/plain", description="A link to a resource"),
        EmbeddedResource(type="resource", resource=TextResourceContents(uri="data://config.json", mime_type="application/json",
                                                                        text='{"answer": 42}')),
        EmbeddedResource(type="resource", resource=BlobResourceContents(uri="image://pixel.png", mime_type="image/png",
                                                                        blob=base64.b64encode(PIXEL_PNG).decode())),
    ])


@mcp.resource("text://hello", name="hello", mime_type="text/plain", description="A plain text resource")
def hello_text() -> str:
    return "hello world"


@mcp.resource("data://config.json", name="config", mime_type="application/json")
def config_json() -> str:
    return json.dumps({"answer": 42, "nested": {"ok": True}})


@mcp.resource("image://pixel.png", name="pixel", mime_type="image/png")
def pixel_png() -> bytes:
    return PIXEL_PNG


@mcp.resource("greeting://{name}", name="greeting", mime_type="text/plain", description="Greets by name")
def greeting(name: str) -> str:
    return f"Hello, {name}!"


@mcp.prompt()
def greet(name: str, style: str = "friendly") -> str:
    """Ask the model to greet someone."""
    return f"Please greet {name} in a {style} way."


STYLES = ["friendly", "formal", "funny", "pirate"]
NAMES = ["Ada", "Alan", "Grace", "Guido"]


@mcp.completion()
async def complete(ref, argument, context):
    """Suggestions for greet's arguments and greeting://{name}; with a name filled in, greet's
    styles include one made for that name (to show the context reaches the server)."""
    from mcp_types import Completion

    typed = argument.value.lower()
    if getattr(ref, "type", "") == "ref/prompt" and ref.name == "greet" and argument.name == "style":
        options = list(STYLES)
        name = (context.arguments or {}).get("name") if context else None
        if name:
            options.append(f"{name.lower()}-style")
    elif argument.name == "name":
        options = NAMES
    else:
        return None
    values = [o for o in options if o.lower().startswith(typed)]
    return Completion(values=values, total=len(values), has_more=False)


if __name__ == "__main__":
    serve(mcp)
