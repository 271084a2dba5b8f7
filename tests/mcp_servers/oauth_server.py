"""A test MCP server protected by OAuth 2.1, built from the `mcp` SDK's own authorization-server
pieces (`MCPServer(auth=…, auth_server_provider=…)`): protected-resource and authorization-server
metadata, dynamic client registration, PKCE, authorization code and refresh-token grants.

Run: ``python tests/mcp_servers/oauth_server.py --port N [--token-seconds S] [--iss-supported]
[--send-iss issuer|wrong] [--metadata-issuer URL] [--cimd FETCH_BASE]``: the next three make a
server that advertises RFC 9207's ``authorization_response_iss_parameter_supported``, sends (its
own or another) ``iss`` with the authorization response, or serves metadata naming another issuer
(RFC 8414 §3.3). ``--cimd`` advertises ``client_id_metadata_document_supported``: an https
``client_id`` is then a Client ID Metadata Document, fetched over HTTP from FETCH_BASE + the URL's
path (the test's app answers on loopback for its https PUBLIC_URL) and checked (its
``client_id`` is that URL; the redirect URI must be one it lists, as for any client).
``--client-credentials ID:SECRET`` and ``--client-jwt-key PEM_FILE`` add the client credentials
grant (the OAuth client credentials extension) for the client ID: authenticated with its secret
(client_secret_basic or _post) or with a JWT signed by the private key of that public key
(private_key_jwt, RFC 7523: iss = sub = ID, aud = this issuer); its tokens' subject is
``machine-ID``. ``--assertion-key PEM_FILE`` adds the RFC 7523 JWT bearer grant for that client
(its secret checked if it has one, else only its id): the assertion must verify with that public
key, `aud` this issuer; an ID-JAG (`typ` ``oauth-id-jag+jwt``, SEP-990) must also name the client
(`client_id`) and the requested `resource`. Its tokens' subject is ``assertion-SUB``.
``--dpop`` demands DPoP-bound tokens (RFC 9449): every token request needs a valid proof (ES256,
``htm``/``htu`` of the token endpoint, recent ``iat``), the token is answered ``token_type: DPoP`` and
bound to the proof key's thumbprint, and each MCP request with it needs ``Authorization: DPoP`` and
a valid proof of that key with ``ath``; ``--dpop-nonce`` also makes both the token endpoint and the MCP
endpoint demand a nonce (``use_dpop_nonce``, once per origin, then on every proof).
The authorization endpoint approves at once (a real one would show a consent page): it
redirects to the client's redirect URI with a code, like a user who clicked "Allow". Each
sign-in is a new "account" (``user-1``, ``user-2``…), so two inspector users get two identities.

Tools:
* ``whoami()`` - the account and a fingerprint of the bearer token this request carried (and
  ``dpop``: whether it was DPoP-bound, so this request came with a valid proof of its key).
* ``revoke_all()`` - forget every token (a revoked grant: the next request is a 401).
* ``break_token_endpoint(on)`` - the token endpoint answers garbage (a hostile server) while on.
* ``wait(seconds)`` - sleeps, then says which account asked.
* ``admin_only()`` - needs the scope ``admin`` too: without it, a 403 ``insufficient_scope`` naming
  ``mcp admin`` (a step-up: the client signs in again asking for it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import secrets
import sys
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mcp.server.auth.middleware.auth_context import get_access_token  # noqa: E402
from mcp.server.auth.provider import (  # noqa: E402
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions  # noqa: E402
from mcp.server.mcpserver import MCPServer  # noqa: E402
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken  # noqa: E402

TOKEN_SECONDS = {"value": 3600}
BROKEN = {"token": False}
# RFC 9207 / RFC 8414 §3.3 behaviours (command-line options): whether the metadata advertises
# `iss`, what the authorization response sends as `iss` ("" none, "issuer", "wrong"), and an
# issuer to put in the metadata instead of this server's own.
ISSUER = {"supported": False, "send": "", "metadata": "", "own": ""}
WRONG_ISSUER = "https://attacker.example.com"
CIMD = {"fetch_base": ""}  # --cimd: where Client ID Metadata Documents are fetched from
MACHINE = {"client_id": "", "secret": "", "public_key": "", "assertion_key": ""}  # --client-credentials, --client-jwt-key, --assertion-key
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
DPOP: dict[str, Any] = {"on": False, "nonce": "", "bound": {}, "jtis": set()}  # --dpop, --dpop-nonce; token -> jkt


class Provider:
    """Everything in memory: clients, codes, tokens."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.accounts = 0

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        if CIMD["fetch_base"] and client_id.startswith("https://"):
            return await self._metadata_document(client_id)
        return self.clients.get(client_id)

    async def _metadata_document(self, url: str) -> OAuthClientInformationFull | None:
        """A Client ID Metadata Document, fetched (no cache) and checked: its client_id is its URL."""
        from urllib.parse import urlsplit

        import httpx2

        async with httpx2.AsyncClient(timeout=10) as http:
            response = await http.get(CIMD["fetch_base"] + urlsplit(url).path)
        if response.status_code != 200:
            return None
        document = response.json()
        if document.get("client_id") != url or "client_secret" in document:
            return None
        # The document names no scope: this server lets such a client ask for any it offers.
        return OAuthClientInformationFull.model_validate({"scope": "mcp admin", **document})

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        self.accounts += 1
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code, scopes=params.scopes or ["mcp"], expires_at=time.time() + 300, client_id=client.client_id,
            code_challenge=params.code_challenge, redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly, resource=params.resource,
            subject=f"user-{self.accounts}",
        )
        iss = {"issuer": ISSUER["own"], "wrong": WRONG_ISSUER}.get(ISSUER["send"])
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state, iss=iss)

    async def load_authorization_code(self, client: OAuthClientInformationFull, authorization_code: str) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    def _issue(self, client_id: str, scopes: list[str], subject: str | None, resource: str | None) -> OAuthToken:
        if BROKEN["token"]:
            raise RuntimeError("broken on purpose")  # never reached: the ASGI wrapper answers first
        access, refresh = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        expires = int(time.time()) + TOKEN_SECONDS["value"]
        self.access[access] = AccessToken(token=access, client_id=client_id, scopes=scopes, expires_at=expires,
                                          resource=resource, subject=subject)
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, resource=resource,
                                             subject=subject)
        return OAuthToken(access_token=access, token_type="Bearer", expires_in=TOKEN_SECONDS["value"],
                          refresh_token=refresh, scope=" ".join(scopes))

    async def exchange_authorization_code(self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        return self._issue(client.client_id, authorization_code.scopes, authorization_code.subject, authorization_code.resource)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(self, client: OAuthClientInformationFull, refresh_token: RefreshToken,
                                     scopes: list[str]) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)
        return self._issue(client.client_id, scopes or refresh_token.scopes, refresh_token.subject, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: Any) -> None:
        self.access.pop(getattr(token, "token", ""), None)
        self.refresh.pop(getattr(token, "token", ""), None)


