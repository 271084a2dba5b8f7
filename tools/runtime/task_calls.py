"""A tool call sent as an MCP task (2025-11-25): create it, follow it, fetch its result.

A tool whose `execution.taskSupport` is "required" (or "optional" when the caller asked) is
called with `params.task`; the server answers at once with a task id, which is stored on the
row before anything else happens. The worker then follows the task: `tasks/get` at the
server's poll interval (woken early by `notifications/tasks/status`), each new status stored
in the row's history and sent to pages, the row's lease renewed so the sweep leaves a working
task alone. Once the task ends, or needs input, `tasks/result` returns the CallToolResult; a
server asks for a task's input (elicitation, sampling) on that request, and those requests
reach the browser through the same cards as any call's (tools/runtime/server_requests.py). The result
is stored and projected exactly as a plain call's (tools/runtime/pipeline.py), so history and replays
do not change.

A later delivery (the worker died) finds the task id on the row and follows the same task
instead of starting the tool again. Cancel sends `tasks/cancel` (tools/runtime/live_calls.py).
Tasks left the core protocol in 2026-07-28, so a modern connection calls the tool plainly.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import close_old_connections, transaction
from django.utils import timezone

from tools.mcp.errors import CallTimeout, RemoteError
from tools.models import ToolCall
from tools.runtime import deadlines, events

if TYPE_CHECKING:
    from tools.mcp.connection import Connection
    from tools.runtime.live_calls import LiveCall

log = logging.getLogger(__name__)

ENDED = ("completed", "failed", "cancelled")
POLL_MIN, POLL_MAX = 0.2, 5.0  # seconds between tasks/get, whatever pollInterval the server suggests
HISTORY_CAP = 200  # statuses kept per call (a chatty server's status messages must not grow the row forever)


def wanted(conn: Connection, call: ToolCall) -> bool:
    """Send this call as a task: its tool requires one, or allows one and the caller asked,
    and the connection speaks 2025-11-25 (tasks are not in the 2026-07-28 core)."""
    if not call.task_mode or conn.is_modern:
        return False
    return call.task_mode == "required" or conn.tasks.supported


async def run(conn: Connection, call: ToolCall, live: LiveCall, timeout: float, max_timeout: float) -> dict[str, Any]:
    """The task's CallToolResult (raw), following a task this call already started if it has one."""
    task_id = call.task_id
    resumed = bool(task_id)  # a later delivery: the task runs already
    if not task_id:
        created = await conn.call_tool(call.tool_name, call.arguments or {}, timeout, tag=live,
                                       task_ttl_ms=int(max_timeout * 1000))
        task = created.get("task")
        if not isinstance(task, dict) or not task.get("taskId"):
            return created  # the server ran it as a plain call (it may, for an optional task)
        task_id = str(task["taskId"])
        live.task_id = task_id
        await _record(call, live, task, new_task=True)
    else:
        live.task_id = task_id
    ended = False
    try:
        status = await _follow(conn, call, live, task_id, timeout, resumed=resumed)
        ended = status in ENDED
        remaining = live.hard_deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            raise CallTimeout(f"The task {task_id} was still {status} at the hard maximum of {max_timeout:g} s.")
        # tasks/result blocks until the task ends (a person may be answering its questions): keep
        # following meanwhile, so the lease and the time left to answer move on with the task.
        keeper = asyncio.ensure_future(_keep_following(conn, call, live, task_id, timeout))
        try:
            result = await conn.tasks.result(task_id, remaining, tag=live)
        finally:
            keeper.cancel()
        try:  # the status it ended with, for the card (best effort: the result is what matters)
            await _record(call, live, await conn.tasks.get(task_id, timeout))
        except Exception as exc:  # noqa: BLE001 - never lose a result in hand for a status line
            log.info("could not read the final status of task %s: %s", task_id, exc)
        return result
    except BaseException:
        if not ended:  # the call fails or is cancelled here; the server's task need not go on
            await cancel(conn, live)
        raise
    finally:
        conn.tasks.forget(task_id)


