"""A test server that asks things of its client mid-call: elicitation, sampling, roots, progress, logs.

Run: ``python tests/mcp_servers/asks.py --legacy [--transport stdio|http|sse] [--port N]``.
Server-to-client requests need a legacy (initialize handshake) connection: on 2026-07-28 a
server asks through input-required results instead.

Tools:
* ``ask_form(question)`` - form elicitation {name: string (required), age: integer, subscribe: boolean};
  answers "accept {…}", "decline" or "cancel".
* ``ask_defaults()`` - a form whose every field but the required name has a default: a string, an
  integer, a decimal number, a boolean, an untitled single enum (no title at all), an untitled
  multi-select (1 or 2 items), a titled single (oneOf) and multi (anyOf) enum and a legacy
  enumNames enum; answers like ``ask_form``.
* ``ask_url(url)`` - URL-mode elicitation of ``url`` (a test passes ``javascript:…`` too).
* ``ask_schema(kind)`` - an elicitation whose schema the spec forbids (``array``: not an object
  schema; ``nested``: an object property); answers what the client said, or its error.
* ``ask_model(text, repeat)`` - sampling/createMessage of ``text * repeat``; answers the model's text or the error.
* ``ask_model_verbatim(text)`` - the same, answering the whole CreateMessageResult it got, as JSON.
* ``list_roots()`` - the client's roots as JSON; ``roots_changes()`` - how many
  ``notifications/roots/list_changed`` this process received.
* ``progress(steps, delay)`` - reports progress (with a message) and logs an info and a debug
  message each step, at or above the level the client set with ``logging/setLevel`` (default info).
* ``wait(seconds, tag)`` - sleeps; ``cancelled(tag)`` says how many of its runs the client cancelled.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import serve  # noqa: E402
from mcp_types import EmptyResult, NotificationParams, SamplingMessage, SetLevelRequestParams, TextContent  # noqa: E402

from mcp.server.mcpserver import Context, MCPServer  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

mcp: MCPServer[Any] = MCPServer("asks-test-server", version="1.0.0")

LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
LOG_LEVEL = {"value": "info"}


async def set_level(ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
    LOG_LEVEL["value"] = params.level
    return EmptyResult()


mcp._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)  # noqa: SLF001

ROOTS_CHANGED = {"count": 0}


async def roots_changed(ctx: Any, params: Any) -> None:
    ROOTS_CHANGED["count"] += 1


mcp._lowlevel_server.add_notification_handler(  # noqa: SLF001
    "notifications/roots/list_changed", NotificationParams, roots_changed)


async def _log(ctx: Context, level: str, text: str) -> None:
    if LEVELS.index(level) >= LEVELS.index(LOG_LEVEL["value"]):
        await ctx.log(level, text, logger_name="asks")

FORM = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name", "description": "As you like to be called"},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "subscribe": {"type": "boolean", "default": False},
        "colour": {"type": "string", "enum": ["red", "green", "blue"]},
    },
    "required": ["name"],
}
DEFAULTS_FORM = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name"},
        "motto": {"type": "string", "title": "Motto", "default": "Measure twice."},
        "count": {"type": "integer", "title": "How many", "minimum": 1, "maximum": 10, "default": 7},
        "ratio": {"type": "number", "title": "Ratio", "minimum": 0, "maximum": 10, "default": 2.75},
        "agree": {"type": "boolean", "title": "Agree", "default": True},
        "size": {"type": "string", "enum": ["S", "M", "L"], "default": "M"},
        "toppings": {"type": "array", "title": "Toppings", "minItems": 1, "maxItems": 2,
                     "items": {"type": "string", "enum": ["olive", "basil", "chili"]}, "default": ["basil"]},
        "planet": {"type": "string", "title": "Planet", "default": "p-4",
                   "oneOf": [{"const": "p-3", "title": "Earth"}, {"const": "p-4", "title": "Mars"}]},
        "moons": {"type": "array", "title": "Moons", "minItems": 1, "default": ["m-2"],
                  "items": {"anyOf": [{"const": "m-1", "title": "Phobos"}, {"const": "m-2", "title": "Deimos"}]}},
        "shade": {"type": "string", "title": "Shade", "enum": ["s-1", "s-2"], "enumNames": ["Light", "Dark"], "default": "s-2"},
    },
    "required": ["name"],
}
BAD_SCHEMAS = {
    "array": {"type": "array", "items": {"type": "string"}},
    "nested": {"type": "object", "properties": {"address": {"type": "object", "properties": {"city": {"type": "string"}}}}},
}


def _describe(result: Any) -> str:
    if result.action == "accept":
        return f"accept {json.dumps(result.content, sort_keys=True)}" if result.content is not None else "accept"
    return result.action


@mcp.tool(structured_output=False)
async def ask_form(question: str, ctx: Context) -> str:
    """Ask the user a form question mid-call."""
    result = await ctx.request_context.session.elicit_form(question, FORM, related_request_id=ctx.request_id)
    return _describe(result)


@mcp.tool(structured_output=False)
async def ask_defaults(ctx: Context) -> str:
    """Ask a form whose fields (all but the name) come with the server's defaults."""
    result = await ctx.request_context.session.elicit_form("Check the defaults", DEFAULTS_FORM, related_request_id=ctx.request_id)
    return _describe(result)