def build(port: int) -> tuple[MCPServer, Provider]:
    base = f"http://127.0.0.1:{port}"
    provider = Provider()
    mcp: MCPServer[Any] = MCPServer(
        "oauth-test-server", version="1.0.0", auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=base, resource_server_url=f"{base}/mcp", required_scopes=["mcp"],
            client_registration_options=ClientRegistrationOptions(enabled=True, valid_scopes=["mcp", "admin"],
                                                                  default_scopes=["mcp"]),
            revocation_options=RevocationOptions(enabled=True), validate_token_resource=True,
        ),
    )

    @mcp.tool(structured_output=False)
    async def whoami() -> str:
        """Who the bearer token says you are."""
        token = get_access_token()
        fingerprint = hashlib.sha256(token.token.encode()).hexdigest()[:16] if token else ""
        return json.dumps({"subject": token.subject if token else None, "token_sha256_16": fingerprint,
                           "dpop": bool(token and token.token in DPOP["bound"])})

    @mcp.tool(structured_output=False)
    async def revoke_all() -> str:
        """Forget every token: the next request with one is refused (401)."""
        count = len(provider.access)
        provider.access.clear()
        provider.refresh.clear()
        return f"revoked {count}"

    @mcp.tool(structured_output=False)
    async def wait(seconds: float = 1.0) -> str:
        """Sleep, then say which account asked."""
        token = get_access_token()
        await anyio.sleep(seconds)
        return f"waited {seconds:g} s for {token.subject if token else None}"

    @mcp.tool(structured_output=False)
    async def admin_only() -> str:
        """Needs the `admin` scope (checked before the call reaches here, see `step_up`)."""
        token = get_access_token()
        return f"admin for {token.subject if token else None}"

    @mcp.tool(structured_output=False)
    async def break_token_endpoint(on: bool = True) -> str:
        """Make the token endpoint answer garbage (200, not JSON) while on."""
        BROKEN["token"] = on
        return f"token endpoint broken: {on}"

    return mcp, provider


