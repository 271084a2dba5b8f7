"""WebSockets of the inspector: the live JSON-RPC log and a manual tool call's result."""

from __future__ import annotations

from channels.db import database_sync_to_async

from inspector.consumers import GroupRelayConsumer
from tools.models import ToolCall
from tools.rpclog import LOG_GROUP


class RpcLogConsumer(GroupRelayConsumer):
    """Every frame of the servers the user can see, as `rpc.frames` events."""

    async def groups_for_user(self, user):
        self.visible = await database_sync_to_async(self._visible)()
        return [LOG_GROUP]

    def _visible(self) -> set[int]:
        from tools.views import log_servers

        return set(log_servers(self.scope["user"]).values_list("pk", flat=True))

    async def filter_event(self, event):
        if event.get("type") != "rpc.frames":
            return event
        # Look again each time: servers come and go while a socket stays open.
        self.visible = await database_sync_to_async(self._visible)()
        frames = [f for f in event["frames"] if f["server_id"] in self.visible]
        return {**event, "frames": frames} if frames else None


class ToolCallConsumer(GroupRelayConsumer):
    """Status and full result of one tool call; sends the stored result at once if it is finished."""

    async def groups_for_user(self, user):
        pk = self.scope["url_route"]["kwargs"]["pk"]
        exists = await database_sync_to_async(lambda: ToolCall.objects.visible_to(user).filter(pk=pk).exists())()
        return [f"toolcall.{pk}"] if exists else None

    async def on_accepted(self, user):
        from tools.pipeline import result_event

        pk = self.scope["url_route"]["kwargs"]["pk"]

        def snapshot():
            call = ToolCall.objects.get(pk=pk)
            if call.is_final:
                return {"type": "tool_call.result", **result_event(call)}
            return {"type": "tool_call.status", "tool_call_id": str(call.pk), "status": call.status}

        event = await database_sync_to_async(snapshot)()
        if event:
            await self.send_json(event)
