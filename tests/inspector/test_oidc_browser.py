"""Team sign-in in a real browser against a real OpenID Connect provider (tests/oidc_provider.py:
django-oauth-toolkit on a loopback port), the app a real daphne configured by environment only."""

from __future__ import annotations

import subprocess
import sys

import pytest

from chat.models import Conversation
from inspector import roles
from inspector.models import SignInIdentity
from tests import oidc_provider
from tests.helpers import ARTIFACTS, BASE_DIR, free_port, start_daphne, stop_process
from tools.models import Server

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def team_sign_in(django_db_setup, django_db_blocker, tmp_path_factory):
    """daphne with OIDC on (domain team.example, group inspector-viewers → viewer), then the provider
    that knows daphne's callback. daphne asks the provider nothing until someone signs in."""
    from inspector.launch import wait_for_port

    port = free_port()
    issuer = f"http://127.0.0.1:{port}/o"
    env = {
        "OIDC_ISSUER": issuer, "OIDC_CLIENT_ID": oidc_provider.CLIENT_ID,
        "OIDC_CLIENT_SECRET": oidc_provider.CLIENT_SECRET, "OIDC_PROVIDER_NAME": oidc_provider.PROVIDER_NAME,
        "OIDC_ALLOWED_DOMAINS": "team.example", "OIDC_VIEWER_GROUPS": "inspector-viewers",
        "OIDC_ADMIN_GROUPS": "inspector-admins", "LOG_LEVEL": "DEBUG",
    }
    with django_db_blocker.unblock():
        app = start_daphne("daphne-oidc.log", env)
    log = ARTIFACTS / "oidc-provider.log"
    with open(log, "ab") as out:
        provider = subprocess.Popen(
            [sys.executable, str(BASE_DIR / "tests" / "oidc_provider.py"), str(port),
             str(tmp_path_factory.mktemp("oidc-provider")), f"{app.url}/oidc/callback/"],
            cwd=BASE_DIR, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        wait_for_port("127.0.0.1", port, 60, provider)
    except RuntimeError:
        stop_process(provider)
        stop_process(app.proc)
        raise RuntimeError(f"the OIDC provider did not start; see {log}:\n{log.read_text()[-3000:]}")
    yield app, f"http://127.0.0.1:{port}"
    stop_process(provider)
    stop_process(app.proc)


def _page(browser):
    """A fresh browser page that records every request it sends (URL and body)."""
    page = browser.new_context(viewport={"width": 1280, "height": 860}).new_page()
    page.sent = []
    page.on("request", lambda r: page.sent.append(f"{r.method} {r.url} {r.post_data or ''}"))
    return page


def _sign_in_at_provider(page, app_url: str, provider_url: str, username: str, password: str) -> None:
    page.goto(f"{app_url}/")
    page.wait_for_url(f"{app_url}/login/?next=/")
    page.click("#oidc-sign-in")
    page.wait_for_url(f"{provider_url}/login/**")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("#idp-submit")


def test_sign_in_creates_the_account_then_sign_out(browser, team_sign_in, django_user_model, screenshots):
    app, provider_url = team_sign_in
    page = _page(browser)
    page.goto(f"{app.url}/login/")
    assert page.locator("#oidc-sign-in").inner_text() == "Sign in with Team IdP"
    assert page.locator("input[name=username]").count() == 1  # local accounts still sign in beside it
    assert not django_user_model.objects.filter(email="alice@team.example").exists()

    _sign_in_at_provider(page, app.url, provider_url, "alice", "alice-idp-pass")
    page.wait_for_url(f"{app.url}/")
    assert page.locator("h1").inner_text() == "Welcome, alice@team.example"
    page.screenshot(path=str(screenshots / "oidc-signed-in.png"))
    # First sign-in created a member, with no password of its own, tied to the provider's subject.
    user = django_user_model.objects.get(email="alice@team.example")
    assert user.username == "alice@team.example" and user.first_name == "Alice"
    assert roles.role_of(user) == "member" and not user.has_usable_password()
    identity = SignInIdentity.objects.get(user=user)
    assert identity.issuer == f"{provider_url}/o" and identity.subject

    page.click("text=Log out")
    page.wait_for_url(f"{app.url}/login/")
    page.goto(f"{app.url}/chat/")
    page.wait_for_url(f"{app.url}/login/?next=/chat/")  # signed out

    # Again: the provider still knows the browser, so no form; the same account, not a new one.
    page.click("#oidc-sign-in")
    page.wait_for_url(f"{app.url}/chat/")
    assert django_user_model.objects.filter(email="alice@team.example").count() == 1
    assert SignInIdentity.objects.count() == 1

    # The client secret never went through the browser, nor into a page or daphne's log.
    secret = oidc_provider.CLIENT_SECRET
    assert page.sent and not [r for r in page.sent if secret in r]
    assert secret not in page.content()
    assert secret not in (ARTIFACTS / "daphne-oidc.log").read_text()


def test_a_disallowed_domain_is_refused_with_a_clear_page(browser, team_sign_in, django_user_model, screenshots):
    app, provider_url = team_sign_in
    page = _page(browser)
    statuses = {}
    page.on("response", lambda r: statuses.__setitem__(r.url.split("?")[0], r.status))
    _sign_in_at_provider(page, app.url, provider_url, "mallory", "mallory-idp-pass")
    page.wait_for_url(f"{app.url}/oidc/callback/**")
    refusal = page.locator("#oidc-refused")
    assert refusal.locator("h1").inner_text() == "Not signed in"
    assert ("Accounts of elsewhere.example may not sign in to this inspector (allowed: team.example)."
            in refusal.inner_text())
    assert statuses[f"{app.url}/oidc/callback/"] == 403
    page.screenshot(path=str(screenshots / "oidc-refused.png"))
    assert not django_user_model.objects.filter(email="mallory@elsewhere.example").exists()
    page.goto(f"{app.url}/")
    page.wait_for_url(f"{app.url}/login/?next=/")  # not signed in


def test_a_viewer_from_the_provider_reads_what_is_shared_and_changes_nothing(
        browser, team_sign_in, user, django_user_model):
    app, provider_url = team_sign_in
    Server.objects.create(name="team-server", transport="streamable_http", url="http://h/mcp", owner=user, shared=True)
    Server.objects.create(name="alices-server", transport="streamable_http", url="http://h/mcp", owner=user)
    shared = Conversation.objects.create(owner=user, model="m", title="Incident review", shared=True)
    Conversation.objects.create(owner=user, model="m", title="Alice's notes")

    page = _page(browser)
    _sign_in_at_provider(page, app.url, provider_url, "victor", "victor-idp-pass")
    page.wait_for_url(f"{app.url}/")
    victor = django_user_model.objects.get(email="victor@team.example")
    assert roles.role_of(victor) == "viewer"
    assert "You are a viewer" in page.locator("#viewer-note").inner_text()
    assert page.locator("text=Add a server").count() == 0
    page.goto(f"{app.url}/servers/")
    assert "team-server" in page.content() and "alices-server" not in page.content()
    page.goto(f"{app.url}/chat/")
    assert "Incident review" in page.content() and "Alice's notes" not in page.content()
    page.goto(f"{app.url}/chat/{shared.pk}/")
    page.wait_for_url(f"{app.url}/chat/{shared.pk}/replay/")
    assert page.locator("#shared-by").inner_text() == "shared by alice"
    # Refused by the server, whatever the page shows.
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    answer = page.request.post(f"{app.url}/api/conversations/{shared.pk}/messages/", data={"text": "hi"},
                               headers={"X-CSRFToken": token})
    assert answer.status == 403 and answer.json()["error"] == roles.READ_ONLY_MESSAGE
    assert not shared.messages.exists()
