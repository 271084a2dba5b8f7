"""One LLM request: the litellm call, streamed, with its deltas published as they arrive.

Everything that speaks to a provider lives here: which key a conversation uses, how a
provider error reads, how streamed tool calls are folded (and shown early), and the buffer
that lets a page opened mid-stream show the text so far. chat/agent.py decides when a step
runs and what is stored; this module only asks the model and reports what it said.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import redis
from django.conf import settings
from django.utils import timezone

from chat import history
from chat.models import Conversation, ProviderKey, Turn
from inspector.events import publish

log = logging.getLogger(__name__)

STOP_POLL_SECONDS = 0.5
PROGRESS_BEAT_SECONDS = 10


@dataclass
class Answer:
    """What the model said in one step (or how far it got before the user pressed Stop)."""

    text: str
    tool_calls: list[dict[str, str]] = field(default_factory=list)  # {"id", "name", "arguments" (JSON text)}
    usage: dict[str, Any] | None = None
    stopped: bool = False


def load_litellm() -> ModuleType:
    """litellm, imported on the first request to a model rather than at the top of this module.

    Importing it costs ~3 s of CPU (it loads the OpenAI SDK's types and every provider), and this
    module is reached from the URL configuration and from the Celery app's task modules: a
    top-level import made every daphne, worker and management command pay it at start. Only the
    code that calls a model (stream() here, chat/sampling.py) asks for it.
    tests/inspector/test_cold_start.py fails if a process imports it at start again.
    """
    import litellm

    litellm.suppress_debug_info = True  # no "Provider List: ..." banners in the worker's log
    return litellm


# --- live stream buffer: lets a page that opens mid-stream show the text so far -----------------

def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.CELERY_BROKER_URL)


def stream_key(turn_id: int) -> str:
    return f"{settings.REDIS_PREFIX}stream:{turn_id}"


def forget_stream(turn_id: int) -> None:
    """Drop the buffer once the text is stored as a message (or the turn ended)."""
    try:
        _redis().delete(stream_key(turn_id))
    except redis.RedisError:
        pass


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


def credentials(conversation: Conversation) -> dict[str, str]:
    """litellm's `api_base`/`api_key` for the conversation's requests (chat steps and sampling).

    litellm would fall back to the deployment's environment key (e.g. OPENAI_API_KEY) and send
    it to whatever api_base the user typed: a custom endpoint gets only keys the user gave.
    """
    kwargs: dict[str, str] = {}
    if conversation.api_base:
        kwargs["api_base"] = conversation.api_base
    key = api_key_for(conversation)
    if key:
        kwargs["api_key"] = key
    elif conversation.api_base:
        kwargs["api_key"] = "no-key"
    return kwargs


def completion_kwargs(
    model: str, messages: list[dict[str, Any]], creds: dict[str, str], *, temperature: float | None = None,
    max_tokens: int | None = None, tools: list[dict[str, Any]] | None = None, stream: bool = False,
) -> dict[str, Any]:
    """litellm.completion's keyword arguments, for a chat step and a server's sampling request alike.

    Why one: both talk to the same providers with the same credentials rules (`credentials`), the
    same LLM_TIMEOUT and no retries of litellm's own (a step is retried by its task, a sampling
    request by the person approving it); an option is sent only when it is set.
    """
    kwargs: dict[str, Any] = {"model": model, "messages": messages}
    if stream:
        kwargs.update(stream=True, stream_options={"include_usage": True})
    kwargs.update(timeout=settings.LLM_TIMEOUT, num_retries=0, max_retries=0)
    if tools:
        kwargs["tools"] = tools
    kwargs.update(creds)
    if temperature is not None:
        kwargs["temperature"] = temperature
    if max_tokens is not None:
        kwargs["max_tokens"] = max_tokens
    return kwargs


def describe_provider_error(exc: Exception) -> str:
    """A message a person can act on; never includes the key."""
    litellm = sys.modules.get("litellm")  # not imported yet: then `exc` is none of its errors
    kinds = [] if litellm is None else [
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
        if not target[0].isdigit():  # a tool an App view registered (chat/history.py VIEW_KEY)
            return {"server_id": None, "server_name": "App view", "tool": target[1], "is_app": False}
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


def stream(conversation: Conversation, turn: Turn, request: history.LlmRequest) -> Answer:
    """Ask the model, streaming; publish text and tool-call deltas to the conversation as they come.

    Provider errors propagate (the caller ends the turn with describe_provider_error).
    """
    kwargs = completion_kwargs(conversation.model, request.messages, credentials(conversation),
                               temperature=conversation.temperature, tools=request.tools, stream=True)

    group = conversation.group_name
    streaming_calls = StreamingToolCalls(request.tool_map)
    chunks = []
    text = ""
    buffer = _redis()
    last_check = last_beat = time.monotonic()
    stopped = False
    litellm = load_litellm()
    response = litellm.completion(**kwargs)
    for chunk in response:
        chunks.append(chunk)
        choices = getattr(chunk, "choices", None) or []
        delta = choices[0].delta if choices else None
        piece = getattr(delta, "content", None) if delta else None
        if piece:
            offset = len(text)
            text += piece
            # The buffer first, then the event: a page joining in between reads a snapshot that
            # holds the piece and also gets the event, whose `offset` lets it skip the overlap.
            try:
                buffer.set(stream_key(turn.pk), text, ex=600)
            except redis.RedisError:
                pass
            publish(group, {"type": "message.delta", "turn_id": turn.pk, "step": turn.steps, "delta": piece, "offset": offset})
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
        return Answer(text=text, stopped=True)
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
    return Answer(text=text, tool_calls=tool_calls, usage=usage)
