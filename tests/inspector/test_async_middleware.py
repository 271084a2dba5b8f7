"""The project's middleware in the async chain daphne runs (issue 31.3): every middleware in
settings is async-capable, so a request reaches an async view without a thread hop for the
chain, and the gates (sandbox origin, API token, viewer read-only, CSP) answer as in the sync
chain the test client runs (tests/inspector/test_roles.py, test_security.py)."""

from __future__ import annotations

import pytest
from asgiref.sync import SyncToAsync, async_to_sync, iscoroutinefunction
from django.core.handlers.asgi import ASGIHandler
from django.test import AsyncClient

from inspector import roles
from inspector.models import ApiToken
from tools.models import Server

pytestmark = pytest.mark.django_db


def test_the_whole_chain_runs_on_the_event_loop():
    chain = ASGIHandler()._middleware_chain
    # One sync-only middleware anywhere makes Django run the chain from there out in a thread.
    assert not isinstance(chain, SyncToAsync) and iscoroutinefunction(chain)


@pytest.fixture
def viewer(django_user_model):
    user = django_user_model.objects.create_user("vera", password="vera-pass-123")
    roles.set_role(user, roles.VIEWER)
    return user


def test_a_viewer_is_refused_in_the_async_chain_by_session_and_by_token(viewer, user):
    server = Server.objects.create(name="shared", transport="streamable_http", url="http://h/mcp", owner=user, shared=True)
    client = AsyncClient()
    client.force_login(viewer)
    post = async_to_sync(client.post)
    answer = post(f"/api/servers/{server.pk}/tools/t/call/", {"arguments": {}}, content_type="application/json")
    assert answer.status_code == 403 and answer.json()["error"] == roles.READ_ONLY_MESSAGE
    page = post("/servers/new/", {"name": "x"})
    assert page.status_code == 403 and "viewer" in page.content.decode()
    assert async_to_sync(client.get)("/api/servers/").status_code == 200

    key = ApiToken.issue(viewer)[1]
    answer = async_to_sync(AsyncClient().post)("/api/conversations/", {"model": "m"}, content_type="application/json",
                                               headers={"Authorization": f"Token {key}"})
    assert answer.status_code == 403 and answer.json()["error"] == roles.READ_ONLY_MESSAGE
    assert Server.objects.count() == 1


def test_tokens_csp_and_the_sandbox_gate_in_the_async_chain(user):
    key = ApiToken.issue(user)[1]
    get = async_to_sync(AsyncClient().get)
    good = get("/api/servers/", headers={"Authorization": f"Token {key}"})
    assert good.status_code == 200 and "default-src 'self'" in good["Content-Security-Policy"]
    bad = get("/api/servers/", headers={"Authorization": "Token nope"})
    assert bad.status_code == 401 and bad.json() == {"error": "Invalid or revoked API token."}
    assert get("/api/servers/").status_code == 401
    sandbox = get("/sandbox/proxy/")  # the sandbox proxy, asked on the app's origin
    assert sandbox.status_code == 404 and b"only on SANDBOX_ORIGIN" in sandbox.content
