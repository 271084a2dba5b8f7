"""The agent loop, one LLM step at a time, run by Celery (never by the web process).

A turn is a chain: `llm_step` streams the model's answer and stores the assistant message
and its tool calls; the tool calls run as a group of `execute_tool_call` tasks; a chord
then starts the next `llm_step`. Each step rebuilds the history from the database
(chat.history), so any worker can take any step.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import timedelta
from typing import Any

import litellm
import redis
from celery import chord
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from chat import history
from chat.models import Conversation, Message, ProviderKey, Turn
from inspector.events import publish
from tools.models import ToolCall

log = logging.getLogger(__name__)
litellm.suppress_debug_info = True

STOP_POLL_SECONDS = 0.5
PROGRESS_BEAT_SECONDS = 10


# --- live stream buffer: lets a page that opens mid-stream show the text so far -----------------

def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.CELERY_BROKER_URL)


def stream_key(turn_id: int) -> str:
    return f"{settings.REDIS_PREFIX}stream:{turn_id}"


def streamed_so_far(turn_id: int) -> str:
    try:
        value = _redis().get(stream_key(turn_id))
    except redis.RedisError:
        return ""
    return value.decode() if value else ""


# --- credentials ----------------------------------------------------------------------------------

def api_key_for(conversation: Conversation) -> str | None:
    """The conversation's own key, else the owner's saved key for the provider, else None
    (litellm then reads the provider's usual environment variable)."""
    if conversation.api_key:
        return conversation.api_key
    provider = conversation.model.split("/", 1)[0] if "/" in conversation.model else ""
    saved = ProviderKey.objects.filter(user=conversation.owner_id, provider=provider).first() if provider else None
    return saved.api_key if saved else None


def describe_provider_error(exc: Exception) -> str:
    """A message a person can act on; never includes the key."""
    kinds = [
        (litellm.AuthenticationError, "The provider rejected the API key"),
        (litellm.RateLimitError, "The provider's rate limit was hit"),
        (litellm.NotFoundError, "The provider does not know this model"),
        (litellm.Timeout, "The provider did not answer in time"),
        (litellm.BadRequestError, "The provider refused the request"),
        (litellm.APIConnectionError, "Could not reach the provider"),
    ]
    for cls, text in kinds:
        if isinstance(exc, cls):
            detail = getattr(exc, "message", "") or str(exc)
            return f"{text}: {detail}"[:2000]
    return f"LLM error ({exc.__class__.__name__}): {exc}"[:2000]


# --- turn bookkeeping -----------------------------------------------------------------------------

def start_turn(conversation: Conversation, text: str) -> Turn:
    """Store the user's message and queue the first step."""
    with transaction.atomic():
        Conversation.objects.select_for_update().filter(pk=conversation.pk).first()
        turn = Turn.objects.create(conversation=conversation)
        message = conversation.append_message(role=Message.Role.USER, text=text, turn=turn)
        fields = {"status": Conversation.Status.RUNNING, "updated_at": timezone.now()}
        if not conversation.title:
            fields["title"] = text.strip().splitlines()[0][:80] if text.strip() else "Untitled"
        Conversation.objects.filter(pk=conversation.pk).update(**fields)
        transaction.on_commit(lambda: _after_start(conversation, turn, message))
    return turn


def _after_start(conversation: Conversation, turn: Turn, message: Message) -> None:
    from chat.tasks import llm_step

    publish(conversation.group_name, {"type": "message.completed", "message": message_json(message)})
    publish(conversation.group_name, {"type": "turn.started", "turn_id": turn.pk})
    from chat.tasks import fail_turn

    llm_step.si(turn.pk, 1).on_error(fail_turn.si(turn.pk)).delay()


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
    try:
        _redis().delete(stream_key(turn.pk))
    except redis.RedisError:
        pass
    group = f"conversation.{turn.conversation_id}"
    if status == Turn.Status.FAILED:
        publish(group, {"type": "turn.failed", "turn_id": turn.pk, "error": error})
    elif status == Turn.Status.STOPPED:
        publish(group, {"type": "turn.stopped", "turn_id": turn.pk})
    else:
        publish(group, {"type": "turn.completed", "turn_id": turn.pk, "notice": notice})


def close_if_stale(turn: Turn) -> bool:
    """Fail a running turn that has shown no progress for longer than any step or call may take.

    Covers a worker that died between storing a step and scheduling the next one: without
    this the conversation would answer 409 until someone pressed Stop.
    """
    from django.db.models import Max

    unfinished = ToolCall.objects.filter(turn=turn, status__in=[ToolCall.Status.QUEUED, ToolCall.Status.RUNNING])
    if unfinished.exists() and not unfinished.filter(celery_task_id="").exists():
        # Dispatched: the broker holds them (acks_late) however long the queue is, and the
        # chord starts the next step after them. Only calls never dispatched mean a lost turn.
        return False
    calls = ToolCall.objects.filter(turn=turn).aggregate(finished=Max("finished_at"), started=Max("started_at"))
    last = max(
        t for t in (
            turn.created_at,
            turn.step_claimed_at,  # refreshed while the model streams (see _stream)
            turn.messages.aggregate(m=Max("created_at"))["m"],
            calls["finished"],
            calls["started"],
        ) if t is not None
    )
    stale_after = timedelta(seconds=settings.LLM_TIMEOUT + settings.MCP_CONNECT_TIMEOUT + settings.MCP_CALL_TIMEOUT + 60)
    if timezone.now() - last < stale_after:
        return False
    ToolCall.objects.filter(turn=turn, status__in=[ToolCall.Status.QUEUED, ToolCall.Status.RUNNING]).update(
        status=ToolCall.Status.CANCELLED, error="The turn stopped making progress.", finished_at=timezone.now()
    )
    finish_turn(turn, Turn.Status.FAILED, error="The turn stopped making progress (a worker may have died), so it was closed.")
    return True


def close_stale_turns() -> int:
    """Close every running turn that has stopped making progress; return how many."""
    return sum(close_if_stale(turn) for turn in Turn.objects.filter(status=Turn.Status.RUNNING))


def stop_turn(turn: Turn) -> None:
    """Stop a running turn: no further step starts, and queued or running tool calls are cancelled."""
    from inspector.celery import app

    Turn.objects.filter(pk=turn.pk).update(stop_requested=True)
    active = [ToolCall.Status.QUEUED, ToolCall.Status.RUNNING]
    calls = list(ToolCall.objects.filter(turn=turn, status__in=active))
    for call in calls:
        if call.celery_task_id:
            app.control.revoke(call.celery_task_id)
    # The status filter again: a call that finished meanwhile keeps its result.
    ToolCall.objects.filter(pk__in=[c.pk for c in calls], status__in=active).update(
        status=ToolCall.Status.CANCELLED, error="Stopped by the user.", finished_at=timezone.now()
    )
    for call in calls:
        publish(f"conversation.{turn.conversation_id}", {"type": "tool_call.status", "tool_call_id": str(call.pk), "status": "cancelled"})
    finish_turn(turn, Turn.Status.STOPPED)


# --- JSON shapes shared by events and the API ---------------------------------------------------

def message_json(m: Message) -> dict[str, Any]:
    return {
        "id": m.pk, "seq": m.seq, "role": m.role, "text": m.text, "tool_calls": m.tool_calls,
        "tool_call_id": str(m.tool_call_id) if m.tool_call_id else None, "llm_tool_call_id": m.llm_tool_call_id,
        "turn_id": m.turn_id, "step": m.step, "model": m.model, "usage": m.usage, "created_at": m.created_at.isoformat(),
    }


# --- one step -------------------------------------------------------------------------------------

class StreamingToolCalls:
    """Tool calls as the model streams them: name first, then argument fragments.

    Browsers get `tool_call.streaming` events with the arguments parsed so far (healed JSON),
    so a tool card and an App's view can appear, and the view can receive
    `ui/notifications/tool-input-partial`, before the model has finished writing the call.
    """

    PUBLISH_EVERY = 0.1  # seconds between events for one call (the first one goes at once)

    def __init__(self, tool_map: dict[str, tuple[str, str]]) -> None:
        self.tool_map = tool_map
        self.calls: dict[int, dict[str, Any]] = {}
        self.tools: dict[tuple[str, str], Any] = {}

    def add(self, delta: Any) -> dict[str, Any] | None:
        """Fold one streamed fragment in; return the event to publish now, if any."""
        index = getattr(delta, "index", None) or 0
        call = self.calls.setdefault(index, {"id": "", "name": "", "arguments": "", "published": 0.0})
        fn = getattr(delta, "function", None)
        if getattr(delta, "id", None) and delta.id != call["id"]:
            if call["id"]:  # a provider reusing an index for a new call: start it afresh
                call.update(name="", arguments="", published=0.0)
            call["id"] = delta.id
        if fn is not None and getattr(fn, "name", None):
            call["name"] = fn.name
        if fn is not None and getattr(fn, "arguments", None):
            call["arguments"] += fn.arguments
        now = time.monotonic()
        if not call["name"] or not call["id"] or now - call["published"] < self.PUBLISH_EVERY:
            return None
        call["published"] = now
        return {"index": index, "llm_tool_call_id": call["id"], "name": call["name"],
                "arguments": heal_arguments(call["arguments"]), **self._describe(call["name"])}

    def _describe(self, name: str) -> dict[str, Any]:
        target = self.tool_map.get(name)
        if target is None:
            return {"server_id": None, "server_name": "", "tool": name, "is_app": False}
        if target not in self.tools:
            from tools.models import Tool

            self.tools[target] = Tool.objects.filter(server_id=int(target[0]), name=target[1]).select_related("server").first()
        tool = self.tools[target]
        return {"server_id": int(target[0]), "server_name": tool.server.name if tool else "", "tool": target[1],
                "is_app": bool(tool and tool.is_app and tool.ui_resource_uri)}


def heal_arguments(partial: str) -> dict[str, Any]:
    """The arguments object parsed from an unfinished JSON string ({} until there is one)."""
    from partial_json_parser import loads

    try:
        value = loads(partial) if partial.strip() else {}
    except Exception:  # noqa: BLE001 - any fragment a model streams must not break the step
        return {}
    return value if isinstance(value, dict) else {}


def _stream(conversation: Conversation, turn: Turn, request: history.LlmRequest) -> tuple[str, list[dict], dict | None, bool]:
    """Call the model with streaming; publish deltas; return (text, tool_calls, usage, stopped)."""
    kwargs: dict[str, Any] = {
        "model": conversation.model,
        "messages": request.messages,
        "stream": True,
        "stream_options": {"include_usage": True},
        "timeout": settings.LLM_TIMEOUT,
        "num_retries": 0,
        "max_retries": 0,
    }
    if request.tools:
        kwargs["tools"] = request.tools
    if conversation.api_base:
        kwargs["api_base"] = conversation.api_base
    key = api_key_for(conversation)
    if key:
        kwargs["api_key"] = key
    elif conversation.api_base:
        # litellm would fall back to the deployment's environment key (e.g. OPENAI_API_KEY) and
        # send it to whatever api_base the user typed. A custom endpoint gets only keys the user gave.
        kwargs["api_key"] = "no-key"
    if conversation.temperature is not None:
        kwargs["temperature"] = conversation.temperature

    group = conversation.group_name
    streaming_calls = StreamingToolCalls(request.tool_map)
    chunks = []
    text = ""
    buffer = _redis()
    last_check = last_beat = time.monotonic()
    stopped = False
    response = litellm.completion(**kwargs)
    for chunk in response:
        chunks.append(chunk)
        choices = getattr(chunk, "choices", None) or []
        delta = choices[0].delta if choices else None
        piece = getattr(delta, "content", None) if delta else None
        if piece:
            text += piece
            publish(group, {"type": "message.delta", "turn_id": turn.pk, "step": turn.steps, "delta": piece})
            try:
                buffer.set(stream_key(turn.pk), text, ex=600)
            except redis.RedisError:
                pass
        tool_deltas = getattr(delta, "tool_calls", None) if delta else None
        for tc in tool_deltas or []:
            event = streaming_calls.add(tc)
            if event:
                publish(group, {"type": "tool_call.streaming", "turn_id": turn.pk, "step": turn.steps, **event})
        if time.monotonic() - last_check > STOP_POLL_SECONDS:
            last_check = time.monotonic()
            if Turn.objects.filter(pk=turn.pk, stop_requested=True).exists():
                stopped = True
                break
            if last_check - last_beat > PROGRESS_BEAT_SECONDS:
                # A long answer is progress: keeps the step's lease and tells close_if_stale so.
                last_beat = last_check
                Turn.objects.filter(pk=turn.pk, steps=turn.steps).update(step_claimed_at=timezone.now())
    if stopped:
        try:
            response.completion_stream.close()  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - best effort: stop reading from the provider
            pass
        return text, [], None, True
    built = litellm.stream_chunk_builder(chunks, messages=request.messages) if chunks else None
    tool_calls = []
    usage = None
    if built is not None:
        message = built.choices[0].message
        text = message.content or text
        for tc in message.tool_calls or []:
            tool_calls.append({"id": tc.id, "name": tc.function.name, "arguments": tc.function.arguments or "{}"})
        if getattr(built, "usage", None):
            usage = {k: getattr(built.usage, k, None) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
    return text, tool_calls, usage, False


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
        lease = timedelta(seconds=settings.LLM_TIMEOUT + 60)
        if turn.steps == step and turn.step_claimed_at and timezone.now() - turn.step_claimed_at < lease:
            raise StepInProgress()
        if turn.stop_requested or step > settings.CHAT_MAX_STEPS:
            return turn, "finish"
        Turn.objects.filter(pk=turn.pk).update(steps=step, step_claimed_at=timezone.now())
        turn.steps = step
        return turn, "claimed"


def run_step(turn_id: int, step: int | None = None) -> str:
    from tools.api import start_tool_call
    from tools.tasks import execute_tool_call

    if step is None:
        step = (Turn.objects.filter(pk=turn_id).values_list("steps", flat=True).first() or 0) + 1
    turn, claim = _claim_step(turn_id, step)
    if turn is None:
        return claim
    conversation = turn.conversation
    if claim == "finish":
        if turn.stop_requested:
            finish_turn(turn, Turn.Status.STOPPED)
            return "stopped"
        finish_turn(
            turn, Turn.Status.COMPLETED,
            notice=f"Stopped after {step - 1} model steps: the limit is CHAT_MAX_STEPS={settings.CHAT_MAX_STEPS}.",
        )
        return "step limit"

    request = history.build(conversation)
    try:
        text, requested, usage, stopped = _stream(conversation, turn, request)
    except Exception as exc:  # noqa: BLE001 - provider errors end the turn with a clear message
        log.warning("LLM step failed for turn %s: %s", turn.pk, exc.__class__.__name__)
        finish_turn(turn, Turn.Status.FAILED, error=describe_provider_error(exc))
        return "failed"
    if stopped:
        if text:
            m = conversation.append_message(role=Message.Role.ASSISTANT, text=text + "\n\n[stopped]", turn=turn,
                                            step=step, model=conversation.model)
            publish(conversation.group_name, {"type": "message.completed", "message": message_json(m)})
        finish_turn(turn, Turn.Status.STOPPED)
        return "stopped"

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
            return "stopped"
        try:
            with transaction.atomic():
                assistant = conversation.append_message(
                    role=Message.Role.ASSISTANT, text=text, tool_calls=requested, turn=turn, step=step,
                    model=conversation.model, usage=usage,
                )
        except IntegrityError:
            return "already done"  # another delivery of this step stored its answer first
        tool_messages = []
        for tc in requested:
            target = request.tool_map.get(tc["name"])
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
                server=server, tool_name=target[1], arguments=arguments, origin=ToolCall.Origin.LLM,
                user=conversation.owner, conversation=conversation, turn=turn, llm_tool_call_id=tc["id"], enqueue=False,
            )
            calls.append(call)
            tool_messages.append(
                conversation.append_message(role=Message.Role.TOOL, turn=turn, tool_call=call, llm_tool_call_id=tc["id"])
            )

        def after_commit():
            try:
                _redis().delete(stream_key(turn.pk))
            except redis.RedisError:
                pass
            group = conversation.group_name
            publish(group, {"type": "message.completed", "message": message_json(assistant)})
            for call in calls:
                publish(group, {
                    "type": "tool_call.created", "tool_call_id": str(call.pk), "llm_tool_call_id": call.llm_tool_call_id,
                    "server_id": call.server_id, "server_name": call.server_name, "tool": call.tool_name,
                    "arguments": call.arguments, "is_app": call.is_app, "origin": call.origin, "status": call.status,
                })
            for m in tool_messages:
                publish(group, {"type": "message.completed", "message": message_json(m)})
            if requested:
                # Parallel tool calls run in parallel; the next step starts when all have ended.
                from chat.tasks import fail_turn, llm_step

                header = [execute_tool_call.si(str(c.pk)) for c in calls]
                next_step = llm_step.si(turn.pk, step + 1).on_error(fail_turn.si(turn.pk))
                if header:
                    result = chord(header)(next_step)
                    for c, r in zip(calls, result.parent.results if result.parent else [], strict=False):
                        ToolCall.objects.filter(pk=c.pk).update(celery_task_id=r.id)
                else:
                    next_step.delay()
            else:
                finish_turn(turn, Turn.Status.COMPLETED)

        transaction.on_commit(after_commit)
    return "step done"
