"""OAuth client credentials (issue 26.5, the `io.modelcontextprotocol/oauth-client-credentials`
extension): a machine-to-machine server whose tokens the server's own client gets, with its secret
(client_secret_basic) or its private key (private_key_jwt), no one signing in; both secrets
encrypted at rest and never sent back (masked like the others).

Real parts: tests/mcp_servers/oauth_server.py with `--client-credentials` and `--client-jwt-key`
(its token endpoint checks the Basic header, or verifies the JWT with the public key), the
suite's Celery worker and the JSON API.
"""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.db import connection

from tests.helpers import ARTIFACTS, finished_call, start_api_call
from tools.models import OAuthGrant, Server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

MASK = "********"
CLIENT, SECRET = "machine-client", "s3cret-of-the-machine"


@pytest.fixture(scope="module")
def key_pair():
    key = ec.generate_private_key(ec.SECP256R1())
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return private, public


@pytest.fixture(scope="module")
def machine_http(key_pair):
    from tests.mcp_servers.launch import start_server

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    public_file = ARTIFACTS / "machine-client-public.pem"
    public_file.write_text(key_pair[1])
    server = start_server("oauth_server.py", "http", "--client-credentials", f"{CLIENT}:{SECRET}",
                          "--client-jwt-key", str(public_file))
    yield server
    server.stop()


def create(api, url: str, **oauth) -> Server:
    resp = api.post("/api/servers/", {"name": "machine", "transport": "streamable_http", "url": url, "auth": "oauth",
                                      "oauth_grant": "client_credentials", "oauth_client_id": CLIENT, **oauth})
    assert resp.status_code == 201, resp.json()
    return Server.objects.get(pk=resp.json()["id"])


def whoami(api, server: Server) -> dict:
    refreshed = api.post(f"/api/servers/{server.pk}/refresh/")  # lists the tools with the machine's token
    assert refreshed.status_code == 200, refreshed.json()
    call = finished_call(start_api_call(api, server, "whoami", {}))
    assert call.status == "succeeded", call.error
    return json.loads(call.full_result.raw["content"][0]["text"])


def raw_column(server: Server, column: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM tools_server WHERE id = %s", [server.pk])
        return cursor.fetchone()[0]


def test_client_secret_basic_gets_a_token_without_a_sign_in(api, user, machine_http):
    server = create(api, machine_http.url, oauth_client_secret=SECRET, oauth_client_auth="client_secret_basic")
    shown = api.get(f"/api/servers/{server.pk}/").json()
    assert shown["oauth_client_secret"] == MASK and SECRET not in json.dumps(shown)
    assert SECRET not in raw_column(server, "oauth_client_secret")  # encrypted at rest
    assert whoami(api, server)["subject"] == f"machine-{CLIENT}"
    grant = OAuthGrant.objects.get(server=server, user=user)
    assert grant.status == "active" and grant.client_id == CLIENT
    refused = api.post(f"/api/servers/{server.pk}/oauth/sign-in/")
    assert refused.status_code == 409 and "client credentials" in refused.json()["error"]


def test_private_key_jwt_gets_a_token_and_the_key_never_comes_back(api, user, machine_http, key_pair):
    private, _ = key_pair
    server = create(api, machine_http.url, oauth_private_key=private, oauth_client_auth="private_key_jwt")
    shown = api.get(f"/api/servers/{server.pk}/").json()
    assert shown["oauth_private_key"] == MASK and "PRIVATE KEY" not in json.dumps(shown)
    assert "PRIVATE KEY" not in raw_column(server, "oauth_private_key")
    assert api.patch(f"/api/servers/{server.pk}/", {"oauth_private_key": MASK, "name": "machine 2"}).status_code == 200
    server.refresh_from_db()
    assert server.oauth_private_key == private.strip()  # the mask kept the stored key
    assert whoami(api, server)["subject"] == f"machine-{CLIENT}"


def test_a_wrong_secret_fails_with_why(api, user, machine_http):
    server = create(api, machine_http.url, oauth_client_secret="not-it", oauth_client_auth="client_secret_basic")
    refreshed = api.post(f"/api/servers/{server.pk}/refresh/")
    error = refreshed.json()["error"]
    assert refreshed.status_code == 502 and "client credentials failed" in error and "invalid_client" in error, error
    assert "not-it" not in error


def test_the_form_asks_for_what_the_grant_needs(api, user):
    resp = api.post("/api/servers/", {"name": "m", "transport": "streamable_http", "url": "http://127.0.0.1:9/mcp",
                                      "auth": "oauth", "oauth_grant": "client_credentials", "oauth_client_id": CLIENT,
                                      "oauth_client_auth": "private_key_jwt"})
    assert resp.status_code == 400 and "oauth_private_key" in resp.json()["fields"]
