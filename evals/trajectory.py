"""What a stored conversation did, read once for the evals: its tool calls, answer, steps, usage.

Why one module: how a tool call links to its conversation is being reshaped (a call carries an
opaque context from its caller); `conversation_tool_calls` is the ONE place evals read a
conversation's calls, so only it changes when that link does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from chat.models import Conversation, Message, Turn
from chat.tool_calls import calls_of
from evals.checks import Observation, ObservedCall
from tools.models import ToolCall


def conversation_tool_calls(conversation: Conversation) -> list[ObservedCall]:
    """The calls the model made in the conversation, in the order it made them, with the
    projection it saw of each (never the full result)."""
    rows = (calls_of(conversation).filter(origin=ToolCall.Origin.LLM)
            .select_related("projection").order_by("queued_at", "pk"))
    out = []
    for call in rows:
        projection = call.projection if hasattr(call, "projection") else None  # hasattr: no row yet
        out.append(ObservedCall(server=call.server_name, tool=call.tool_name, arguments=call.arguments or {},
                                status=call.status, projection=projection.text if projection else "", id=str(call.pk)))
    return out


@dataclass
class Usage:
    """Tokens, time and how the turns ended, for an attempt's figures."""

    tokens_in: int = 0
    tokens_out: int = 0
    latency_ms: float | None = None
    turn_statuses: list[str] = field(default_factory=list)
    turn_errors: list[str] = field(default_factory=list)
    started_at: datetime | None = None
    finished_at: datetime | None = None


def observe(conversation: Conversation) -> tuple[Observation, Usage]:
    """The conversation's calls, final answer and step count (for the checks) and its usage."""
    assistant = list(conversation.messages.filter(role=Message.Role.ASSISTANT).order_by("seq")
                     .values_list("text", "usage"))
    answer = next((text for text, _ in reversed(assistant) if text.strip()), "")
    usage = Usage()
    for _, u in assistant:
        if isinstance(u, dict):
            usage.tokens_in += int(u.get("prompt_tokens") or 0)
            usage.tokens_out += int(u.get("completion_tokens") or 0)
    turns = list(Turn.objects.filter(conversation=conversation).order_by("created_at", "pk"))
    usage.turn_statuses = [t.status for t in turns]
    usage.turn_errors = [t.error for t in turns if t.status == Turn.Status.FAILED and t.error]
    if turns:
        usage.started_at = turns[0].created_at
        usage.finished_at = turns[-1].finished_at
        if usage.finished_at:
            usage.latency_ms = sum((t.finished_at - t.created_at).total_seconds() * 1000 for t in turns if t.finished_at)
    return Observation(calls=conversation_tool_calls(conversation), answer=answer, steps=len(assistant)), usage
