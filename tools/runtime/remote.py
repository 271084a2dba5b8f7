"""Talking to MCP servers from a worker: the process's pool, wired to the JSON-RPC log.

Only Celery workers import this; the web process never opens an MCP connection.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import threading
import time
from typing import Any, Awaitable, Callable, TypeVar

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from inspector.events import publish
from tools.mcp import tool_headers
from tools.mcp.connection import Connection
from tools.mcp.errors import CallTimeout, ConnectionFailed, RemoteError
from tools.mcp.pool import Pool, get_pool
from tools.mcp.url_secrets import redact
from tools.models import ResourceSubscription, Server, Tool, UiResource, parse_pool_key, pool_key
from tools.runtime import events, result_cache
from tools.runtime.oauth import authorized_config, refresh_after_401, rejected
from tools.runtime.rpclog import recorder
from tools.runtime.server_requests import handle
from tools.signals import server_listed

log = logging.getLogger(__name__)
T = TypeVar("T")

LIST_CHANGED = {
    "notifications/tools/list_changed": "tools",
    "notifications/resources/list_changed": "resources",
    "notifications/prompts/list_changed": "prompts",
}


def _on_notification(config, method: str, params: dict) -> None:
    """Called on the pool's loop thread: hand list-changed and resource-updated work to a thread of its own."""
    if method in LIST_CHANGED:
        server_id, user_id = parse_pool_key(config.key)
        threading.Thread(target=_list_changed, args=(server_id, LIST_CHANGED[method], user_id), daemon=True).start()
    elif method == "notifications/resources/updated":
        threading.Thread(target=_resource_updated, args=(config, params, time.time()), daemon=True).start()


def _resource_updated(config, params: dict, at: float) -> None:
    """Tell the server's pages; and if nobody wants that resource any more (unsubscribed through
    another worker's connection), stop this connection's subscriptions to what nobody wants."""
    close_old_connections()
    try:
        server_id, user_id = parse_pool_key(config.key)
        uri = str(params.get("uri") or "")
        result_cache.forget(server_id, "resources/read", key=uri)  # the next read asks the server again
        publish(events.server_group(server_id), {
            "type": events.RESOURCE_UPDATED, "server_id": server_id, "uri": uri,
            "at": datetime.datetime.fromtimestamp(at, tz=datetime.timezone.utc).isoformat(),
        })
        server = Server.objects.filter(pk=server_id).first()
        wanted = subscription_uris(server, user_id) if server is not None else set()
        if uri not in wanted:
            pool().run(config, lambda conn: conn.subscriptions.sync(wanted), timeout=settings.MCP_CALL_TIMEOUT)
    except Exception:  # noqa: BLE001
        log.exception("handling notifications/resources/updated from %s failed", config.name)
    finally:
        close_old_connections()


def subscription_uris(server: Server, user_id: int | None = None) -> set[str]:
    """The resources a connection to `server` (for `user_id` on an OAuth server) subscribes to:
    what any user subscribed to (one connection serves them all), on an OAuth server that user's own.
    A server loaded by the pipeline says whether it has any (`has_subscriptions`): most have
    none, and their calls skip this query."""
    if getattr(server, "has_subscriptions", True) is False:
        return set()
    rows = ResourceSubscription.objects.filter(server=server)
    if server.auth == "oauth":
        rows = rows.filter(user_id=user_id)
    return set(rows.values_list("uri", flat=True))


def _list_changed(server_id: int, what: str, user_id: int | None = None) -> None:
    close_old_connections()
    try:
        server = Server.objects.get(pk=server_id)
        if what == "tools":
            sync_tools(server, user_id=user_id)  # (on an OAuth server, with the sign-in of the connection's user)
        elif what == "resources":
            UiResource.objects.filter(server=server).delete()
            result_cache.forget(server_id, "resources/list", "resources/templates/list", "resources/read")
        else:
            result_cache.forget(server_id, "prompts/list")
    except Exception:  # noqa: BLE001
        log.exception("refresh after %s list_changed failed for server %s", what, server_id)
    finally:
        close_old_connections()


def pool() -> Pool:
    return get_pool(on_frame=recorder(), on_notification=_on_notification, on_server_request=handle,
                    idle_timeout=settings.MCP_IDLE_TIMEOUT)


def roots_version(roots: Any) -> str:
    """A fingerprint of a server's configured roots."""
    return hashlib.sha256(json.dumps(roots or [], sort_keys=True).encode()).hexdigest()


def config_for(server: Server, user_id: int | None = None):
    """The connection settings for `user_id`'s requests: on an OAuth server their own token and
    connection (tools/runtime/oauth.py), else the server's one."""
    config = server.config()
    return authorized_config(server, config, user_id) if server.auth == "oauth" else config


