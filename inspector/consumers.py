"""The base WebSocket consumer: login required, and a relay for events published to groups."""

from __future__ import annotations

import asyncio
import logging

from channels.generic.websocket import AsyncJsonWebsocketConsumer
from redis.exceptions import RedisError

from inspector.events import event_text

CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
# The channel layer (Redis) cannot be reached. Below 4400 on purpose: static/js/http.js
# reconnects after codes under 4400 and gives up on refusals (4401, 4404).
CLOSE_UNAVAILABLE = 4000

log = logging.getLogger(__name__)
JOIN_ATTEMPTS = 3


class GroupRelayConsumer(AsyncJsonWebsocketConsumer):
    """Subclasses say which groups a socket joins in `groups_for_user`; None refuses the socket."""

    @classmethod
    async def encode_json(cls, content: dict) -> str:
        # A pushed full result arrives as its JSON text (inspector/events.py): sent as it is.
        return event_text(content)

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
        if not await self._join(groups):
            await self.close(code=CLOSE_UNAVAILABLE)
            return
        await self.accept()
        await self.on_accepted(user)

    async def _join(self, groups: list[str]) -> bool:
        """Join the groups, trying again on a Redis connection error: after Redis restarts, the
        layer's pooled connections are dead and the first command on each fails."""
        for attempt in range(JOIN_ATTEMPTS):
            try:
                for group in groups:
                    await self.channel_layer.group_add(group, self.channel_name)
                return True
            except (RedisError, OSError) as exc:
                log.warning("joining %s failed (%s), attempt %d of %d", groups, exc, attempt + 1, JOIN_ATTEMPTS)
                await asyncio.sleep(0.2 * (attempt + 1))
        return False

    async def disconnect(self, code) -> None:
        for group in getattr(self, "joined", []):
            try:
                await self.channel_layer.group_discard(group, self.channel_name)
            except (RedisError, OSError) as exc:  # the membership expires by itself (channel layer `expiry`)
                log.warning("leaving %s failed: %s", group, exc)

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
