"""Tokens from an assertion, no browser (Django-free like tools/mcp/oauth_grants.py): the two MCP
auth extensions whose client presents a JWT someone else issued.

- Enterprise-managed authorization (SEP-990, `io.modelcontextprotocol/enterprise-managed-authorization`):
  the user's ID token from the enterprise identity provider is exchanged there (RFC 8693,
  `requested_token_type=…:id-jag`) for an Identity Assertion JWT Authorization Grant (ID-JAG) whose
  `aud` is the MCP authorization server's issuer and whose `resource` is the MCP server; the
  ID-JAG then goes to the authorization server with the RFC 7523 jwt-bearer grant.
- Workload identity federation (SEP-1933, `io.modelcontextprotocol/auth/wif`): a JWT the workload
  already holds (a Kubernetes or cloud token, from a setting or a file) goes straight to the
  authorization server with the jwt-bearer grant.

The requests are built as the `mcp` SDK's `IdentityAssertionOAuthProvider` builds its leg 2 (and
as the SDK's conformance client does leg 1, which the SDK leaves to the caller): jwt-bearer with
`assertion`, `client_id` and the RFC 8707 `resource`; the client's secret, if it has one, with
`client_secret_basic` or `client_secret_post`. A failed grant is reported, never retried or
swapped for another grant (the WIF scenario checks that). Discovery (protected-resource and
authorization-server metadata with the RFC 8414 issuer check) is tools/mcp/oauth_flow.py's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx2
from mcp.shared.auth import JWT_BEARER_GRANT_TYPE, OAuthToken

from tools.mcp.dpop import Proofer
from tools.mcp.oauth_flow import HTTP_TIMEOUT, OAuthError, Steps, _check_dpop, _discover, _error_text, _post_token, _token_request

TOKEN_EXCHANGE_GRANT_TYPE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id-jag"


@dataclass
class AssertionClient:
    """The server's client at the MCP authorization server, and what it presents.

    `assertion` is the ID token (enterprise-managed) or the workload JWT (WIF); the IdP fields are
    for the enterprise-managed token exchange only."""

    client_id: str
    assertion: str
    client_secret: str = ""
    auth_method: str = ""  # client_secret_basic | client_secret_post; "" picks basic with a secret
    scope: str = ""
    idp_token_endpoint: str = ""
    idp_client_id: str = ""
    idp_client_secret: str = ""

    def method(self) -> str:
        if not self.client_secret:
            return "none"
        return self.auth_method if self.auth_method in ("client_secret_basic", "client_secret_post") else "client_secret_basic"


def id_jag_request(client: AssertionClient, audience: str, resource: str, scope: str = "") -> httpx2.Request:
    """RFC 8693 at the enterprise IdP (SEP-990 leg 1): the ID token for an ID-JAG naming the MCP
    authorization server (`audience`) and the MCP server (`resource`)."""
    data = {"grant_type": TOKEN_EXCHANGE_GRANT_TYPE, "requested_token_type": ID_JAG_TOKEN_TYPE,
            "subject_token": client.assertion, "subject_token_type": ID_TOKEN_TYPE,
            "audience": audience, "resource": resource}
    if scope:
        data["scope"] = scope
    if not client.idp_client_id:  # an IdP that knows the caller by the ID token alone
        return httpx2.Request("POST", client.idp_token_endpoint, data=data,
                              headers={"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"})
    method = "client_secret_basic" if client.idp_client_secret else "none"
    return _token_request(client.idp_token_endpoint, data, client.idp_client_id, client.idp_client_secret, method)


def jwt_bearer_request(token_endpoint: str, client: AssertionClient, assertion: str, resource: str,
                       scope: str = "") -> httpx2.Request:
    """RFC 7523 §2.1 at the MCP authorization server: the assertion as the grant."""
    data = {"grant_type": JWT_BEARER_GRANT_TYPE, "assertion": assertion, "resource": resource}
    if scope:
        data["scope"] = scope
    return _token_request(token_endpoint, data, client.client_id, client.client_secret, client.method())


async def request_id_jag(client: AssertionClient, audience: str, resource: str, scope: str, steps: Steps) -> str:
    """The ID-JAG the IdP issues for this ID token (its `access_token`, RFC 8693 §2.2.1)."""
    if not client.idp_token_endpoint:
        raise OAuthError("Enterprise-managed authorization needs the identity provider's token endpoint in the server's settings.")
    async with httpx2.AsyncClient(timeout=HTTP_TIMEOUT, follow_redirects=False) as http:
        response = await steps.send(http, "token exchange at the identity provider (ID token for ID-JAG)",
                                    id_jag_request(client, audience, resource, scope))
    if response.status_code != 200:
        raise OAuthError(f"The identity provider's token endpoint answered {response.status_code}: {_error_text(response.text)}")
    try:
        body = json.loads(response.text)
    except ValueError:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("access_token"), str) or not body["access_token"]:
        raise OAuthError("The identity provider's answer to the token exchange has no access_token (the ID-JAG).")
    issued = body.get("issued_token_type")
    if issued is not None and issued != ID_JAG_TOKEN_TYPE:
        raise OAuthError(f"The identity provider issued a {issued}, not an ID-JAG ({ID_JAG_TOKEN_TYPE}).")
    return body["access_token"]


async def assertion_grant(server_url: str, client: AssertionClient, steps: Steps, exchange_at_idp: bool,
                          dpop: Proofer | None = None) -> tuple[OAuthToken, dict[str, Any]]:
    """A token for `client` from its assertion (grant_type=jwt-bearer), first exchanged at the IdP
    for an ID-JAG when `exchange_at_idp`; and the context it came from (token endpoint, issuer,
    resource, client id) to keep with it. With `dpop` (tools/mcp/dpop.py), bound to its key."""
    what = "enterprise-managed authorization" if exchange_at_idp else "the JWT bearer grant"
    if not client.client_id:
        raise OAuthError(f"{what[0].upper()}{what[1:]} needs the server's OAuth client id at its authorization server.")
    if not client.assertion:
        held = "the ID token from the identity provider" if exchange_at_idp else "the JWT assertion (or its file)"
        raise OAuthError(f"{what[0].upper()}{what[1:]} needs {held} in the server's settings.")
    async with httpx2.AsyncClient(timeout=HTTP_TIMEOUT, follow_redirects=False) as http:
        found = await _discover(http, server_url, steps)
    asm = found["asm"]
    token_endpoint = str(asm.token_endpoint)
    scope = client.scope or found["scope"] or ""
    assertion = client.assertion
    if exchange_at_idp:
        assertion = await request_id_jag(client, str(asm.issuer), found["resource"], scope, steps)
        steps.note("ID-JAG", True, f"the identity provider issued an ID-JAG for {asm.issuer}")
    steps.note("client", True, f"JWT bearer grant as {client.client_id} ({client.method()})")
    _check_dpop(dpop, found)
    token = await _post_token(steps, "token request (JWT bearer)",
                              jwt_bearer_request(token_endpoint, client, assertion, found["resource"], scope), dpop)
    context = {"token_endpoint": token_endpoint, "issuer": str(asm.issuer), "resource": found["resource"],
               "scope": scope, "client_id": client.client_id, "client_method": client.method()}
    return token, context
