"""The full result pushed in `tool_call.result` (issue 25.5), over real WebSockets to real daphne.

Up to WS_INLINE_RESULT_MAX_BYTES (default 512 KiB) the event carries the stored CallToolResult
as `result`, so pages and App views fetch nothing; above it, only the summary's `result_url`
(streamed over HTTP). Real worker, real MCP servers, the Redis channel layer, daphne; the
socket is aiohttp's, a client like a browser's. The browser side is in
test_browser_pushed_results.py.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from inspector.events import JSON_TEXT, event_text
from tests.helpers import refresh_tools, run_call, streamed_body, worker_to_kill
from tests.tools.test_events import stored_json_text
from chat.tool_calls import calls_of
from tools.runtime import events
from tools.runtime.lifecycle import start_tool_call
from tools.models import ToolCall, ToolResult

pytestmark = [pytest.mark.django_db(transaction=True)]

DEFAULT_LIMIT = 512 * 1024
SMALL_EVENT = 64 * 1024  # an event without the result: a summary


async def _frames(url: str, cookie: str, path: str, until: set[str], action=None, timeout: float = 60) -> list[tuple[dict, str]]:
    """Every frame of the socket at `path` (parsed, and as sent) up to one whose type is in `until`;
    `action` (sync) runs in a thread once the socket is open."""
    import aiohttp

    got: list[tuple[dict, str]] = []
    async with aiohttp.ClientSession(cookies={"sessionid": cookie}) as session:
        async with session.ws_connect(url.replace("http://", "ws://") + path, headers={"Origin": url},
                                      max_msg_size=4 * 1024 * 1024) as ws:
            if action is not None:
                await asyncio.to_thread(action)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                message = await ws.receive(timeout=deadline - time.monotonic())
                assert message.type == aiohttp.WSMsgType.TEXT, f"the socket ended: {message}"
                event = json.loads(message.data)
                got.append((event, message.data))
                if event["type"] in until:
                    return got
    raise AssertionError(f"no {until}; got {[e['type'] for e, _ in got]}")


def stored(api, call_id) -> dict:
    """The full result as result_url serves it."""
    return json.loads(streamed_body(api.get(f"/api/tool-calls/{call_id}/result/")))


def test_the_conversation_socket_pushes_results_up_to_512_kib_and_refers_to_bigger_ones(
        client, api, user, fake_llm, basic_server, app_server, live_app, celery_worker):
    refresh_tools(basic_server)
    refresh_tools(app_server)
    cid = api.post("/api/conversations/", {"model": "openai/test-model", "api_base": fake_llm.url, "api_key": "sk-x",
                                           "server_ids": [basic_server.pk, app_server.pk]}).json()["id"]
    fake_llm.script([
        {"tool_calls": [{"name": "basic__unknown_fields", "arguments": {}, "id": "u1"},
                        {"name": "apps__show_marker", "arguments": {"label": "push"}, "id": "m1"},
                        # Just under 512 KiB: it must pass the channel layer and daphne whole.
                        {"name": "apps__big_view", "arguments": {"size_mb": 0.495}, "id": "n1"},
                        {"name": "apps__big_view", "arguments": {"size_mb": 0.6}, "id": "o1"}]},
        {"text": "All shown."},
    ])
    cookie = client.cookies["sessionid"].value

    def post():
        assert api.post(f"/api/conversations/{cid}/messages/", {"text": "go"}).status_code == 202

    got = asyncio.run(_frames(live_app.url, cookie, f"/ws/conversations/{cid}/", {"turn.completed", "turn.failed"}, post))
    assert got[-1][0]["type"] == "turn.completed", got[-1][0]
    results = {e["tool_call"]["llm_tool_call_id"]: (e, text) for e, text in got if e["type"] == "tool_call.result"}
    assert set(results) == {"u1", "m1", "n1", "o1"}

    # Unknown fields kept: the result as the server sent it, identical to what result_url serves.
    event, _ = results["u1"]
    assert event["result"]["x-extra"] == {"keep": "me"}
    assert event["result"] == stored(api, event["tool_call_id"])
    event, _ = results["m1"]
    assert event["result"]["structuredContent"]["secret"] == "STRUCTURED-MARKER-push"
    assert event["result"]["_meta"]["note"] == "META-MARKER-push"
    assert event["result"] == stored(api, event["tool_call_id"])
    assert event["tool_call"]["result_url"]  # the summary is unchanged: the reference is still there

    near, near_text = results["n1"]
    assert 500 * 1024 < near["tool_call"]["size_full"] <= DEFAULT_LIMIT
    assert near["result"]["structuredContent"]["data"].endswith(f"END{int(0.495 * 1024 * 1024):013d}")
    assert near["result"] == stored(api, near["tool_call_id"]) and len(near_text.encode()) > near["tool_call"]["size_full"]

    over, over_text = results["o1"]
    assert over["tool_call"]["size_full"] > DEFAULT_LIMIT
    assert "result" not in over and over["tool_call"]["result_url"] == f"/api/tool-calls/{over['tool_call_id']}/result/"
    assert len(over_text.encode()) < SMALL_EVENT

    # A page that (re)connects to one call's socket after it ended gets the same, from the database:
    # the stored JSON text verbatim when it is small enough, a reference otherwise.
    for llm_id, pushed in (("m1", True), ("n1", True), ("o1", False)):
        call = calls_of(cid).get(llm_tool_call_id=llm_id)
        [(catch_up, text)] = asyncio.run(_frames(live_app.url, cookie, f"/ws/tool-calls/{call.pk}/", {"tool_call.result"}))
        assert ("result" in catch_up) is pushed, llm_id
        if pushed:
            assert f'"result":{stored_json_text(call)}' in text
            assert catch_up["result"] == results[llm_id][0]["result"]
        else:
            assert len(text.encode()) < SMALL_EVENT


def test_the_limit_is_the_setting_to_the_byte_on_a_calls_own_socket(client, api, user, basic_server, live_app, celery_worker):
    """`slow` answers "slept 2.0" or "slept 2.25": two results one byte apart. A worker whose
    WS_INLINE_RESULT_MAX_BYTES is the smaller one's size pushes that one and not the other, live
    on the socket of the call (open before the call ends)."""
    refresh_tools(basic_server)
    limit = run_call(basic_server, "slow", {"seconds": 0.1}).full_result.size_bytes  # "slept 0.1": the same length as 2.0
    cookie = client.cookies["sessionid"].value

    def live(seconds: float) -> tuple[dict, dict]:
        call = start_tool_call(server=basic_server, tool_name="slow", arguments={"seconds": seconds}, origin="manual",
                               user=user)
        got = asyncio.run(_frames(live_app.url, cookie, f"/ws/tool-calls/{call.pk}/", {"tool_call.result"}))
        assert got[0][0]["type"] == "tool_call.status", "the call ended before its socket was open: not a live push"
        return got[-1][0], stored(api, call.pk)

    with worker_to_kill(celery_worker, "tools", "push-limit", {"WS_INLINE_RESULT_MAX_BYTES": str(limit)}):
        at_limit, at_limit_stored = live(2.0)
        over_limit, _ = live(2.25)
    assert at_limit["tool_call"]["size_full"] == limit and at_limit["result"] == at_limit_stored
    assert at_limit["result"]["content"] == [{"type": "text", "text": "slept 2.0"}]
    assert over_limit["tool_call"]["size_full"] == limit + 1 and "result" not in over_limit
    assert over_limit["tool_call"]["result_url"].endswith(f"/{over_limit['tool_call_id']}/result/")


def test_a_result_too_big_to_push_is_not_read_to_decide(user, basic_server, settings):
    """The size column decides: the catch-up of a big result reads nothing more of it."""
    call = ToolCall.objects.create(server=basic_server, tool_name="big_text", origin="manual", requested_by=user,
                                   status="succeeded")
    ToolResult.objects.create(tool_call=call, raw={"content": [{"type": "text", "text": "x" * 2000}]}, size_bytes=2040,
                              tokens=500)
    settings.WS_INLINE_RESULT_MAX_BYTES = 2039
    loaded = events.summary_queryset(ToolCall.objects.filter(pk=call.pk)).get()
    with CaptureQueriesContext(connection) as queries:
        assert events.stored_text_to_push(loaded) is None
    assert len(queries) == 0
    settings.WS_INLINE_RESULT_MAX_BYTES = 2040
    text = events.stored_text_to_push(loaded)
    assert json.loads(text) == ToolResult.objects.get(pk=call.pk).raw


def test_a_pushed_member_is_written_into_the_frame_as_its_text():
    """Not parsed and serialised again: unknown members, number spellings and key order stay."""
    stored_text = '{"content":[],"x-extra":{"b":1,"a":1e-07},"big":123456789012345678901234567890}'
    frame = event_text({"type": "tool_call.result", "tool_call_id": "c", JSON_TEXT: {"result": stored_text}})
    assert frame == '{"type": "tool_call.result", "tool_call_id": "c","result":' + stored_text + "}"
    assert json.loads(frame)["result"]["big"] == 123456789012345678901234567890
    assert event_text({"type": "x"}) == '{"type": "x"}'
