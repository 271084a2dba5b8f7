"""OAuth 2.1 (issue 13.6): each user signs in to a protected server with their own account.

Real parts: tests/mcp_servers/oauth_server.py (the `mcp` SDK's own authorization-server pieces
on loopback: metadata, dynamic registration, PKCE, code and refresh grants), the suite's Celery
worker, the JSON API and the callback page. The authorization server approves at once, so the
browser's part is an HTTP GET of the authorization URL and following its redirect back.
"""

from __future__ import annotations

import hashlib
import html
import json
from urllib.parse import urlsplit

import httpx2
import pytest
from django.db import connection

from tests.helpers import ARTIFACTS, finished_call, start_api_call, wait_for
from tools.models import OAuthFlow, OAuthGrant, Server, Tool, ToolCall

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


@pytest.fixture(scope="module")
def oauth_http():
    from tests.mcp_servers.launch import start_server

    server = start_server("oauth_server.py", "http")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def short_tokens_http():
    """The same server issuing tokens that live 5 s (so every connection refreshes first)."""
    from tests.mcp_servers.launch import start_server

    server = start_server("oauth_server.py", "http", "--token-seconds", "5")
    yield server
    server.stop()


def protected(url: str, owner, shared: bool = True) -> Server:
    return Server.objects.create(name="protected", transport="streamable_http", url=url, owner=owner, auth="oauth",
                                 shared=shared)


def sign_in(client, server: Server) -> OAuthFlow:
    """What a browser does: Sign in, the authorization server (which approves at once), back to the callback."""
    resp = client.post(f"/api/servers/{server.pk}/oauth/sign-in/", content_type="application/json")
    assert resp.status_code == 200, resp.json()
    authorize = httpx2.get(resp.json()["authorization_url"], follow_redirects=False, timeout=10)
    assert authorize.status_code in (302, 303, 307), authorize.text
    back = urlsplit(authorize.headers["location"])
    assert back.path == "/oauth/callback/"
    done = client.get(f"{back.path}?{back.query}")
    assert done.status_code == 302 and done.headers["location"] == f"/servers/{server.pk}/"
    return OAuthFlow.objects.get(pk=resp.json()["flow_id"])


def whoami(api, server: Server) -> dict:
    call = finished_call(start_api_call(api, server, "whoami", {}))
    assert call.status == "succeeded", call.error
    return json.loads(call.full_result.raw["content"][0]["text"])


