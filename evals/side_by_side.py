"""Side-by-side chat: the same prompt to up to three models at once, each its own ordinary stored
conversation (so each can be continued, replayed, or made into an eval case)."""

from __future__ import annotations

from django.db import transaction

from chat.models import Conversation
from chat.tasks import begin_turn
from tools.models import Server


def start(user, prompt: str, models: list[dict[str, str]], *, api_key: str = "", servers: list[Server]) -> list[int]:
    """Create one conversation per model and send the prompt to each; their ids, in order."""
    ids = []
    with transaction.atomic():
        for m in models[:3]:
            conversation = Conversation.objects.create(owner=user, model=m["model"], api_base=m.get("api_base", ""),
                                                       api_key=api_key or "")
            conversation.servers.set(servers)
            begin_turn(conversation, prompt)
            ids.append(conversation.pk)
    return ids