def step_up(app: Any, provider: Provider) -> Any:
    """ASGI wrapper: a tools/call of admin_only with a token lacking `admin` is a 403 insufficient_scope."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST" or scope.get("path") != "/mcp":
            return await app(scope, receive, send)
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        try:
            asks = json.loads(body)
        except ValueError:
            asks = {}
        auth = dict(scope.get("headers") or []).get(b"authorization", b"").decode()
        token = provider.access.get(auth.removeprefix("Bearer ").strip())
        if isinstance(asks, dict) and asks.get("method") == "tools/call" and (asks.get("params") or {}).get("name") == "admin_only" \
                and token is not None and "admin" not in token.scopes:
            challenge = 'Bearer error="insufficient_scope", scope="mcp admin", error_description="admin_only needs admin"'
            await send({"type": "http.response.start", "status": 403,
                        "headers": [(b"content-type", b"application/json"), (b"www-authenticate", challenge.encode())]})
            await send({"type": "http.response.body", "body": b'{"error": "insufficient_scope"}'})
            return None
        replayed = {"sent": False}

        async def replay() -> dict[str, Any]:
            if not replayed["sent"]:
                replayed["sent"] = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await app(scope, replay, send)

    return wrapped


def garbage_token_endpoint(app: Any) -> Any:
    """ASGI wrapper: while BROKEN, POST /token answers 200 with a body that is not a token response."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and BROKEN["token"] and scope.get("path") == "/token":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": b'{"access_token": 12, "nonsense": ["<script>"]'})
            return
        await app(scope, receive, send)

    return wrapped


