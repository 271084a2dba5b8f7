"""A server's surface as one canonical JSON document, its hash, and the versions stored from refreshes.

The surface is what a client (and so the model) is told: server info and instructions,
capabilities, tools with their schemas and annotations, resources, resource templates, prompts.
Lists are sorted by their key and dicts by key, so the same surface always hashes the same,
whatever order the server listed things in.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from typing import Any

from django.db import IntegrityError, transaction

from review.models import ServerReview, SurfaceVersion
from tools.models import Server

log = logging.getLogger(__name__)

SECTIONS = ("tools", "resources", "resourceTemplates", "prompts")
KEYS = {"tools": "name", "resources": "uri", "resourceTemplates": "uriTemplate", "prompts": "name"}


def _sorted(items: list[Any], key: str) -> list[dict[str, Any]]:
    return sorted((i for i in items or [] if isinstance(i, dict)), key=lambda i: str(i.get(key, "")))


def canonical(info: dict[str, Any], resources: list | None = None, templates: list | None = None,
              prompts: list | None = None) -> dict[str, Any]:
    """The surface from a refresh's `info` (tools/runtime/remote.py `_overview`) and the other lists."""
    return {
        "serverInfo": info.get("server_info") or {},
        "instructions": info.get("instructions") or "",
        "capabilities": info.get("capabilities") or {},
        "tools": _sorted(info.get("tools") or [], "name"),
        "resources": _sorted(resources or [], "uri"),
        "resourceTemplates": _sorted(templates or [], "uriTemplate"),
        "prompts": _sorted(prompts or [], "name"),
    }


def canonical_json(surface: dict[str, Any]) -> str:
    return json.dumps(surface, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def surface_hash(surface: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(surface).encode()).hexdigest()


def offered_text(surface: dict[str, Any]) -> str:
    """What the model is sent for this surface on every request: the instructions and each tool's
    name, description and input schema (the shape chat/history.py offers)."""
    tools = [{"name": t.get("name"), "description": t.get("description") or t.get("title") or "",
              "parameters": t.get("inputSchema") or {}} for t in surface.get("tools", [])]
    return (surface.get("instructions") or "") + json.dumps(tools, sort_keys=True, ensure_ascii=False)


def token_cost(surface: dict[str, Any]) -> int:
    from tools.mcp import tokens

    return tokens.count(offered_text(surface))


def tool_tokens(tool: dict[str, Any]) -> int:
    from tools.mcp import tokens

    return tokens.count(json.dumps({"name": tool.get("name"), "description": tool.get("description") or "",
                                    "parameters": tool.get("inputSchema") or {}}, sort_keys=True, ensure_ascii=False))


# Each extra list a refresh asks for the surface is bounded by this (s): the refresh's own answer
# (the page's "Test connection") waits for it, and a server that hangs on prompts/list must not hold it.
LIST_TIMEOUT = 10.0


async def _other_lists(conn) -> dict[str, list]:
    """Resources, templates and prompts, each only when the server offers that capability; a
    list the server refuses (or does not answer within LIST_TIMEOUT) is recorded empty (its
    capability says it offers it; the diff shows that)."""
    caps = conn.capabilities or {}
    out: dict[str, list] = {"resources": [], "templates": [], "prompts": []}
    for key, cap, method in (("resources", "resources", conn.list_resources),
                             ("templates", "resources", conn.list_resource_templates),
                             ("prompts", "prompts", conn.list_prompts)):
        if cap in caps:
            try:
                out[key] = await method(timeout=LIST_TIMEOUT)
            except Exception as exc:  # noqa: BLE001 - one list missing must not lose the snapshot
                log.info("could not list %s of %s: %s", key, conn.config.name, exc)
    return out


def fetch_lists(server: Server, user_id: int | None = None) -> dict[str, list]:
    """List the rest of the surface on the server's warm connection (worker or command)."""
    from tools.runtime import remote

    return remote.run(server, _other_lists, user_id=user_id)


def latest(server: Server) -> SurfaceVersion | None:
    return SurfaceVersion.objects.filter(server=server).order_by("-number").first()


def record(server: Server, surface: dict[str, Any], by_id: int | None = None, source: str = "refresh") -> tuple[SurfaceVersion, bool]:
    """Store `surface` as the server's next version unless it hashes like the latest one.
    Returns (the latest version, whether it is new). Two workers recording at once: the unique
    number makes one of them re-read and find the other's."""
    from review import findings as review_findings

    digest = surface_hash(surface)
    current = latest(server)
    if current is not None and current.hash == digest:
        return current, False
    found = review_findings.review(server, surface)
    cost = token_cost(surface)
    try:
        with transaction.atomic():
            version = SurfaceVersion.objects.create(
                server=server, number=(current.number + 1) if current else 1, hash=digest, surface=surface,
                tokens=cost, findings=found, created_by_id=by_id, source=source)
    except IntegrityError:
        return latest(server), False
    from review import drift

    drift.apply(server)
    return version, True


def capture(server: Server, user_id: int | None = None, source: str = "command") -> tuple[SurfaceVersion, bool]:
    """Connect now, list everything, record (what `manage.py surface snapshot` does). The refresh's own
    signal is kept from recording it a second time with source "refresh"."""
    from tools.runtime import remote

    with quiet_refresh():
        info = remote.sync_tools(server, reconnect=True, user_id=user_id)
    lists = fetch_lists(server, user_id)
    return record(server, canonical(info, lists["resources"], lists["templates"], lists["prompts"]), user_id, source)


_quiet = threading.local()


class quiet_refresh:
    """While inside (this thread), the receiver of `server_listed` records nothing: the caller records itself."""

    def __enter__(self) -> "quiet_refresh":
        _quiet.depth = getattr(_quiet, "depth", 0) + 1
        return self

    def __exit__(self, *exc) -> bool:
        _quiet.depth -= 1
        return False


def is_quiet() -> bool:
    return getattr(_quiet, "depth", 0) > 0


def review_of(server: Server) -> ServerReview:
    return ServerReview.objects.get_or_create(server=server)[0]
