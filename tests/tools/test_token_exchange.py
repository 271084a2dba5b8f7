"""Tokens from an assertion (issue 26.5): enterprise-managed authorization (SEP-990: the ID token
exchanged at the identity provider for an ID-JAG, RFC 8693, then the RFC 7523 jwt-bearer grant)
and the JWT bearer grant of workload identity federation (SEP-1933), as server settings; the
ID token / assertion and the IdP secret encrypted at rest, masked, never exported.

Real parts: a small identity provider on loopback (tests/mcp_servers/identity_provider.py) and
tests/mcp_servers/oauth_server.py with `--assertion-key` (its token endpoint verifies the
assertion with the IdP's public key), the suite's Celery worker and the JSON API.
"""

from __future__ import annotations

import asyncio
import json
import time

import jwt
import pytest
from django.db import connection
from django.test import override_settings

from tests.helpers import ARTIFACTS, finished_call, start_api_call
from tools.mcp import token_exchange
from tools.mcp.oauth_flow import OAuthError, Steps
from tools.models import OAuthGrant, Server
from tools.runtime import assertion_grants

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

MASK = "********"
CLIENT, SECRET = "xaa-client", "xaa-s3cret"
IDP_CLIENT = "idp-client-of-the-inspector"


@pytest.fixture(scope="module")
def idp():
    from tests.mcp_servers.identity_provider import IdentityProvider

    provider = IdentityProvider(IDP_CLIENT, CLIENT)
    yield provider
    provider.stop()


@pytest.fixture(scope="module")
def mcp_http(idp):
    from tests.mcp_servers.launch import start_server

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    key_file = ARTIFACTS / "xaa-idp-public.pem"
    key_file.write_text(idp.public_pem)
    server = start_server("oauth_server.py", "http", "--client-credentials", f"{CLIENT}:{SECRET}", "--assertion-key", str(key_file))
    yield server
    server.stop()


def issuer_of(url: str) -> str:
    return url.split("/mcp")[0]


def workload_jwt(idp, audience: str, seconds: int = 300) -> str:
    now = int(time.time())
    return jwt.encode({"iss": idp.issuer, "sub": "ci-runner", "aud": audience, "iat": now, "exp": now + seconds},
                      idp.private_pem, algorithm="ES256")


def create(api, url: str, **oauth) -> Server:
    resp = api.post("/api/servers/", {"name": "xaa", "transport": "streamable_http", "url": url, "auth": "oauth",
                                      "oauth_client_id": CLIENT, **oauth})
    assert resp.status_code == 201, resp.json()
    return Server.objects.get(pk=resp.json()["id"])


def whoami(api, server: Server) -> dict:
    refreshed = api.post(f"/api/servers/{server.pk}/refresh/")
    assert refreshed.status_code == 200, refreshed.json()
    call = finished_call(start_api_call(api, server, "whoami", {}))
    assert call.status == "succeeded", call.error
    return json.loads(call.full_result.raw["content"][0]["text"])


