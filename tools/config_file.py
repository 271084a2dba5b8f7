"""Import and export of the common `{"mcpServers": {name: {...}}}` configuration format.

An HTTP server that signs in with OAuth carries `"oauth": {"enabled": true, "clientId": …,
"clientSecret": …, "scopes": [...]}` (the shape Gemini CLI reads); export leaves the client
secret out, as it masks every other secret. Each user's tokens never leave: they sign in again.
A grant without a sign-in (tools/mcp/oauth_grants.py, tools/mcp/token_exchange.py) adds its
non-secret settings: `grant`, `clientAuth`, `idpTokenEndpoint`, `idpClientId`, `assertionFile`;
an import also reads the secrets `assertion` and `idpClientSecret` (and `privateKey`), never exported.
`"dpop": true` says the server's tokens are DPoP-bound (its DPoP key is never exported either).
"""

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
        if oauth_form_data(entry.get("oauth")):
            raise ValueError("`oauth` is for HTTP and SSE servers (`url`), not for `command`")
        return {
            "name": name, "transport": Transport.STDIO, "command": entry["command"], "args": entry.get("args") or [],
            "env": entry.get("env") or {}, "cwd": entry.get("cwd") or "", "url": "", "headers": {},
        }
    if entry.get("url"):
        kind = str(entry.get("type") or entry.get("transport") or "").lower()
        transport = Transport.SSE if kind == "sse" else Transport.STREAMABLE_HTTP
        return {
            "name": name, "transport": transport, "command": "", "args": [], "env": {}, "cwd": "",
            "url": entry["url"], "headers": entry.get("headers") or {}, **oauth_form_data(entry.get("oauth")),
        }
    raise ValueError("needs either `command` (stdio) or `url` (HTTP/SSE)")


def oauth_form_data(oauth: Any) -> dict[str, str]:
    """The server form's OAuth fields from an entry's `oauth` object (absent or disabled: none)."""
    if oauth is None or oauth is False:
        return {}
    if not isinstance(oauth, dict):
        raise ValueError("`oauth` must be an object like {\"enabled\": true, \"clientId\": …, \"scopes\": [...]}")
    if not isinstance(oauth.get("enabled", True), bool):
        raise ValueError("`oauth.enabled` must be true or false")
    if oauth.get("enabled") is False:
        return {}
    scopes = oauth.get("scopes") or []
    if isinstance(scopes, str):
        scopes = scopes.split()
    if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
        raise ValueError("`oauth.scopes` must be a list of strings")
    for key in ("clientId", "clientSecret", *OAUTH_SETTINGS):
        if not isinstance(oauth.get(key, ""), (str, type(None))):
            raise ValueError(f"`oauth.{key}` must be a string")
    if not isinstance(oauth.get("dpop", False), bool):
        raise ValueError("`oauth.dpop` must be true or false")
    extra = {field: oauth[key] for key, field in OAUTH_SETTINGS.items() if oauth.get(key)}
    if oauth.get("dpop"):
        extra["oauth_dpop"] = "on"
    return {"auth": "oauth", "oauth_client_id": oauth.get("clientId") or "",
            "oauth_client_secret": oauth.get("clientSecret") or "", "oauth_scope": " ".join(scopes), **extra}


# `oauth` keys beyond the common ones, and the server settings they are; the secrets are read on
# import only (SECRET_OAUTH_SETTINGS), never exported.
OAUTH_SETTINGS = {"grant": "oauth_grant", "clientAuth": "oauth_client_auth", "idpTokenEndpoint": "oauth_idp_token_endpoint",
                  "idpClientId": "oauth_idp_client_id", "assertionFile": "oauth_assertion_file", "assertion": "oauth_assertion",
                  "idpClientSecret": "oauth_idp_client_secret", "privateKey": "oauth_private_key"}
SECRET_OAUTH_SETTINGS = {"assertion", "idpClientSecret", "privateKey"}


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
        if server.auth == "oauth":
            oauth: dict[str, Any] = {"enabled": True}
            if server.oauth_client_id:
                oauth["clientId"] = server.oauth_client_id
            if server.oauth_scope:
                oauth["scopes"] = server.oauth_scope.split()
            if server.oauth_grant != "authorization_code":
                for key, field in OAUTH_SETTINGS.items():
                    if key not in SECRET_OAUTH_SETTINGS and getattr(server, field):
                        oauth[key] = getattr(server, field)
            if server.oauth_dpop:
                oauth["dpop"] = True
            entry["oauth"] = oauth  # no clientSecret nor SECRET_OAUTH_SETTINGS: secrets, like the masked ones above
        out[server.name] = entry
    return {"mcpServers": out}
