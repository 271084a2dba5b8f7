"""Headless Chromium: a server's log panel (issue 28.5).

Log messages (`notifications/message`) the server sends between calls show live on the server's
Log tab, coloured by level, filterable by level and text, with those of earlier calls; the level
control sends `logging/setLevel` on the live connection (2025-11-25) or stamps the next requests'
log level (2026-07-28), without reconnecting."""

from __future__ import annotations

import sys

import pytest
from playwright.sync_api import expect

from tests.helpers import login_page, refresh_tools, run_call, wait_for
from tests.mcp_servers.launch import server_path
from tools.models import RpcFrame, Server, ServerLogMessage

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


def subs_server(owner, legacy: bool) -> Server:
    args = [server_path("subs.py"), *(["--legacy"] if legacy else [])]
    server = Server.objects.create(name="subs", transport="stdio", command=sys.executable, args=args, owner=owner,
                                   log_level="debug")
    refresh_tools(server)
    return server


def pid(server) -> str:
    return run_call(server, "whoami").full_result.raw["content"][0]["text"]


def test_log_panel_live_between_calls_filtered_and_level_set_without_reconnecting(browser, live_app, staff_user, screenshots):
    server = subs_server(staff_user, legacy=True)
    run_call(server, "log_now")  # five messages during a call, before the page opens
    wait_for(lambda: ServerLogMessage.objects.filter(server=server).count() == 5, message="the call's logs")
    page = login_page(browser, live_app, "stella", "stella-pass-123")
    page.goto(f"{live_app.url}/servers/{server.pk}/")
    page.click("nav.tabs >> text=\"Log\"")
    page.wait_for_url(f"{live_app.url}/servers/{server.pk}/log/")
    rows = page.locator("#server-log .log-row")
    expect(rows).to_have_count(5)
    assert "during the call" in rows.nth(0).inner_text()
    expect(page.locator("#log-state")).to_have_text("live", timeout=10000)

    # Between calls: the call ends at once, its messages follow, and the panel shows them live.
    first_pid = pid(server)
    run_call(server, "log_later", {"count": 5, "delay": 0.1})
    expect(rows).to_have_count(10, timeout=20000)
    assert ServerLogMessage.objects.filter(server=server, tool_call__isnull=True).count() == 5
    error_row = page.locator("#server-log .log-row.level-error").last
    expect(error_row).to_contain_text("error message 4 between calls")
    colour = error_row.locator(".level").evaluate("e => getComputedStyle(e).color")
    debug_colour = page.locator("#server-log .log-row.level-debug .level").last.evaluate("e => getComputedStyle(e).color")
    assert colour != debug_colour
    page.screenshot(path=str(screenshots / "server-log-panel.png"), full_page=True)

    # Filters: the least level, then text.
    page.select_option("#log-filter-level", "warning")
    expect(page.locator("#server-log .log-row:visible")).to_have_count(4)
    page.fill("#log-filter-text", "between calls")
    expect(page.locator("#server-log .log-row:visible")).to_have_count(2)
    page.select_option("#log-filter-level", "debug")
    page.fill("#log-filter-text", "")
    expect(page.locator("#server-log .log-row:visible")).to_have_count(10)

    # The level control: logging/setLevel on the live connection, no reconnection.
    page.select_option("#log-level", "error")
    page.click("#set-log-level")
    expect(page.locator("#log-level-state")).to_contain_text("logging/setLevel", timeout=20000)
    assert Server.objects.get(pk=server.pk).log_level == "error"
    frame = RpcFrame.objects.filter(server=server, method="logging/setLevel", direction="out").order_by("-at").first()
    assert frame is not None and frame.payload["params"]["level"] == "error"
    run_call(server, "log_later", {"count": 5, "delay": 0.1})
    expect(rows).to_have_count(11, timeout=20000)
    page.wait_for_timeout(1000)
    expect(rows).to_have_count(11)
    expect(rows.last).to_contain_text("error message 4 between calls")
    assert pid(server) == first_pid, "the level change reconnected the server"
    page.screenshot(path=str(screenshots / "server-log-level-error.png"), full_page=True)


def test_level_control_on_a_2026_connection_stamps_the_next_requests(client, staff_user):
    """2026-07-28 has no logging/setLevel: the level rides each request's `_meta`, changed without
    reconnecting; the server sends only what is at or above it."""
    server = subs_server(staff_user, legacy=False)
    first_pid = pid(server)
    client.force_login(staff_user)
    resp = client.post(f"/api/servers/{server.pk}/log-level/", {"level": "warning"}, content_type="application/json")
    assert resp.status_code == 200, resp.content
    assert "request" in resp.json()["applied"]
    call = run_call(server, "log_now")
    wait_for(lambda: ServerLogMessage.objects.filter(tool_call=call).count() == 2, message="warning and error only")
    assert sorted(ServerLogMessage.objects.filter(tool_call=call).values_list("level", flat=True)) == ["error", "warning"]
    out = RpcFrame.objects.filter(server=server, method="tools/call", direction="out").order_by("-at").first()
    assert out.payload["params"]["_meta"]["io.modelcontextprotocol/logLevel"] == "warning"
    assert pid(server) == first_pid
