"""A tool call's life, seen from outside the worker: start, dispatch, answer its input, cancel;
and the requests a page waits on a worker for. The only module of the tools app that sends tasks.

A call is a row first (`queued`), then a Celery task. The task id is chosen before the row
is written, so the row is written once and anyone can later find (or re-send) its task. Tasks
are sent by name (tools/runtime/tasks.py defines them and runs in workers): nothing here
imports the worker's side, so every caller (API, chat, widgets, admin, replays, the sweep) can
import this module. The worker's side of the life (claim, run, rest for input, finish) is
tools/runtime/pipeline.py; what ends a stuck call is tools/runtime/sweep.py.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable
from typing import Any

from celery.exceptions import TimeoutError as CeleryTimeout
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from inspector import sql_columns, tracing
from inspector.celery import app
from inspector.errors import Unavailable
from tools.callers import Caller
from tools.models import Server, ServerRequest, Tool, ToolCall
from tools.runtime import events, input_rounds, pipeline, server_requests, waits
from tools.runtime.deadlines import resolve_timeout

log = logging.getLogger(__name__)

# The tasks' names (tools/runtime/tasks.py): wire names, kept when modules move.
EXECUTE = "tools.tasks.execute_tool_call"
SERVER_ACTION = "tools.tasks.server_action"
OAUTH_START = "tools.tasks.oauth_start"
OAUTH_FINISH = "tools.tasks.oauth_finish"

END_RECHECK = 1.0  # seconds between looks at the row while waiting for a call's end


def start_tool_call(
    *, server: Server, tool_name: str, arguments: dict, origin: str, user, caller: Caller | None = None,
    llm_tool_call_id: str = "", replay_of: ToolCall | None = None, enqueue: bool = True, tool: Tool | None = None,
    timeout: float | None = None, view_call: ToolCall | None = None, as_task: bool = False,
) -> ToolCall:
    """Create the queued row and, unless the caller schedules it (a chat step's chord), enqueue
    its task after commit. Pass `tool` when the caller has already looked it up, and `caller`
    when an app above tools started it (a conversation: tools/callers.py).

    `timeout` overrides the server's call timeout for this call (1 s up to MCP_MAX_CALL_TIMEOUT,
    else deadlines.TimeoutOutOfRange); the row stores it, or the server's default (tools/runtime/deadlines.py).
    `as_task` sends it as an MCP task when the tool allows one (one it requires always is:
    tools/runtime/task_calls.py)."""
    timeout_s = resolve_timeout(server, timeout)
    if tool is None and origin != ToolCall.Origin.VIEW:  # a view's own tool is not the server's namesake
        tool = Tool.objects.filter(server=server, name=tool_name).only("is_app", "definition").first()
    call = ToolCall(
        task_mode=tool.task_mode(as_task) if tool is not None else "",
        server=server, server_name=server.name, tool_name=tool_name, arguments=arguments, origin=origin,
        requested_by=user, llm_tool_call_id=llm_tool_call_id, **(caller or Caller()).row_fields(),
        is_app=bool(tool and tool.is_app), replay_of=replay_of, view_call=view_call, celery_task_id=str(uuid.uuid4()), timeout_s=timeout_s,
        trace_context=tracing.carrier(),
    )
    sql_columns.insert(call)  # one INSERT built once: the ORM compiled it on every call (issue 31.3)
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
    try:
        app.send_task(EXECUTE, args=[str(tool_call_id)], task_id=task_id, ignore_result=True,
                      result_cls=_Sent)
    except Exception as exc:  # noqa: BLE001 - the row is the source of truth; the sweep re-sends
        log.warning("could not enqueue tool call %s (%s); the sweep will send it again", tool_call_id, exc)
        return False
    return True


def answer(row: ServerRequest, user, body: dict[str, Any]) -> ServerRequest:
    """A person's answer to what a server asked; a 2026-07-28 call rests while its round is open,
    and the last answer queues its retry with a task of its own, so the call goes on now (a chat
    step's task for it is still waiting and finds it running or done; the sweep re-sends a lost one)."""
    row = server_requests.answer(row, user, body)
    if input_rounds.requeue_if_answered(row):
        dispatch(row.tool_call_id, str(uuid.uuid4()))
    return row


def cancel_calls(calls: Iterable[ToolCall], reason: str) -> list[str]:
    """End queued or running calls as `cancelled` (the web side of Cancel and the chat's Stop).

    A queued call's task is revoked; a running one's worker is told through Redis and sends the
    server notifications/cancelled. Returns the ids of the calls that were cancelled.
    """
    cancelled = []
    for c in calls:
        changes = {"status": ToolCall.Status.CANCELLED, "error": reason, "finished_at": timezone.now()}
        # A call resting for input (tools/runtime/input_rounds.py) has no worker: it is ended here, its
        # open requests closed and the model's note written; a chat step's task for it finds it
        # ended at its next look (it is not revoked: that would fail the chord, and the turn).
        # So is a running call of a view's own tool (origin "view"): the browser runs it, no worker.
        resting = ToolCall.objects.filter(
            Q(status=ToolCall.Status.INPUT_REQUIRED) | Q(status=ToolCall.Status.RUNNING, origin=ToolCall.Origin.VIEW), pk=c.pk,
        ).update(**changes)
        if resting:
            input_rounds.close_open_requests(c.pk, ServerRequest.Status.CANCELLED, reason)
            pipeline.end_call(c.pk, ToolCall.Status.CANCELLED, reason)
            cancelled.append(str(c.pk))
            continue
        if not ToolCall.objects.filter(pk=c.pk, status__in=ToolCall.ACTIVE).update(**changes):
            continue  # it finished meanwhile: it keeps its result
        if c.celery_task_id:
            app.control.revoke(c.celery_task_id)  # a queued call never starts; a redelivery is dropped
        waits.push(waits.cancel_key(c.pk), {"reason": reason}, announce=True)
        events.publish_tool_call(events.TOOL_CALL_STATUS, c.pk)
        cancelled.append(str(c.pk))
    return cancelled


def wait_for_end(tool_call_id, timeout: float) -> bool:
    """Wait in the request's thread until the call has ended or `timeout` passed; True if it ended.

    The end is told on Redis (waits.ended_key, pushed with the call's final event); a second's
    wait at a time, with a look at the row between, so an end whose notice was lost (a Redis
    hiccup) is still seen within a second."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if waits.wait_blocking(waits.ended_key(tool_call_id), max(min(remaining, END_RECHECK), 0.001)) is not None:
            return True
        if _has_ended(tool_call_id):
            return True
        if deadline - time.monotonic() <= 0:
            return False


def _has_ended(tool_call_id) -> bool:
    return ToolCall.objects.filter(pk=tool_call_id, status__in=ToolCall.FINAL).exists()


def ask_worker(server_id: int, action: str, params: dict[str, Any] | None, user_id: int | None, what: str,
               timeout: float | None = None, expires: float | None = None) -> dict[str, Any]:
    """An inspector request a page waits for (refresh, resources, prompts, completion…): a worker
    runs it (all MCP traffic happens there) and answers a JSON-able dict, {"ok": False, "error"} included.
    `expires`: drop the request if no worker took it by then (a suggestion nobody waits for any more)."""
    timeout = timeout or settings.MCP_WEB_WAIT
    sent = app.send_task(SERVER_ACTION, args=(server_id, action, params or {}, user_id), expires=expires)
    return wait_for_worker(sent, what, timeout)


def refresh_later(server_id: int, user_id: int | None) -> None:
    """List a server's tools again in the background (nobody waits for the answer)."""
    app.send_task(SERVER_ACTION, args=(server_id, "refresh", {"reconnect": True}, user_id))


def start_sign_in(server_id: int, user_id: int, redirect_uri: str) -> dict[str, Any]:
    """The authorization URL of a user's OAuth sign-in to a server (discovered by a worker), or why not."""
    return wait_for_worker(app.send_task(OAUTH_START, args=(server_id, user_id, redirect_uri)), "the sign-in's discovery")


def finish_sign_in(flow_id: str, code: str, iss: str | None, timeout: float | None = None) -> dict[str, Any]:
    """Swap the code the authorization server sent back for the user's tokens (in a worker)."""
    return wait_for_worker(app.send_task(OAUTH_FINISH, args=(flow_id, code, iss)), "the token exchange", timeout)


def wait_for_worker(async_result, what: str, timeout: float | None = None) -> dict[str, Any]:
    """Wait for a worker's answer to an inspector request; Unavailable (a 504) when none comes."""
    timeout = timeout or settings.MCP_WEB_WAIT
    try:
        return async_result.get(timeout=timeout, disable_sync_subtasks=False)
    except CeleryTimeout:
        async_result.revoke()
        raise Unavailable(f"No worker answered {what} within {timeout:g} s. Is a Celery worker running?") from None
