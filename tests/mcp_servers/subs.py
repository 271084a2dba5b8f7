"""A test server whose resource changes on demand and which logs between calls.

Run: ``python tests/mcp_servers/subs.py [--legacy] [--transport stdio|http|sse] [--port N]``.

Resource ``note://board`` (text): what ``set_note`` last wrote. A client subscribes to it with
``resources/subscribe`` (2025-11-25, ``--legacy``) or ``subscriptions/listen`` with
``resourceSubscriptions`` (2026-07-28); ``set_note`` then notifies it
(``notifications/resources/updated``).

Tools:
* ``set_note(text)`` - change ``note://board`` and notify its subscribers.
* ``subscribers()`` - the URIs a 2025-11-25 client subscribed to (``resources/subscribe`` minus
  ``resources/unsubscribe``), as JSON.
* ``log_later(count, delay)`` - answers at once; then, after the call has ended, sends ``count``
  log messages (``notifications/message``), one every ``delay`` s, cycling through the levels
  debug..error, each at or above the level the client set with ``logging/setLevel`` (default
  debug). Between calls: 2025-11-25 only (2026-07-28 logs only inside a request).
* ``log_now()`` - logs one message at each level debug..error during the call (on 2026-07-28 the
  request's own log level decides which reach the client).
* ``whoami()`` - the server's pid (a reconnection starts another process over stdio).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import serve  # noqa: E402
from mcp_types import EmptyResult, SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams  # noqa: E402

from mcp.server.mcpserver import Context, MCPServer  # noqa: E402

mcp: MCPServer[Any] = MCPServer("subs-test-server", version="1.0.0")

URI = "note://board"
NOTE = {"text": "first note"}
LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
LOG_LEVEL = {"value": "debug"}
SUBSCRIBERS: dict[str, list[Any]] = {}  # uri -> the 2025-11-25 sessions subscribed to it
_background: set[asyncio.Task[None]] = set()


async def set_level(ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
    LOG_LEVEL["value"] = params.level
    return EmptyResult()


def _client(session: Any) -> Any:
    """The client connection a request's session belongs to (each request has a session object of its own)."""
    return session._connection  # noqa: SLF001 - the SDK exposes no public accessor


async def subscribe(ctx: Any, params: SubscribeRequestParams) -> EmptyResult:
    sessions = SUBSCRIBERS.setdefault(str(params.uri), [])
    if all(_client(s) is not _client(ctx.session) for s in sessions):
        sessions.append(ctx.session)
    return EmptyResult()


async def unsubscribe(ctx: Any, params: UnsubscribeRequestParams) -> EmptyResult:
    SUBSCRIBERS[str(params.uri)] = [s for s in SUBSCRIBERS.get(str(params.uri), []) if _client(s) is not _client(ctx.session)]
    return EmptyResult()


lowlevel = mcp._lowlevel_server  # noqa: SLF001 - the SDK exposes no public accessor
lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)
lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)


@mcp.resource(URI, name="board", mime_type="text/plain", description="A note that set_note changes")
def board() -> str:
    return NOTE["text"]


@mcp.tool(structured_output=False)
async def set_note(text: str, ctx: Context) -> str:
    """Change note://board and tell its subscribers."""
    NOTE["text"] = text
    for session in list(SUBSCRIBERS.get(URI, [])):
        try:
            await session.send_resource_updated(URI)
        except Exception:  # noqa: BLE001 - a session that went away
            SUBSCRIBERS[URI].remove(session)
    await ctx.notify_resource_updated(URI)  # subscriptions/listen streams (2026-07-28)
    return f"note is now {text!r}"


@mcp.tool(structured_output=False)
def subscribers() -> str:
    """The URIs a 2025-11-25 client is subscribed to."""
    return json.dumps(sorted(uri for uri, sessions in SUBSCRIBERS.items() if sessions))


async def _send_logs(session: Any, count: int, delay: float) -> None:
    for i in range(count):
        await asyncio.sleep(delay)
        level = LEVELS[i % 5]
        if LEVELS.index(level) >= LEVELS.index(LOG_LEVEL["value"]):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await session.send_log_message(level, f"{level} message {i} between calls", logger="subs")


@mcp.tool(structured_output=False)
async def log_later(ctx: Context, count: int = 5, delay: float = 0.2) -> str:
    """Answer now, then log `count` messages after the call has ended."""
    task = asyncio.get_running_loop().create_task(_send_logs(ctx.request_context.session, count, delay))
    _background.add(task)
    task.add_done_callback(_background.discard)
    return f"{count} log messages will follow"


@mcp.tool(structured_output=False)
async def log_now(ctx: Context) -> str:
    """Log one message at each level debug..error during the call."""
    for level in LEVELS[:5]:
        if LEVELS.index(level) >= LEVELS.index(LOG_LEVEL["value"]):
            await ctx.log(level, f"{level} message during the call", logger_name="subs")
    return "logged"


@mcp.tool(structured_output=False)
def whoami() -> str:
    """The server's pid."""
    return str(os.getpid())


if __name__ == "__main__":
    serve(mcp)
