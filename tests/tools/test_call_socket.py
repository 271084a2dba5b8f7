"""One WebSocket per page for every call it watches, `/ws/calls/` (issue 31.2).

Real daphne, a real worker, the basic test server over Streamable HTTP; the socket is aiohttp's
(a client like a browser's), and the tool page in headless Chromium, whose sockets are counted.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from tests.helpers import login_page, refresh_tools, run_call
from tools.models import ToolCall
from tools.runtime.lifecycle import start_tool_call

pytestmark = [pytest.mark.django_db(transaction=True)]


async def _watch(url: str, cookie: str, steps, expect_results: int, timeout: float = 60) -> list[dict]:
    """Open /ws/calls/ once; `steps` (sync, in a thread) returns the ids to subscribe, in batches;
    collect events until `expect_results` results came."""
    import aiohttp

    got: list[dict] = []
    async with aiohttp.ClientSession(cookies={"sessionid": cookie}) as session:
        async with session.ws_connect(url.replace("http://", "ws://") + "/ws/calls/", headers={"Origin": url}) as ws:
            for batch in await asyncio.to_thread(steps):
                await ws.send_str(json.dumps({"subscribe": batch}))
            deadline = time.monotonic() + timeout
            while sum(e["type"] == "tool_call.result" for e in got) < expect_results:
                message = await ws.receive(timeout=deadline - time.monotonic())
                assert message.type == aiohttp.WSMsgType.TEXT, f"the socket ended: {message}"
                got.append(json.loads(message.data))
            # Anything more (a second result of one call) would come now.
            try:
                extra = await ws.receive(timeout=1.5)
                if extra.type == aiohttp.WSMsgType.TEXT:
                    got.append(json.loads(extra.data))
            except asyncio.TimeoutError:
                pass
    return got


def test_one_socket_brings_every_watched_calls_result_once_even_one_ended_before_it_was_watched(
        client, user, other_user, basic_server, live_app, celery_worker):
    refresh_tools(basic_server)
    client.force_login(user)
    cookie = client.cookies["sessionid"].value
    ended = run_call(basic_server, "echo", {"text": "before"}, user=user)  # over before anyone watches it
    theirs = run_call(basic_server, "echo", {"text": "not yours"}, user=other_user)

    def steps():
        slow = start_tool_call(server=basic_server, tool_name="slow", arguments={"seconds": 1.5}, origin="manual", user=user)
        quick = start_tool_call(server=basic_server, tool_name="echo", arguments={"text": "quick"}, origin="manual", user=user)
        return [[str(slow.pk)], [str(quick.pk), str(ended.pk)], [str(theirs.pk), "not-a-uuid"]]

    got = asyncio.run(_watch(live_app.url, cookie, steps, expect_results=3))
    results = [e for e in got if e["type"] == "tool_call.result"]
    ids = {e["tool_call_id"] for e in results}
    assert len(results) == 3 and len(ids) == 3, [(e["type"], e.get("tool_call_id")) for e in got]
    assert str(ended.pk) in ids and str(theirs.pk) not in ids
    by_tool = {e["tool_call"]["tool"]: e for e in results}
    assert by_tool["slow"]["result"]["content"] == [{"type": "text", "text": "slept 1.5"}]
    assert by_tool["echo"]["tool_call"]["status"] == "succeeded"
    refused = [e for e in got if e["type"] == "calls.refused"]
    assert [e["tool_call_id"] for e in refused] == [str(theirs.pk)]
    assert all(e.get("tool_call_id") for e in got)
    # The slow call was watched while it ran: its status came first, live, then its result.
    slow_events = [e["type"] for e in got if e.get("tool_call_id") == by_tool["slow"]["tool_call_id"]]
    assert slow_events[0] == "tool_call.status" and slow_events[-1] == "tool_call.result"


def test_the_calls_socket_needs_a_login(live_app):
    """Refused before it opens (closed with 4401 before the handshake is accepted: daphne answers 403)."""
    import aiohttp

    async def status() -> int:
        async with aiohttp.ClientSession() as session:
            try:
                async with session.ws_connect(live_app.url.replace("http://", "ws://") + "/ws/calls/",
                                              headers={"Origin": live_app.url}):
                    return 101
            except aiohttp.WSServerHandshakeError as exc:
                return exc.status

    assert asyncio.run(status()) == 403


@pytest.mark.browser
def test_the_tool_page_runs_calls_over_one_socket(browser, live_app, user, basic_server, celery_worker):
    """Calls that outlast the page's quick wait (?wait=0.5, static/js/tool-run.js) are followed on
    the page's one socket, every one on the same; a quick one needs no socket at all."""
    refresh_tools(basic_server)
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    sockets: list[str] = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    page.goto(f"{live_app.url}/servers/{basic_server.pk}/tools/echo/")
    page.locator("#schema-form input[name=text]").fill("quick")
    page.locator("#run-tool").click()
    page.locator("#full-result", has_text="quick").wait_for(timeout=30000)
    assert [u for u in sockets if "/ws/" in u] == [], sockets  # answered by the POST itself

    page.goto(f"{live_app.url}/servers/{basic_server.pk}/tools/slow/")
    for tag in ("one", "two", "three"):
        page.locator("#schema-form input[name=seconds]").fill("1")
        page.locator("#schema-form input[name=tag]").fill(tag)
        page.locator("#run-tool").click()
        page.locator("#run-status.running").wait_for(timeout=30000)  # followed on the socket
        page.locator("#full-result", has_text="slept 1").wait_for(timeout=30000)
        page.locator("#run-tool:not([disabled])").wait_for(timeout=10000)
    assert ToolCall.objects.filter(tool_name="slow", status="succeeded").count() == 3
    call_sockets = [u for u in sockets if "/ws/calls/" in u or "/ws/tool-calls/" in u]
    assert len(call_sockets) == 1 and call_sockets[0].endswith("/ws/calls/"), sockets
    page.context.close()
