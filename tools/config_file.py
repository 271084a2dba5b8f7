"""Import and export of the common `{"mcpServers": {name: {...}}}` configuration format."""

from __future__ import annotations

from typing import Any, Iterable

from django.core.exceptions import PermissionDenied
from django.db import transaction

from tools.forms import ServerForm, masked
from tools.models import Server, Transport


def entry_to_form_data(name: str, entry: Any) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise ValueError("each server must be a JSON object with `command` or `url`")
    if entry.get("command"):
        return {
            "name": name, "transport": Transport.STDIO, "command": entry["command"], "args": entry.get("args") or [],
            "env": entry.get("env") or {}, "cwd": entry.get("cwd") or "", "url": "", "headers": {},
        }
    if entry.get("url"):
        kind = str(entry.get("type") or entry.get("transport") or "").lower()
        transport = Transport.SSE if kind == "sse" else Transport.STREAMABLE_HTTP
        return {
            "name": name, "transport": transport, "command": "", "args": [], "env": {}, "cwd": "",
            "url": entry["url"], "headers": entry.get("headers") or {},
        }
    raise ValueError("needs either `command` (stdio) or `url` (HTTP/SSE)")


def import_servers(document: dict[str, Any], user) -> tuple[list[Server], list[dict[str, str]]]:
    """Create one server per entry; entries that fail are reported, the others still imported."""
    import json

    servers = document.get("mcpServers")
    if not isinstance(servers, dict) or not servers:
        return [], [{"name": "", "error": 'Expected {"mcpServers": {"name": {"command": …} | {"url": …}}}.'}]
    created, errors = [], []
    for name, entry in servers.items():
        try:
            data = entry_to_form_data(str(name), entry)
            for key in ("args", "env", "headers"):
                data[key] = json.dumps(data[key])
            data["enabled"] = "on"
            data["projection_policy"] = "content-first"
            form = ServerForm(data, user=user)
            if not form.is_valid():
                raise ValueError("; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
            with transaction.atomic():
                server = form.save(commit=False)
                server.owner = user
                server.save()
            created.append(server)
        except PermissionDenied as exc:
            errors.append({"name": str(name), "error": str(exc)})
        except ValueError as exc:
            errors.append({"name": str(name), "error": str(exc)})
    return created, errors


def export_servers(servers: Iterable[Server]) -> dict[str, Any]:
    """The mcpServers document with every secret masked (env, headers, the URL's password and tokens)."""
    out: dict[str, Any] = {}
    for server in servers:
        entry = server.to_config_entry()
        if "url" in entry:
            entry["url"] = server.masked_url
        for key in ("env", "headers"):
            if key in entry:
                entry[key] = masked(entry[key])
        out[server.name] = entry
    return {"mcpServers": out}
