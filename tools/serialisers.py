"""How the web layer shows servers, tools and sign-ins as JSON (API answers and pages' data), secrets masked."""

from __future__ import annotations

from typing import Any

from tools.forms import masked
from tools.mcp.url_secrets import MASK
from tools.models import OAuthFlow, OAuthGrant, Server, Tool


def server_json(server: Server) -> dict[str, Any]:
    """A server as the API shows it: secrets masked, never in clear."""
    return {
        "id": server.pk,
        "name": server.name,
        "transport": server.transport,
        "command": server.command,
        "args": server.args,
        "env": masked(server.env),
        "cwd": server.cwd,
        "url": server.masked_url,
        "headers": masked(server.headers),
        "auth": server.auth,
        "oauth_client_id": server.oauth_client_id,
        "oauth_client_secret": MASK if server.oauth_client_secret else "",
        "oauth_scope": server.oauth_scope,
        "oauth_grant": server.oauth_grant,
        "oauth_client_auth": server.oauth_client_auth,
        "oauth_private_key": MASK if server.oauth_private_key else "",
        "oauth_assertion": MASK if server.oauth_assertion else "",
        "oauth_assertion_file": server.oauth_assertion_file,
        "oauth_idp_token_endpoint": server.oauth_idp_token_endpoint,
        "oauth_idp_client_id": server.oauth_idp_client_id,
        "oauth_idp_client_secret": MASK if server.oauth_idp_client_secret else "",
        "oauth_dpop": server.oauth_dpop,  # the DPoP key itself never leaves
        "owner": server.owner.get_username(),
        "shared": server.shared,
        "enabled": server.enabled,
        "projection_policy": server.projection_policy,
        "roots": server.roots,
        "log_level": server.log_level,
        "call_timeout": server.call_timeout,
        "server_info": server.server_info,
        "protocol_version": server.protocol_version,
        "capabilities": server.capabilities,
        "instructions": server.instructions,
        "last_connected_at": server.last_connected_at.isoformat() if server.last_connected_at else None,
        "last_error": server.last_error,
        "created_at": server.created_at.isoformat(),
        "updated_at": server.updated_at.isoformat(),
    }


def tool_json(tool: Tool) -> dict[str, Any]:
    return {
        "name": tool.name, "title": tool.title, "description": tool.description,
        "input_schema": tool.input_schema, "output_schema": tool.output_schema, "annotations": tool.annotations,
        "meta": tool.meta, "is_app": tool.is_app, "ui_resource_uri": tool.ui_resource_uri,
        "visibility": tool.visibility, "projection_policy": tool.effective_policy(),
        "task_support": tool.task_support,
    }


def oauth_json(server: Server, user) -> dict[str, Any] | None:
    """The user's own sign-in to an OAuth server (never the tokens), and their latest attempts."""
    if server.auth != "oauth":
        return None
    grant = OAuthGrant.objects.filter(server=server, user=user).first()
    flows = OAuthFlow.objects.filter(server=server, user=user)[:5]
    return {
        "signed_in": bool(grant and grant.status == OAuthGrant.Status.ACTIVE),
        "grant": {"status": grant.status, "error": grant.error, "scope": grant.scope, "client_id": grant.client_id,
                  "token_type": grant.token_type, "expires_at": grant.expires_at.isoformat() if grant.expires_at else None,
                  "has_refresh_token": bool(grant.refresh_token), "updated_at": grant.updated_at.isoformat()} if grant else None,
        "attempts": [{"id": str(f.pk), "status": f.status, "error": f.error, "created_at": f.created_at.isoformat(),
                      "steps": f.steps} for f in flows],
    }
