"""DPoP-bound tokens (issue 26.5, the `io.modelcontextprotocol/auth/dpop` extension, RFC 9449) through
the app: the server setting "DPoP-bound tokens" on, the server's key generated once and encrypted,
a proof on the token request and on every MCP request, the servers' nonces honoured; the key never
shown, exported or sent but as the proofs' public JWK.

Real parts: tests/mcp_servers/oauth_server.py with `--dpop-nonce` (its token endpoint and MCP endpoint
verify each proof, bind the token to the key's thumbprint and demand a nonce first), the client
credentials grant (no browser), the suite's Celery worker and the JSON API.
"""

from __future__ import annotations

import json

import pytest
from django.db import connection

from tests.helpers import finished_call, start_api_call
from tests.tools.test_oauth import sign_in
from tools.models import OAuthGrant, Server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

CLIENT, SECRET = "dpop-client", "s3cret-of-the-dpop-client"


@pytest.fixture(scope="module")
def dpop_http():
    from tests.mcp_servers.launch import start_server

    server = start_server("oauth_server.py", "http", "--client-credentials", f"{CLIENT}:{SECRET}", "--dpop-nonce")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def dpop_short_http():
    """Sign-ins (the authorization code) whose tokens live 5 s: every request refreshes first."""
    from tests.mcp_servers.launch import start_server

    server = start_server("oauth_server.py", "http", "--dpop-nonce", "--token-seconds", "5")
    yield server
    server.stop()


def create(api, url: str, **settings) -> Server:
    resp = api.post("/api/servers/", {"name": "bound", "transport": "streamable_http", "url": url, "auth": "oauth",
                                      "oauth_grant": "client_credentials", "oauth_client_id": CLIENT,
                                      "oauth_client_secret": SECRET, "oauth_client_auth": "client_secret_basic", **settings})
    assert resp.status_code == 201, resp.json()
    return Server.objects.get(pk=resp.json()["id"])


def whoami(api, server: Server) -> dict:
    call = finished_call(start_api_call(api, server, "whoami", {}))
    assert call.status == "succeeded", call.error
    return json.loads(call.full_result.raw["content"][0]["text"])


def test_a_dpop_server_gets_a_bound_token_and_every_request_proves_the_key(api, user, dpop_http):
    server = create(api, dpop_http.url, oauth_dpop=True)
    refreshed = api.post(f"/api/servers/{server.pk}/refresh/")  # initialize + tools/list, each with a proof
    assert refreshed.status_code == 200, refreshed.json()
    first, second = whoami(api, server), whoami(api, server)
    assert first["dpop"] is True and first["subject"] == f"machine-{CLIENT}"  # the server verified each proof
    assert second["dpop"] is True and second["token_sha256_16"] == first["token_sha256_16"]
    grant = OAuthGrant.objects.get(server=server, user=user)
    assert grant.token_type == "DPoP" and grant.status == "active"
    assert api.get(f"/api/servers/{server.pk}/oauth/").json()["oauth"]["grant"]["token_type"] == "DPoP"
    assert "DPoP-bound" in api.client.get(f"/servers/{server.pk}/").content.decode()
    server.refresh_from_db()
    assert server.oauth_dpop_key.startswith("-----BEGIN PRIVATE KEY-----")  # generated on first use
    with connection.cursor() as cursor:
        cursor.execute("SELECT oauth_dpop_key FROM tools_server WHERE id = %s", [server.pk])
        assert "PRIVATE KEY" not in cursor.fetchone()[0]  # encrypted at rest
    shown = api.get(f"/api/servers/{server.pk}/").json()
    assert shown["oauth_dpop"] is True and "oauth_dpop_key" not in shown and "PRIVATE KEY" not in json.dumps(shown)
    exported = api.get("/api/servers/export/").json()["mcpServers"]["bound"]
    assert exported["oauth"] == {"enabled": True, "clientId": CLIENT, "grant": "client_credentials",
                                 "clientAuth": "client_secret_basic", "dpop": True}
    assert "PRIVATE KEY" not in json.dumps(exported) and SECRET not in json.dumps(exported)


def test_a_sign_in_and_its_refreshes_are_dpop_bound_too(client, api, user, dpop_short_http):
    server = Server.objects.create(name="signed", transport="streamable_http", url=dpop_short_http.url, owner=user,
                                   auth="oauth", oauth_dpop=True)
    assert sign_in(client, server).status == "signed_in"  # the code exchange: a proof, the nonce, a DPoP token
    signed = OAuthGrant.objects.get(server=server, user=user)
    assert signed.token_type == "DPoP"
    seen = whoami(api, server)  # the token expires within a minute: refreshed first, with a proof
    refreshed = OAuthGrant.objects.get(server=server, user=user)
    assert refreshed.access_token != signed.access_token and refreshed.token_type == "DPoP"
    assert seen["dpop"] is True and seen["subject"] == "user-1"
    Server.objects.filter(pk=server.pk).update(oauth_dpop=False)  # turned off: the token stays bound to the key
    again = whoami(api, server)  # refreshed again, still with a proof
    assert again["dpop"] is True and again["token_sha256_16"] != seen["token_sha256_16"]


def test_without_the_setting_the_error_says_to_turn_it_on(api, user, dpop_http):
    server = create(api, dpop_http.url)
    refreshed = api.post(f"/api/servers/{server.pk}/refresh/")
    error = refreshed.json()["error"]
    assert refreshed.status_code == 502 and "invalid_dpop_proof" in error and "DPoP-bound tokens" in error, error


def test_an_import_keeps_the_auth_settings(api, user):
    document = {"mcpServers": {"again": {"url": "http://127.0.0.1:9/mcp", "oauth": {
        "enabled": True, "clientId": CLIENT, "clientSecret": SECRET, "grant": "client_credentials",
        "clientAuth": "client_secret_post", "dpop": True}}}}
    resp = api.post("/api/servers/import/", document)
    assert resp.status_code == 201, resp.json()
    server = Server.objects.get(name="again")
    assert (server.auth, server.oauth_grant, server.oauth_client_auth, server.oauth_dpop) == \
        ("oauth", "client_credentials", "client_secret_post", True)
    assert server.oauth_dpop_key == ""  # made on first use, never imported


def test_saving_the_settings_keeps_a_dpop_key_a_worker_made_meanwhile(user):
    """The settings page read the server before the worker's first token request made its key; its
    full save must not write the empty key back (every token bound to the key would be orphaned)."""
    from tools.mcp import dpop

    server = Server.objects.create(name="d", owner=user, transport="streamable_http", url="http://127.0.0.1:9/mcp",
                                   auth="oauth", oauth_dpop=True)
    page_copy = Server.objects.get(pk=server.pk)
    key = dpop.new_private_key()
    Server.objects.filter(pk=server.pk).update(oauth_dpop_key=key)  # what tools/runtime/oauth.py does
    page_copy.name = "renamed"
    page_copy.save()
    stored = Server.objects.get(pk=server.pk)
    assert (stored.name, stored.oauth_dpop_key) == ("renamed", key)
