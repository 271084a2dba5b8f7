"""Honouring a server's cache hints (tools/mcp/cache_hints.py) where the inspector lists and reads.

A list or a `resources/read` answered with `ttlMs` > 0 is kept (CachedResult) until then; asked
again within that time, the worker answers from what it kept instead of asking the server (the
tools list from the Tool rows sync_tools stored). A user's explicit refresh (`force`) always asks
the server. What the server says changed is forgotten at once: `notifications/*/list_changed`
drops that list, `notifications/resources/updated` that resource's read (tools/runtime/remote.py);
so does editing the server (tools/views.py refreshes with `force`).

`cacheScope: "private"` on an OAuth server (a connection, and a token, per user) keeps the result
for that user only; a public result, or any result of a server whose one connection serves every
user, is reused by all.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from tools.mcp.cache_hints import PRIVATE, CacheHint
from tools.models import CachedResult, Server


def _owner(server: Server, scope: str, user_id: int | None) -> int | None:
    return user_id if server.auth == "oauth" and scope == PRIVATE else None


def fresh(server: Server, method: str, user_id: int | None = None, key: str = "") -> CachedResult | None:
    """The kept result `user_id` may reuse for this request, if one is still fresh."""
    mine = Q(user__isnull=True) | Q(user_id=user_id) if server.auth == "oauth" else Q(user__isnull=True)
    return (CachedResult.objects.filter(mine, server=server, method=method, key=key, fresh_until__gt=timezone.now())
            .order_by("-fresh_until").first())


def keep(server: Server, method: str, hint: CacheHint, result: Any = None, user_id: int | None = None,
         key: str = "") -> CachedResult | None:
    """Keep a result the server just sent, for as long as its hint allows (nothing, and anything
    kept before forgotten, when it says 0 or nothing)."""
    owner = _owner(server, hint.scope, user_id)
    CachedResult.objects.filter(server=server, method=method, key=key, user_id=owner).delete()
    if hint.ttl_ms <= 0:
        return None
    now = timezone.now()
    return CachedResult.objects.create(server=server, user_id=owner, method=method, key=key, scope=hint.scope,
                                       ttl_ms=hint.ttl_ms, result=result if result is not None else {}, fetched_at=now,
                                       fresh_until=now + timedelta(milliseconds=hint.ttl_ms))


def forget(server_id: int, *methods: str, key: str | None = None) -> int:
    """Drop what was kept for these methods (all of the server's, without any): the server said it changed."""
    rows = CachedResult.objects.filter(server_id=server_id)
    if methods:
        rows = rows.filter(method__in=methods)
    if key is not None:
        rows = rows.filter(key=key)
    return rows.delete()[0]


def note(entry: CachedResult) -> dict[str, Any]:
    """What an answer served from the cache says about it (shown as “cached, fresh until …”)."""
    return {"cached": True, "fresh_until": entry.fresh_until.isoformat(), "fetched_at": entry.fetched_at.isoformat(),
            "cache_scope": entry.scope}
