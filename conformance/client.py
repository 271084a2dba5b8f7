"""The client the official MCP conformance suite drives: this project's connection layer
(tools/mcp/connection.py, the same code the workers use), scripted per scenario.

The suite runs `python conformance/client.py <server-url>` with MCP_CONFORMANCE_SCENARIO set;
the scenario's server checks what this client does. Run them all with `make conformance`.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx2  # noqa: E402

from tools.mcp import dpop, oauth_flow, oauth_grants, token_exchange, tool_headers  # noqa: E402
from tools.mcp.config import ServerConfig  # noqa: E402
from tools.mcp.connection import Connection  # noqa: E402
from tools.mcp.elicitation import with_defaults  # noqa: E402
from tools.mcp.errors import ConnectionFailed  # noqa: E402
from tools.mcp.http import BEARER_TOKENS  # noqa: E402

# Where an authorization server sends the browser back; the suite's approves at once and
# redirects there with the code, which this client reads from the Location header.
REDIRECT_URI = "http://localhost:3000/callback"
# This client's Client ID Metadata Document URL: the one the suite's auth/basic-cimd scenario
# expects as the client id (its authorization server does not fetch it). The inspector's own is
# PUBLIC_URL/oauth/client-metadata.json (tools/runtime/cimd.py).
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"

# The tool each scenario's server offers, and the arguments to call it with.
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "tools_call": ("add_numbers", {"a": 2, "b": 3}),
    "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {}),
    "sse-retry": ("test_reconnection", {}),
}


async def answer(method: str, params: dict[str, Any], tag: Any) -> dict[str, Any]:
    """What a person would do in the inspector, decided at once: accept a form with nothing
    typed (so the schema's defaults apply, as the inspector's answer path does), answer a
    sampling request with a fixed text, and give no roots."""
    if method == "elicitation/create":
        return {"action": "accept", "content": with_defaults(params.get("requestedSchema"), {})}
    if method == "sampling/createMessage":
        return {"role": "assistant", "content": {"type": "text", "text": "conformance"}, "model": "conformance"}
    if method == "roots/list":
        return {"roots": []}
    return {}


@dataclass
class Grant:
    """What the inspector keeps between sign-ins to one server (tools/runtime/oauth.py): the client
    registered dynamically (on the server row, with the issuer it belongs to) and the scope the last
    sign-in was granted (on the user's grant)."""

    registered: dict[str, Any] | None = None
    scope: str = ""
    proofer: dpop.Proofer | None = None  # the server's DPoP key ("DPoP-bound tokens" on: the auth/dpop scenarios)


async def sign_in(url: str, context: dict[str, Any], grant: Grant, needed: str = "") -> dict[str, str]:
    """The inspector's sign-in (tools/mcp/oauth_flow.py) with the browser's part done at once: the
    authorization URL is fetched and its redirect read. A pre-registered client comes in the
    scenario's context. As the inspector's `_settings` asks: the scope granted before and the scope a
    403 named, on top of what discovery suggests (SEP-2350: the union, not only the new scope). With
    the grant's DPoP key, the token is DPoP-bound: the connection sends it with a proof (its key in
    tools/mcp/dpop.PROOFERS, the token in BEARER_TOKENS, as tools/runtime/oauth.py sets them), so
    this answers no header."""
    settings = oauth_flow.ClientSettings(client_id=context.get("client_id", ""), client_secret=context.get("client_secret", ""),
                                         metadata_url=CLIENT_METADATA_URL, extra_scope=oauth_flow.union(grant.scope, needed),
                                         registered=grant.registered)
    steps = oauth_flow.Steps()
    begun = await oauth_flow.begin(url, REDIRECT_URI, settings, steps)
    grant.registered = begun.registered or grant.registered
    async with httpx2.AsyncClient(follow_redirects=False, timeout=10) as http:
        back = await http.get(begun.authorization_url)
    query = parse_qs(urlsplit(back.headers.get("location", "")).query)
    if query.get("state", [""])[0] != begun.state:
        raise oauth_flow.OAuthError("The authorization server's redirect carries another state.")
    registered = grant.registered or {}
    secret = registered.get("client_secret", "") if registered.get("client_id") == begun.context["client_id"] else settings.client_secret
    token = await oauth_flow.exchange_code(begun.context, query.get("code", [""])[0], query.get("iss", [None])[0],
                                           REDIRECT_URI, begun.code_verifier, secret, steps, dpop=grant.proofer)
    grant.scope = token.scope or begun.context["scope"]
    if token.token_type == "DPoP":
        BEARER_TOKENS[DPOP_KEY] = token.access_token
        return {}
    return {"Authorization": f"Bearer {token.access_token}"}


def placeholder_arguments(tool: dict[str, Any]) -> dict[str, Any]:
    """A value for each required property, by its type (what someone trying a tool would type)."""
    schema = tool.get("inputSchema") or {}
    values = {"string": "conformance", "integer": 0, "number": 0, "boolean": False, "object": {}, "array": []}
    return {name: values.get((schema.get("properties") or {}).get(name, {}).get("type"), "conformance")
            for name in schema.get("required") or []}


async def every_tool(conn: Connection, tools: list[dict[str, Any]], context: dict[str, Any]) -> None:
    """Call each tool as someone trying them in the inspector would: with the scenario's arguments
    when it names some (`toolCalls`), else placeholders. A call that asks for input (2026-07-28,
    `resultType: "input_required"`) rests while the next tools are called, as in the inspector
    (tools/runtime/input_rounds.py), then goes again with the answers and the `requestState`
    echoed verbatim (none if the server sent none)."""
    given = {call["name"]: call.get("arguments") or {} for call in context.get("toolCalls") or []}
    calls = [(call["name"], call.get("arguments") or {}) for call in context.get("toolCalls") or []]
    calls += [(tool["name"], placeholder_arguments(tool)) for tool in tools if tool["name"] not in given]
    resting = []
    for name, arguments in calls:
        result = await conn.call_tool(name, arguments, timeout=20)
        if result.get("resultType") == "input_required":
            resting.append((name, arguments, result))
    for name, arguments, result in resting:
        for _ in range(3):
            responses = {key: await answer(request.get("method", ""), request.get("params") or {}, None)
                         for key, request in (result.get("inputRequests") or {}).items()}
            result = await conn.call_tool(name, arguments, timeout=20, input_responses=responses,
                                          request_state=result.get("requestState"))
            if result.get("resultType") != "input_required":
                break


async def session(config: ServerConfig, scenario: str, context: dict[str, Any]) -> None:
    async with Connection(config, on_server_request=answer) as conn:
        listed = await conn.list_tools()
        if scenario in ("http-custom-headers", "sep-2322-client-request-state"):
            await every_tool(conn, listed, context)
        elif scenario == "json-schema-2020-12-preservation":
            # The scenario's script: hand the focal tool's input schema, as listed (the inspector
            # stores the raw definition, tools.models.Tool.definition / input_schema), to its echo tool.
            schema = next(tool.get("inputSchema") for tool in listed if tool["name"] == "json_schema_2020_12_tool")
            await conn.call_tool("json_schema_echo", {"schema": schema}, timeout=20)
        elif scenario == "http-invalid-tool-headers":
            # What the inspector stores (tools/runtime/remote.py store_tools): the tools set aside for an
            # invalid x-mcp-header are not tools; every other one is called.
            kept, _ = tool_headers.set_aside(listed, conn.protocol_version)
            for tool in kept:
                await conn.call_tool(tool["name"], placeholder_arguments(tool), timeout=20)
        elif scenario in CALLS:
            name, arguments = CALLS[scenario]
            await conn.call_tool(name, arguments, timeout=20)
        elif scenario.startswith("auth/"):
            tools = await conn.list_tools()
            if tools:
                await conn.call_tool(tools[0]["name"], {}, timeout=20)


async def machine_token(url: str, context: dict[str, Any]) -> dict[str, str]:
    """The client credentials grant (tools/mcp/oauth_grants.py): the scenario's client id with its
    secret (client_secret_basic) or private key (private_key_jwt)."""
    client = oauth_grants.MachineClient(client_id=context["client_id"], client_secret=context.get("client_secret", ""),
                                        private_key=context.get("private_key_pem", ""),
                                        signing_alg=context.get("signing_algorithm", ""))
    token, _ = await oauth_grants.client_credentials(url, client, oauth_flow.Steps())
    return {"Authorization": f"Bearer {token.access_token}"}


# Scenarios whose client presents an assertion (tools/mcp/token_exchange.py): True where the ID
# token is first exchanged at the enterprise IdP for an ID-JAG (SEP-990), False for a workload's
# own JWT (WIF, SEP-1933).
ASSERTION_SCENARIOS = {"auth/cross-app-access-complete-flow": True, "auth/enterprise-managed-authorization": True,
                       "auth/wif-jwt-bearer": False}


async def assertion_token(url: str, context: dict[str, Any], exchange_at_idp: bool) -> dict[str, str]:
    """The JWT bearer grant with what the scenario hands over, as a server's settings would hold it:
    the client id and secret at the authorization server, and the ID token with the IdP's token
    endpoint and client id (enterprise-managed), or the workload's valid JWT (WIF)."""
    client = token_exchange.AssertionClient(
        client_id=context["client_id"], client_secret=context.get("client_secret", ""),
        assertion=context.get("idp_id_token" if exchange_at_idp else "valid_jwt", ""),
        idp_token_endpoint=context.get("idp_token_endpoint", ""), idp_client_id=context.get("idp_client_id", ""))
    token, _ = await token_exchange.assertion_grant(url, client, oauth_flow.Steps(), exchange_at_idp)
    return {"Authorization": f"Bearer {token.access_token}"}


# The auth/dpop scenarios (the DPoP extension): the inspector's "DPoP" server setting on; the
# connection's key in tools/mcp/dpop.PROOFERS and BEARER_TOKENS, as tools/runtime/oauth.py sets them.
DPOP_KEY = "conformance-dpop"


NEEDS_SCOPE = re.compile(r"needs the scope “([^”]*)”")


async def run(url: str, scenario: str) -> None:
    """Connect; on a 401 sign in, as the inspector asks a user to (again, once, when the server
    refuses the token it gave: it may now name another authorization server); on a 403 that names
    a scope, sign in once more asking for it too (a step-up), then give up (a server that keeps
    asking must not loop the client)."""
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    headers: dict[str, str] = {}
    grant = Grant(proofer=dpop.register(DPOP_KEY, dpop.new_private_key()) if scenario.startswith("auth/dpop") else None)
    sign_ins = 0
    for attempt in range(3):
        bound = DPOP_KEY in BEARER_TOKENS
        config = ServerConfig(name=f"conformance-{scenario}", transport="streamable_http", url=url, headers=headers,
                              key=DPOP_KEY if bound else None, bearer=bound, dpop=bound)
        try:
            return await session(config, scenario, context)
        except ConnectionFailed as exc:
            needed = NEEDS_SCOPE.search(str(exc))
            if "401" in str(exc) and not headers and scenario.startswith("auth/client-credentials-"):
                headers = await machine_token(url, context)
            elif "401" in str(exc) and not headers and scenario in ASSERTION_SCENARIOS:
                headers = await assertion_token(url, context, ASSERTION_SCENARIOS[scenario])
            elif "401" in str(exc) and sign_ins < 2:
                sign_ins += 1
                headers = await sign_in(url, context, grant)
            elif needed and attempt < 2 and not set(needed.group(1).split()) <= set(grant.scope.split()):
                headers = await sign_in(url, context, grant, needed.group(1))
            else:
                raise


if __name__ == "__main__":
    asyncio.run(run(sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize")))