def raw_column(server: Server, column: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM tools_server WHERE id = %s", [server.pk])
        return cursor.fetchone()[0]


def test_the_token_exchange_and_jwt_bearer_requests(idp, mcp_http):
    """The client module alone: what goes to the IdP (RFC 8693, SEP-990's types, audience = the MCP
    authorization server's issuer, resource = the MCP server) and the token the AS gives for the ID-JAG."""
    idp.requests.clear()
    client = token_exchange.AssertionClient(client_id=CLIENT, client_secret=SECRET, assertion=idp.id_token("alice"),
                                            idp_token_endpoint=idp.token_endpoint, idp_client_id=IDP_CLIENT)
    steps = Steps()
    token, context = asyncio.run(token_exchange.assertion_grant(mcp_http.url, client, steps, exchange_at_idp=True))
    [sent] = idp.requests
    assert sent == {"grant_type": token_exchange.TOKEN_EXCHANGE_GRANT_TYPE, "requested_token_type": token_exchange.ID_JAG_TOKEN_TYPE,
                    "subject_token": client.assertion, "subject_token_type": token_exchange.ID_TOKEN_TYPE,
                    "audience": issuer_of(mcp_http.url), "resource": mcp_http.url, "client_id": IDP_CLIENT, "scope": "mcp"}
    assert token.access_token and context["client_method"] == "client_secret_basic" and context["resource"] == mcp_http.url
    logged = json.dumps(steps.entries)
    assert client.assertion not in logged and SECRET not in logged and token.access_token not in logged  # the log is redacted


def test_a_refused_assertion_is_reported_not_retried(idp, mcp_http):
    idp.requests.clear()
    client = token_exchange.AssertionClient(client_id=CLIENT, client_secret=SECRET,
                                            assertion=workload_jwt(idp, "https://wrong.example"))
    steps = Steps()
    with pytest.raises(OAuthError, match="invalid_grant"):
        asyncio.run(token_exchange.assertion_grant(mcp_http.url, client, steps, exchange_at_idp=False))
    assert [e["step"] for e in steps.entries].count("token request (JWT bearer)") == 1 and idp.requests == []


def test_enterprise_managed_server_gets_each_token_without_a_sign_in(api, user, idp, mcp_http):
    id_token = idp.id_token("alice@example.com")
    server = create(api, mcp_http.url, oauth_grant="token_exchange", oauth_client_secret=SECRET, oauth_assertion=id_token,
                    oauth_idp_token_endpoint=idp.token_endpoint, oauth_idp_client_id=IDP_CLIENT,
                    oauth_idp_client_secret="idp-s3cret")
    shown = api.get(f"/api/servers/{server.pk}/").json()
    assert shown["oauth_assertion"] == MASK and shown["oauth_idp_client_secret"] == MASK
    assert id_token not in json.dumps(shown) and "idp-s3cret" not in json.dumps(shown)
    assert id_token not in raw_column(server, "oauth_assertion") and "idp-s3cret" not in raw_column(server, "oauth_idp_client_secret")
    assert api.patch(f"/api/servers/{server.pk}/", {"oauth_assertion": MASK, "name": "xaa 2"}).status_code == 200
    server.refresh_from_db()
    assert server.oauth_assertion == id_token  # the mask kept it
    assert whoami(api, server)["subject"] == "assertion-alice@example.com"
    assert OAuthGrant.objects.get(server=server, user=user).status == "active"
    refused = api.post(f"/api/servers/{server.pk}/oauth/sign-in/")
    assert refused.status_code == 409 and "no sign-in" in refused.json()["error"]
    exported = json.dumps(api.get("/api/servers/export/").json())
    assert idp.token_endpoint in exported and '"grant": "token_exchange"' in exported
    assert id_token not in exported and "idp-s3cret" not in exported and SECRET not in exported


def test_an_expired_id_token_fails_with_why(api, user, idp, mcp_http):
    now = int(time.time())
    stale = jwt.encode({"iss": idp.issuer, "sub": "bob", "aud": IDP_CLIENT, "iat": now - 900, "exp": now - 300},
                       idp.private_pem, algorithm="ES256")
    server = create(api, mcp_http.url, oauth_grant="token_exchange", oauth_client_secret=SECRET, oauth_assertion=stale,
                    oauth_idp_token_endpoint=idp.token_endpoint, oauth_idp_client_id=IDP_CLIENT)
    refreshed = api.post(f"/api/servers/{server.pk}/refresh/")
    error = refreshed.json()["error"]
    assert refreshed.status_code == 502 and "enterprise-managed authorization failed" in error
    assert "identity provider" in error and "invalid_grant" in error and stale not in error
    # The server page keeps saying why after a reload: the failure is this user's grant, without a token.
    grant = OAuthGrant.objects.get(server=server, user=user)
    assert grant.status == "expired" and "invalid_grant" in grant.error and not grant.access_token
    page = api.client.get(f"/servers/{server.pk}/").content.decode()
    assert "invalid_grant" in page and stale not in page


def test_jwt_bearer_server_presents_the_workload_jwt(api, user, idp, mcp_http):
    assertion = workload_jwt(idp, issuer_of(mcp_http.url))
    server = create(api, mcp_http.url, oauth_grant="jwt_bearer", oauth_client_secret=SECRET, oauth_assertion=assertion)
    assert whoami(api, server)["subject"] == "assertion-ci-runner"
    assert assertion not in json.dumps(api.get(f"/api/servers/{server.pk}/").json())


def test_the_form_asks_for_what_each_grant_needs(api, user, tmp_path):
    base = {"name": "x", "transport": "streamable_http", "url": "http://127.0.0.1:9/mcp", "auth": "oauth", "oauth_client_id": CLIENT}
    resp = api.post("/api/servers/", {**base, "oauth_grant": "token_exchange"})
    assert resp.status_code == 400 and {"oauth_idp_token_endpoint", "oauth_assertion"} <= set(resp.json()["fields"])
    resp = api.post("/api/servers/", {**base, "oauth_grant": "jwt_bearer"})
    assert resp.status_code == 400 and "oauth_assertion" in resp.json()["fields"]
    # An assertion file is the deployment's own identity: not for a user's server, even in the directory.
    (tmp_path / "token").write_text("the.workload.jwt")
    with override_settings(WORKLOAD_TOKEN_DIR=str(tmp_path)):
        resp = api.post("/api/servers/", {**base, "oauth_grant": "jwt_bearer", "oauth_assertion_file": str(tmp_path / "token")})
        assert resp.status_code == 400 and "Only staff" in json.dumps(resp.json()["fields"])
    # Enterprise-managed authorization presents the owner's ID token: such a server is never shared.
    resp = api.post("/api/servers/", {**base, "oauth_grant": "token_exchange", "oauth_assertion": "an.id.token", "shared": True,
                                      "oauth_idp_token_endpoint": "http://127.0.0.1:9/token"})
    assert resp.status_code == 400 and "cannot be shared" in json.dumps(resp.json()["fields"].get("shared"))


def test_only_staff_point_a_server_at_an_assertion_file_under_its_directory(staff_api, tmp_path):
    base = {"name": "x", "transport": "streamable_http", "url": "http://127.0.0.1:9/mcp", "auth": "oauth", "oauth_client_id": CLIENT}
    resp = staff_api.post("/api/servers/", {**base, "oauth_grant": "jwt_bearer", "oauth_assertion_file": "/etc/passwd"})
    assert resp.status_code == 400 and "INSPECTOR_WORKLOAD_TOKEN_DIR" in json.dumps(resp.json()["fields"])
    with override_settings(WORKLOAD_TOKEN_DIR=str(tmp_path)):
        resp = staff_api.post("/api/servers/", {**base, "oauth_grant": "jwt_bearer", "oauth_assertion_file": str(tmp_path / "../x")})
        assert resp.status_code == 400 and "must be under" in json.dumps(resp.json()["fields"])
        resp = staff_api.post("/api/servers/", {**base, "oauth_grant": "jwt_bearer", "oauth_assertion_file": str(tmp_path / "t")})
        assert resp.status_code == 201, resp.json()


def test_nobody_but_the_owner_acts_with_a_servers_id_token(user, other_user, idp):
    from tools.runtime.oauth import SignInRequired, authorized_config

    server = Server.objects.create(name="xaa", owner=user, shared=True, transport="streamable_http", url="http://127.0.0.1:9/mcp",
                                   auth="oauth", oauth_grant="token_exchange", oauth_client_id=CLIENT, oauth_assertion="an.id.token",
                                   oauth_idp_token_endpoint=idp.token_endpoint, oauth_idp_client_id=IDP_CLIENT)
    with pytest.raises(SignInRequired, match="only its owner can use it"):
        authorized_config(server, server.config(), other_user.pk)


def test_the_assertion_file_is_read_only_under_its_directory_for_a_staff_members_server(tmp_path, idp, staff_user, user):
    (tmp_path / "token").write_text(" the.workload.jwt\n")
    mine = Server(name="w", owner=user, oauth_grant="jwt_bearer", oauth_client_id=CLIENT, oauth_assertion_file=str(tmp_path / "token"))
    with override_settings(WORKLOAD_TOKEN_DIR=str(tmp_path)), pytest.raises(OAuthError, match="Only a staff member's server"):
        assertion_grants.assertion_client(mine)
    server = Server(name="w", owner=staff_user, oauth_grant="jwt_bearer", oauth_client_id=CLIENT,
                    oauth_assertion_file=str(tmp_path / "token"))
    with pytest.raises(OAuthError, match="INSPECTOR_WORKLOAD_TOKEN_DIR is not set"):
        assertion_grants.assertion_client(server)
    with override_settings(WORKLOAD_TOKEN_DIR=str(tmp_path)):
        assert assertion_grants.assertion_client(server).assertion == "the.workload.jwt"
    with override_settings(WORKLOAD_TOKEN_DIR=str(tmp_path / "sub")):
        with pytest.raises(OAuthError, match="must be under"):
            assertion_grants.assertion_client(server)


def test_an_import_carries_the_grant_and_its_secrets_an_export_only_the_settings(api, user, idp):
    id_token = idp.id_token("carol")
    oauth = {"enabled": True, "clientId": CLIENT, "clientSecret": SECRET, "grant": "token_exchange", "assertion": id_token,
             "idpTokenEndpoint": idp.token_endpoint, "idpClientId": IDP_CLIENT, "idpClientSecret": "idp-s3cret"}
    resp = api.post("/api/servers/import/", {"mcpServers": {"xaa": {"url": "http://127.0.0.1:9/mcp", "oauth": oauth}}})
    assert resp.status_code == 201, resp.json()
    server = Server.objects.get(name="xaa")
    assert (server.oauth_grant, server.oauth_assertion, server.oauth_idp_client_secret) == ("token_exchange", id_token, "idp-s3cret")
    assert id_token not in raw_column(server, "oauth_assertion")
    exported = api.get("/api/servers/export/").json()["mcpServers"]["xaa"]["oauth"]
    assert exported == {"enabled": True, "clientId": CLIENT, "grant": "token_exchange", "idpTokenEndpoint": idp.token_endpoint,
                        "idpClientId": IDP_CLIENT}
