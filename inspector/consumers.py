"""The base WebSocket consumer: login required, and a relay for events published to groups."""

from __future__ import annotations

from channels.generic.websocket import AsyncJsonWebsocketConsumer

CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404


class GroupRelayConsumer(AsyncJsonWebsocketConsumer):
    """Subclasses say which groups a socket joins in `groups_for_user`; None refuses the socket."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        groups = await self.groups_for_user(user)
        if groups is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.joined = groups
        for group in groups:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()
        await self.on_accepted(user)

    async def disconnect(self, code) -> None:
        for group in getattr(self, "joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def groups_for_user(self, user) -> list[str] | None:
        raise NotImplementedError

    async def on_accepted(self, user) -> None:
        """Hook for sending a catch-up snapshot."""

    async def relay(self, message: dict) -> None:
        event = await self.filter_event(message["event"])
        if event is not None:
            await self.send_json(event)

    async def filter_event(self, event: dict) -> dict | None:
        return event
