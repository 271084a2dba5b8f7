"""Tasks (2025-11-25): a task-augmented tools/call is followed by ``tasks/get`` and ``tasks/result``
and cancelled with ``tasks/cancel``; ``notifications/tasks/status`` wakes the poller early (Django-free).

tools/runtime/task_calls.py drives a call sent as a task with these.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

import mcp_types as types

if TYPE_CHECKING:  # (the connection owns this object; imported for the annotation only)
    from tools.mcp.connection import Connection


class Tasks:
    """The task requests of one connection, and the status notifications its pollers wait for."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._changed: dict[str, asyncio.Event] = {}  # a task's poller, woken by notifications/tasks/status

    def status_changed(self, params: dict[str, Any]) -> None:
        """A notifications/tasks/status arrived: wake the task's poller, if one waits."""
        changed = self._changed.get(str(params.get("taskId")))
        if changed is not None:
            changed.set()

    @property
    def supported(self) -> bool:
        """The server takes task-augmented ``tools/call`` (2025-11-25 ``tasks.requests.tools.call``)."""
        tasks = self.conn.capabilities.get("tasks") or {}
        return not self.conn.is_modern and isinstance(tasks, dict) and "call" in ((tasks.get("requests") or {}).get("tools") or {})

    async def get(self, task_id: str, timeout: float | None = None) -> dict[str, Any]:
        """The raw ``tasks/get`` result: the task's status, statusMessage, pollInterval…"""
        return await self.conn.request(types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id)), timeout)

    async def result(self, task_id: str, timeout: float | None = None, *, tag: Any = None) -> dict[str, Any]:
        """The raw ``tasks/result``: the task's CallToolResult, once it has ended. A server asks for
        a task's input (elicitation, sampling) while this request is open: those requests are
        attributed to ``tag`` like a call's own."""
        request = types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id))
        return await self.conn.tagged(request, timeout, tag)

    async def cancel(self, task_id: str, timeout: float | None = None) -> dict[str, Any]:
        """The raw ``tasks/cancel`` result (the task, now cancelled)."""
        return await self.conn.request(types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id)), timeout)

    async def changed(self, task_id: str, within: float) -> bool:
        """Wait up to ``within`` seconds for a ``notifications/tasks/status`` of the task; True if one came."""
        changed = self._changed.setdefault(task_id, asyncio.Event())
        try:
            # asyncio.timeout, not wait_for: before Python 3.12, wait_for drops a cancel that lands as the wait ends.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(within):
                    await changed.wait()
            return changed.is_set()
        finally:
            changed.clear()

    def forget(self, task_id: str) -> None:
        """Forget a task's status notifications (its call ended)."""
        self._changed.pop(task_id, None)