async def held_response(app: Any, scope: dict[str, Any], receive: Any) -> tuple[dict[str, Any], bytes]:
    """The wrapped app's answer (its start message and whole body), held so a wrapper can rewrite it."""
    held: dict[str, Any] = {"start": None, "body": b""}

    async def hold(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            held["start"] = message
        else:
            held["body"] += message.get("body", b"")

    await app(scope, receive, hold)
    return held["start"], held["body"]


def issuer_metadata(app: Any) -> Any:
    """ASGI wrapper: the authorization-server metadata as the options say (RFC 9207 support
    advertised, another issuer named); records the issuer it names for the `iss` it sends."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope.get("path", "").startswith("/.well-known/oauth-authorization-server"):
            return await app(scope, receive, send)
        start, body = await held_response(app, scope, receive)
        if start["status"] == 200:
            metadata = json.loads(body)
            if ISSUER["supported"]:
                metadata["authorization_response_iss_parameter_supported"] = True
            if ISSUER["metadata"]:
                metadata["issuer"] = ISSUER["metadata"]
            if CIMD["fetch_base"]:
                metadata["client_id_metadata_document_supported"] = True
            if DPOP["on"]:
                metadata["dpop_signing_alg_values_supported"] = ["ES256"]
            ISSUER["own"] = metadata["issuer"]
            body = json.dumps(metadata).encode()
            start = {**start, "headers": [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
                     + [(b"content-length", str(len(body)).encode())]}
        await send(start)
        await send({"type": "http.response.body", "body": body})
        return None

    return wrapped


def _form(body: bytes) -> dict[str, str]:
    from urllib.parse import parse_qsl

    return dict(parse_qsl(body.decode()))


def machine_client(provider: Provider, port: int) -> Any:
    """ASGI wrapper: POST /token with grant_type=client_credentials, the client authenticated by
    its secret (Basic or in the form) or by a signed JWT (private_key_jwt)."""
    import base64

    import jwt

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path") != "/token" or not MACHINE["client_id"]:
            return await app_(scope, receive, send)
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        form = _form(body)
        if form.get("grant_type") == JWT_BEARER and MACHINE["assertion_key"]:
            answer, status = jwt_bearer(provider, form, dict(scope.get("headers") or []).get(b"authorization", b"").decode(), port)
            data = json.dumps(answer).encode()
            await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": data})
            return None
        if form.get("grant_type") != "client_credentials":
            replayed = {"sent": False}

            async def replay() -> dict[str, Any]:
                if not replayed["sent"]:
                    replayed["sent"] = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            return await app_(scope, replay, send)
        auth = dict(scope.get("headers") or []).get(b"authorization", b"").decode()
        client_id, ok = MACHINE["client_id"], False
        if auth.startswith("Basic ") and MACHINE["secret"]:
            ok = base64.b64decode(auth[6:]).decode() == f"{client_id}:{MACHINE['secret']}"
        elif form.get("client_secret") and MACHINE["secret"]:
            ok = form.get("client_id") == client_id and form["client_secret"] == MACHINE["secret"]
        elif form.get("client_assertion") and MACHINE["public_key"]:
            try:
                claims = jwt.decode(form["client_assertion"], MACHINE["public_key"], algorithms=["ES256", "RS256"],
                                    audience=[f"http://127.0.0.1:{port}/", f"http://127.0.0.1:{port}"])
                ok = claims["iss"] == claims["sub"] == client_id and \
                    form.get("client_assertion_type") == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
            except jwt.PyJWTError:
                ok = False
        if not ok:
            answer, status = {"error": "invalid_client", "error_description": "client authentication failed"}, 401
        else:
            scopes = (form.get("scope") or "mcp").split()
            answer, status = provider._issue(client_id, scopes, f"machine-{client_id}", form.get("resource")).model_dump(
                exclude_none=True), 200
        data = json.dumps(answer).encode()
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": data})
        return None

    app_: Any = None

    def wrap(app: Any) -> Any:
        nonlocal app_
        app_ = app
        return wrapped

    return wrap


def jwt_bearer(provider: Provider, form: dict[str, str], auth: str, port: int) -> tuple[dict[str, Any], int]:
    """RFC 7523 §2.1: the token for a verified assertion (and the client, as client_credentials checks it)."""
    import base64

    import jwt

    client_id = MACHINE["client_id"]
    if MACHINE["secret"]:
        client_ok = (auth.startswith("Basic ") and base64.b64decode(auth[6:]).decode() == f"{client_id}:{MACHINE['secret']}") or (
            form.get("client_id") == client_id and form.get("client_secret") == MACHINE["secret"])
    else:
        client_ok = form.get("client_id") == client_id
    if not client_ok:
        return {"error": "invalid_client", "error_description": "client authentication failed"}, 401
    try:
        claims = jwt.decode(form.get("assertion", ""), MACHINE["assertion_key"], algorithms=["ES256", "RS256"],
                            audience=[f"http://127.0.0.1:{port}/", f"http://127.0.0.1:{port}"])
        header = jwt.get_unverified_header(form["assertion"])
    except (jwt.PyJWTError, KeyError) as exc:
        return {"error": "invalid_grant", "error_description": f"assertion refused: {exc}"}, 400
    if header.get("typ") == "oauth-id-jag+jwt" and (claims.get("client_id") != client_id or claims.get("resource") != form.get("resource")):
        return {"error": "invalid_grant", "error_description": "the ID-JAG names another client or resource"}, 400
    scopes = (form.get("scope") or "mcp").split()
    return provider._issue(client_id, scopes, f"assertion-{claims.get('sub')}", form.get("resource")).model_dump(exclude_none=True), 200


def _thumbprint(jwk: dict[str, str]) -> str:
    """RFC 7638 over an EC key's required members (written here, not imported: an independent check)."""
    import base64

    canonical = json.dumps({k: jwk.get(k) for k in ("crv", "kty", "x", "y")}, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).rstrip(b"=").decode()


def _check_proof(proof: str, method: str, url: str, token: str | None) -> tuple[str, str]:
    """(jkt of the proof's key, "") for a valid DPoP proof of this request, else ("", why)."""
    import base64

    import jwt

    if not proof or "," in proof:
        return "", "one DPoP proof is required"
    try:
        header = jwt.get_unverified_header(proof)
        jwk = header.get("jwk") or {}
        if header.get("typ") != "dpop+jwt" or header.get("alg") != "ES256" or "d" in jwk:
            return "", "typ dpop+jwt, alg ES256 and a public jwk are required"
        claims = jwt.decode(proof, jwt.PyJWK(jwk, "ES256").key, algorithms=["ES256"])
    except (jwt.PyJWTError, ValueError, TypeError) as exc:
        return "", f"the proof does not verify ({exc.__class__.__name__})"
    if claims.get("htm") != method or claims.get("htu") != url or abs(time.time() - claims.get("iat", 0)) > 60:
        return "", "htm, htu or iat do not match this request"
    if not isinstance(claims.get("jti"), str) or claims["jti"] in DPOP["jtis"]:
        return "", "a fresh jti is required"
    if token is not None:
        ath = base64.urlsafe_b64encode(hashlib.sha256(token.encode()).digest()).rstrip(b"=").decode()
        if claims.get("ath") != ath:
            return "", "ath does not match the access token"
    if DPOP["nonce"] and claims.get("nonce") != DPOP["nonce"]:
        return "", "nonce"
    DPOP["jtis"].add(claims["jti"])
    return _thumbprint(jwk), ""


def dpop_binding(app: Any, port: int) -> Any:
    """ASGI wrapper (--dpop): proofs at the token endpoint (its tokens become DPoP-bound) and on every
    request of the MCP endpoint with a bound token, which reaches the SDK's app as a bearer token."""
    base = f"http://127.0.0.1:{port}"

    async def answer(send: Any, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]]) -> None:
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), *headers]})
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not DPOP["on"] or path not in ("/token", "/mcp"):
            return await app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        proof = headers.get(b"dpop", b"").decode()
        nonce_header = [(b"dpop-nonce", DPOP["nonce"].encode())] if DPOP["nonce"] else []
        if path == "/token":
            jkt, why = _check_proof(proof, scope["method"], f"{base}/token", None)
            if why == "nonce":
                return await answer(send, 400, {"error": "use_dpop_nonce", "error_description": "a DPoP nonce is required"},
                                    nonce_header)
            if why:
                return await answer(send, 400, {"error": "invalid_dpop_proof", "error_description": why}, [])
            start, body = await held_response(app, scope, receive)
            if start["status"] == 200:
                issued = json.loads(body)
                issued["token_type"] = "DPoP"
                DPOP["bound"][issued["access_token"]] = jkt
                body = json.dumps(issued).encode()
                start = {**start, "headers": [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
                         + [(b"content-length", str(len(body)).encode())]}
            await send(start)
            await send({"type": "http.response.body", "body": body})
            return None
        scheme, _, token = headers.get(b"authorization", b"").decode().partition(" ")
        bound = DPOP["bound"].get(token)
        if bound is None:
            return await app(scope, receive, send)  # no token, or not a DPoP one: the SDK's 401
        if scheme != "DPoP":
            return await answer(send, 401, {"error": "invalid_token"},
                                [(b"www-authenticate", b'DPoP error="invalid_token", error_description="a DPoP-bound token"')])
        jkt, why = _check_proof(proof, scope["method"], f"{base}/mcp", token)
        if why == "nonce":
            return await answer(send, 401, {"error": "use_dpop_nonce"},
                                [(b"www-authenticate", b'DPoP error="use_dpop_nonce"'), *nonce_header])
        if why or jkt != bound:
            return await answer(send, 401, {"error": "invalid_dpop_proof", "error_description": why or "another key"},
                                [(b"www-authenticate", b'DPoP error="invalid_dpop_proof"')])
        as_bearer = [(k, v) for k, v in scope["headers"] if k != b"authorization"] + [(b"authorization", f"Bearer {token}".encode())]
        return await app({**scope, "headers": as_bearer}, receive, send)

    return wrapped


async def main(port: int) -> None:
    import uvicorn

    mcp, provider = build(port)
    app = dpop_binding(issuer_metadata(machine_client(provider, port)(
        garbage_token_endpoint(step_up(mcp.streamable_http_app(host="127.0.0.1"), provider)))), port)
    await uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=1)).serve()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", default="http")  # (launch.py passes it; HTTP only)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token-seconds", type=int, default=3600)
    parser.add_argument("--iss-supported", action="store_true")
    parser.add_argument("--send-iss", choices=["", "issuer", "wrong"], default="")
    parser.add_argument("--metadata-issuer", default="")
    parser.add_argument("--cimd", default="", help="advertise CIMD support; fetch documents from this base URL")
    parser.add_argument("--client-credentials", default="", metavar="ID:SECRET")
    parser.add_argument("--client-jwt-key", default="", metavar="PEM_FILE", help="the public key of private_key_jwt")
    parser.add_argument("--assertion-key", default="", metavar="PEM_FILE", help="the public key jwt-bearer assertions verify with")
    parser.add_argument("--dpop", action="store_true", help="demand DPoP-bound tokens (RFC 9449)")
    parser.add_argument("--dpop-nonce", action="store_true", help="and a DPoP nonce at the token and MCP endpoints")
    args = parser.parse_args()
    DPOP.update(on=args.dpop or args.dpop_nonce, nonce="nonce-" + secrets.token_urlsafe(8) if args.dpop_nonce else "")
    CIMD["fetch_base"] = args.cimd.rstrip("/")
    if args.client_credentials:
        MACHINE["client_id"], _, MACHINE["secret"] = args.client_credentials.partition(":")
    if args.client_jwt_key:
        MACHINE["public_key"] = Path(args.client_jwt_key).read_text()
    if args.assertion_key:
        MACHINE["assertion_key"] = Path(args.assertion_key).read_text()
    TOKEN_SECONDS["value"] = args.token_seconds
    ISSUER.update(supported=args.iss_supported, send=args.send_iss, metadata=args.metadata_issuer)
    anyio.run(main, args.port)