@mcp.tool(structured_output=False)
async def ask_url(url: str, ctx: Context) -> str:
    """Send the user to a URL (URL-mode elicitation)."""
    try:
        result = await ctx.request_context.session.elicit_url(
            "Please sign in at the page", url, uuid.uuid4().hex, related_request_id=ctx.request_id)
    except MCPError as exc:
        return f"error {exc.error.code}: {exc.error.message}"
    return _describe(result)


@mcp.tool(structured_output=False)
async def ask_schema(kind: str, ctx: Context) -> str:
    """An elicitation with a schema the spec does not allow."""
    try:
        result = await ctx.request_context.session.elicit_form("Bad form", BAD_SCHEMAS[kind], related_request_id=ctx.request_id)
    except MCPError as exc:
        return f"error {exc.error.code}: {exc.error.message}"
    return _describe(result)


@mcp.tool(structured_output=False)
async def ask_model(text: str, ctx: Context, repeat: int = 1) -> str:
    """Ask the client's model (sampling/createMessage)."""
    try:
        result = await ctx.request_context.session.create_message(
            [SamplingMessage(role="user", content=TextContent(type="text", text=text * repeat))],
            max_tokens=200, system_prompt="You are terse.", related_request_id=ctx.request_id,
        )
    except MCPError as exc:
        return f"error {exc.error.code}: {exc.error.message}"
    content = result.content
    return f"model {result.model} said: {getattr(content, 'text', content)}"


@mcp.tool(structured_output=False)
async def ask_model_verbatim(text: str, ctx: Context) -> str:
    """Ask the client's model; answer the CreateMessageResult as the server received it."""
    try:
        result = await ctx.request_context.session.create_message(
            [SamplingMessage(role="user", content=TextContent(type="text", text=text))],
            max_tokens=200, related_request_id=ctx.request_id,
        )
    except MCPError as exc:
        return f"error {exc.error.code}: {exc.error.message}"
    return json.dumps(result.model_dump(by_alias=True, mode="json", exclude_none=True), sort_keys=True)


@mcp.tool(structured_output=False)
async def roots_changes() -> str:
    """How many notifications/roots/list_changed this server process has received."""
    return str(ROOTS_CHANGED["count"])


@mcp.tool(structured_output=False)
async def list_roots(ctx: Context) -> str:
    """The client's roots."""
    result = await ctx.request_context.session.list_roots()
    return json.dumps([{"uri": str(r.uri), "name": r.name} for r in result.roots])


@mcp.tool(structured_output=False)
async def progress(steps: int, ctx: Context, delay: float = 0.2) -> str:
    """Report progress and log at each step."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
        await _log(ctx, "info", f"working on step {step}")
        await _log(ctx, "debug", f"debug detail {step}")
        await anyio.sleep(delay)
    return f"done {steps} steps"


CANCELLED: dict[str, int] = {}


@mcp.tool(structured_output=False)
async def wait(seconds: float, tag: str = "") -> str:
    """Sleep; a client cancel (notifications/cancelled) is counted per tag."""
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        CANCELLED[tag] = CANCELLED.get(tag, 0) + 1
        raise
    return f"waited {seconds}"


@mcp.tool(structured_output=False)
def cancelled(tag: str) -> str:
    """How many `wait` runs with this tag were cancelled by the client."""
    return str(CANCELLED.get(tag, 0))


if __name__ == "__main__":
    serve(mcp)
