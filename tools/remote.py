"""Talking to MCP servers from a worker: the process's pool, wired to the JSON-RPC log.

Only Celery workers import this; the web process never opens an MCP connection.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Awaitable, Callable, TypeVar

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from tools.connection import CallTimeout, Connection, ConnectionFailed
from tools.models import Server, Tool
from tools.pool import Pool, get_pool
from tools.rpclog import recorder
from tools.url_secrets import redact

log = logging.getLogger(__name__)
T = TypeVar("T")

LIST_CHANGED = {
    "notifications/tools/list_changed": "tools",
    "notifications/resources/list_changed": "resources",
    "notifications/prompts/list_changed": "prompts",
}


def _on_notification(config, method: str, params: dict) -> None:
    """Called on the pool's loop thread: hand list-changed work to a thread of its own."""
    if method in LIST_CHANGED:
        threading.Thread(target=_list_changed, args=(int(config.key), LIST_CHANGED[method]), daemon=True).start()


def _list_changed(server_id: int, what: str) -> None:
    close_old_connections()
    try:
        server = Server.objects.get(pk=server_id)
        if what == "tools":
            sync_tools(server)
        elif what == "resources":
            from tools.models import UiResource

            UiResource.objects.filter(server=server).delete()
    except Exception:  # noqa: BLE001
        log.exception("refresh after %s list_changed failed for server %s", what, server_id)
    finally:
        close_old_connections()


def pool() -> Pool:
    from tools.server_requests import handle

    return get_pool(on_frame=recorder(), on_notification=_on_notification, on_server_request=handle,
                    idle_timeout=settings.MCP_IDLE_TIMEOUT)


def run(server: Server, fn: Callable[[Connection], Awaitable[T]], timeout: float | None = None) -> T:
    """Run `fn` against the server's warm connection; record the outcome on the server row."""
    config = server.config()
    try:
        result = pool().run(config, fn, timeout=timeout or (settings.MCP_CONNECT_TIMEOUT + settings.MCP_CALL_TIMEOUT))
    except (ConnectionFailed, CallTimeout, TimeoutError) as exc:
        # Only the connection's health goes on the server; a JSON-RPC error answer is the request's.
        Server.objects.filter(pk=server.pk).update(last_error=redact(str(exc)) or exc.__class__.__name__)
        raise
    return result


async def _overview(conn: Connection) -> dict[str, Any]:
    tools = await conn.list_tools()
    return {
        "server_info": conn.server_info or {},
        "protocol_version": conn.protocol_version or "",
        "capabilities": conn.capabilities or {},
        "instructions": conn.instructions or "",
        "tools": tools,
    }


def store_tools(server: Server, tools: list[dict[str, Any]]) -> list[Tool]:
    """Replace the cached tool definitions with what the server just listed."""
    names = []
    for raw in tools:
        name = raw.get("name")
        if not isinstance(name, str):
            continue
        names.append(name)
        Tool.objects.update_or_create(server=server, name=name, defaults=Tool.fields_from_wire(raw))
    Tool.objects.filter(server=server).exclude(name__in=names).delete()
    return list(server.tools.all())


def sync_tools(server: Server, reconnect: bool = False) -> dict[str, Any]:
    """Connect (fresh when `reconnect`), list tools, and store what the server said about itself."""
    if reconnect:
        pool().drop_server(server.config().key)
    info = run(server, _overview)
    Server.objects.filter(pk=server.pk).update(
        server_info=info["server_info"], protocol_version=info["protocol_version"], capabilities=info["capabilities"],
        instructions=info["instructions"], last_connected_at=timezone.now(), last_error="",
    )
    store_tools(server, info["tools"])
    return info
