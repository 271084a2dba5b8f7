"""WebSockets of the inspector: the live JSON-RPC log, a server's own events and a manual tool call's result."""

from __future__ import annotations

import asyncio

from channels.db import database_sync_to_async

from inspector.consumers import GroupRelayConsumer
from tools.lookups import log_servers, reads_log
from tools.models import Server, ToolCall
from tools.runtime import events


class RpcLogConsumer(GroupRelayConsumer):
    """Every frame of the servers the user can see, as `rpc.frames` events."""

    async def groups_for_user(self, user):
        self.visible = await database_sync_to_async(self._visible)()
        return [events.RPC_LOG_GROUP]

    def _visible(self) -> set[int]:

        return set(log_servers(self.scope["user"]).values_list("pk", flat=True))

    async def filter_event(self, event):
        if event.get("type") != events.RPC_FRAMES:
            return event
        # Look again each time: servers come and go while a socket stays open.
        self.visible = await database_sync_to_async(self._visible)()
        frames = [f for f in event["frames"] if f["server_id"] in self.visible]
        return {**event, "frames": frames} if frames else None


class ServerConsumer(GroupRelayConsumer):
    """A server's own events for its pages: `resource.updated` to whoever sees the server,
    `server.log` to those who read its log (tools/server_log.py)."""

    async def groups_for_user(self, user):

        pk = self.scope["url_route"]["kwargs"]["pk"]
        server = await database_sync_to_async(lambda: Server.objects.visible_to(user).filter(pk=pk).first())()
        if server is None:
            return None
        self.reads_log = reads_log(user, server)
        return [events.server_group(pk)]

    async def filter_event(self, event):
        if event.get("type") == events.SERVER_LOG and not self.reads_log:
            return None
        return event


class ToolCallConsumer(GroupRelayConsumer):
    """Status and result of one tool call; on connect, its stored state at once.

    Like the live event, the catch-up `tool_call.result` carries the full result when it is
    small enough to push (tools/runtime/events.py), else only its `result_url`.
    A published event can be lost (publishing never fails the work that produced it; a Redis
    hiccup drops it), so while the call is not final the socket also looks at the database
    every RECHECK_SECONDS and sends the result itself if the event has not come: a socket
    that waits for a result always gets it.
    """

    RECHECK_SECONDS = 3.0

    async def groups_for_user(self, user):
        pk = self.scope["url_route"]["kwargs"]["pk"]
        exists = await database_sync_to_async(lambda: ToolCall.objects.visible_to(user).filter(pk=pk).exists())()
        return [events.tool_call_group(pk)] if exists else None

    def _current_event(self) -> dict:
        pk = self.scope["url_route"]["kwargs"]["pk"]
        call = events.summary_queryset(ToolCall.objects.filter(pk=pk)).get()
        if not call.is_final:
            return events.tool_call_event(events.TOOL_CALL_STATUS, call)
        return events.tool_call_event(events.TOOL_CALL_RESULT, call, events.stored_text_to_push(call))

    async def on_accepted(self, user):
        self.final_sent = False
        first = await database_sync_to_async(self._current_event)()
        await self.send_event(first)
        if not self.final_sent:
            self.recheck = asyncio.create_task(self._recheck())

    async def send_event(self, event: dict) -> None:
        if event.get("type") == events.TOOL_CALL_RESULT:
            if self.final_sent:
                return  # the recheck and the live event may both bring it: once is enough
            self.final_sent = True
        await self.send_json(event)

    async def relay(self, message: dict) -> None:
        await self.send_event(message["event"])

    async def _recheck(self) -> None:
        while not self.final_sent:
            await asyncio.sleep(self.RECHECK_SECONDS)
            try:
                event = await database_sync_to_async(self._current_event)()
            except ToolCall.DoesNotExist:
                return
            if event["type"] == events.TOOL_CALL_RESULT:
                await self.send_event(event)

    async def disconnect(self, code) -> None:
        task = getattr(self, "recheck", None)
        if task is not None:
            task.cancel()
        await super().disconnect(code)
