"""Headless Chromium: Subscribe on a resource page (issue 28.3).

`resources/subscribe` on a 2025-11-25 connection, `subscriptions/listen` with the resource's URI
on a 2026-07-28 one; the page shows each `notifications/resources/updated` as it arrives (the
server's socket, /ws/servers/{id}/) with the content read again, and Unsubscribe stops them.
The resource changes on demand: the test server's `set_note` tool (tests/mcp_servers/subs.py)."""

from __future__ import annotations

import json
import sys

import pytest
from playwright.sync_api import expect

from tests.helpers import login_page, refresh_tools, run_call, wait_for
from tests.mcp_servers.launch import server_path
from tools.models import ResourceSubscription, RpcFrame, Server

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

URI = "note://board"


def subs_server(owner, legacy: bool) -> Server:
    args = [server_path("subs.py"), *(["--legacy"] if legacy else [])]
    server = Server.objects.create(name="subs", transport="stdio", command=sys.executable, args=args, owner=owner)
    refresh_tools(server)
    return server


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
def test_subscribe_shows_updates_live_and_unsubscribe_stops_them(browser, live_app, staff_user, screenshots, era):
    server = subs_server(staff_user, legacy=era == "2025-11-25")
    assert Server.objects.get(pk=server.pk).protocol_version == era
    page = login_page(browser, live_app, "stella", "stella-pass-123")
    page.goto(f"{live_app.url}/servers/{server.pk}/resources/?uri=note://board")
    expect(page.locator("#resource-read .resource-text")).to_have_text("first note")
    expect(page.locator("#subscription-state")).to_contain_text("Not subscribed")

    page.click("#subscribe")
    expect(page.locator("#subscription-state")).to_contain_text("Subscribed", timeout=20000)
    assert ResourceSubscription.objects.filter(server=server, uri=URI, user=staff_user).exists()
    method = "resources/subscribe" if era == "2025-11-25" else "subscriptions/listen"
    wait_for(lambda: any(URI in json.dumps(frame.payload) for frame in
                         RpcFrame.objects.filter(server=server, method=method, direction="out")), message=f"a {method} frame")

    run_call(server, "set_note", {"text": "second note"})
    expect(page.locator("#resource-updates .resource-update")).to_have_count(1, timeout=20000)
    expect(page.locator("#resource-read .resource-text")).to_have_text("second note", timeout=20000)
    run_call(server, "set_note", {"text": "third note"})
    expect(page.locator("#resource-updates .resource-update")).to_have_count(2, timeout=20000)
    expect(page.locator("#resource-read .resource-text")).to_have_text("third note", timeout=20000)
    page.screenshot(path=str(screenshots / f"resource-subscription-{era}.png"), full_page=True)

    # After a reload the page knows it is subscribed.
    page.reload()
    expect(page.locator("#subscription-state")).to_contain_text("Subscribed")
    page.click("#unsubscribe")
    expect(page.locator("#subscription-state")).to_contain_text("Not subscribed", timeout=20000)
    assert not ResourceSubscription.objects.filter(server=server).exists()
    if era == "2025-11-25":
        assert run_call(server, "subscribers").full_result.raw["content"][0]["text"] == "[]"
    before = RpcFrame.objects.filter(server=server, method="notifications/resources/updated").count()
    run_call(server, "set_note", {"text": "fourth note"})
    page.wait_for_timeout(1500)
    assert RpcFrame.objects.filter(server=server, method="notifications/resources/updated").count() == before
    expect(page.locator("#resource-updates .resource-update")).to_have_count(0)


def test_no_subscribe_button_when_the_server_does_not_offer_it(client, user):
    """A 2025-11-25 server without `resources.subscribe`: no button, a note why."""
    client.force_login(user)
    server = Server.objects.create(name="known", transport="streamable_http", url="http://127.0.0.1:9/mcp", owner=user,
                                   protocol_version="2025-11-25", capabilities={"resources": {"listChanged": True}})
    page = client.get(f"/servers/{server.pk}/resources/?uri=text://hello").content.decode()
    assert "does not offer resource subscriptions" in page
    assert 'id="subscribe"' not in page
