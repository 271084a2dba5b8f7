"""Headless Chromium: a server saved with OAuth 2.1 from the form, signed in to from its page (the
browser goes to the authorization server and comes back to /oauth/callback/), its tools listed
with the new sign-in, the sign-in's steps readable. Real parts: tests/mcp_servers/oauth_server.py
(the `mcp` SDK's authorization-server pieces), the suite's worker, daphne."""

from __future__ import annotations

import pytest

from tests.helpers import login_page
from tools.models import OAuthGrant, Server, Tool

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


@pytest.fixture(scope="module")
def oauth_http():
    from tests.mcp_servers.launch import start_server

    server = start_server("oauth_server.py", "http")
    yield server
    server.stop()


def test_sign_in_from_the_server_page(browser, live_app, user, oauth_http, screenshots):
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.goto(f"{live_app.url}/servers/new/")
    page.fill("#id_name", "protected")
    page.select_option("#id_transport", "streamable_http")
    page.fill("#id_url", oauth_http.url)
    assert page.locator(".field-oauth_client_id").is_hidden() and page.locator(".field-oauth_dpop").is_hidden()
    page.select_option("#id_auth", "oauth")
    assert page.locator(".field-oauth_client_id").is_visible() and page.locator(".field-oauth_dpop").is_visible()
    # Each grant shows the fields it uses (tools/forms.py asks for the same): none of the others' by default.
    only = ["oauth_private_key", "oauth_assertion", "oauth_assertion_file", "oauth_idp_token_endpoint"]

    def shown() -> set[str]:
        return {name for name in only if page.locator(f".field-{name}").is_visible()}

    assert shown() == set()
    page.select_option("#id_oauth_grant", "client_credentials")
    assert shown() == {"oauth_private_key"}
    page.select_option("#id_oauth_grant", "token_exchange")
    assert shown() == {"oauth_assertion", "oauth_idp_token_endpoint"}
    page.select_option("#id_oauth_grant", "jwt_bearer")
    assert shown() == {"oauth_assertion", "oauth_assertion_file"} and page.locator(".field-oauth_dpop").is_visible()
    page.select_option("#id_oauth_grant", "authorization_code")
    page.click("#server-form button[type=submit]")
    page.wait_for_url(f"{live_app.url}/servers/*/")
    server = Server.objects.get(name="protected")
    assert server.auth == "oauth"
    card = page.locator("#oauth")
    assert "You have not signed in" in card.inner_text()

    page.click("#oauth-sign-in")
    page.wait_for_url(f"{live_app.url}/servers/{server.pk}/", timeout=30000)
    page.locator("#oauth .status", has_text="signed in").wait_for(timeout=30000)
    assert "Signed in to “protected”" in page.content()
    assert page.locator("#tools a", has_text="whoami").count() == 1  # listed with the sign-in, on the page it came back to
    page.locator("#oauth .oauth-attempt summary").first.click()
    steps = page.locator("#oauth .oauth-steps").first.inner_text()
    assert "dynamic client registration" in steps and "token exchange" in steps
    page.screenshot(path=str(screenshots / "oauth-signed-in.png"), full_page=True)
    grant = OAuthGrant.objects.get(server=server, user=user)
    assert grant.access_token not in page.content() and grant.refresh_token not in page.content()
    assert Tool.objects.filter(server=server, name="admin_only").exists()


def test_a_redirect_without_the_advertised_iss_ends_the_sign_in_with_the_reason_on_the_page(browser, live_app, user, screenshots):
    """RFC 9207: the authorization server advertises `iss` in its responses and the redirect back
    has none: the code is not exchanged, and the server page says why."""
    from tests.mcp_servers.launch import start_server

    server_process = start_server("oauth_server.py", "http", "--iss-supported")
    try:
        server = Server.objects.create(name="mix-up", transport="streamable_http", url=server_process.url, owner=user,
                                       auth="oauth")
        page = login_page(browser, live_app, "alice", "alice-pass-123")
        page.goto(f"{live_app.url}/servers/{server.pk}/")
        page.click("#oauth-sign-in")
        page.wait_for_url(f"{live_app.url}/servers/{server.pk}/", timeout=30000)
        page.get_by_text("the redirect back had no iss").first.wait_for(timeout=30000)
        assert "Sign-in to “mix-up” failed" in page.content()
        page.screenshot(path=str(screenshots / "oauth-iss-missing-refused.png"), full_page=True)
        assert not OAuthGrant.objects.filter(server=server).exists()
    finally:
        server_process.stop()


def test_metadata_naming_another_issuer_stops_the_sign_in_with_the_reason_on_the_page(browser, live_app, user, screenshots):
    """RFC 8414 §3.3: the authorization-server metadata names another issuer: the sign-in stops
    before registering or leaving the page, and says why."""
    from tests.mcp_servers.launch import start_server

    server_process = start_server("oauth_server.py", "http", "--metadata-issuer", "https://attacker.example.com")
    try:
        server = Server.objects.create(name="poisoned", transport="streamable_http", url=server_process.url, owner=user,
                                       auth="oauth")
        page = login_page(browser, live_app, "alice", "alice-pass-123")
        page.goto(f"{live_app.url}/servers/{server.pk}/")
        page.click("#oauth-sign-in")
        page.locator("#oauth-state.error", has_text="names the issuer https://attacker.example.com").wait_for(timeout=30000)
        assert page.url == f"{live_app.url}/servers/{server.pk}/"  # never sent to the authorization server
        page.reload()
        assert "names the issuer https://attacker.example.com" in page.locator("#oauth").inner_text()
        page.screenshot(path=str(screenshots / "oauth-metadata-issuer-refused.png"), full_page=True)
        assert not Server.objects.get(pk=server.pk).oauth_client
    finally:
        server_process.stop()
