"""WebSockets of the inspector: the live JSON-RPC log, a server's own events, and tool calls' progress and results."""

from __future__ import annotations

import asyncio
import uuid

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


def current_call_event(pk) -> dict:
    """A call's state as one event: its status while it runs, its result (pushed when small
    enough, tools/runtime/events.py) once it has ended. Raises ToolCall.DoesNotExist."""
    call = events.summary_queryset(ToolCall.objects.filter(pk=pk)).get()
    if not call.is_final:
        return events.tool_call_event(events.TOOL_CALL_STATUS, call)
    return events.tool_call_event(events.TOOL_CALL_RESULT, call, events.stored_text_to_push(call))


class CallsConsumer(GroupRelayConsumer):
    """One socket per page for every call it watches (`/ws/calls/`): the page sends
    `{"subscribe": [ids]}` (and `{"unsubscribe": [ids]}`), and gets each call's events, every
    one naming its `tool_call_id`. A page pays one handshake, not one per call.

    Nothing is missed between a POST and its subscription: the socket joins the call's group
    first, then sends the call's current state (its result if it has already ended). Like the
    one-call socket, while a watched call runs the socket looks at the database every
    RECHECK_SECONDS and sends the result itself if the event was lost. A call's result is sent
    once; after it the socket leaves the call's group.
    """

    RECHECK_SECONDS = 3.0
    MAX_WATCHED = 200  # calls one socket may watch at once (a page watches a few)

    async def groups_for_user(self, user):
        self.watched: dict[str, bool] = {}  # call id -> its result was sent
        self.recheck: asyncio.Task | None = None
        return []

    async def receive_json(self, content, **kwargs) -> None:
        if not isinstance(content, dict):
            return
        for pk in _ids(content.get("unsubscribe")):
            await self._leave(pk)
        for pk in _ids(content.get("subscribe")):
            await self._watch(pk)

    async def _watch(self, pk: str) -> None:
        if pk in self.watched:
            self.watched[pk] = False  # (a page that subscribes again wants the current state again)
        elif len(self.watched) >= self.MAX_WATCHED:
            await self.send_json({"type": "calls.refused", "tool_call_id": pk, "error": "This socket watches too many calls."})
            return
        user = self.scope["user"]
        visible = await database_sync_to_async(lambda: ToolCall.objects.visible_to(user).filter(pk=pk).exists())()
        if not visible:
            await self.send_json({"type": "calls.refused", "tool_call_id": pk, "error": "No such tool call."})
            return
        self.watched[pk] = False
        if not await self._join([events.tool_call_group(pk)]):
            await self.send_json({"type": "calls.refused", "tool_call_id": pk, "error": "The event layer is unavailable."})
            return
        await self.send_event(await database_sync_to_async(current_call_event)(pk))
        if self.recheck is None or self.recheck.done():
            self.recheck = asyncio.create_task(self._recheck())

    async def _leave(self, pk: str) -> None:
        if self.watched.pop(pk, None) is not None:
            await self.channel_layer.group_discard(events.tool_call_group(pk), self.channel_name)

    async def send_event(self, event: dict) -> None:
        pk = event.get("tool_call_id")
        if pk not in self.watched or self.watched[pk]:
            # A call this page stopped watching, or one whose result was sent: the recheck and
            # the live event may both bring the result, and a status still in flight is stale.
            return
        if event.get("type") == events.TOOL_CALL_RESULT:
            self.watched[pk] = True
            await self.send_json(event)
            await self.channel_layer.group_discard(events.tool_call_group(pk), self.channel_name)
            return
        await self.send_json(event)

    async def relay(self, message: dict) -> None:
        await self.send_event(message["event"])

    async def _recheck(self) -> None:
        while any(not sent for sent in self.watched.values()):
            await asyncio.sleep(self.RECHECK_SECONDS)
            for pk in [pk for pk, sent in self.watched.items() if not sent]:
                try:
                    event = await database_sync_to_async(current_call_event)(pk)
                except ToolCall.DoesNotExist:
                    self.watched.pop(pk, None)
                    continue
                if event["type"] == events.TOOL_CALL_RESULT:
                    await self.send_event(event)

    async def disconnect(self, code) -> None:
        if getattr(self, "recheck", None) is not None:
            self.recheck.cancel()
        self.joined = [events.tool_call_group(pk) for pk, sent in getattr(self, "watched", {}).items() if not sent]
        await super().disconnect(code)


def _ids(value) -> list[str]:
    """Call ids from a page's message (a list of UUID strings); anything else is ignored."""
    if not isinstance(value, list):
        return []
    ids = []
    for item in value[:CallsConsumer.MAX_WATCHED]:
        try:
            ids.append(str(uuid.UUID(str(item))))
        except ValueError:
            continue
    return ids


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
        return current_call_event(self.scope["url_route"]["kwargs"]["pk"])

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
