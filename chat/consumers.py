"""The conversation WebSocket: `/ws/conversations/{id}/`, its owner's, or anyone's once shared.

Events (all JSON objects with a `type`) are documented in the README. On connect the socket
sends `stream.snapshot` with the assistant text streamed so far in a running step; the page
loads stored messages over the API, so a page that opens or reconnects mid-turn misses nothing.
"""

from __future__ import annotations

from channels.db import database_sync_to_async

from chat import events
from chat.models import Conversation
from inspector.consumers import GroupRelayConsumer


class ConversationConsumer(GroupRelayConsumer):
    async def groups_for_user(self, user):
        pk = self.scope["url_route"]["kwargs"]["pk"]
        # Read-only: its owner, and anyone (viewers too) once it is shared with the team.
        exists = await database_sync_to_async(lambda: Conversation.objects.visible_to(user).filter(pk=pk).exists())()
        return [events.conversation_group(pk)] if exists else None

    async def on_accepted(self, user):
        from chat.llm import streamed_so_far

        pk = self.scope["url_route"]["kwargs"]["pk"]

        def snapshot():
            conversation = Conversation.objects.get(pk=pk)
            turn = conversation.active_turn()
            return {
                "type": events.STREAM_SNAPSHOT,
                "status": conversation.status,
                "turn_id": turn.pk if turn else None,
                "text": streamed_so_far(turn.pk) if turn else "",
            }

        await self.send_json(await database_sync_to_async(snapshot)())
