"""Publishing live events to Channels groups from workers and views (sync code).

Sends go through one long-lived event loop per process (a daemon thread). `async_to_sync`
would make a new loop per call, and channels_redis keeps its connections per loop, so every
event paid for new Redis connections (measured: ~3 ms a publish, see bench/tool_calls.py).

An event may carry members that are JSON text already (`JSON_TEXT`, e.g. a full tool result as
the worker serialised and stored it): they travel as strings and `event_text` writes them into
the WebSocket frame as they are, never parsed and serialised again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from channels.layers import get_channel_layer

log = logging.getLogger(__name__)

# The event's member holding {name: JSON text}: each becomes member `name` of the frame, verbatim.
JSON_TEXT = "json_text"

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_loop_pid: int | None = None


def _publisher_loop() -> asyncio.AbstractEventLoop:
    global _loop, _loop_pid
    with _lock:
        if _loop is None or _loop_pid != os.getpid() or not _loop.is_running():
            loop = asyncio.new_event_loop()
            started = threading.Event()
            loop.call_soon(started.set)
            threading.Thread(target=loop.run_forever, name="event-publisher", daemon=True).start()
            started.wait(5)
            _loop, _loop_pid = loop, os.getpid()
        return _loop


def publish(group: str, event: dict[str, Any], timeout: float = 5.0) -> None:
    """Send `event` (a JSON object with a `type`) to every socket in `group`.

    A failed publish never fails the work that produced the event: the database is the
    source of truth and pages catch up from it.
    """
    publish_many([group], event, timeout=timeout)


def publish_many(groups: list[str], event: dict[str, Any], then: Callable[[], Awaitable[None]] | None = None,
                 timeout: float = 5.0) -> None:
    """`publish` to each of `groups`, then await `then()` (e.g. a notice on Redis), all in one
    hop to the publisher loop: each hop costs a thread wake-up on both sides (bench/hot_path.py)."""
    layer = get_channel_layer()
    if sys.is_finalizing():
        return

    async def send() -> None:
        try:
            message = {"type": "relay", "event": event}
            if hasattr(layer, "group_send_many"):  # inspector/channel_layer.py, the configured one
                await layer.group_send_many(groups, message)
            elif layer is not None:  # another layer named in CHANNEL_LAYERS
                for group in groups:
                    await layer.group_send(group, message)
        finally:  # told even when a group send failed
            if then is not None:
                await then()

    try:
        asyncio.run_coroutine_threadsafe(send(), _publisher_loop()).result(timeout)
    except Exception:  # noqa: BLE001 - logged, and the page will catch up from the database
        if not sys.is_finalizing():
            log.exception("could not publish %s to %s", event.get("type"), ", ".join(groups))


def event_text(event: dict[str, Any]) -> str:
    """The WebSocket frame of `event`: its JSON, with the `JSON_TEXT` members spliced in as
    the text they are (valid JSON by contract: what was stored)."""
    members = event.get(JSON_TEXT)
    if not members:
        return json.dumps(event)
    rest = json.dumps({k: v for k, v in event.items() if k != JSON_TEXT})
    spliced = "".join(f",{json.dumps(name)}:{text}" for name, text in members.items())
    return rest[:-1] + spliced + "}" if rest != "{}" else "{" + spliced[1:] + "}"
