"""A tool call while it runs in a worker: its progress, its log, its server requests, its Cancel.

`call()` runs on the MCP pool's loop around `Connection.call_tool`. It sends a progressToken
and turns `notifications/progress` into throttled `tool_call.progress` events (the latest value
is also stored on the row, so a page that opens late shows it, with the deadline progress
earned: see tools/runtime/deadlines.py); it is the `tag` server requests
and log messages are attributed to (tools/runtime/server_requests/); and it watches Redis for a Cancel
(`cancel_calls`, from the API or the chat's Stop): the awaiting task is cancelled, which makes
the SDK send `notifications/cancelled` for the call's request id (and `tasks/cancel` for a call
sent as a task, tools/runtime/task_calls.py), and the call ends `cancelled`.
When the call ends, whatever server request is still waiting for a person is released.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from inspector.events import publish
from tools import callers
from tools.models import ToolCall
from tools.runtime import deadlines, events, task_calls, waits

log = logging.getLogger(__name__)

PROGRESS_EVERY = 0.25  # seconds between progress events of one call (the latest value always goes out)


class Cancelled(Exception):
    """The user cancelled the call; the server was sent notifications/cancelled."""


@dataclass(eq=False)
class LiveCall:
    tool_call_id: str
    caller_groups: list[str]  # the caller's groups that hear the call's events too (tools/callers.py)
    deadline: float  # on the loop's clock; progress moves it (as Connection does its own)
    deadline_at: datetime
    timeout: float = 0.0
    hard_deadline: float = math.inf  # start + the hard maximum, on the loop's clock
    started_at: datetime | None = None
    open_requests: set[str] = field(default_factory=set)
    latest: dict[str, Any] | None = None
    last_sent: float = 0.0
    flusher: asyncio.Task | None = None
    # A call sent as an MCP task (tools/runtime/task_calls.py): its id, the last status stored, when the lease was renewed.
    task_id: str | None = None
    task_seen: tuple[str, str] = ("", "")
    lease_renewed: float = 0.0

    def remaining(self) -> float:
        return self.deadline - asyncio.get_running_loop().time()

    def groups(self) -> list[str]:
        return [events.tool_call_group(self.tool_call_id), *self.caller_groups]

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """The SDK's progress callback: remember the value; a flusher sends it, throttled.

        Progress gives the call its timeout again (up to the hard maximum, see
        Connection._request_reset_on_progress): its deadline moves here, and on the row when the
        value is stored, so neither another delivery nor the sweep takes a call that is working."""
        now = asyncio.get_running_loop().time()
        self.deadline = min(now + self.timeout, self.hard_deadline)
        self.deadline_at = timezone.now() + timedelta(seconds=self.deadline - now)
        self.latest = {"progress": progress, "total": total, "message": (message or "")[:500]}
        if self.flusher is None or self.flusher.done():
            self.flusher = asyncio.ensure_future(self._flush())

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        while self.latest is not None:
            wait = self.last_sent + PROGRESS_EVERY - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            value, self.latest = self.latest, None
            self.last_sent = loop.time()
            lease = deadlines.deadline_after_progress(self.started_at, timezone.now(), self.timeout) if self.started_at else None
            try:
                await asyncio.to_thread(_store_progress, self.tool_call_id, value, self.groups(), lease)
            except Exception:  # noqa: BLE001 - progress is best-effort
                log.exception("could not store progress of tool call %s", self.tool_call_id)


def _store_progress(tool_call_id: str, value: dict[str, Any], groups: list[str], deadline_at: datetime | None) -> None:
    """The latest progress on the row, with the deadline it earned (one UPDATE), and the event."""
    from django.db import close_old_connections

    close_old_connections()
    changes: dict[str, Any] = {"progress": value}
    if deadline_at is not None:
        changes["deadline_at"] = deadline_at
    try:
        ToolCall.objects.filter(pk=tool_call_id, status=ToolCall.Status.RUNNING).update(**changes)
    finally:
        close_old_connections()
    event = {"type": events.TOOL_CALL_PROGRESS, "tool_call_id": tool_call_id, "progress": value}
    for group in groups:
        publish(group, event)


async def call(conn, tool_call: ToolCall, timeout: float, max_timeout: float | None = None,
               input_responses: dict[str, Any] | None = None, request_state: str | None = None) -> dict[str, Any]:
    """`tools/call` with progress, server requests and Cancel; raises Cancelled when cancelled.

    The server has `timeout` seconds to answer; each progress notification gives it `timeout`
    again, up to `max_timeout` in all (tools/runtime/deadlines.py). A retry of a call that asked for
    input carries the answers and the state (tools/runtime/input_rounds.py)."""
    loop = asyncio.get_running_loop()
    max_timeout = max(max_timeout or timeout, timeout)
    now = loop.time()
    live = LiveCall(str(tool_call.pk), callers.groups(tool_call.context), now + timeout,
                    timezone.now() + timedelta(seconds=timeout), timeout=timeout, hard_deadline=now + max_timeout,
                    started_at=tool_call.started_at)
    if task_calls.wanted(conn, tool_call):
        task = asyncio.ensure_future(task_calls.run(conn, tool_call, live, timeout, max_timeout))
    else:
        task = asyncio.ensure_future(conn.call_tool(tool_call.tool_name, tool_call.arguments or {}, timeout,
                                                    tag=live, on_progress=live.progress, max_timeout=max_timeout,
                                                    input_responses=input_responses, request_state=request_state,
                                                    input_schema=getattr(tool_call, "tool_input_schema", None)))
    watcher = asyncio.ensure_future(waits.wait_announced(waits.cancel_key(tool_call.pk), max_timeout + 5,
                                                     first_look=waits.FIRST_LOOK))
    ending = "The tool call ended before this request was answered."
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if task.done() or watcher.result() is None:
            return await task
        ending = "The tool call was cancelled."
        task.cancel()  # the SDK sends notifications/cancelled for the call's request id (task_calls: tasks/cancel)
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        raise Cancelled("Cancelled by the user.")
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher
        for request_id in list(live.open_requests):
            with contextlib.suppress(Exception):
                await waits.apush(waits.answer_key(request_id), {"ended": ending})
        if live.flusher is not None:
            with contextlib.suppress(Exception):  # asyncio.timeout keeps a cancel that wait_for (3.11) could drop
                async with asyncio.timeout(2.0):
                    await live.flusher
