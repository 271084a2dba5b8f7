"""Inspector pages and faults, through the real worker and real MCP servers."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest
from channels.testing import WebsocketCommunicator
from playwright.sync_api import expect

from inspector.asgi import application
from tests.helpers import closing, login_page, refresh_tools, run_async, run_call, wait_for
from tests.mcp_servers.launch import pid_alive
from tools.models import RpcFrame, Server, Tool, ToolResult

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


def whoami(server) -> int:
    call = run_call(server, "whoami")
    assert call.status == "succeeded", call.error
    return int(ToolResult.objects.get(tool_call=call).raw["content"][0]["text"])


def test_test_connection_fills_the_overview(client, user, app_server):
    client.force_login(user)
    resp = client.post(f"/servers/{app_server.pk}/test/", follow=True)
    page = resp.content.decode()
    assert "Connected: protocol" in page
    app_server.refresh_from_db()
    assert app_server.protocol_version and app_server.server_info["name"]
    assert app_server.protocol_version in page
    assert 'class="badge app"' in page and "show_marker" in page
    tool_page = client.get(f"/servers/{app_server.pk}/tools/show_marker/").content.decode()
    assert "ui://app/marker.html" in tool_page and "schema-form" in tool_page


def test_resources_templates_read_and_download(client, user, basic_server):
    client.force_login(user)
    page = client.get(f"/servers/{basic_server.pk}/resources/").content.decode()
    assert "greeting://{name}" in page
    listed = [line for line in page.splitlines() if "?uri=" in line]
    assert listed, page
    text = client.get(f"/servers/{basic_server.pk}/resources/", {"uri": "greeting://Ada"}).content.decode()
    assert "Ada" in text and 'class="resource-text"' in text
    resources = Server.objects.get(pk=basic_server.pk)
    from tools.runtime.tasks import server_action

    answer = server_action.delay(resources.pk, "resources").get(timeout=30)
    by_mime = {r.get("mimeType"): r["uri"] for r in answer["resources"]}
    json_page = client.get(f"/servers/{basic_server.pk}/resources/", {"uri": by_mime["application/json"]}).content.decode()
    assert "\n  " in json_page  # pretty-printed
    image_page = client.get(f"/servers/{basic_server.pk}/resources/", {"uri": by_mime["image/png"]}).content.decode()
    assert 'src="data:image/png;base64,' in image_page
    download = client.get(f"/servers/{basic_server.pk}/resources/download/", {"uri": by_mime["image/png"]})
    assert download.status_code == 200 and download.content.startswith(b"\x89PNG")


def test_prompts_get_with_arguments(client, user, basic_server):
    client.force_login(user)
    page = client.get(f"/servers/{basic_server.pk}/prompts/").content.decode()
    assert "greet" in page
    result = client.post(f"/servers/{basic_server.pk}/prompts/", {"prompt": "greet", "arg_name": "Grace", "arg_style": "formal"})
    body = result.content.decode()
    assert "Grace" in body and "prompt-message" in body
    assert 'name="arg_name" value="Grace"' in body  # the form keeps what was submitted


def test_unreachable_server_gives_clear_errors_everywhere(client, api, user):
    server = Server.objects.create(name="nowhere", transport="streamable_http", url="http://127.0.0.1:1/mcp", owner=user)
    resp = api.post(f"/api/servers/{server.pk}/refresh/")
    assert resp.status_code == 502
    assert "could not connect" in resp.json()["error"]
    page = client.post(f"/servers/{server.pk}/test/", follow=True).content.decode()
    assert "Connection failed" in page and "Last connection error" in page
    call = run_call(server, "anything")
    assert call.status == "failed" and "could not connect" in call.error


def test_wrong_command_is_a_clear_error(staff_api, staff_user):
    server = Server.objects.create(name="bad", transport="stdio", command="/no/such/mcp-server", owner=staff_user)
    resp = staff_api.post(f"/api/servers/{server.pk}/refresh/")
    assert resp.status_code == 502
    assert "/no/such/mcp-server" in resp.json()["error"]


def test_pool_reuses_one_stdio_process_and_recovers_after_kill(stdio_server):
    refresh_tools(stdio_server)
    first, second = whoami(stdio_server), whoami(stdio_server)
    assert first == second, "consecutive calls must reuse the warm stdio server"
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: not pid_alive(first), message="the killed server to die")
    third = whoami(stdio_server)
    assert third != first
    assert whoami(stdio_server) == third


def test_server_exiting_mid_call_then_reconnects(stdio_server):
    refresh_tools(stdio_server)
    before = whoami(stdio_server)
    crashed = run_call(stdio_server, "crash")
    assert crashed.status == "failed" and crashed.error
    assert whoami(stdio_server) != before


def test_list_changed_refreshes_cached_tools(stdio_server):
    refresh_tools(stdio_server)
    assert not Tool.objects.filter(server=stdio_server, name__startswith="dynamic").exists()
    run_call(stdio_server, "add_tool_now")
    wait_for(lambda: Tool.objects.filter(server=stdio_server).exclude(
        name__in=["echo", "add", "whoami", "slow", "crash", "bad_output", "unknown_fields", "add_tool_now"]).exists(),
        message="the new tool to be cached after tools/list_changed")


def test_rpc_log_rows_page_filters_export_and_live_socket(client, user, other_user, basic_server):
    client.force_login(user)
    cookie = (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())
    origin = (b"origin", b"http://127.0.0.1:8000")

    async def scenario():
        comm = WebsocketCommunicator(application, "/ws/rpc-log/", headers=[cookie, origin])
        connected, _ = await comm.connect(timeout=5)
        assert connected
        await asyncio.to_thread(closing(refresh_tools), basic_server)
        await asyncio.to_thread(closing(run_call), basic_server, "echo", {"text": "logged"})
        frames = []
        try:
            while not any(f["method"] == "tools/call" and f["direction"] == "in" for f in frames):
                event = await comm.receive_json_from(timeout=10)
                frames.extend(event["frames"])
        finally:
            await comm.disconnect()
        return frames

    live_frames = run_async(scenario)
    out = wait_for(lambda: RpcFrame.objects.filter(server=basic_server, method="tools/call", direction="out").first(),
                   message="the tools/call request frame")
    back = wait_for(lambda: RpcFrame.objects.filter(server=basic_server, rpc_id=out.rpc_id, direction="in").first(),
                    message="its response frame")
    assert out.payload["params"]["name"] == "echo" and out.kind == "request"
    assert back.kind == "response" and back.method == "tools/call" and back.latency_ms is not None
    assert back.payload["result"]["content"][0]["text"] == "logged"
    assert any(f["method"] == "tools/call" and f["direction"] == "out" for f in live_frames)

    page = client.get("/rpc-log/", {"server": basic_server.pk, "method": "tools/call", "direction": "out"}).content.decode()
    assert page.count('class="frame"') >= 1 and "initialize" not in page.split("<tbody>")[1].split("</tbody>")[0]
    exported = client.get("/rpc-log/export/", {"server": basic_server.pk, "direction": "in"})
    assert exported["Content-Disposition"].startswith("attachment")
    frames = json.loads(exported.content)["frames"]
    assert frames and all(f["direction"] == "in" for f in frames)
    assert frames == sorted(frames, key=lambda f: f["at"], reverse=True)

    client.force_login(other_user)
    assert json.loads(client.get("/rpc-log/export/").content)["frames"] == []


@pytest.mark.browser
def test_run_a_tool_from_the_schema_form(browser, live_app, user, basic_server, screenshots):
    refresh_tools(basic_server)
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.goto(f"{live_app.url}/servers/{basic_server.pk}/tools/add/")
    page.fill("#arg-a", "20")
    page.fill("#arg-b", "22")
    page.click("#run-tool")
    page.wait_for_selector("#run-status.succeeded", timeout=30000)
    expect(page.locator("#full-result")).to_contain_text('"sum": 42', timeout=10000)
    assert "42" in page.locator("#projection-text").inner_text()
    assert "matches the outputSchema" in page.locator("#schema-status").inner_text()
    # The call's trace id (the tool page's POST started the trace), small and selectable to copy.
    from tools.models import ToolCall

    call = ToolCall.objects.filter(server=basic_server, tool_name="add").latest("queued_at")
    assert call.trace_id and page.locator("#result-trace").inner_text() == call.trace_id
    # The raw JSON editor round-trips the form.
    page.click("[data-mode=json]")
    assert json.loads(page.locator("#raw-args").input_value()) == {"a": 20, "b": 22}
    page.screenshot(path=str(screenshots / "tool-run.png"), full_page=True)
    page.goto(f"{live_app.url}/servers/{basic_server.pk}/tools/add/")
    page.fill("#arg-a", "1")
    page.click("#run-tool")
    assert "b is required" in page.locator("#args-error").inner_text()
    page.goto(f"{live_app.url}/rpc-log/?server={basic_server.pk}")
    page.wait_for_selector("#live-state >> text=live")
    page.click("tr.frame >> nth=0")
    assert page.locator("tr.frame-json >> nth=0").is_visible()
    page.screenshot(path=str(screenshots / "rpc-log.png"), full_page=True)
    page.context.close()