def run(server: Server, fn: Callable[[Connection], Awaitable[T]], timeout: float | None = None,
        user_id: int | None = None) -> T:
    """Run `fn` against the server's warm connection (for `user_id`, who must have signed in if
    the server uses OAuth); record the outcome on the server row.

    Roots edited since this connection last used them are announced first
    (`notifications/roots/list_changed`): the server then asks `roots/list` again. Roots are
    read from the database when asked, so a change needs no reconnection."""
    config = config_for(server, user_id)
    roots = roots_version(server.roots)
    subscriptions = subscription_uris(server, user_id)

    async def with_roots(conn: Connection) -> T:
        if conn.roots_version is not None and conn.roots_version != roots:
            try:
                await conn.announce_roots_changed()
            except Exception as exc:  # noqa: BLE001 - a lost notification must not fail the call
                log.info("could not announce changed roots to %s: %s", server.name, exc)
        conn.roots_version = roots
        await _settle(conn, config.log_level, subscriptions)
        return await fn(conn)

    wait = timeout or (settings.MCP_CONNECT_TIMEOUT + settings.MCP_CALL_TIMEOUT)
    try:
        try:
            result = pool().run(config, with_roots, timeout=wait)
        except ConnectionFailed as exc:
            # A 401 means the server did not process the request: with a refreshed token it may go again, once.
            if exc.http_status != 401 or not refresh_after_401(server, user_id):
                raise
            pool().drop_server(config.key)
            config = config_for(server, user_id)
            result = pool().run(config, with_roots, timeout=wait)
    except (ConnectionFailed, CallTimeout, TimeoutError) as exc:
        told = rejected(server, user_id, exc) if isinstance(exc, ConnectionFailed) else ""
        if told:  # one user's token, not the server's health
            pool().drop_server(config.key)
            raise ConnectionFailed(told, exc.http_status) from None
        # Only the connection's health goes on the server; a JSON-RPC error answer is the request's.
        Server.objects.filter(pk=server.pk).update(last_error=redact(str(exc)) or exc.__class__.__name__)
        raise
    return result


async def _settle(conn: Connection, log_level: str | None, subscriptions: set[str]) -> None:
    """Bring a live connection to the server row's log level and the subscriptions users hold,
    without reconnecting: each worker's connection catches up at its next use. Refusals are
    logged (and kept per URI on the connection), never a reason to fail the call."""
    if conn.logging.level != log_level:
        try:
            await conn.logging.set(log_level)
        except (RemoteError, CallTimeout, ValueError) as exc:
            log.info("could not set the log level of %s to %s: %s", conn.config.name, log_level, exc)
            conn.logging.level = log_level  # not again at every call
    if subscriptions != conn.subscriptions.subscribed:
        try:
            await conn.subscriptions.sync(subscriptions)
        except (RemoteError, CallTimeout) as exc:
            log.info("could not update the resource subscriptions of %s: %s", conn.config.name, exc)


async def _overview(conn: Connection) -> dict[str, Any]:
    listed = await conn.listing("tools/list")
    return {
        "server_info": conn.handshake.server_info or {},
        "protocol_version": conn.protocol_version or "",
        "capabilities": conn.capabilities or {},
        "instructions": conn.handshake.instructions or "",
        "tools": listed.items,
        "hint": listed.hint,
    }


def store_tools(server: Server, tools: list[dict[str, Any]], protocol_version: str = "") -> list[Tool]:
    """Replace the cached tool definitions with what the server just listed; those with an invalid
    x-mcp-header are kept apart on the server, with why (tools/mcp/tool_headers.py)."""
    tools, aside = tool_headers.set_aside(tools, protocol_version)
    Server.objects.filter(pk=server.pk).update(set_aside_tools=aside)
    names = []
    for raw in tools:
        name = raw.get("name")
        if not isinstance(name, str):
            continue
        names.append(name)
        Tool.objects.update_or_create(server=server, name=name, defaults=Tool.fields_from_wire(raw))
    Tool.objects.filter(server=server).exclude(name__in=names).delete()
    return list(server.tools.all())


def sync_tools(server: Server, reconnect: bool = False, user_id: int | None = None, force: bool = True) -> dict[str, Any]:
    """Connect (fresh when `reconnect`), list tools, and store what the server said about itself.

    Without `force`, a tools list the server said is still fresh (its `ttlMs`, tools/runtime/result_cache.py)
    is not asked for again: the answer is what was stored, with `cached` and `fresh_until`."""
    if not force and (kept := result_cache.fresh(server, "tools/list", user_id)) is not None:
        return {"server_info": server.server_info, "protocol_version": server.protocol_version,
                "capabilities": server.capabilities, "instructions": server.instructions,
                "tools": [tool.definition for tool in server.tools.all()], **result_cache.note(kept)}
    if reconnect:
        pool().drop_server(pool_key(server.pk, user_id if server.auth == "oauth" else None))
    info = run(server, _overview, user_id=user_id)
    hint = info.pop("hint")
    Server.objects.filter(pk=server.pk).update(
        server_info=info["server_info"], protocol_version=info["protocol_version"], capabilities=info["capabilities"],
        instructions=info["instructions"], last_connected_at=timezone.now(), last_error="",
    )
    store_tools(server, info["tools"], info["protocol_version"])
    result_cache.keep(server, "tools/list", hint, user_id=user_id)
    server_listed.send(sender=Server, server=server, info=info, user_id=user_id)
    return info
