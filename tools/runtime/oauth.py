"""OAuth 2.1 for Streamable HTTP and SSE servers: each user signs in with their own account.

The sign-in, the tokens and every connection's bearer token, on the database (the HTTP steps
themselves are tools/mcp/oauth_flow.py):

1. `start` (a worker, when the user presses *Sign in*): discovery, the server's pre-registered
   client or one registered dynamically (kept, encrypted, on the server for the next user),
   PKCE; an `OAuthFlow` row with the authorization URL the browser is sent to.
2. The authorization server sends the browser back to `/oauth/callback/` with a code; `finish`
   (a worker) swaps it for tokens, stored encrypted per (server, user) in `OAuthGrant`.
3. `authorized_config` (every request a worker makes for that user): the user's bearer token,
   refreshed first when it expires within a minute, handed to the connection's HTTP client
   (`BEARER_TOKENS`) rather than put in its settings, so a refresh does not reconnect (and cut a
   call that is running); the pool keeps one warm connection per (server, user). No grant, a refresh that fails, or a 401 from the server
   (`rejected`): the request fails with "sign in (again) on the server page", and the grant
   says why.

With the server's "DPoP-bound tokens" setting (`oauth_dpop`), every token request carries a DPoP
proof of the server's own key (generated on first use, kept encrypted: `dpop_proofer`), and a
DPoP-bound token goes to the connection with that key (tools/mcp/dpop.py signs each request).

Every step is recorded on the `OAuthFlow` row with its HTTP exchange, secrets redacted, for the
server page's sign-in log.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from dataclasses import replace
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from mcp.shared.auth import OAuthToken

from tools.mcp import dpop, oauth_flow, oauth_grants, token_exchange
from tools.mcp.config import ServerConfig
from tools.mcp.errors import ConnectionFailed
from tools.mcp.http import BEARER_TOKENS
from tools.mcp.oauth_flow import ClientSettings, OAuthError, Steps
from tools.models import OAuthFlow, OAuthGrant, Server, pool_key
from tools.runtime import assertion_grants, cimd

log = logging.getLogger(__name__)

REFRESH_BEFORE = timedelta(seconds=60)  # refresh a token that expires within this


class SignInRequired(ConnectionFailed):
    """The user has no usable grant for this server: they must sign in on the server page."""


def _settings(server: Server, user_id: int, redirect_uri: str) -> ClientSettings:
    """The client for this sign-in. The app's Client ID Metadata Document (tools/runtime/cimd.py) is
    offered only when the browser comes back to the one redirect URI it lists (PUBLIC_URL's)."""
    granted, needed = OAuthGrant.objects.filter(server=server, user_id=user_id).values_list("scope", "needed_scope").first() or ("", "")
    # A new sign-in asks again for what the last one was granted, and for what a 403 named (SEP-2350: the union).
    return ClientSettings(client_id=server.oauth_client_id, client_secret=server.oauth_client_secret or "",
                          metadata_url=cimd.metadata_url() if redirect_uri == cimd.redirect_uri() else "", scope=server.oauth_scope,
                          extra_scope=oauth_flow.union(granted, needed),
                          registered=server.oauth_client or None)


def _client_secret(server: Server, client_id: str) -> str:
    """The secret of the client a grant or flow used: the pre-registered one, or the registered one."""
    if server.oauth_client_id == client_id:
        return server.oauth_client_secret or ""
    stored = server.oauth_client or {}
    return (stored.get("client_secret") or "") if stored.get("client_id") == client_id else ""


def dpop_proofer(server: Server, bound: bool = False) -> dpop.Proofer | None:
    """The server's DPoP key when its "DPoP-bound tokens" setting is on (or the token to refresh is
    bound already, the setting turned off since): generated on first use and stored encrypted (once,
    even with two workers at it), never replaced (its tokens are bound to it)."""
    if not (server.oauth_dpop or bound):
        return None
    if not server.oauth_dpop_key:
        with transaction.atomic():
            locked = Server.objects.select_for_update().only("pk", "oauth_dpop_key").get(pk=server.pk)
            if not locked.oauth_dpop_key:
                locked.oauth_dpop_key = dpop.new_private_key()
                Server.objects.filter(pk=server.pk).update(oauth_dpop_key=locked.oauth_dpop_key)
        server.oauth_dpop_key = locked.oauth_dpop_key
    return dpop.Proofer(server.oauth_dpop_key)


def start(server: Server, user_id: int, redirect_uri: str) -> OAuthFlow:
    """Begin a sign-in: the flow row, with the authorization URL (or the error) and its steps."""
    steps = Steps()
    try:
        begun = asyncio.run(oauth_flow.begin(server.real_url(), redirect_uri, _settings(server, user_id, redirect_uri), steps))
    except OAuthError as exc:
        steps.note("stopped", False, str(exc))
        return OAuthFlow.objects.create(server=server, user_id=user_id, state=secrets.token_urlsafe(32),
                                        redirect_uri=redirect_uri, steps=steps.entries, status=OAuthFlow.Status.FAILED,
                                        error=str(exc), finished_at=timezone.now())
    if begun.registered is not None:
        Server.objects.filter(pk=server.pk).update(oauth_client=begun.registered)
    return OAuthFlow.objects.create(server=server, user_id=user_id, state=begun.state, code_verifier=begun.code_verifier,
                                    redirect_uri=redirect_uri, authorization_url=begun.authorization_url,
                                    context=begun.context, steps=steps.entries)


def finish(flow: OAuthFlow, code: str, iss: str | None) -> OAuthFlow:
    """Swap the authorization code for tokens and store them as the user's grant."""
    steps = Steps(list(flow.steps))
    context = flow.context
    try:
        token = asyncio.run(oauth_flow.exchange_code(context, code, iss, flow.redirect_uri, flow.code_verifier,
                                                     _client_secret(flow.server, context["client_id"]), steps,
                                                     dpop=dpop_proofer(flow.server)))
    except OAuthError as exc:
        steps.note("stopped", False, str(exc))
        OAuthFlow.objects.filter(pk=flow.pk).update(steps=steps.entries, status=OAuthFlow.Status.FAILED, error=str(exc),
                                                    finished_at=timezone.now(), code_verifier="")
        flow.refresh_from_db()
        return flow
    with transaction.atomic():
        OAuthGrant.objects.update_or_create(server=flow.server, user=flow.user, defaults={
            **_grant_fields(token, None), "token_endpoint": context["token_endpoint"], "client_id": context["client_id"],
            "resource": context["resource"], "status": OAuthGrant.Status.ACTIVE, "error": "", "needed_scope": "",
        })
        OAuthFlow.objects.filter(pk=flow.pk).update(steps=steps.entries, status=OAuthFlow.Status.SIGNED_IN,
                                                    finished_at=timezone.now(), code_verifier="")
    flow.refresh_from_db()
    return flow


def _grant_fields(token: OAuthToken, previous: OAuthGrant | None) -> dict[str, Any]:
    expires = timezone.now() + timedelta(seconds=int(token.expires_in)) if token.expires_in else None
    return {"access_token": token.access_token, "token_type": token.token_type or "Bearer",
            # RFC 6749 §6: a refresh answer may omit both (unchanged).
            "refresh_token": token.refresh_token or (previous.refresh_token if previous else ""),
            "scope": token.scope or (previous.scope if previous else ""), "expires_at": expires}


def _refresh(grant: OAuthGrant) -> OAuthGrant:
    try:
        token = asyncio.run(oauth_flow.refresh(grant.token_endpoint, grant.refresh_token, grant.client_id,
                                               _client_secret(grant.server, grant.client_id), grant.resource, Steps(),
                                               dpop=dpop_proofer(grant.server, bound=grant.token_type == "DPoP")))
    except OAuthError as exc:
        now = OAuthGrant.objects.select_related("server").filter(pk=grant.pk).first()
        if now is not None and now.status == OAuthGrant.Status.ACTIVE and now.access_token != grant.access_token:
            return now  # another request refreshed it first (the refresh token was rotated): use its token
        OAuthGrant.objects.filter(pk=grant.pk).update(status=OAuthGrant.Status.EXPIRED, error=f"Refreshing the token failed: {exc}")
        raise SignInRequired(f"{grant.server.name}: your sign-in expired and refreshing it failed ({exc}); "
                             "sign in again on the server page.") from None
    OAuthGrant.objects.filter(pk=grant.pk).update(**_grant_fields(token, grant), status=OAuthGrant.Status.ACTIVE, error="")
    grant.refresh_from_db()
    return grant


def machine_client(server: Server) -> oauth_grants.MachineClient:
    """The server's own client, for the client credentials grant (tools/mcp/oauth_grants.py)."""
    return oauth_grants.MachineClient(client_id=server.oauth_client_id, client_secret=server.oauth_client_secret or "",
                                      private_key=server.oauth_private_key or "", auth_method=server.oauth_client_auth,
                                      scope=server.oauth_scope)


GRANT_NAMES = {"client_credentials": "the server's client credentials", "token_exchange": "enterprise-managed authorization",
               "jwt_bearer": "the server's JWT bearer assertion"}


def _machine_token(server: Server, steps: Steps) -> tuple[OAuthToken, dict[str, Any]]:
    """A token from the server's grant without a person: client credentials, or an assertion."""
    if server.oauth_grant == "client_credentials":
        return asyncio.run(oauth_grants.client_credentials(server.real_url(), machine_client(server), steps,
                                                           dpop=dpop_proofer(server)))
    client = assertion_grants.assertion_client(server)
    return asyncio.run(token_exchange.assertion_grant(server.real_url(), client, steps, server.oauth_grant == "token_exchange",
                                                      dpop=dpop_proofer(server)))


def _machine_grant(server: Server, user_id: int) -> OAuthGrant:
    """A new token from the server's grant without a person (client credentials, or an assertion),
    stored as this user's grant (the same client for everyone, one connection per user as with
    sign-ins). Failing, the request fails with why; an assertion grant is not tried again here."""
    steps = Steps()
    try:
        token, context = _machine_token(server, steps)
    except OAuthError as exc:
        # Kept as this user's grant, with no token, also the first time: the server page says why.
        OAuthGrant.objects.update_or_create(server=server, user_id=user_id, defaults={
            "status": OAuthGrant.Status.EXPIRED, "error": str(exc)[:500], "access_token": "", "refresh_token": "",
            "expires_at": None, "client_id": server.oauth_client_id[:300]})
        raise SignInRequired(f"{server.name}: getting a token with {GRANT_NAMES.get(server.oauth_grant, 'the server grant')} "
                             f"failed: {exc}") from None
    grant, _ = OAuthGrant.objects.update_or_create(server=server, user_id=user_id, defaults={
        **_grant_fields(token, None), "token_endpoint": context["token_endpoint"], "client_id": context["client_id"],
        "resource": context["resource"], "status": OAuthGrant.Status.ACTIVE, "error": "", "needed_scope": "",
    })
    return grant


def authorized_config(server: Server, config: ServerConfig, user_id: int | None) -> ServerConfig:
    """`config` for this user's connection: their bearer token, a pool key of their own."""
    if user_id is None:
        raise SignInRequired(f"{server.name} needs each user to sign in (OAuth), and this request has no user.")
    if server.oauth_grant == "token_exchange" and user_id != server.owner_id:
        # The ID token in the settings is the owner's identity: nobody else may act as them.
        raise SignInRequired(f"{server.name} uses enterprise-managed authorization with its owner's ID token; "
                             "only its owner can use it. Register the server yourself with your own ID token.")
    grant = OAuthGrant.objects.select_related("server").filter(server=server, user_id=user_id).first()
    if not server.signs_in and (
            grant is None or grant.status != OAuthGrant.Status.ACTIVE
            or (grant.expires_at is not None and grant.expires_at - timezone.now() < REFRESH_BEFORE)):
        grant = _machine_grant(server, user_id)  # no person, no refresh token: the grant again
    if grant is None or grant.status != OAuthGrant.Status.ACTIVE:
        why = f" ({grant.get_status_display()}: {grant.error})" if grant is not None and grant.error else ""
        raise SignInRequired(f"{server.name} uses OAuth: sign in on the server page first{why}.")
    if grant.expires_at is not None and grant.expires_at - timezone.now() < REFRESH_BEFORE:
        if not grant.refresh_token:
            OAuthGrant.objects.filter(pk=grant.pk).update(status=OAuthGrant.Status.EXPIRED, error="The token expired (no refresh token).")
            raise SignInRequired(f"{server.name}: your sign-in expired; sign in again on the server page.")
        grant = _refresh(grant)
    key = pool_key(server.pk, user_id)
    BEARER_TOKENS[key] = grant.access_token  # read by each HTTP request of the connection (not in its settings)
    bound = grant.token_type == "DPoP"
    if bound:
        dpop_key = grant.server.oauth_dpop_key  # as fresh as the grant (another worker may have made the key)
        if not dpop_key:
            OAuthGrant.objects.filter(pk=grant.pk).update(status=OAuthGrant.Status.EXPIRED, error="The DPoP key is gone.")
            raise SignInRequired(f"{server.name}: your token is bound to a DPoP key this server no longer has; sign in again.")
        dpop.register(str(key), dpop_key)  # each request's proof (tools/mcp/dpop.py), nonces kept
    return replace(config, key=key, bearer=True, dpop=bound)


def rejected(server: Server, user_id: int | None, exc: ConnectionFailed) -> str:
    """The server refused this user's token: a 401 (revoked, expired), or a 403 naming a scope the
    token lacks. The grant is marked so; the next sign-in asks for that scope too. Returns what to
    tell the user ("" if it was neither, or not an OAuth server)."""
    if server.auth != "oauth" or user_id is None or exc.http_status not in (401, 403):
        return ""
    if exc.http_status == 403:
        if not exc.needed_scope:
            return ""  # a 403 about something else (this request, not the token's scope)
        OAuthGrant.objects.filter(server=server, user_id=user_id).update(
            status=OAuthGrant.Status.REJECTED, error=str(exc)[:500], needed_scope=exc.needed_scope[:1000])
        return f"{server.name} needs more access (the scope “{exc.needed_scope}”): sign in again on the server page to grant it."
    OAuthGrant.objects.filter(server=server, user_id=user_id).update(status=OAuthGrant.Status.REJECTED, error=str(exc)[:500])
    return f"{server.name} refused your sign-in (HTTP 401): sign in again on the server page."


def refresh_after_401(server: Server, user_id: int | None) -> bool:
    """A 401 on a token we thought valid (the server revoked or shortened it): refresh once. True
    if a new token was stored (the request, which the server did not process, may go again)."""
    if server.auth != "oauth" or user_id is None:
        return False
    if not server.signs_in:
        try:
            _machine_grant(server, user_id)
        except SignInRequired:
            return False
        return True
    grant = OAuthGrant.objects.select_related("server").filter(server=server, user_id=user_id,
                                                               status=OAuthGrant.Status.ACTIVE).first()
    if grant is None or not grant.refresh_token:
        return False
    try:
        _refresh(grant)
    except SignInRequired:
        return False
    return True
