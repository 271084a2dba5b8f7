"""A conversation's tool calls: the caller context chat gives them, and chat's ways back to them.

Why: tools knows nothing of chat (tools/callers.py), so a call stores no foreign key into chat.
Chat starts its calls with a `Caller` keyed "conversation:<id>" (the `caller` column, indexed)
that carries the conversation's owner, model and group, and its id (and the turn's, for a
model's call) as refs in the call's JSON. Chat finds its calls by that key, and keeps what the
foreign keys did: a deleted conversation takes its calls with it (`delete_conversation_calls`,
connected in chat/apps.py), and a call of a shared conversation is readable by the team
(`shared_calls`, registered with tools there).
"""

from __future__ import annotations

from typing import Any

from django.db.models import CharField, Q, QuerySet, Value
from django.db.models.functions import Cast, Concat
from django.urls import reverse

from chat.events import conversation_group
from chat.models import Conversation, ModelContext, Turn
from tools.callers import Caller
from tools.models import ToolCall

KEY_PREFIX = "conversation:"
# The ids every tool call's JSON carries (None for a call no conversation made).
REF_NAMES = ("conversation_id", "turn_id")


def conversation_key(conversation_id: int) -> str:
    return f"{KEY_PREFIX}{conversation_id}"


def caller(conversation: Conversation, turn: Turn | None = None) -> Caller:
    """The caller of a call `conversation` makes (in `turn`, for the model's calls)."""
    return Caller(
        key=conversation_key(conversation.pk), owner_id=conversation.owner_id, model=conversation.model,
        groups=(conversation_group(conversation.pk),), refs={"conversation_id": conversation.pk},
        local_refs={"turn_id": turn.pk} if turn is not None else {},
    )


def calls_of(conversation: Conversation | int) -> QuerySet[ToolCall]:
    """Every call the conversation made (the model's, its views', its replays')."""
    pk = conversation if isinstance(conversation, int) else conversation.pk
    return ToolCall.objects.filter(caller=conversation_key(pk))


def calls_of_turn(turn: Turn) -> QuerySet[ToolCall]:
    """The calls the model asked for in `turn`."""
    return calls_of(turn.conversation_id).filter(context__local_refs__turn_id=turn.pk)


def follow_model(conversation: Conversation) -> int:
    """After the conversation's model changed: its calls still running count their tokens, and
    sample, with the new one (as when they read it through the foreign key). Returns how many."""
    calls = list(calls_of(conversation).filter(status__in=ToolCall.ACTIVE).only("pk", "context"))
    for call in calls:
        call.context = {**(call.context or {}), "model": conversation.model}
    ToolCall.objects.bulk_update(calls, ["context"])
    return len(calls)


def conversation_id_of(call: ToolCall) -> int | None:
    return ((call.context or {}).get("refs") or {}).get("conversation_id") if call.caller.startswith(KEY_PREFIX) else None


def turn_id_of(call: ToolCall) -> int | None:
    return ((call.context or {}).get("local_refs") or {}).get("turn_id")


def conversation_of(call: ToolCall) -> Conversation | None:
    pk = conversation_id_of(call)
    return Conversation.objects.filter(pk=pk).first() if pk is not None else None


def link(call: ToolCall) -> tuple[str, str] | None:
    """Where the workbench links a conversation's call back to (registered with tools.callers)."""
    pk = conversation_id_of(call)
    return (reverse("chat_view", args=[pk]), "conversation") if pk is not None else None


def view_state(call: ToolCall) -> dict[str, Any] | None:
    """The model context a view of the call stored (registered with tools.callers: the view gets it back)."""
    return ModelContext.objects.filter(tool_call=call).values("content", "structured", "widget_state").first()


def _keys(conversations: QuerySet[Conversation]) -> QuerySet:
    return conversations.annotate(
        caller_key=Concat(Value(KEY_PREFIX), Cast("pk", CharField()), output_field=CharField())
    ).values("caller_key")


def shared_calls(user: Any) -> Q:
    """The calls of conversations shared with the team (registered with tools.callers at ready)."""
    return Q(caller__in=_keys(Conversation.objects.filter(shared=True)))


def delete_conversation_calls(sender, instance: Conversation, **kwargs) -> None:
    """post_delete of a conversation: its calls go too (what the foreign key's CASCADE did)."""
    calls_of(instance.pk).delete()
