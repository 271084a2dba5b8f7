"""The MCP authorization flow's HTTP steps, Django-free (like tools/mcp/connection.py): used by the
workers through tools/runtime/oauth.py, and by the conformance client (conformance/client.py).

Split where a person acts: `begin` (discovery, the client, PKCE, the authorization URL), then,
once the browser comes back with a code, `exchange_code`; later `refresh`. Built from the `mcp`
SDK's own pieces: its discovery-URL builders and response handlers, its registration request
and response, its metadata, token and PKCE models. (The SDK's OAuthClientProvider runs the whole
flow around one blocked request, which a worker cannot do.)

Each HTTP exchange is recorded in `Steps`, secrets redacted, for the server page's sign-in log.
"""

from __future__ import annotations

import base64
import json
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit

import httpx2
from mcp.client.auth.oauth2 import PKCEParameters
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    create_client_registration_request,
    create_oauth_metadata_request,
    extract_resource_metadata_from_www_auth,
    extract_scope_from_www_auth,
    handle_auth_metadata_response,
    handle_protected_resource_response,
    handle_registration_response,
    is_valid_client_metadata_url,
    issuers_match,
    should_use_client_metadata_url,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthMetadata, OAuthToken
from mcp.shared.auth_utils import check_resource_allowed, resource_url_from_server_url
from pydantic import ValidationError

from tools.mcp.dpop import BoundToken, DPoPError, Proofer
from tools.mcp.url_secrets import mask as mask_url

HTTP_TIMEOUT = 15.0
EXCERPT = 4000  # characters of an HTTP answer kept per step
SECRET_KEYS = {"access_token", "refresh_token", "id_token", "client_secret", "code", "code_verifier", "assertion",
               "registration_access_token", "subject_token"}
CLIENT_NAME = "MCP Inspector"


class OAuthError(Exception):
    """A step of the sign-in failed; the message says which and why."""


