"""OAuth grants without a person (the MCP auth extension `io.modelcontextprotocol/oauth-client-credentials`,
SEP-1046), Django-free like tools/mcp/oauth_flow.py: a machine-to-machine server a team runs, whose
token comes from the client's own credentials, no browser, no code.

The client authenticates at the token endpoint with `client_secret_basic` (its id and secret in
an HTTP Basic header) or `private_key_jwt` (RFC 7523 §2.2: a JWT signed with its private key,
`iss` = `sub` = the client id, `aud` = the authorization server's issuer, short-lived, a fresh
`jti`), built as the `mcp` SDK's `ClientCredentialsOAuthProvider` / `PrivateKeyJWTOAuthProvider`
and `SignedJWTParameters` build them. Discovery (protected-resource and authorization-server
metadata, the RFC 8414 issuer check) is tools/mcp/oauth_flow.py's; the RFC 8707 `resource` and the
scope go with the request.
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

import httpx2
import jwt
from mcp.shared.auth import OAuthToken

from tools.mcp.dpop import Proofer
from tools.mcp.oauth_flow import HTTP_TIMEOUT, OAuthError, Steps, _check_dpop, _discover, _post_token

CLIENT_AUTH_METHODS = ("client_secret_basic", "client_secret_post", "private_key_jwt")
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ASSERTION_SECONDS = 300


@dataclass
class MachineClient:
    """A client that gets its own tokens: its id, and a secret or a private key (PEM)."""

    client_id: str
    client_secret: str = ""
    private_key: str = ""
    auth_method: str = ""  # one of CLIENT_AUTH_METHODS; "" picks from what is given
    signing_alg: str = ""  # private_key_jwt: "" picks from the key (ES256 for EC, RS256 for RSA)
    scope: str = ""

    def method(self) -> str:
        if self.auth_method:
            return self.auth_method
        return "private_key_jwt" if self.private_key else "client_secret_basic"


def _signing_alg(private_key: str, wanted: str, offered: list[str] | None) -> str:
    if wanted:
        return wanted
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        key = load_pem_private_key(private_key.encode(), password=None)
    except (ValueError, TypeError) as exc:
        raise OAuthError(f"The private key is not a PEM private key without a password ({exc.__class__.__name__}).") from None
    alg = "ES256" if isinstance(key, ec.EllipticCurvePrivateKey) else "RS256"
    if offered and alg not in offered:
        raise OAuthError(f"The authorization server takes JWTs signed with {', '.join(offered)}, not {alg} (this key's).")
    return alg


def client_assertion(client: MachineClient, audience: str, alg: str) -> str:
    """RFC 7523 §2.2: the JWT that authenticates the client (as the SDK's SignedJWTParameters)."""
    now = int(time.time())
    claims: dict[str, Any] = {"iss": client.client_id, "sub": client.client_id, "aud": audience,
                              "iat": now, "exp": now + ASSERTION_SECONDS, "jti": str(uuid4())}
    try:
        return jwt.encode(claims, client.private_key, algorithm=alg)
    except (ValueError, TypeError, jwt.PyJWTError) as exc:
        raise OAuthError(f"Signing the client assertion with the private key failed: {exc}") from None


async def client_credentials(server_url: str, client: MachineClient, steps: Steps,
                             dpop: Proofer | None = None) -> tuple[OAuthToken, dict[str, Any]]:
    """A token for `client` itself (grant_type=client_credentials), and the context it came from
    (token endpoint, issuer, resource, client id) to keep with it; with `dpop`, bound to its key."""
    if not client.client_id:
        raise OAuthError("The client credentials grant needs the server's OAuth client id (and its secret or private key).")
    async with httpx2.AsyncClient(timeout=HTTP_TIMEOUT, follow_redirects=False) as http:
        found = await _discover(http, server_url, steps)
    asm = found["asm"]
    token_endpoint = str(asm.token_endpoint)
    scope = client.scope or found["scope"] or ""
    data = {"grant_type": "client_credentials", "resource": found["resource"]}
    if scope:
        data["scope"] = scope
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
    method = client.method()
    if method == "private_key_jwt":
        if not client.private_key:
            raise OAuthError("private_key_jwt needs the client's private key (PEM) in the server's settings.")
        alg = _signing_alg(client.private_key, client.signing_alg, asm.token_endpoint_auth_signing_alg_values_supported)
        data.update(client_assertion=client_assertion(client, str(asm.issuer), alg), client_assertion_type=ASSERTION_TYPE)
    elif not client.client_secret:
        raise OAuthError(f"{method} needs the client's secret in the server's settings.")
    elif method == "client_secret_basic":
        headers["Authorization"] = "Basic " + base64.b64encode(f"{client.client_id}:{client.client_secret}".encode()).decode()
    else:
        data.update(client_id=client.client_id, client_secret=client.client_secret)
    steps.note("client", True, f"client credentials grant as {client.client_id} ({method})")
    _check_dpop(dpop, found)
    token = await _post_token(steps, "token request (client credentials)", httpx2.Request("POST", token_endpoint, data=data,
                                                                                             headers=headers), dpop)
    context = {"token_endpoint": token_endpoint, "issuer": str(asm.issuer), "resource": found["resource"],
               "scope": scope, "client_id": client.client_id, "client_method": method}
    return token, context
