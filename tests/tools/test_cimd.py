"""Client ID Metadata Documents (issue 26.1): the app names itself by the URL of its own client
metadata document when the authorization server supports it, instead of registering dynamically.

Real parts: the app under daphne with an https PUBLIC_URL (as behind a team's TLS proxy; the
document is served at PUBLIC_URL/oauth/client-metadata.json), and tests/mcp_servers/oauth_server.py
with `--cimd`: it advertises `client_id_metadata_document_supported`, fetches the document the
client id names over HTTP from that daphne, and checks it (its client_id, the redirect URI) as
it would any client. The sign-in's HTTP steps are tools/mcp/oauth_flow.py, as the workers run them.
"""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from django.test import override_settings

from tests.helpers import start_daphne, stop_process
from tools.mcp import oauth_flow
from tools.runtime import cimd

pytestmark = pytest.mark.django_db(transaction=True)

PUBLIC = "https://inspector.test"
DOCUMENT = f"{PUBLIC}/oauth/client-metadata.json"
CALLBACK = f"{PUBLIC}/oauth/callback/"


@pytest.fixture(scope="module")
def https_app(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        app = start_daphne("cimd-daphne.log", {"PUBLIC_URL": PUBLIC})
    yield app
    stop_process(app.proc)


@pytest.fixture
def cimd_server(https_app):
    from tests.mcp_servers.launch import start_server

    server = start_server("oauth_server.py", "http", "--cimd", https_app.url)
    yield server
    server.stop()


def test_the_document_is_public_and_holds_no_secret(https_app):
    """Authorization servers fetch it without a session: no login, JSON, the URL is its client id."""
    answer = httpx2.get(f"{https_app.url}/oauth/client-metadata.json", timeout=10)
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    document = answer.json()
    assert document["client_id"] == DOCUMENT
    assert document["redirect_uris"] == [CALLBACK]
    assert document["token_endpoint_auth_method"] == "none" and "client_secret" not in document
    assert document["grant_types"] == ["authorization_code", "refresh_token"]


def test_a_server_that_supports_cimd_gets_the_document_url_as_client_id(cimd_server):
    """No registration: the authorization server fetches the document, accepts the redirect URI it
    lists, and the code is exchanged for a token with the URL as client id (no secret)."""
    steps = oauth_flow.Steps()
    settings = oauth_flow.ClientSettings(metadata_url=DOCUMENT)
    begun = asyncio.run(oauth_flow.begin(cimd_server.url, CALLBACK, settings, steps))
    assert begun.registered is None and begun.context["client_id"] == DOCUMENT
    assert "dynamic client registration" not in [s["step"] for s in steps.entries]
    assert any("Client ID Metadata Document" in s["detail"] for s in steps.entries)
    assert parse_qs(urlsplit(begun.authorization_url).query)["client_id"] == [DOCUMENT]
    authorize = httpx2.get(begun.authorization_url, follow_redirects=False, timeout=10)
    assert authorize.status_code in (302, 303, 307), authorize.text  # the server fetched and accepted it
    back = parse_qs(urlsplit(authorize.headers["location"]).query)
    assert "code" in back, authorize.headers["location"]
    token = asyncio.run(oauth_flow.exchange_code(begun.context, back["code"][0], back.get("iss", [None])[0], CALLBACK,
                                                 begun.code_verifier, "", steps))
    assert token.access_token


def test_a_redirect_uri_the_document_does_not_list_is_refused(cimd_server):
    """The authorization server checks the document: a sign-in coming back elsewhere is refused."""
    begun = asyncio.run(oauth_flow.begin(cimd_server.url, "https://elsewhere.test/cb",
                                         oauth_flow.ClientSettings(metadata_url=DOCUMENT), oauth_flow.Steps()))
    authorize = httpx2.get(begun.authorization_url, follow_redirects=False, timeout=10)
    assert authorize.status_code == 400, authorize.text


def test_without_cimd_support_or_https_the_client_registers_dynamically(cimd_server):
    """The spec's fall-back: a server that does not advertise CIMD gets a dynamic registration; and,
    as in the SDK, a document URL that is not https is never used as a client id."""
    from tests.mcp_servers.launch import start_server

    plain = start_server("oauth_server.py", "http")
    try:
        steps = oauth_flow.Steps()
        begun = asyncio.run(oauth_flow.begin(plain.url, CALLBACK, oauth_flow.ClientSettings(metadata_url=DOCUMENT), steps))
        assert begun.registered is not None and begun.context["client_id"] != DOCUMENT
        assert "dynamic client registration" in [s["step"] for s in steps.entries]
    finally:
        plain.stop()
    insecure = "http://inspector.test/oauth/client-metadata.json"
    begun = asyncio.run(oauth_flow.begin(cimd_server.url, "http://inspector.test/oauth/callback/",
                                         oauth_flow.ClientSettings(metadata_url=insecure), oauth_flow.Steps()))
    assert begun.context["client_id"] != insecure and begun.registered is not None


def test_the_app_offers_its_document_only_over_https_and_for_its_own_callback():
    with override_settings(PUBLIC_URL=PUBLIC):
        assert cimd.metadata_url() == DOCUMENT and cimd.redirect_uri() == CALLBACK
    with override_settings(PUBLIC_URL="http://127.0.0.1:8000"):
        assert cimd.metadata_url() == ""  # the SDK's rule: https with a path
        assert cimd.document()["client_id"] == "http://127.0.0.1:8000/oauth/client-metadata.json"