def redact_json(value: Any) -> Any:
    """A copy of `value` with the values of secret-bearing keys replaced by their length."""
    if isinstance(value, dict):
        return {k: (f"•••({len(str(v))} chars)" if k in SECRET_KEYS and v else redact_json(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_json(v) for v in value]
    return value


def _redact_text(text: str) -> str:
    try:
        return json.dumps(redact_json(json.loads(text)), indent=1)[:EXCERPT]
    except ValueError:
        return text[:EXCERPT]


@dataclass
class Steps:
    """The sign-in's record: one entry per step, with its HTTP exchange."""

    entries: list[dict[str, Any]] = field(default_factory=list)

    def note(self, step: str, ok: bool, detail: str = "", **extra: Any) -> None:
        self.entries.append({"step": step, "ok": ok, "detail": detail[:1000],
                             "at": datetime.now(timezone.utc).isoformat(), **extra})

    async def send(self, http: httpx2.AsyncClient, step: str, request: httpx2.Request,
                   expected: tuple[int, ...] = ()) -> httpx2.Response:
        """Send one request of the flow and record it (a status in `expected` is fine even if >= 400)."""
        body = request.content.decode("utf-8", "replace") if request.content else ""
        if body and request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            body = json.dumps(redact_json(dict(parse_qsl(body))), indent=1)
        entry: dict[str, Any] = {"method": request.method, "url": mask_url(str(request.url)),
                                 "request_body": _redact_text(body) if body else ""}
        try:
            response = await http.send(request)
            await response.aread()
        except httpx2.HTTPError as exc:
            self.note(step, False, f"{exc.__class__.__name__}: {exc}", **entry)
            raise OAuthError(f"{step}: could not reach {mask_url(str(request.url))} ({exc.__class__.__name__})") from None
        entry.update(status=response.status_code, response_body=_redact_text(response.text))
        self.note(step, response.status_code < 400 or response.status_code in expected, "", **entry)
        return response


@dataclass
class ClientSettings:
    """How this client is known to the authorization server: pre-registered (`client_id`, maybe a
    secret), or registered dynamically earlier (`registered`, reused when it still fits)."""

    client_id: str = ""
    client_secret: str = ""
    metadata_url: str = ""  # this client's Client ID Metadata Document (tools/runtime/cimd.py), if usable
    scope: str = ""  # instead of what discovery suggests
    # On top of it: the scope granted before and what a 403 insufficient_scope asked for (a step-up
    # asks for the union, SEP-2350, so the new token keeps what the old one could do).
    extra_scope: str = ""
    registered: dict[str, Any] | None = None


@dataclass
class Begun:
    """Where to send the browser, and what the code exchange will need."""

    authorization_url: str
    state: str
    code_verifier: str
    context: dict[str, Any]  # token_endpoint, issuer, resource, scope, client_id, client_method
    registered: dict[str, Any] | None  # a client registered now: keep it for the next sign-in


# --- discovery and the client ------------------------------------------------------------------------------

async def _discover(http: httpx2.AsyncClient, server_url: str, steps: Steps) -> dict[str, Any]:
    probe = await steps.send(http, "probe the server (expect 401)", httpx2.Request(
        "POST", server_url, json={"jsonrpc": "2.0", "id": 0, "method": "ping"},
        headers={"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}), expected=(401,))
    www_auth_url = extract_resource_metadata_from_www_auth(probe) if probe.status_code == 401 else None
    scope_hint = extract_scope_from_www_auth(probe) if probe.status_code == 401 else None
    prm = None
    for url in build_protected_resource_metadata_discovery_urls(www_auth_url, server_url):
        prm = await handle_protected_resource_response(
            await steps.send(http, "protected resource metadata", create_oauth_metadata_request(url)))
        if prm is not None:
            break
    auth_server = str(prm.authorization_servers[0]) if prm and prm.authorization_servers else None
    asm: OAuthMetadata | None = None
    dpop_algs: list[str] | None = None
    for url in build_oauth_authorization_server_metadata_discovery_urls(auth_server, server_url):
        response = await steps.send(http, "authorization server metadata", create_oauth_metadata_request(url))
        go_on, asm = await handle_auth_metadata_response(response)
        if asm is not None:
            _check_metadata_issuer(asm, auth_server, server_url, url)
            dpop_algs = _dpop_algs(response)
        if asm is not None or not go_on:
            break
    if asm is None:
        if auth_server is not None:
            raise OAuthError(f"No metadata was found for the authorization server {auth_server} (RFC 8414 / OpenID discovery).")
        # 2025-03-26: a server without metadata serves the default endpoints at its own origin.
        base = f"{urlsplit(server_url).scheme}://{urlsplit(server_url).netloc}"
        asm = OAuthMetadata(issuer=base, authorization_endpoint=f"{base}/authorize", token_endpoint=f"{base}/token",
                            registration_endpoint=f"{base}/register", response_types_supported=["code"])
        steps.note("default endpoints", True, f"no metadata anywhere: {base}/authorize, /token and /register (2025-03-26)")
    resource = resource_url_from_server_url(server_url)
    if prm is not None and prm.resource:
        if not check_resource_allowed(requested_resource=resource, configured_resource=str(prm.resource)):
            raise OAuthError(f"The protected resource metadata names {prm.resource}, which is not this server's URL.")
        resource = str(prm.resource)
    scope = scope_hint or (" ".join(prm.scopes_supported) if prm and prm.scopes_supported else None)
    return {"asm": asm, "resource": resource, "scope": scope, "dpop_algs": dpop_algs}


def _dpop_algs(response: httpx2.Response) -> list[str] | None:
    """`dpop_signing_alg_values_supported` (RFC 9449 §5.1), which the SDK's OAuthMetadata does not keep."""
    try:
        algs = response.json().get("dpop_signing_alg_values_supported")
    except (ValueError, AttributeError):
        return None
    return [str(a) for a in algs] if isinstance(algs, list) else None


def _origin_issuer(server_url: str) -> str:
    """The MCP server's origin as an issuer (`scheme://authority`), rendered as `OAuthMetadata`
    renders URLs so the two compare as strings (as the SDK's client does)."""
    parts = urlsplit(server_url)
    return str(OAuthMetadata(issuer=f"{parts.scheme}://{parts.netloc}", authorization_endpoint=server_url,
                             token_endpoint=server_url).issuer)


def _check_metadata_issuer(asm: OAuthMetadata, auth_server: str | None, server_url: str, fetched_from: str) -> None:
    """RFC 8414 §3.3: the metadata's `issuer` is the issuer its well-known URL was built from (the
    one the protected-resource metadata names), compared as plain strings as the SDK's client does.
    Without protected-resource metadata (the 2025-03-26 way) there is no issuer to compare with,
    only the MCP server's origin the URL was built from: the SDK wants that origin exactly; here an
    issuer on that same origin is accepted too (a 2025-03-26 server may name `<origin>/oauth`, as
    the conformance suite's 0.1.16 back-compat scenario does), another origin is not. Anything
    else may be another server's metadata: none of its endpoints is used."""
    if auth_server is None:
        origin = _origin_issuer(server_url)
        mine = urlsplit(str(asm.issuer))
        if issuers_match(str(asm.issuer), origin) or f"{mine.scheme}://{mine.netloc}" == origin.rstrip("/"):
            return
        expected = origin
    elif str(asm.issuer) == auth_server:
        return
    else:
        expected = auth_server
    raise OAuthError(f"The authorization server metadata at {mask_url(fetched_from)} names the issuer {asm.issuer}, "
                     f"not {expected}, the server it was fetched for: refused (RFC 8414 §3.3), nothing in it is used.")


def _client_of(info: dict[str, Any]) -> dict[str, str]:
    method = info.get("token_endpoint_auth_method") or ("client_secret_post" if info.get("client_secret") else "none")
    return {"client_id": info["client_id"], "client_secret": info.get("client_secret") or "", "method": method}


async def _client(http: httpx2.AsyncClient, settings: ClientSettings, asm: OAuthMetadata, redirect_uri: str,
                  scope: str | None, steps: Steps) -> tuple[dict[str, str], dict[str, Any] | None]:
    """(client id, secret, auth method), and a newly registered client to keep.

    In the `mcp` SDK client's order: the pre-registered client; else, when the authorization
    server advertises `client_id_metadata_document_supported` and this client has a usable
    document URL (https, with a path), that URL as the client id (a public client: no secret, no
    registration); else the client registered dynamically earlier, or a new registration; without
    a registration endpoint either, the user is asked for a pre-registered client."""
    if settings.client_id:
        steps.note("client", True, "the pre-registered client id")
        method = "client_secret_post" if settings.client_secret else "none"
        if settings.client_secret and "client_secret_basic" in (asm.token_endpoint_auth_methods_supported or []) and \
                "client_secret_post" not in (asm.token_endpoint_auth_methods_supported or []):
            method = "client_secret_basic"
        return {"client_id": settings.client_id, "client_secret": settings.client_secret, "method": method}, None
    if is_valid_client_metadata_url(settings.metadata_url) and should_use_client_metadata_url(asm, settings.metadata_url):
        steps.note("client", True, f"the Client ID Metadata Document {settings.metadata_url} (the authorization server "
                                   "supports client_id_metadata_document_supported): no registration")
        return {"client_id": settings.metadata_url, "client_secret": "", "method": "none"}, None
    stored = settings.registered or {}
    covers = not stored.get("scope") or set((scope or "").split()) <= set(str(stored.get("scope")).split())
    if stored.get("client_id") and redirect_uri in (stored.get("redirect_uris") or []) and stored.get("issuer") == str(asm.issuer) and covers:
        steps.note("client", True, "the client registered earlier")
        return _client_of(stored), None
    if not asm.registration_endpoint:
        raise OAuthError("The authorization server offers no dynamic client registration: enter a client id "
                         "registered with it in the server's settings.")
    metadata = OAuthClientMetadata(redirect_uris=[redirect_uri], client_name=CLIENT_NAME, scope=scope,
                                   grant_types=["authorization_code", "refresh_token"], response_types=["code"],
                                   token_endpoint_auth_method="none", application_type="web")
    response = await steps.send(http, "dynamic client registration",
                                create_client_registration_request(asm, metadata, str(asm.issuer)))
    try:
        info: OAuthClientInformationFull = await handle_registration_response(response)
    except Exception as exc:  # noqa: BLE001 - the SDK's OAuthRegistrationError, or a body that is not one
        raise OAuthError(f"Dynamic client registration failed: {exc}") from None
    registered = {**info.model_dump(mode="json", exclude_none=True), "issuer": str(asm.issuer)}
    return _client_of(registered), registered


def union(*scopes: str) -> str:
    """Space-separated scopes, each once, in the order first seen."""
    return " ".join(dict.fromkeys(word for scope in scopes for word in (scope or "").split()))


async def begin(server_url: str, redirect_uri: str, settings: ClientSettings, steps: Steps) -> Begun:
    """Discovery, the client, PKCE and state: the authorization URL to send the browser to."""
    async with httpx2.AsyncClient(timeout=HTTP_TIMEOUT, follow_redirects=False) as http:
        found = await _discover(http, server_url, steps)
        asm: OAuthMetadata = found["asm"]
        scope = union(settings.scope or found["scope"] or "", settings.extra_scope) or None
        client, registered = await _client(http, settings, asm, redirect_uri, scope, steps)
    pkce = PKCEParameters.generate()
    state = secrets.token_urlsafe(32)
    params = {"response_type": "code", "client_id": client["client_id"], "redirect_uri": redirect_uri, "state": state,
              "code_challenge": pkce.code_challenge, "code_challenge_method": "S256", "resource": found["resource"]}
    if scope:
        params["scope"] = scope
    endpoint = str(asm.authorization_endpoint) if asm.authorization_endpoint else urljoin(str(asm.issuer), "/authorize")
    url = f"{endpoint}?{urlencode(params)}"
    steps.note("authorization request", True, "the browser goes to the authorization server", url=endpoint)
    token_endpoint = str(asm.token_endpoint) if asm.token_endpoint else urljoin(str(asm.issuer), "/token")
    context = {"token_endpoint": token_endpoint, "issuer": str(asm.issuer), "resource": found["resource"],
               "scope": scope or "", "client_id": client["client_id"], "client_method": client["method"],
               "iss_supported": bool(asm.authorization_response_iss_parameter_supported),
               "dpop_algs": found["dpop_algs"]}
    return Begun(url, state, pkce.code_verifier, context, registered)


# --- tokens ------------------------------------------------------------------------------------------------

def _token_request(url: str, data: dict[str, str], client_id: str, secret: str, method: str) -> httpx2.Request:
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
    data = {**data, "client_id": client_id}
    if secret and method == "client_secret_basic":
        headers["Authorization"] = "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()
    elif secret:
        data["client_secret"] = secret
    return httpx2.Request("POST", url, data=data, headers=headers)


def _error_text(text: str) -> str:
    try:
        body = json.loads(text)
        return f"{body.get('error', '')} {body.get('error_description', '')}".strip() or text[:200]
    except (ValueError, AttributeError):
        return text[:200]


async def _post_token(steps: Steps, step: str, request: httpx2.Request, dpop: Proofer | None = None) -> OAuthToken:
    """POST a token request. With `dpop`, with a DPoP proof (RFC 9449 §5), sent once more with the
    authorization server's nonce if it answers `use_dpop_nonce` (§8); the token may then be DPoP-bound."""
    async with httpx2.AsyncClient(timeout=HTTP_TIMEOUT, follow_redirects=False) as http:
        if dpop is not None:
            dpop.sign(request)
        response = await steps.send(http, step, request)
        if dpop is not None and dpop.note_nonce(response):
            dpop.sign(request)
            response = await steps.send(http, f"{step}, again with the DPoP nonce", request)
    if response.status_code != 200:
        hint = ""
        if dpop is None and ("dpop" in response.text.lower() or "dpop" in response.headers.get("WWW-Authenticate", "").lower()):
            hint = " (it wants DPoP: turn on “DPoP-bound tokens” in the server's settings)"
        raise OAuthError(f"The token endpoint answered {response.status_code}: {_error_text(response.text)}{hint}")
    try:
        return (BoundToken if dpop is not None else OAuthToken).model_validate_json(response.content)
    except ValidationError:
        raise OAuthError("The token endpoint's answer is not an OAuth token response "
                         f"({len(response.content)} bytes; see the sign-in log).") from None


def _check_dpop(dpop: Proofer | None, context: dict[str, Any]) -> None:
    if dpop is not None:
        try:
            dpop.check_algorithms(context.get("dpop_algs"))
        except DPoPError as exc:
            raise OAuthError(str(exc)) from None


async def exchange_code(context: dict[str, Any], code: str, iss: str | None, redirect_uri: str, code_verifier: str,
                        client_secret: str, steps: Steps, dpop: Proofer | None = None) -> OAuthToken:
    """The authorization code (with the PKCE verifier and the RFC 8707 resource) for tokens.

    RFC 9207, as the SDK's client checks it: an `iss` that is not the issuer's own (simple string
    comparison), or none when the metadata advertised `authorization_response_iss_parameter_supported`,
    and the code is not sent anywhere (the response may come from another server: a mix-up).
    With `dpop` (tools/mcp/dpop.py), the token is asked for bound to its key."""
    if iss is not None and iss != context.get("issuer"):
        raise OAuthError(f"The authorization response came from issuer {iss}, not {context.get('issuer')}: "
                         "the code was not exchanged (RFC 9207).")
    if iss is None and context.get("iss_supported"):
        raise OAuthError(f"The authorization server {context.get('issuer')} says it sends its issuer with the "
                         "authorization response (authorization_response_iss_parameter_supported), but the redirect back "
                         "had no iss: the code was not exchanged (RFC 9207).")
    data = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
            "code_verifier": code_verifier, "resource": context["resource"]}
    _check_dpop(dpop, context)
    return await _post_token(steps, "token exchange", _token_request(
        context["token_endpoint"], data, context["client_id"], client_secret, context["client_method"]), dpop)


async def refresh(token_endpoint: str, refresh_token: str, client_id: str, client_secret: str, resource: str,
                  steps: Steps, dpop: Proofer | None = None) -> OAuthToken:
    """A new access token from the refresh token (with `dpop`, bound to its key, as the refresh token may be)."""
    data = {"grant_type": "refresh_token", "refresh_token": refresh_token}
    if resource:
        data["resource"] = resource
    method = "client_secret_post" if client_secret else "none"
    return await _post_token(steps, "refresh", _token_request(token_endpoint, data, client_id, client_secret, method), dpop)
