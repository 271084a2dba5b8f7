"""Starting tool calls: the one service every caller uses (API, chat, widgets, admin, replays, the sweep).

A call is a row first (`queued`), then a Celery task. The task id is chosen before the row
is written, so the row is written once and anyone can later find (or re-send) its task.
"""

from __future__ import annotations

import logging
import uuid

from django.db import transaction

from tools.runtime.deadlines import resolve_timeout
from tools.models import Server, Tool, ToolCall

log = logging.getLogger(__name__)


def start_tool_call(
    *, server: Server, tool_name: str, arguments: dict, origin: str, user, conversation=None, turn=None,
    llm_tool_call_id: str = "", replay_of: ToolCall | None = None, enqueue: bool = True, tool: Tool | None = None,
    timeout: float | None = None, view_call: ToolCall | None = None, as_task: bool = False,
) -> ToolCall:
    """Create the queued row and, unless the caller schedules it (a chat step's chord), enqueue
    its task after commit. Pass `tool` when the caller has already looked it up.

    `timeout` overrides the server's call timeout for this call (1 s up to MCP_MAX_CALL_TIMEOUT,
    else deadlines.TimeoutOutOfRange); the row stores it, or the server's default (tools/runtime/deadlines.py).
    `as_task` sends it as an MCP task when the tool allows one (one it requires always is:
    tools/runtime/task_calls.py)."""
    timeout_s = resolve_timeout(server, timeout)
    if tool is None and origin != ToolCall.Origin.VIEW:  # a view's own tool is not the server's namesake
        tool = Tool.objects.filter(server=server, name=tool_name).only("is_app", "definition").first()
    call = ToolCall.objects.create(
        task_mode=tool.task_mode(as_task) if tool is not None else "",
        server=server, server_name=server.name, tool_name=tool_name, arguments=arguments, origin=origin,
        requested_by=user, conversation=conversation, turn=turn, llm_tool_call_id=llm_tool_call_id,
        is_app=bool(tool and tool.is_app), replay_of=replay_of, view_call=view_call, celery_task_id=str(uuid.uuid4()), timeout_s=timeout_s,
    )
    if enqueue:
        transaction.on_commit(lambda: dispatch(call.pk, call.celery_task_id))
    return call


class _Sent:
    """What `dispatch` asks Celery to hand back: the task id, nothing to read a result with.
    Celery's default, an AsyncResult, builds the thread's result backend, and Django's ASGI
    handler runs every request in a new thread: ~1 ms a request for a result nobody reads."""

    def __init__(self, task_id: str) -> None:
        self.id = task_id


def dispatch(tool_call_id, task_id: str) -> bool:
    """Send the call's task to the broker. A broker that is down loses nothing: the call stays
    `queued` and the sweep (tools/runtime/sweep.py) sends it again.

    No result is stored: nothing reads it (the rows are the result; a chat step's calls are
    sent by its chord, which keeps theirs), and storing it costs the worker and Redis a write."""
    from inspector.celery import app
    from tools.runtime.tasks import execute_tool_call

    try:
        app.send_task(execute_tool_call.name, args=[str(tool_call_id)], task_id=task_id, ignore_result=True,
                      result_cls=_Sent)
    except Exception as exc:  # noqa: BLE001 - the row is the source of truth; the sweep re-sends
        log.warning("could not enqueue tool call %s (%s); the sweep will send it again", tool_call_id, exc)
        return False
    return True
