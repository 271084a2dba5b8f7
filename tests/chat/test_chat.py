"""Chat end to end: a real worker, real MCP servers, the recording stand-in LLM, and the real
Channels consumer (WebsocketCommunicator over the Redis channel layer)."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta

import pytest
from channels.testing import WebsocketCommunicator
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chat import history
from chat.llm import streamed_so_far
from chat.tool_calls import caller, calls_of
from chat.models import Conversation, Message, Turn
from inspector.asgi import application
from tests.helpers import wait_until_worker_is_quiet, closing, refresh_tools, run_async, streamed_body, wait_for
from tools.models import Projection, RpcFrame, ToolCall, ToolResult

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

MODEL = "openai/test-model"


def new_conversation(api, fake_llm, servers=(), **extra) -> int:
    body = {"model": MODEL, "api_base": fake_llm.url, "api_key": "sk-test-secret-key", "server_ids": [s.pk for s in servers], **extra}
    resp = api.post("/api/conversations/", body)
    assert resp.status_code == 201, resp.json()
    return resp.json()["id"]


def wait_turn(api, cid: int, timeout: float = 40) -> dict:
    return wait_for(lambda: (d := api.get(f"/api/conversations/{cid}/").json())["status"] != "running" and d,
                    timeout=timeout, message="the turn to end")


class Socket:
    """A WebSocket client on the real consumer, authenticated with the test client's session."""

    def __init__(self, client, cid: int):
        cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
        self.comm = WebsocketCommunicator(
            application, f"/ws/conversations/{cid}/", headers=[(b"cookie", cookie), (b"origin", b"http://127.0.0.1:8000")]
        )
        self.events: list[dict] = []

    async def connect(self) -> bool:
        connected, _ = await self.comm.connect(timeout=10)
        return connected

    async def collect_until(self, types: set[str], timeout: float = 40) -> list[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                event = await self.comm.receive_json_from(timeout=max(0.1, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                break
            self.events.append(event)
            if event["type"] in types:
                return self.events
        raise AssertionError(f"no {types} event; got {[e['type'] for e in self.events]}")


def test_app_tool_end_to_end_model_sees_only_the_projection(client, api, fake_llm, app_server):
    refresh_tools(app_server)
    cid = new_conversation(api, fake_llm, [app_server])
    fake_llm.script([
        {"text": "Let me show it.", "tool_calls": [{"name": "apps__show_marker", "arguments": {"label": "e2e"}, "id": "call_1"}]},
        {"text": "Shown **above**."},
    ])

    async def scenario():
        sock = Socket(client, cid)
        assert await sock.connect()
        snapshot = await sock.comm.receive_json_from(timeout=5)
        assert snapshot["type"] == "stream.snapshot"
        resp = await asyncio.to_thread(closing(api.post), f"/api/conversations/{cid}/messages/", {"text": "show the marker"})
        assert resp.status_code == 202 and "turn_id" in resp.json()
        events = await sock.collect_until({"turn.completed", "turn.failed"})
        await sock.comm.disconnect()
        return events

    events = run_async(scenario)
    types = [e["type"] for e in events]
    assert "turn.completed" in types, events[-1]
    assert "message.delta" in types and "tool_call.created" in types
    # The browser gets the full result: pushed inside tool_call.result (it is under
    # WS_INLINE_RESULT_MAX_BYTES), and the same at result_url. Only that event carries it.
    pushed = next(e for e in events if e["type"] == "tool_call.result")
    result = pushed["tool_call"]
    assert result["status"] == "succeeded" and result["has_view"] is True and result["has_result"] is True
    assert pushed["result"]["structuredContent"]["secret"] == "STRUCTURED-MARKER-e2e"
    assert pushed["result"]["_meta"]["note"] == "META-MARKER-e2e"
    others = [e for e in events if e is not pushed]
    assert "STRUCTURED-MARKER" not in json.dumps(others) and "META-MARKER" not in json.dumps(others)
    full = api.get(result["result_url"])
    full_json = json.loads(streamed_body(full))
    assert full_json["structuredContent"]["secret"] == "STRUCTURED-MARKER-e2e"
    assert full_json["_meta"]["note"] == "META-MARKER-e2e"
    created = next(e for e in events if e["type"] == "tool_call.created")["tool_call"]
    assert created["arguments"] == {"label": "e2e"} and created["is_app"] is True

    bodies = fake_llm.bodies
    assert len(bodies) == 2
    wire = json.dumps(bodies)
    assert "CONTENT-MARKER-e2e" in json.dumps(bodies[1]["messages"])
    assert "STRUCTURED-MARKER" not in wire and "META-MARKER" not in wire
    assert "sk-test-secret-key" not in wire
    # app_only_increment's visibility is ["app"]: never offered to the model.
    assert sorted(t["function"]["name"] for t in bodies[0]["tools"]) == [
        "apps__big_text", "apps__big_view", "apps__csp_probe", "apps__model_only", "apps__show_marker"]
    call = calls_of(cid).get()
    assert call.origin == "llm" and call.llm_tool_call_id == "call_1"
    assert ToolResult.objects.filter(tool_call=call).exists() and Projection.objects.filter(tool_call=call).exists()
    data = api.get(f"/api/conversations/{cid}/").json()
    assert [m["role"] for m in data["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert data["messages"][-1]["text"] == "Shown **above**."
    assert data["tool_calls"][0]["tool"] == "show_marker" and data["tool_calls"][0]["origin"] == "llm"
    assert Conversation.objects.get(pk=cid).title == "show the marker"


def test_tool_call_arguments_stream_to_the_browser_before_the_call_exists(client, api, fake_llm, app_server):
    refresh_tools(app_server)
    cid = new_conversation(api, fake_llm, [app_server])
    label = "streamed-label-" + "x" * 24
    fake_llm.script([
        {"tool_calls": [{"name": "apps__show_marker", "arguments": {"label": label}, "id": "call_s"}], "chunk_delay": 0.15},
        {"text": "Done."},
    ])

    async def scenario():
        sock = Socket(client, cid)
        assert await sock.connect()
        await sock.comm.receive_json_from(timeout=5)
        await asyncio.to_thread(closing(api.post), f"/api/conversations/{cid}/messages/", {"text": "stream it"})
        events = await sock.collect_until({"turn.completed", "turn.failed"})
        await sock.comm.disconnect()
        return events

    events = run_async(scenario)
    types = [e["type"] for e in events]
    streamed = [e for e in events if e["type"] == "tool_call.streaming"]
    assert len(streamed) >= 3, types
    # All before the call row exists, each naming the real server and tool, the App flag set.
    assert types.index("tool_call.created") > types.index("tool_call.streaming")
    assert all(e["llm_tool_call_id"] == "call_s" and e["server_id"] == app_server.pk and e["tool"] == "show_marker"
               and e["server_name"] == "apps" and e["is_app"] is True for e in streamed)
    # The arguments grow as parsed, healed JSON: always an object, each a prefix of the final value.
    labels = [e["arguments"].get("label", "") for e in streamed]
    assert all(isinstance(e["arguments"], dict) for e in streamed)
    assert all(label.startswith(part) for part in labels) and labels == sorted(labels, key=len)
    assert any(0 < len(part) < len(label) for part in labels), labels
    created = next(e for e in events if e["type"] == "tool_call.created")["tool_call"]
    assert created["llm_tool_call_id"] == "call_s" and created["arguments"] == {"label": label}


def test_streaming_tool_calls_fold_fragments_and_heal_json():
    from types import SimpleNamespace as NS

    from chat.llm import StreamingToolCalls, heal_arguments

    assert heal_arguments("") == {} and heal_arguments('{"a": "b') == {"a": "b"}
    assert heal_arguments('{"n": [1, 2') == {"n": [1, 2]} and heal_arguments("[1") == {} and heal_arguments("}{") == {}
    folded = StreamingToolCalls({"srv__t": ("999999", "t")})
    folded.PUBLISH_EVERY = 0
    first = folded.add(NS(index=0, id="c1", function=NS(name="srv__t", arguments='{"q": "he')))
    assert first["arguments"] == {"q": "he"} and first["tool"] == "t" and first["server_id"] == 999999
    assert first["is_app"] is False  # no such Tool row: never claimed to be an App
    second = folded.add(NS(index=0, id=None, function=NS(name=None, arguments='llo"}')))
    assert second["arguments"] == {"q": "hello"} and second["llm_tool_call_id"] == "c1"
    other = folded.add(NS(index=1, id="c2", function=NS(name="unknown__x", arguments="{")))
    assert other["server_id"] is None and other["tool"] == "unknown__x" and other["index"] == 1
    # Throttled: a burst of fragments publishes once per interval.
    folded.PUBLISH_EVERY = 60
    assert folded.add(NS(index=0, id=None, function=NS(name=None, arguments=" "))) is None


def test_deleting_a_server_keeps_its_calls_and_the_conversations_that_used_it(api, fake_llm, basic_server):
    refresh_tools(basic_server)
    cid = new_conversation(api, fake_llm, [basic_server])
    fake_llm.script([
        {"tool_calls": [{"name": "basic__echo", "arguments": {"text": "kept-after-delete"}, "id": "d1"}]},
        {"text": "Echoed."},
    ])
    api.post(f"/api/conversations/{cid}/messages/", {"text": "echo it"})
    assert wait_turn(api, cid)["status"] != "running"
    call = calls_of(cid).get()
    projection_text = Projection.objects.get(tool_call=call).text
    assert "kept-after-delete" in projection_text

    assert api.delete(f"/api/servers/{basic_server.pk}/").status_code == 204
    call.refresh_from_db()
    assert call.server_id is None and call.server_name == "basic"
    assert ToolResult.objects.filter(tool_call=call).exists()
    detail = api.get(f"/api/tool-calls/{call.pk}/").json()
    assert detail["server_name"] == "basic" and detail["full"]["content"][0]["text"].endswith("kept-after-delete")
    replay = api.post(f"/api/tool-calls/{call.pk}/replay/")
    assert replay.status_code == 409 and "deleted" in replay.json()["error"]

    # The conversation goes on: the model still gets the old tool answer, never an empty one.
    fake_llm.script([{"text": "Still here."}])
    api.post(f"/api/conversations/{cid}/messages/", {"text": "and now?"})
    data = wait_turn(api, cid)
    assert data["messages"][-1]["text"] == "Still here."
    tool_messages = [m for m in fake_llm.bodies[-1]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == [projection_text]
    assert fake_llm.bodies[-1].get("tools") in (None, [])


def test_building_llm_messages_never_reads_the_full_result_table(api, fake_llm, app_server):
    refresh_tools(app_server)
    cid = new_conversation(api, fake_llm, [app_server])
    fake_llm.script([
        {"tool_calls": [{"name": "apps__show_marker", "arguments": {"label": "q"}, "id": "c1"}]},
        {"text": "ok"},
    ])
    api.post(f"/api/conversations/{cid}/messages/", {"text": "go"})
    wait_turn(api, cid)
    conversation = Conversation.objects.get(pk=cid)
    with CaptureQueriesContext(connection) as ctx:
        request = history.build(conversation)
    sql = " ".join(q["sql"] for q in ctx.captured_queries).lower()
    assert "tools_projection" in sql  # it does read projections...
    assert "tools_toolresult" not in sql  # ...and never the full results
    assert any(m["role"] == "tool" and "CONTENT-MARKER-q" in m["content"] for m in request.messages)
    llm_view = api.get(f"/api/conversations/{cid}/llm-messages/").json()
    assert llm_view["messages"] == request.messages and llm_view["tools"] == request.tools


def test_parallel_tool_calls_and_a_failing_tool(api, fake_llm, basic_server):
    refresh_tools(basic_server)
    cid = new_conversation(api, fake_llm, [basic_server], system_prompt="Be brief.")
    fake_llm.script([
        {"tool_calls": [
            {"name": "basic__slow", "arguments": {"seconds": 1}, "id": "p1"},
            {"name": "basic__slow", "arguments": {"seconds": 1}, "id": "p2"},
            {"name": "basic__nope", "arguments": {}, "id": "p3"},
        ]},
        {"tool_calls": [{"name": "basic__echo", "arguments": {"text": "second step"}, "id": "s1"}]},
        {"text": "All done."},
    ])
    api.post(f"/api/conversations/{cid}/messages/", {"text": "run them"})
    data = wait_turn(api, cid)
    assert data["turn"]["status"] == "completed", data["turn"]
    calls = calls_of(cid).order_by("queued_at")
    slow = [c for c in calls if c.tool_name == "slow"]
    assert len(slow) == 2
    # Parallel: the two one-second calls overlapped.
    assert max(c.started_at for c in slow) < min(c.finished_at for c in slow)
    bodies = fake_llm.bodies
    assert len(bodies) == 3
    second = bodies[1]["messages"]
    assert second[0] == {"role": "system", "content": "Be brief."}
    tool_msgs = [m for m in second if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["p1", "p2", "p3"]
    assert "Unknown tool 'basic__nope'" in tool_msgs[2]["content"]
    assert any(m["role"] == "tool" and "second step" in m["content"] for m in bodies[2]["messages"])


def test_tool_error_reaches_the_model_as_text(api, fake_llm, stdio_server):
    # The crash tool kills its server process: use the stdio one, which the pool restarts.
    refresh_tools(stdio_server)
    cid = new_conversation(api, fake_llm, [stdio_server])
    fake_llm.script([{"tool_calls": [{"name": "stdio-basic__crash", "arguments": {}, "id": "x1"}]}, {"text": "It crashed."}])
    api.post(f"/api/conversations/{cid}/messages/", {"text": "crash it"})
    data = wait_turn(api, cid)
    assert data["turn"]["status"] == "completed"
    call = calls_of(cid).get()
    assert call.status == "failed" and call.error
    tool_msg = [m for m in fake_llm.bodies[1]["messages"] if m["role"] == "tool"][0]
    assert tool_msg["content"].startswith("Tool call failed:")


def test_provider_error_ends_the_turn_clearly_and_keeps_history(api, fake_llm):
    cid = new_conversation(api, fake_llm)
    fake_llm.script([{"text": "first answer"}])
    api.post(f"/api/conversations/{cid}/messages/", {"text": "hello"})
    assert wait_turn(api, cid)["turn"]["status"] == "completed"
    fake_llm.script([{"error": {"status": 401, "message": "Invalid API key provided"}}])
    api.post(f"/api/conversations/{cid}/messages/", {"text": "again"})
    data = wait_turn(api, cid)
    assert data["turn"]["status"] == "failed"
    assert "rejected the API key" in data["turn"]["error"]
    assert "sk-test-secret-key" not in data["turn"]["error"]
    assert [m["text"] for m in data["messages"]] == ["hello", "first answer", "again"]
    # The conversation stays usable.
    fake_llm.script([{"text": "recovered"}])
    assert api.post(f"/api/conversations/{cid}/messages/", {"text": "third"}).status_code == 202
    assert wait_turn(api, cid)["messages"][-1]["text"] == "recovered"


def test_step_limit_is_said_in_the_chat(api, fake_llm, basic_server):
    refresh_tools(basic_server)
    cid = new_conversation(api, fake_llm, [basic_server])
    fake_llm.script([{"tool_calls": [{"name": "basic__echo", "arguments": {"text": "loop"}}], "times": None}])
    api.post(f"/api/conversations/{cid}/messages/", {"text": "loop forever"})
    data = wait_turn(api, cid, timeout=60)
    assert data["turn"]["status"] == "completed"
    assert "CHAT_MAX_STEPS=4" in data["turn"]["error"]
    assert len(fake_llm.bodies) == 4


def test_stop_cancels_and_conversation_stays_usable(client, api, fake_llm, basic_server, celery_worker):
    refresh_tools(basic_server)
    cid = new_conversation(api, fake_llm, [basic_server])
    fake_llm.script([{"tool_calls": [{"name": "basic__slow", "arguments": {"seconds": 5}, "id": "s"}]}])
    api.post(f"/api/conversations/{cid}/messages/", {"text": "be slow"})
    wait_for(lambda: calls_of(cid).filter(status="running").exists(), message="the running call")
    resp = api.post(f"/api/conversations/{cid}/stop/")
    assert resp.json()["stopped"] is True
    data = api.get(f"/api/conversations/{cid}/").json()
    assert data["status"] == "idle" and data["turn"]["status"] == "stopped"
    assert calls_of(cid).get().status == "cancelled"
    # The server is told (notifications/cancelled) and the call's task ends, which fires the chord:
    # no further step may start.
    wait_for(lambda: RpcFrame.objects.filter(server=basic_server, direction="out", method="notifications/cancelled").exists(),
             timeout=15, message="the cancel sent to the server")
    wait_until_worker_is_quiet(celery_worker.hostname)
    assert len(fake_llm.bodies) == 1
    fake_llm.script([{"text": "fresh start"}])
    api.post(f"/api/conversations/{cid}/messages/", {"text": "next"})
    data = wait_turn(api, cid)
    assert data["messages"][-1]["text"] == "fresh start"
    tool_msg = [m for m in fake_llm.bodies[1]["messages"] if m["role"] == "tool"][0]
    assert tool_msg["tool_call_id"] == "s" and "cancelled" in tool_msg["content"]


def test_reconnect_mid_stream_catches_up_from_snapshot(client, api, fake_llm):
    cid = new_conversation(api, fake_llm)
    words = " ".join(f"w{i}" for i in range(30))
    fake_llm.script([{"text": words, "chunk_delay": 0.1}])
    turn_id = api.post(f"/api/conversations/{cid}/messages/", {"text": "stream slowly"}).json()["turn_id"]
    wait_for(lambda: len(streamed_so_far(turn_id).split()) >= 5, message="the answer half-streamed")

    async def late_joiner():
        sock = Socket(client, cid)
        assert await sock.connect()
        snapshot = await sock.comm.receive_json_from(timeout=5)
        events = await sock.collect_until({"turn.completed"})
        await sock.comm.disconnect()
        return snapshot, events

    snapshot, events = run_async(late_joiner)
    assert snapshot["type"] == "stream.snapshot" and snapshot["status"] == "running"
    assert snapshot["text"].startswith("w0 w1")
    rebuilt = snapshot["text"]
    for e in events:
        if e["type"] == "message.delta":  # as chat.js does: skip what the snapshot already holds
            assert e["offset"] <= len(rebuilt), "a delta was lost between the snapshot and the stream"
            rebuilt += e["delta"][len(rebuilt) - e["offset"]:]
    final = next(e for e in events if e["type"] == "message.completed")["message"]["text"]
    assert rebuilt == final == words


def test_websocket_refuses_anonymous_and_other_users(client, api, fake_llm, other_user):
    cid = new_conversation(api, fake_llm)

    async def attempt(headers):
        comm = WebsocketCommunicator(application, f"/ws/conversations/{cid}/", headers=headers)
        connected, code = await comm.connect(timeout=5)
        await comm.disconnect()
        return connected, code

    origin = (b"origin", b"http://127.0.0.1:8000")
    assert run_async(attempt, [origin]) == (False, 4401)
    client.force_login(other_user)
    cookie = (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())
    assert run_async(attempt, [origin, cookie]) == (False, 4404)
    assert client.get(f"/api/conversations/{cid}/").status_code == 404


def test_conversation_api_validation_and_search(api, fake_llm, basic_server, other_user):
    from tools.models import Server

    assert api.post("/api/conversations/", {"server_ids": []}).status_code == 400
    assert api.post("/api/conversations/", {"model": "m", "api_base": "file:///etc"}).status_code == 400
    theirs = Server.objects.create(name="theirs", transport="sse", url="http://h/sse", owner=other_user)
    assert api.post("/api/conversations/", {"model": "m", "server_ids": [theirs.pk]}).status_code == 404
    cid = new_conversation(api, fake_llm, [basic_server])
    assert Conversation.objects.get(pk=cid).api_key == "sk-test-secret-key"
    with connection.cursor() as cursor:
        cursor.execute("SELECT api_key FROM chat_conversation WHERE id = %s", [cid])
        assert "sk-test-secret-key" not in cursor.fetchone()[0]
    assert "sk-test-secret-key" not in json.dumps(api.get(f"/api/conversations/{cid}/").json())
    fake_llm.script([{"text": "pong"}])
    api.post(f"/api/conversations/{cid}/messages/", {"text": "ping about zebras"})
    wait_turn(api, cid)
    assert api.post(f"/api/conversations/{cid}/messages/", {"text": " "}).status_code == 400
    found = api.get("/api/conversations/?q=zebras").json()["conversations"]
    assert [c["id"] for c in found] == [cid]
    assert api.get("/api/conversations/?q=giraffes").json()["conversations"] == []
    assert Message.objects.filter(conversation_id=cid).count() == 2
    assert Turn.objects.filter(conversation_id=cid).count() == 1


@pytest.mark.parametrize(
    "entry, expected",
    [
        ({"error": {"status": 429, "message": "Slow down"}}, "rate limit"),
        ({"error": {"status": 404, "message": "The model does not exist", "type": "not_found_error"}}, "does not know this model"),
        ({"text": "too late", "delay": 8}, "did not answer in time"),
    ],
)
def test_provider_errors_are_explained(api, fake_llm, entry, expected):
    cid = new_conversation(api, fake_llm)
    fake_llm.script([entry])
    api.post(f"/api/conversations/{cid}/messages/", {"text": "hi"})
    data = wait_turn(api, cid)
    assert data["turn"]["status"] == "failed"
    assert expected in data["turn"]["error"], data["turn"]["error"]
    assert [m["role"] for m in data["messages"]] == ["user"]


def test_saved_provider_key_is_used_and_never_shown(client, api, user, fake_llm):
    resp = client.post("/account/provider-keys/", {"provider": "openai", "api_key": "sk-saved-provider-key-1234"}, follow=True)
    page = resp.content.decode()
    assert "sk-saved-provider-key" not in page and "••••1234" in page
    body = {"model": MODEL, "api_base": fake_llm.url, "server_ids": []}
    cid = api.post("/api/conversations/", body).json()["id"]
    fake_llm.script([{"text": "keyed"}])
    api.post(f"/api/conversations/{cid}/messages/", {"text": "which key?"})
    wait_turn(api, cid)
    assert fake_llm.requests[-1]["headers"]["authorization"] == "Bearer sk-saved-provider-key-1234"
    assert "sk-saved-provider-key" not in json.dumps(fake_llm.bodies)


def test_environment_key_never_goes_to_a_custom_api_base(api, fake_llm):
    body = {"model": MODEL, "api_base": fake_llm.url, "server_ids": []}
    cid = api.post("/api/conversations/", body).json()["id"]
    fake_llm.script([{"text": "no key"}])
    api.post(f"/api/conversations/{cid}/messages/", {"text": "hi"})
    assert wait_turn(api, cid)["turn"]["status"] == "completed"
    assert "sk-environment-secret" not in json.dumps(fake_llm.requests[-1]["headers"])


def stuck_turn(conversation: Conversation) -> Turn:
    """A running turn that last made progress an hour ago, as if its worker had died."""
    hour_ago = timezone.now() - timedelta(hours=1)
    turn = Turn.objects.create(conversation=conversation, steps=1, step_claimed_at=hour_ago)
    Turn.objects.filter(pk=turn.pk).update(created_at=hour_ago)
    Conversation.objects.filter(pk=conversation.pk).update(status="running")
    turn.refresh_from_db()
    return turn


def test_a_stale_running_turn_is_closed_by_the_next_message(api, fake_llm):
    cid = new_conversation(api, fake_llm)
    conversation = Conversation.objects.get(pk=cid)
    stuck = stuck_turn(conversation)
    fresh = Turn.objects.create(conversation=conversation)
    assert api.post(f"/api/conversations/{cid}/messages/", {"text": "blocked?"}).status_code == 409  # fresh is live
    fresh.delete()
    fake_llm.script([{"text": "unblocked"}])
    assert api.post(f"/api/conversations/{cid}/messages/", {"text": "hello again"}).status_code == 202
    stuck.refresh_from_db()
    assert stuck.status == "failed" and "stopped making progress" in stuck.error
    assert wait_turn(api, cid)["messages"][-1]["text"] == "unblocked"


def test_a_stale_turn_is_closed_when_the_page_loads_and_by_the_worker_sweep(api, fake_llm):
    from chat.tasks import close_stale_turns

    cid = new_conversation(api, fake_llm)
    conversation = Conversation.objects.get(pk=cid)
    first = stuck_turn(conversation)
    data = api.get(f"/api/conversations/{cid}/").json()
    assert data["status"] != "running" and "stopped making progress" in data["turn"]["error"]
    first.refresh_from_db()
    assert first.status == "failed"

    second = stuck_turn(conversation)
    live = Turn.objects.create(conversation=Conversation.objects.create(owner=conversation.owner, model=MODEL))
    assert close_stale_turns() == 1
    second.refresh_from_db(); live.refresh_from_db()
    assert second.status == "failed" and live.status == "running"


def test_a_turn_waiting_on_its_calls_is_not_stale_and_a_late_close_keeps_a_newer_turn(api, fake_llm, basic_server):
    from chat.agent import close_if_stale, finish_turn
    from tools.runtime.sweep import sweep_calls

    cid = new_conversation(api, fake_llm, [basic_server])
    conversation = Conversation.objects.get(pk=cid)
    turn = stuck_turn(conversation)
    # A long queue, or a lost task: either way the call sweep ends the call, so the turn waits for it.
    call = ToolCall.objects.create(server=basic_server, tool_name="echo", origin="llm", **caller(conversation, turn).row_fields())
    assert close_if_stale(turn).ended is False
    ToolCall.objects.filter(pk=call.pk).update(queued_at=timezone.now() - timedelta(hours=1))
    assert sweep_calls().ended == 1
    call.refresh_from_db()
    assert call.status == "failed" and "No worker started this call" in call.error
    assert "No worker started this call" in call.projection.text

    newer = Turn.objects.create(conversation=conversation)
    Conversation.objects.filter(pk=cid).update(status="running")
    finish_turn(turn, Turn.Status.FAILED, error="late errback")  # already failed: changes nothing
    assert Conversation.objects.get(pk=cid).status == "running"
    finish_turn(newer, Turn.Status.COMPLETED)
    assert Conversation.objects.get(pk=cid).status == "idle"
