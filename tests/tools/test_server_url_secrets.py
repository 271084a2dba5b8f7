"""Credentials in a server URL, end to end: the real worker connects with them to a real MCP
server that refuses requests without them, and no answer, page or log shows them."""

from __future__ import annotations

import pytest

from tests.helpers import ARTIFACTS, run_call
from tools.forms import MASK
from tools.models import Server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

TOKEN, PASSWORD, WRONG = "tok-live-7", "pw-live-8", "tok-wrong-9"
SECRETS = (TOKEN, PASSWORD, WRONG)


@pytest.fixture(scope="module")
def guarded_http():
    """The basic test server over Streamable HTTP, answering 401 without ?token= and Basic auth."""
    from tests.mcp_servers.launch import start_server

    server = start_server("basic.py", "http", "--require-token", TOKEN, "--require-basic", f"u:{PASSWORD}")
    yield server
    server.stop()


def guarded_url(server, password: str = PASSWORD, token: str | None = TOKEN) -> str:
    query = f"?token={token}&x=1" if token is not None else "?x=1"
    return f"http://u:{password}@127.0.0.1:{server.port}/mcp{query}"


def assert_hidden(body: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in body, f"{secret} shown by {where}"


def echo_works(server: Server) -> tuple[bool, str]:
    call = run_call(Server.objects.get(pk=server.pk), "echo", {"text": "hi"})
    return call.status == "succeeded", call.error


def test_worker_connects_with_url_credentials_and_changes_reach_the_pool(api, client, user, guarded_http):
    resp = api.post("/api/servers/", {"name": "guarded", "transport": "streamable_http", "url": guarded_url(guarded_http, token=WRONG)})
    assert resp.status_code == 201, resp.json()
    server = Server.objects.get(pk=resp.json()["id"])

    # A wrong token: the server refuses, and the error says where without the credentials.
    refresh = api.post(f"/api/servers/{server.pk}/refresh/")
    assert refresh.status_code == 502, refresh.json()
    assert "could not connect to http://127.0.0.1" in refresh.json()["error"]
    assert_hidden(refresh.content.decode(), "the failed refresh answer")

    # The right token typed over the masked one; the masked password is kept.
    fixed = f"http://u:{MASK}@127.0.0.1:{guarded_http.port}/mcp?token={TOKEN}&x=1"
    assert api.patch(f"/api/servers/{server.pk}/", {"url": fixed}).status_code == 200
    refresh = api.post(f"/api/servers/{server.pk}/refresh/")
    assert refresh.status_code == 200, refresh.json()
    assert "echo" in [t["name"] for t in refresh.json()["tools"]]
    assert refresh.json()["server"]["url"] == f"http://u:{MASK}@127.0.0.1:{guarded_http.port}/mcp?token={MASK}&x=1"
    assert_hidden(refresh.content.decode(), "the refresh answer")
    assert echo_works(server) == (True, "")

    # The pool keys warm connections on the whole config: a changed secret is a new
    # connection (no reconnect asked for here), so a wrong or missing token fails.
    api.patch(f"/api/servers/{server.pk}/", {"url": guarded_url(guarded_http, token=WRONG)})
    ok, error = echo_works(server)
    assert not ok and "could not connect" in error
    api.patch(f"/api/servers/{server.pk}/", {"url": f"http://u:{MASK}@127.0.0.1:{guarded_http.port}/mcp?x=1"})
    assert not echo_works(server)[0]
    api.patch(f"/api/servers/{server.pk}/", {"url": f"http://u:pw-bad@127.0.0.1:{guarded_http.port}/mcp?x=1&token={TOKEN}"})
    assert not echo_works(server)[0]
    api.patch(f"/api/servers/{server.pk}/", {"url": guarded_url(guarded_http)})
    assert echo_works(server) == (True, "")

    for path in (f"/api/servers/{server.pk}/", "/api/servers/", "/api/servers/export/", f"/servers/{server.pk}/", "/servers/",
                 f"/servers/{server.pk}/edit/"):
        assert_hidden(client.get(path).content.decode(), path)
    for call in server.tool_calls.all():
        assert_hidden(client.get(f"/api/tool-calls/{call.pk}/").content.decode(), "a tool call's answer")
    assert_hidden((ARTIFACTS / "worker.log").read_text(errors="replace"), "the worker's log")
