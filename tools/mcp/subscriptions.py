"""Resource subscriptions on one connection: ``resources/subscribe`` on 2025-11-25, one
``subscriptions/listen`` stream naming them all on 2026-07-28 (Django-free).

One connection serves every user of a server, so the set it holds is what any of them
subscribed to (tools/runtime/remote.py computes it and calls ``sync``). Updates arrive as
``notifications/resources/updated`` through the connection's ``on_notification`` and ``on_frame``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import anyio
import anyio.abc
import mcp_types as types
from mcp import Client

from tools.mcp.errors import ConnectionFailed, RemoteError, describe

if TYPE_CHECKING:  # (the connection owns this object; imported for the annotation only)
    from tools.mcp.connection import Connection

logger = logging.getLogger(__name__)


class ResourceSubscriptions:
    """The URIs a connection is subscribed to, and why the server refused the others it was asked for."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.subscribed: set[str] = set()
        self.errors: dict[str, str] = {}
        self._listen_task: asyncio.Task[None] | None = None  # 2026-07-28: the listen stream of `subscribed`

    def stop(self) -> None:
        """The connection closes: end the listen stream."""
        if self._listen_task is not None:
            self._listen_task.cancel()

    @property
    def offered(self) -> bool:
        """The server takes resource subscriptions (``resources.subscribe``)."""
        return bool((self.conn.capabilities.get("resources") or {}).get("subscribe"))

    async def sync(self, uris: set[str]) -> None:
        """Be subscribed to exactly ``uris``: ``resources/subscribe``/``unsubscribe`` on 2025-11-25,
        one ``subscriptions/listen`` stream naming them all on 2026-07-28 (opened again when the
        set changes). A URI the server refuses lands in ``errors``, not raised:
        the other URIs must not suffer for it. Updates arrive as ``notifications/resources/updated``
        through ``on_notification`` and ``on_frame``."""
        if self.conn.is_modern:
            listening = self._listen_task is not None and not self._listen_task.done()
            if uris != self.subscribed or (uris and not listening):
                await self._relisten(uris)
            return
        for uri in sorted(uris - self.subscribed):
            try:
                await self.conn.request(types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)))
            except RemoteError as exc:
                self.errors[uri] = f"the server refused resources/subscribe: {exc.message} (code {exc.code})"
                continue
            self.subscribed.add(uri)
            self.errors.pop(uri, None)
        for uri in sorted(self.subscribed - uris):
            self.subscribed.discard(uri)
            try:
                await self.conn.request(types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri)))
            except RemoteError as exc:
                logger.info("resources/unsubscribe %s refused by %s: %s", uri, self.conn.config.name, exc.message)

    async def _relisten(self, uris: set[str]) -> None:
        old, self._listen_task = self._listen_task, None
        self.subscribed = set()
        if old is not None:
            old.cancel()
            await asyncio.gather(old, return_exceptions=True)
        if not uris:
            return
        ready: asyncio.Future[set[str]] = asyncio.get_running_loop().create_future()
        self._listen_task = asyncio.create_task(self._listen_resources(sorted(uris), ready),
                                                    name=f"mcp-resource-listen:{self.conn.config.name}")
        try:
            honored = await ready
        except Exception as exc:  # noqa: BLE001 - recorded per URI, shown to whoever subscribed
            why = f"the server refused subscriptions/listen: {describe(exc)}"
            self.errors.update(dict.fromkeys(uris, why))
            return
        self.subscribed = honored & uris
        for uri in uris:
            if uri in honored:
                self.errors.pop(uri, None)
            else:
                self.errors[uri] = "the server left this URI out of the subscriptions/listen it acknowledged"

    async def _listen_resources(self, uris: list[str], ready: asyncio.Future[set[str]]) -> None:
        """The 2026-07-28 listen stream of the subscribed resources, held until cancelled or lost."""
        client = self.conn.sdk_client()
        try:
            async with client.listen(resource_subscriptions=uris) as subscription:
                ready.set_result(set(subscription.honored.resource_subscriptions or ()))
                async for _event in subscription:
                    pass  # the raw notifications already went to on_notification and on_frame
        except Exception as exc:  # noqa: BLE001 - reported through `ready`, or logged once it was acknowledged
            if not ready.done():
                ready.set_exception(exc)
            else:
                logger.info("resource subscriptions/listen on %s ended: %s", self.conn.config.name, describe(exc))
        finally:
            if not ready.done():
                ready.set_exception(ConnectionFailed(f"{self.conn.config.name}: the listen stream ended before it was acknowledged"))
            if self._listen_task is asyncio.current_task():
                self.subscribed = set()  # lost: the next sync listens again


async def listen_for_list_changes(conn: Connection, client: Client, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    """On 2026-07-28 connections, list-changed notifications only flow on a listen stream.

    Best-effort: a server that refuses or drops the stream still works for calls.
    """
    caps = conn.capabilities
    wanted = {kind: bool((caps.get(kind) or {}).get("listChanged")) for kind in ("tools", "prompts", "resources")}
    started = False
    try:
        if any(wanted.values()):
            async with client.listen(
                tools_list_changed=wanted["tools"],
                prompts_list_changed=wanted["prompts"],
                resources_list_changed=wanted["resources"],
            ) as subscription:
                task_status.started()
                started = True
                async for _event in subscription:
                    pass  # the raw notifications already went to on_notification
    except Exception as exc:  # noqa: BLE001 - notifications are best-effort
        logger.info("subscriptions/listen on %s ended: %s", conn.config.name, describe(exc))
    finally:
        if not started:
            task_status.started()
