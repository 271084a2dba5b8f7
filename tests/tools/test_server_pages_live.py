"""Server pages that know what a server offers: no prompts/resources calls a server did not
advertise, a server page that fills in after a save without a reload, and the version probe
shown as what it is in the JSON-RPC log."""

from __future__ import annotations

import socket
import threading

import pytest
from playwright.sync_api import expect

from tests.helpers import login_page, refresh_tools, wait_for
from tools.models import RpcFrame, Server, Tool

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

UNREACHABLE = "http://127.0.0.1:9/mcp"  # the discard port: nothing listens


def connected_server(user, capabilities: dict) -> Server:
    """A server that connected once (capabilities stored) and now cannot be reached: any call to
    it shows an error, so a page that says nothing about an error did not call it."""
    return Server.objects.create(name="known", transport="streamable_http", url=UNREACHABLE, owner=user,
                                 protocol_version="2025-11-25", capabilities=capabilities)


@pytest.mark.parametrize("tab", ["prompts", "resources"])
def test_a_tab_the_server_does_not_offer_says_so_without_calling(client, user, tab):
    client.force_login(user)
    server = connected_server(user, {"tools": {"listChanged": True}})
    page = client.get(f"/servers/{server.pk}/{tab}/").content.decode()
    assert f"This server does not offer {tab}." in page
    assert "Could not list" not in page and "-32601" not in page


@pytest.mark.parametrize("tab", ["prompts", "resources"])
def test_a_tab_the_server_offers_or_an_unknown_server_is_asked(client, user, tab):
    client.force_login(user)
    offered = connected_server(user, {"tools": {}, tab: {}})
    never = Server.objects.create(name="new", transport="streamable_http", url=UNREACHABLE, owner=user)
    for server in (offered, never):
        page = client.get(f"/servers/{server.pk}/{tab}/").content.decode()
        assert "does not offer" not in page
        assert f"Could not list {tab}" in page  # it was asked (and is unreachable)


class SilentServer:
    """Accepts TCP connections and never answers: a connect that ends only at the timeout,
    so the server page is surely shown before the worker's refresh has ended."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/mcp"
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                self.conns.append(self.sock.accept()[0])
            except OSError:
                return

    def close(self):
        for c in self.conns:
            c.close()
        self.sock.close()


def save_server_form(page, live_app, name: str, url: str) -> None:
    page.goto(f"{live_app.url}/servers/new/")
    page.fill("#id_name", name)
    page.select_option("#id_transport", "streamable_http")
    page.fill("#id_url", url)
    page.click("#server-form button[type=submit]")
    page.wait_for_url(f"{live_app.url}/servers/*/")
    page.evaluate("window.__samePage = true")  # gone if the page reloads


@pytest.mark.browser
def test_server_page_fills_in_after_save_without_reload(browser, live_app, user, basic_server_http, screenshots):
    page = login_page(browser, live_app, "alice", "alice-pass-123")

    # A server that answers: its tools and server info appear on the page the save led to.
    save_server_form(page, live_app, "live-basic", basic_server_http.url)
    page.wait_for_selector("#tools a:has-text('echo')", timeout=30000)
    # The first render may have read the server row just before the worker wrote it and its tools
    # just after: the note says "Connected" once the page has swapped in the fresh overview.
    expect(page.locator("#refresh-state")).to_contain_text("Connected", timeout=30000)
    assert page.evaluate("window.__samePage") is True
    assert "basic-test-server" in page.locator("#server-live").inner_text()
    server = Server.objects.get(name="live-basic")
    assert Tool.objects.filter(server=server, name="echo").exists()

    # A server that never answers: the page says it is waiting, then shows the error, live.
    silent = SilentServer()
    try:
        save_server_form(page, live_app, "live-silent", silent.url)
        assert "fills in when it answers" in page.locator("#refresh-state").inner_text()
        page.wait_for_selector("#last-error", timeout=30000)
        assert page.evaluate("window.__samePage") is True
        assert "could not connect" in page.locator("#refresh-state").inner_text()
        page.screenshot(path=str(screenshots / "server-live-error.png"), full_page=True)
        # A reload afterwards does not poll again: the refresh has ended.
        page.reload()
        assert page.locator("#refresh-state").count() == 0
    finally:
        silent.close()
    page.context.close()


@pytest.fixture(scope="module")
def legacy_server_http():
    from tests.mcp_servers.launch import start_server

    server = start_server("basic.py", "http", "--legacy")
    yield server
    server.stop()


@pytest.mark.browser
def test_version_probe_is_shown_as_a_probe_not_a_fault(client, browser, live_app, user, legacy_server_http, screenshots):
    server = Server.objects.create(name="legacy", transport="streamable_http", url=legacy_server_http.url, owner=user)
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.goto(f"{live_app.url}/rpc-log/?server={server.pk}")
    page.wait_for_selector("#live-state:text('live')")
    refresh_tools(server)

    # Live rows (over the WebSocket).
    live_probe = page.wait_for_selector("tr.frame.probe", timeout=20000)
    assert "version probe — server uses the initialize handshake" in live_probe.inner_text()
    assert "server/discover" in live_probe.inner_text()
    assert page.locator("tr.frame.rpc-error").count() == 0
    color = page.eval_on_selector("tr.frame.probe td", "td => getComputedStyle(td).color")
    assert color == "rgb(107, 115, 133)"  # --muted, not red
    page.wait_for_selector("tr.frame >> text=initialize")

    # Stored rows (rendered by the server).
    wait_for(lambda: RpcFrame.objects.filter(server=server, method="server/discover", kind="error").exists(),
             message="the stored probe answer")
    page.reload()
    stored = page.wait_for_selector("tr.frame.probe")
    assert "version probe" in stored.inner_text()
    assert page.locator("tr.frame.rpc-error").count() == 0
    page.screenshot(path=str(screenshots / "rpc-log-probe.png"), full_page=True)
    page.context.close()