def fingerprint(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def test_each_user_signs_in_with_their_own_account_and_tokens_stay_secret(client, api, user, other_user, oauth_http):
    server = protected(oauth_http.url, user)
    flow = sign_in(client, server)
    assert flow.status == "signed_in", flow.error
    names = [s["step"] for s in flow.steps]
    for step in ("probe the server (expect 401)", "protected resource metadata", "authorization server metadata",
                 "dynamic client registration", "authorization request", "token exchange"):
        assert step in names, names
    grant = OAuthGrant.objects.get(server=server, user=user)
    assert grant.status == "active" and grant.refresh_token and grant.scope == "mcp"
    # Listed with the new sign-in (the callback's worker refreshed the tools).
    assert {"whoami", "revoke_all", "break_token_endpoint"} <= set(Tool.objects.filter(server=server).values_list("name", flat=True))
    alice = whoami(api, server)
    assert alice["token_sha256_16"] == fingerprint(grant.access_token)

    # Encrypted at rest, and never in the sign-in log, the API or the page.
    with connection.cursor() as cursor:
        cursor.execute("SELECT access_token, refresh_token FROM tools_oauthgrant WHERE id = %s", [grant.pk])
        raw_access, raw_refresh = cursor.fetchone()
    assert grant.access_token not in raw_access and grant.refresh_token not in raw_refresh
    shown = json.dumps(flow.steps) + api.get(f"/api/servers/{server.pk}/oauth/").content.decode() + \
        client.get(f"/servers/{server.pk}/").content.decode() + api.get(f"/api/servers/{server.pk}/").content.decode()
    assert grant.access_token not in shown and grant.refresh_token not in shown
    # Nor in the JSON-RPC log (the page, its export), nor a line the worker or daphne logged.
    secrets = [grant.access_token, grant.refresh_token]
    logged = client.get("/rpc-log/").content.decode() + client.get("/rpc-log/export/").content.decode() + \
        "".join((ARTIFACTS / name).read_text(errors="replace") for name in ("worker.log", "daphne.log")
                if (ARTIFACTS / name).exists())
    assert [s[:6] for s in secrets if s in logged] == []
    assert Server.objects.get(pk=server.pk).oauth_client["client_id"] == grant.client_id  # kept for the next sign-in

    # Another user of the shared server: nothing until they sign in, then their own identity.
    client.force_login(other_user)
    refused = finished_call(start_api_call(api, server, "whoami", {}))
    assert refused.status == "failed" and "sign in on the server page first" in refused.error
    bob_flow = sign_in(client, server)
    assert "dynamic client registration" not in [s["step"] for s in bob_flow.steps]  # the client is reused
    bob = whoami(api, server)
    assert bob["subject"] != alice["subject"]
    assert bob["token_sha256_16"] == fingerprint(OAuthGrant.objects.get(server=server, user=other_user).access_token)
    # …and alice's calls still carry alice's token (one pooled connection per user).
    client.force_login(user)
    assert whoami(api, server) == alice


def test_an_expiring_token_is_refreshed_before_the_request(client, api, user, short_tokens_http):
    server = protected(short_tokens_http.url, user)
    assert sign_in(client, server).status == "signed_in"
    first = OAuthGrant.objects.get(server=server, user=user).access_token
    seen = whoami(api, server)
    refreshed = OAuthGrant.objects.get(server=server, user=user)
    assert refreshed.access_token != first and refreshed.status == "active"
    assert seen["token_sha256_16"] == fingerprint(refreshed.access_token)


def test_a_refresh_does_not_cut_a_call_that_is_running(client, api, user, short_tokens_http):
    """The token travels per request, not in the connection's settings: refreshing it for a new
    request leaves the user's running call on its connection."""
    server = protected(short_tokens_http.url, user)
    assert sign_in(client, server).status == "signed_in"
    slow = start_api_call(api, server, "wait", {"seconds": 3})
    wait_for(lambda: ToolCall.objects.get(pk=slow).status == "running", message="the slow call to run")
    before = OAuthGrant.objects.get(server=server, user=user).access_token
    seen = whoami(api, server)  # refreshes first (tokens live 5 s here)
    after = OAuthGrant.objects.get(server=server, user=user).access_token
    assert after != before and seen["token_sha256_16"] == fingerprint(after)
    call = finished_call(slow)
    assert call.status == "succeeded", call.error
    assert call.full_result.raw["content"][0]["text"].startswith("waited 3 s for user-")


def test_a_revoked_grant_asks_the_user_to_sign_in_again(client, api, user, oauth_http):
    server = protected(oauth_http.url, user, shared=False)
    assert sign_in(client, server).status == "signed_in"
    assert finished_call(start_api_call(api, server, "revoke_all", {})).status == "succeeded"
    call = finished_call(start_api_call(api, server, "whoami", {}))
    assert call.status == "failed" and "refused your sign-in (HTTP 401)" in call.error, call.error
    grant = OAuthGrant.objects.get(server=server, user=user)
    assert grant.status == "rejected"
    page = client.get(f"/servers/{server.pk}/").content.decode()
    assert "rejected" in page and "Sign in again" not in page and ">Sign in<" in page
    assert sign_in(client, server).status == "signed_in"
    assert whoami(api, server)["subject"]


def test_a_tool_that_needs_more_scope_asks_for_a_step_up_sign_in(client, api, user, oauth_http):
    server = protected(oauth_http.url, user, shared=False)
    assert sign_in(client, server).status == "signed_in"
    call = finished_call(start_api_call(api, server, "admin_only", {}))
    assert call.status == "failed" and "needs more access (the scope “mcp admin”)" in call.error, call.error
    grant = OAuthGrant.objects.get(server=server, user=user)
    assert grant.status == "rejected" and grant.needed_scope == "mcp admin"
    flow = sign_in(client, server)
    assert flow.context["scope"] == "mcp admin"
    grant.refresh_from_db()
    assert grant.status == "active" and set(grant.scope.split()) == {"mcp", "admin"} and not grant.needed_scope
    done = finished_call(start_api_call(api, server, "admin_only", {}))
    assert done.status == "succeeded" and done.full_result.raw["content"][0]["text"].startswith("admin for user-")


def test_signing_in_again_asks_again_for_the_scope_granted_before(client, api, user, oauth_http):
    """SEP-2350: a new sign-in asks for the union of what the last one was granted and what is
    needed now, so signing in again after a revoked token does not lose a step-up's `admin`
    (discovery alone suggests only `mcp`)."""
    server = protected(oauth_http.url, user, shared=False)
    assert sign_in(client, server).status == "signed_in"
    assert finished_call(start_api_call(api, server, "admin_only", {})).status == "failed"
    assert sign_in(client, server).context["scope"] == "mcp admin"
    assert finished_call(start_api_call(api, server, "revoke_all", {})).status == "succeeded"
    assert finished_call(start_api_call(api, server, "whoami", {})).status == "failed"  # 401: sign in again
    flow = sign_in(client, server)
    assert set(flow.context["scope"].split()) == {"mcp", "admin"}
    done = finished_call(start_api_call(api, server, "admin_only", {}))
    assert done.status == "succeeded", done.error


def test_another_authorization_server_gets_its_own_registration(client, api, user, oauth_http, short_tokens_http):
    """SEP-2352: a client registered with one authorization server is not presented to another.
    Here the server moved (its URL now names another authorization server, as a protected-resource
    metadata that changes its `authorization_servers` does): the next sign-in registers anew."""
    server = protected(oauth_http.url, user, shared=False)
    first = sign_in(client, server)
    assert "dynamic client registration" in [s["step"] for s in first.steps]
    Server.objects.filter(pk=server.pk).update(url=short_tokens_http.url)
    server.refresh_from_db()
    moved = sign_in(client, server)
    assert moved.status == "signed_in" and "dynamic client registration" in [s["step"] for s in moved.steps]
    assert moved.context["client_id"] != first.context["client_id"]
    server.refresh_from_db()
    assert server.oauth_client["issuer"] == moved.context["issuer"] != first.context["issuer"]  # the one kept now
    assert whoami(api, server)["subject"]


def test_a_token_endpoint_that_answers_garbage_ends_the_sign_in_with_a_clear_message(client, api, user, oauth_http):
    server = protected(oauth_http.url, user, shared=False)
    assert sign_in(client, server).status == "signed_in"
    assert finished_call(start_api_call(api, server, "break_token_endpoint", {"on": True})).status == "succeeded"
    try:
        resp = client.post(f"/api/servers/{server.pk}/oauth/sign-in/", content_type="application/json")
        authorize = httpx2.get(resp.json()["authorization_url"], follow_redirects=False, timeout=10)
        back = urlsplit(authorize.headers["location"])
        done = client.get(f"{back.path}?{back.query}", follow=True)
        assert "failed: The token endpoint’s answer is not an OAuth token response".replace("’", "'") in done.content.decode().replace("&#x27;", "'")
        flow = OAuthFlow.objects.get(pk=resp.json()["flow_id"])
        assert flow.status == "failed" and flow.steps[-1]["step"] == "stopped"
        assert "<script>" in json.dumps([s.get("response_body", "") for s in flow.steps])  # kept as evidence…
        assert "<script>" not in done.content.decode()  # …and escaped on the page
    finally:
        # Still signed in with the earlier grant: turn the endpoint back on for the next tests.
        assert finished_call(start_api_call(api, server, "break_token_endpoint", {"on": False})).status == "succeeded"


def test_a_callback_with_someone_elses_state_is_refused(client, user, other_user, oauth_http):
    server = protected(oauth_http.url, user)
    client.force_login(user)
    resp = client.post(f"/api/servers/{server.pk}/oauth/sign-in/", content_type="application/json")
    state = OAuthFlow.objects.get(pk=resp.json()["flow_id"]).state
    client.force_login(other_user)
    refused = client.get(f"/oauth/callback/?code=x&state={state}")
    assert refused.status_code == 400
    assert OAuthFlow.objects.get(state=state).status == "waiting"
    assert not OAuthGrant.objects.filter(server=server).exists()


def test_a_server_without_oauth_says_so(api, user):
    server = Server.objects.create(name="plain", transport="streamable_http", url="http://127.0.0.1:9/mcp", owner=user)
    resp = api.post(f"/api/servers/{server.pk}/oauth/sign-in/")
    assert resp.status_code == 409 and "does not use OAuth" in resp.json()["error"]


@pytest.mark.parametrize("send_iss, refused", [
    ("", "the redirect back had no iss"),  # advertised, not sent: auth/iss-supported-missing
    ("wrong", "came from issuer https://attacker.example.com"),  # another server's iss
    ("issuer", None),  # its own: signed in
])
def test_the_iss_of_the_authorization_response_is_checked_rfc_9207(client, api, user, send_iss, refused):
    """The authorization server advertises `authorization_response_iss_parameter_supported`: a
    redirect without its `iss`, or with another's, is not exchanged for tokens (a mix-up attack
    would send another server's code here), and the server page says why."""
    from tests.mcp_servers.launch import start_server

    server_process = start_server("oauth_server.py", "http", "--iss-supported", "--send-iss", send_iss)
    try:
        server = protected(server_process.url, user, shared=False)
        resp = client.post(f"/api/servers/{server.pk}/oauth/sign-in/", content_type="application/json")
        assert resp.status_code == 200, resp.json()
        authorize = httpx2.get(resp.json()["authorization_url"], follow_redirects=False, timeout=10)
        back = urlsplit(authorize.headers["location"])
        done = client.get(f"{back.path}?{back.query}", follow=True)
        page = html.unescape(done.content.decode())
        flow = OAuthFlow.objects.get(pk=resp.json()["flow_id"])
        if refused is None:
            assert flow.status == "signed_in", flow.error
            assert OAuthGrant.objects.filter(server=server, user=user, status="active").exists()
            return
        assert flow.status == "failed" and refused in flow.error, flow.error
        assert "RFC 9207" in flow.error
        assert f"Sign-in to “protected” failed: {flow.error}" in page
        assert "token exchange" not in [s["step"] for s in flow.steps]  # the code never left
        assert not OAuthGrant.objects.filter(server=server).exists()
    finally:
        server_process.stop()


def test_metadata_naming_another_issuer_is_refused_rfc_8414(client, api, user):
    """The authorization-server metadata says its issuer is another server: nothing in it is used
    (no registration, no authorization URL), and the sign-in says why."""
    from tests.mcp_servers.launch import start_server

    server_process = start_server("oauth_server.py", "http", "--metadata-issuer", "https://attacker.example.com")
    try:
        server = protected(server_process.url, user, shared=False)
        resp = client.post(f"/api/servers/{server.pk}/oauth/sign-in/", content_type="application/json")
        assert resp.status_code == 502, resp.json()
        error = resp.json()["error"]
        assert "names the issuer https://attacker.example.com" in error and "RFC 8414" in error, error
        flow = OAuthFlow.objects.get(pk=resp.json()["flow_id"])
        assert flow.status == "failed" and not flow.authorization_url
        assert "dynamic client registration" not in [s["step"] for s in flow.steps]
        assert Server.objects.get(pk=server.pk).oauth_client in (None, {})
        page = html.unescape(client.get(f"/servers/{server.pk}/").content.decode())
        assert "names the issuer https://attacker.example.com" in page
    finally:
        server_process.stop()
