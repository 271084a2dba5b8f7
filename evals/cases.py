"""A case made in one click from a stored conversation: its user messages become the prompts and
its tool calls (read through evals/trajectory.py) the expected ones, as `equal` matchers to edit."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Max

from chat.models import Conversation, Message
from evals import checks, trajectory
from evals.models import Case, Suite
from tools.models import Server

DEFAULT_SUITE_NAME = "My evals"


def suite_for(user, suite_id: int | None) -> Suite:
    """The suite a new case goes to: the one asked for (the user's own), else the user's most
    recently changed suite, else a new one."""
    own = Suite.objects.filter(owner=user)
    if suite_id:
        return own.get(pk=suite_id)
    return own.order_by("-updated_at").first() or Suite.objects.create(owner=user, name=DEFAULT_SUITE_NAME)


def case_from_conversation(conversation: Conversation, suite: Suite) -> Case:
    prompts = list(conversation.messages.filter(role=Message.Role.USER).order_by("seq").values_list("text", flat=True))
    calls = trajectory.conversation_tool_calls(conversation)
    with transaction.atomic():
        position = (suite.cases.aggregate(m=Max("position"))["m"] or 0) + 1
        case = Case.objects.create(
            suite=suite, position=position, name=(conversation.title or f"Conversation {conversation.pk}")[:200],
            prompts=prompts or [""], expectations=checks.expectations_from_calls(calls), source_conversation=conversation,
        )
        # The suite offers the servers the conversation used (the suite owner's servers of those names).
        names = {c.server for c in calls} | set(conversation.servers.values_list("name", flat=True))
        visible = Server.objects.visible_to(suite.owner)
        have = set(suite.servers.values_list("name", flat=True))
        for name in sorted(names - have):
            match = sorted(visible.filter(name=name), key=lambda s: (s.owner_id != suite.owner_id, s.pk))
            if match:
                suite.servers.add(match[0])
        suite.save(update_fields=["updated_at"])
    return case
