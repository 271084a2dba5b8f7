"""Turns and steps: what is stored, and what happens next, when the model answers.

A turn is a chain of steps. `run_step` asks the model (chat/llm.py), stores the assistant
message and its tool calls, and returns a `StepOutcome` saying what runs next; chat/tasks.py
turns that into Celery work (the tool calls as a group, then the next step as a chord).
Each step rebuilds the history from the database (chat/history.py), so any worker can take
any step. Nothing here imports a task: dependencies run tasks -> agent -> llm/history.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from chat import events as chat_events
from chat import history, llm
from chat.models import Conversation, Message, Turn
from chat.tool_calls import caller, calls_of, calls_of_turn
from inspector.events import publish
from tools.runtime import events
from tools.runtime.lifecycle import cancel_calls, start_tool_call
from tools.models import ToolCall

log = logging.getLogger(__name__)


@dataclass
class StepOutcome:
    """What a step did, and what must run next (chat/tasks.py schedules it)."""

    result: str  # "step done", "stopped", "failed", "already done", "not running", "step limit"
    turn_id: int | None = None
    tool_calls: list[tuple[str, str]] = field(default_factory=list)  # (tool call id, its Celery task id)
    next_step: int | None = None  # run this step once every tool call has ended


@dataclass
class Staleness:
    """What close_if_stale found: the turn ended, or a lost step must be sent again."""

    ended: bool = False
    resume_step: int | None = None


# --- turn bookkeeping -----------------------------------------------------------------------------

def start_turn(conversation: Conversation, text: str, from_view=None) -> Turn:
    """Store the user's message as a new turn (chat/tasks.begin_turn sends its first step).
    `from_view`: the tool call whose App view sent it (ui/message), shown as its sender."""
    with transaction.atomic():
        Conversation.objects.select_for_update().filter(pk=conversation.pk).first()
        turn = Turn.objects.create(conversation=conversation)
        message = conversation.append_message(role=Message.Role.USER, text=text, turn=turn, from_view=from_view)
        fields = {"status": Conversation.Status.RUNNING, "updated_at": timezone.now()}
        if not conversation.title:
            fields["title"] = text.strip().splitlines()[0][:80] if text.strip() else "Untitled"
        Conversation.objects.filter(pk=conversation.pk).update(**fields)
        transaction.on_commit(lambda: _after_start(conversation, turn, message))
    return turn


def _after_start(conversation: Conversation, turn: Turn, message: Message) -> None:
    publish(conversation.group_name, {"type": "message.completed", "message": message_json(message)})
    publish(conversation.group_name, {"type": "turn.started", "turn_id": turn.pk})


def finish_turn(turn: Turn, status: str, error: str = "", notice: str = "") -> None:
    with transaction.atomic():
        updated = Turn.objects.filter(pk=turn.pk, status=Turn.Status.RUNNING).update(
            status=status, error=error or notice, finished_at=timezone.now()
        )
        # Not while a newer turn runs (a late errback or sweep must not mark it idle).
        if not Turn.objects.filter(conversation_id=turn.conversation_id, status=Turn.Status.RUNNING).exists():
            Conversation.objects.filter(pk=turn.conversation_id).update(status=Conversation.Status.IDLE, updated_at=timezone.now())
    if not updated:
        return
    llm.forget_stream(turn.pk)
    group = chat_events.conversation_group(turn.conversation_id)
    if status == Turn.Status.FAILED:
        publish(group, {"type": "turn.failed", "turn_id": turn.pk, "error": error})
    elif status == Turn.Status.STOPPED:
        publish(group, {"type": "turn.stopped", "turn_id": turn.pk})
    else:
        publish(group, {"type": "turn.completed", "turn_id": turn.pk, "notice": notice})


RESUME_AFTER_SECONDS = 10


def close_if_stale(turn: Turn) -> Staleness:
    """Move on, or fail, a running turn that has stopped making progress.

    Tool calls always end (tools/runtime/sweep.py ends them at their deadline), so a turn with
    unfinished calls is waiting for them. Otherwise a worker may have died between storing a
    step and scheduling the next one (or mid-step): the missing step is sent again (steps are
    claimed with a lease, so a duplicate is harmless). Only a turn that still shows no
    progress long after that is failed: without this the conversation would answer 409 until
    someone pressed Stop.
    """
    if calls_of_turn(turn).filter(status__in=ToolCall.ACTIVE).exists():
        return Staleness()
    now = timezone.now()
    calls = calls_of_turn(turn).aggregate(finished=Max("finished_at"), started=Max("started_at"))
    answer = turn.messages.filter(role=Message.Role.ASSISTANT, step=turn.steps).first() if turn.steps else None
    if answer is not None and not answer.tool_calls:
        finish_turn(turn, Turn.Status.COMPLETED)  # the worker died before closing the turn
        return Staleness(ended=True)
    last = max(
        t for t in (
            turn.created_at,
            turn.step_claimed_at,  # refreshed while the model streams (see _stream)
            turn.messages.aggregate(m=Max("created_at"))["m"],
            calls["finished"],
            calls["started"],
        ) if t is not None
    )
    quiet = now - last
    step_lease = step_lease_length()
    stale_after = timedelta(seconds=settings.LLM_TIMEOUT + settings.MCP_CONNECT_TIMEOUT + settings.MCP_CALL_TIMEOUT + 60)
    if quiet >= 2 * stale_after:
        finish_turn(turn, Turn.Status.FAILED, error="The turn stopped making progress (a worker may have died), so it was closed.")
        return Staleness(ended=True)
    if answer is not None and quiet >= timedelta(seconds=RESUME_AFTER_SECONDS):
        # Its tool calls all ended but the next step never started (the chord was lost).
        return Staleness(resume_step=turn.steps + 1)
    if answer is None and quiet >= (step_lease if turn.steps else timedelta(seconds=RESUME_AFTER_SECONDS)):
        # The step (or the first one) was never claimed, or its worker died while the model answered.
        return Staleness(resume_step=turn.steps or 1)
    return Staleness()


def stop_turn(turn: Turn) -> None:
    """Stop a running turn: no further step starts, and queued or running tool calls are cancelled
    (a running call's server is sent notifications/cancelled, see tools/runtime/live_calls.py)."""

    Turn.objects.filter(pk=turn.pk).update(stop_requested=True)
    cancel_calls(calls_of_turn(turn).filter(status__in=ToolCall.ACTIVE).only("pk", "status", "celery_task_id"),
                 "Stopped by the user.")
    finish_turn(turn, Turn.Status.STOPPED)


# --- JSON shapes shared by events and the API ---------------------------------------------------

def message_json(m: Message) -> dict[str, Any]:
    return {
        "id": m.pk, "seq": m.seq, "role": m.role, "text": m.text, "tool_calls": m.tool_calls,
        "tool_call_id": str(m.tool_call_id) if m.tool_call_id else None, "llm_tool_call_id": m.llm_tool_call_id,
        "turn_id": m.turn_id, "step": m.step, "model": m.model, "usage": m.usage, "created_at": m.created_at.isoformat(),
        "from_view": {"tool_call_id": str(m.from_view_id), "tool": m.from_view.tool_name if m.from_view else ""} if m.from_view_id else None,
    }


# --- one step -------------------------------------------------------------------------------------

def step_lease_length() -> timedelta:
    """How long a claimed step (or its last streamed beat) holds the turn before another delivery may take it."""
    return timedelta(seconds=settings.LLM_TIMEOUT + settings.LLM_STEP_LEASE_MARGIN)


class StepInProgress(Exception):
    """Another delivery of this step holds its lease; the task retries after a short wait."""


def _claim_step(turn_id: int, step: int) -> tuple[Turn | None, str]:
    """Claim `step` of the turn for this delivery (acks_late may deliver a step twice)."""
    with transaction.atomic():
        turn = Turn.objects.select_for_update().select_related("conversation", "conversation__owner").filter(pk=turn_id).first()
        if turn is None or turn.status != Turn.Status.RUNNING:
            return None, "not running"
        if Message.objects.filter(turn=turn, step=step, role=Message.Role.ASSISTANT).exists() or turn.steps > step:
            return None, "already done"
        lease = step_lease_length()
        if turn.steps == step and turn.step_claimed_at and timezone.now() - turn.step_claimed_at < lease:
            raise StepInProgress()
        if turn.stop_requested or step > settings.CHAT_MAX_STEPS:
            return turn, "finish"
        Turn.objects.filter(pk=turn.pk).update(steps=step, step_claimed_at=timezone.now())
        turn.steps = step
        return turn, "claimed"


def run_step(turn_id: int, step: int | None = None) -> StepOutcome:
    """Run one step of a turn: ask the model, store its answer and tool calls (rows first)."""
    if step is None:
        step = (Turn.objects.filter(pk=turn_id).values_list("steps", flat=True).first() or 0) + 1
    turn, claim = _claim_step(turn_id, step)
    if turn is None:
        return StepOutcome(claim, turn_id)
    conversation = turn.conversation
    if claim == "finish":
        if turn.stop_requested:
            finish_turn(turn, Turn.Status.STOPPED)
            return StepOutcome("stopped", turn_id)
        finish_turn(
            turn, Turn.Status.COMPLETED,
            notice=f"Stopped after {step - 1} model steps: the limit is CHAT_MAX_STEPS={settings.CHAT_MAX_STEPS}.",
        )
        return StepOutcome("step limit", turn_id)

    request = history.build(conversation)
    try:
        answer = llm.stream(conversation, turn, request)
    except Exception as exc:  # noqa: BLE001 - provider errors end the turn with a clear message
        log.warning("LLM step failed for turn %s: %s", turn.pk, exc.__class__.__name__)
        finish_turn(turn, Turn.Status.FAILED, error=llm.describe_provider_error(exc))
        return StepOutcome("failed", turn_id)
    text, requested, usage = answer.text, answer.tool_calls, answer.usage
    if answer.stopped:
        if text:
            m = conversation.append_message(role=Message.Role.ASSISTANT, text=text + "\n\n[stopped]", turn=turn,
                                            step=step, model=conversation.model)
            publish(conversation.group_name, {"type": "message.completed", "message": message_json(m)})
        finish_turn(turn, Turn.Status.STOPPED)
        return StepOutcome("stopped", turn_id)

    calls: list[ToolCall] = []
    with transaction.atomic():
        locked = Turn.objects.select_for_update().get(pk=turn.pk)
        if locked.status != Turn.Status.RUNNING:
            # Stopped while the answer streamed: keep the text, start none of its tool calls.
            if text or requested:
                note = " [stopped before its tool calls ran]" if requested else ""
                m = conversation.append_message(role=Message.Role.ASSISTANT, text=text + note, turn=turn, step=step,
                                                model=conversation.model, usage=usage)
                transaction.on_commit(lambda: publish(conversation.group_name, {"type": "message.completed", "message": message_json(m)}))
            return StepOutcome("stopped", turn_id)
        try:
            with transaction.atomic():
                assistant = conversation.append_message(
                    role=Message.Role.ASSISTANT, text=text, tool_calls=requested, turn=turn, step=step,
                    model=conversation.model, usage=usage,
                )
        except IntegrityError:
            return StepOutcome("already done", turn_id)  # another delivery of this step stored its answer first
        tool_messages = []
        for tc in requested:
            target = request.tool_map.get(tc["name"])
            view_call = None
            if target and target[0].startswith(history.VIEW_KEY):
                # A tool an App view registered: run by the view in the chat page (tools/view_calls.py).
                view_call = calls_of(conversation).filter(pk=target[0][len(history.VIEW_KEY):]).first()
                server = view_call.server if view_call else None
            else:
                server = history.usable_servers(conversation).filter(pk=int(target[0])).first() if target else None
            try:
                arguments = json.loads(tc["arguments"] or "{}")
                if not isinstance(arguments, dict):
                    raise ValueError("arguments must be a JSON object")
            except ValueError as exc:
                arguments, bad_args = None, str(exc)
            else:
                bad_args = ""
            if server is None or arguments is None:
                note = f"Unknown tool {tc['name']!r}." if server is None else f"Invalid arguments for {tc['name']}: {bad_args}"
                tool_messages.append(
                    conversation.append_message(role=Message.Role.TOOL, text=note, turn=turn, llm_tool_call_id=tc["id"])
                )
                continue
            call = start_tool_call(
                server=server, tool_name=target[1], arguments=arguments,
                origin=ToolCall.Origin.VIEW if view_call else ToolCall.Origin.LLM, view_call=view_call,
                user=conversation.owner, caller=caller(conversation, turn), llm_tool_call_id=tc["id"], enqueue=False,
                as_task=conversation.use_tasks,
            )
            calls.append(call)
            tool_messages.append(
                conversation.append_message(role=Message.Role.TOOL, turn=turn, tool_call=call, llm_tool_call_id=tc["id"])
            )

        def after_commit():
            llm.forget_stream(turn.pk)
            group = conversation.group_name
            publish(group, {"type": "message.completed", "message": message_json(assistant)})
            for call in calls:
                events.publish_tool_call(events.TOOL_CALL_CREATED, call.pk)
            for m in tool_messages:
                publish(group, {"type": "message.completed", "message": message_json(m)})
            if not requested:
                finish_turn(turn, Turn.Status.COMPLETED)

        transaction.on_commit(after_commit)
    if not requested:
        return StepOutcome("step done", turn_id)
    # Parallel tool calls run in parallel; the next step starts when all have ended.
    return StepOutcome("step done", turn_id, [(str(c.pk), c.celery_task_id) for c in calls], next_step=step + 1)