async def _follow(conn: Connection, call: ToolCall, live: LiveCall, task_id: str, timeout: float, resumed: bool) -> str:
    """Poll the task until it ends or needs input; return that status."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            task = await conn.tasks.get(task_id, timeout)
        except RemoteError as exc:
            if resumed:
                raise RuntimeError(f"The server no longer knows the task {task_id} this call started "
                                   f"({exc.message}); it may have restarted.") from None
            raise
        status = str(task.get("status") or "")
        await _record(call, live, task)
        if status in ENDED or status == "input_required":
            return status
        if loop.time() >= live.hard_deadline:
            raise CallTimeout(f"The task {task_id} was still {status or 'working'} at the hard maximum of the call.")
        interval = task.get("pollInterval")
        wait = interval / 1000 if isinstance(interval, int | float) and interval > 0 else 1.0
        await conn.tasks.changed(task_id, min(max(wait, POLL_MIN), POLL_MAX, max(live.hard_deadline - loop.time(), 0)))


async def _keep_following(conn: Connection, call: ToolCall, live: LiveCall, task_id: str, timeout: float) -> None:
    """While tasks/result is open: tasks/get every third of the timeout (statuses stay live, the lease moves)."""
    while True:
        await asyncio.sleep(max(timeout / 3, 1.0))
        try:
            await _record(call, live, await conn.tasks.get(task_id, timeout))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - tasks/result is what decides; this only keeps time
            log.info("tasks/get of %s while waiting for its result: %s", task_id, exc)


async def _record(call: ToolCall, live: LiveCall, task: dict[str, Any], new_task: bool = False) -> None:
    """Store a status the task reported, if it is news, and renew the call's lease. The row in
    hand follows (the pipeline writes the result, and its event, from it)."""
    status = str(task.get("status") or "")[:20]
    message = str(task.get("statusMessage") or "")[:500]
    loop = asyncio.get_running_loop()
    # A task that answers is working: like progress, that gives the call its timeout again (up to
    # the hard maximum), which is also how long a question it asks may wait for its answer.
    live.deadline = min(loop.time() + live.timeout, live.hard_deadline)
    live.deadline_at = timezone.now() + timedelta(seconds=max(live.deadline - loop.time(), 0))
    news = (status, message) != live.task_seen
    lease_due = loop.time() - live.lease_renewed >= max(live.timeout / 3, 1.0)
    if not (news or new_task or lease_due):
        return
    live.task_seen = (status, message)
    live.lease_renewed = loop.time()
    now = timezone.now()
    lease = deadlines.deadline_after_progress(live.started_at, now, live.timeout) if live.started_at else None
    entry = {"status": status, "message": message, "at": now.isoformat()} if news or new_task else None
    history = await asyncio.to_thread(_store, live.tool_call_id, live.task_id or "", entry, lease)
    if history is not None:
        call.task_id, call.task_status, call.task_history = live.task_id or "", status, history


def _store(tool_call_id: str, task_id: str, entry: dict[str, Any] | None, lease: datetime | None) -> list | None:
    """Write it (the history as it now is, or None if unchanged or the call is no longer running)."""
    close_old_connections()
    try:
        with transaction.atomic():
            row = (ToolCall.objects.select_for_update().filter(pk=tool_call_id, status=ToolCall.Status.RUNNING)
                   .values("task_history").first())
            if row is None:
                return None  # cancelled or ended meanwhile
            changes: dict[str, Any] = {"task_id": task_id}
            if lease is not None:
                changes["deadline_at"] = lease
            history = None
            if entry is not None:
                history = [*(row["task_history"] or []), entry][-HISTORY_CAP:]
                changes.update(task_status=entry["status"], task_history=history)
            ToolCall.objects.filter(pk=tool_call_id).update(**changes)
        if entry is not None:
            events.publish_tool_call(events.TOOL_CALL_STATUS, tool_call_id)
        return history
    finally:
        close_old_connections()


async def cancel(conn: Connection, live: LiveCall) -> None:
    """Tell the server to cancel the task (Cancel on a call sent as one)."""
    if not live.task_id:
        return
    try:
        await conn.tasks.cancel(live.task_id, 5.0)
    except Exception as exc:  # noqa: BLE001 - the call ends cancelled either way; the server may have ended it
        log.info("tasks/cancel of %s was refused: %s", live.task_id, exc)
