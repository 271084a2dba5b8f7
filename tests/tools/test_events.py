"""Small events, full results over HTTP, and the lean conversation API (issues 16.2, 9.3, 11.2).

A WebSocket frame above 1 MiB makes daphne close the socket, and a conversation API that
embeds every full result grows without bound: events and the conversation API carry the
bounded tool-call summary (tools/runtime/events.py); the full result has its own streamed endpoint.
Real worker, real MCP App test server, real consumers over the Redis channel layer, real daphne.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
from channels.testing import WebsocketCommunicator
from django.db import connection
from django.db.models import TextField
from django.db.models.functions import Cast
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chat import events as chat_events
from chat.tool_calls import caller, calls_of
from chat.models import Conversation, Message, Turn
from inspector.asgi import application
from tests.helpers import closing, refresh_tools, run_async, run_call, streamed_body
from tools.runtime import events
from tools.models import Projection, ToolCall, ToolResult

pytestmark = [pytest.mark.django_db(transaction=True)]

EVENT_LIMIT = 64 * 1024


def socket(client, path: str) -> WebsocketCommunicator:
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    return WebsocketCommunicator(application, path, headers=[(b"cookie", cookie), (b"origin", b"http://127.0.0.1:8000")])


async def receive_until(comm: WebsocketCommunicator, types: set[str], timeout: float = 60) -> list[dict]:
    """Every event up to one of `types`, each with its size on the wire."""
    got = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            frame = await comm.receive_output(timeout=max(0.1, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            break
        text = frame["text"]
        event = json.loads(text)
        event["_wire_bytes"] = len(text.encode())
        got.append(event)
        if event["type"] in types:
            return got
    raise AssertionError(f"no {types}; got {[e['type'] for e in got]}")


def stored_json_text(call) -> str:
    return ToolResult.objects.filter(tool_call=call).annotate(t=Cast("raw", TextField())).values_list("t", flat=True).get()


@pytest.mark.usefixtures("celery_worker")
def test_a_5_mb_result_travels_in_small_events_live_and_on_catch_up(client, api, fake_llm, app_server):
    refresh_tools(app_server)
    cid = api.post("/api/conversations/", {"model": "openai/test-model", "api_base": fake_llm.url, "api_key": "sk-x",
                                           "server_ids": [app_server.pk]}).json()["id"]
    fake_llm.script([{"tool_calls": [{"name": "apps__big_view", "arguments": {"size_mb": 5}, "id": "b1"}]},
                     {"text": "Big view shown."}])

    async def live():
        comm = socket(client, f"/ws/conversations/{cid}/")
        assert (await comm.connect(timeout=10))[0]
        await asyncio.to_thread(closing(api.post), f"/api/conversations/{cid}/messages/", {"text": "big"})
        got = await receive_until(comm, {"turn.completed", "turn.failed"})
        await comm.disconnect()
        return got

    got = run_async(live)
    assert got[-1]["type"] == "turn.completed", got[-1]
    call = calls_of(cid).get(tool_name="big_view")
    size = ToolResult.objects.get(tool_call=call).size_bytes
    assert size > 5 * 1024 * 1024
    result = next(e for e in got if e["type"] == "tool_call.result")
    assert result["tool_call"]["size_full"] == size and result["tool_call"]["has_result"] is True
    assert result["tool_call"]["has_view"] is True and "full" not in result["tool_call"]
    assert max(e["_wire_bytes"] for e in got) < EVENT_LIMIT, [(e["type"], e["_wire_bytes"]) for e in got]

    async def catch_up():
        comm = socket(client, f"/ws/tool-calls/{call.pk}/")
        assert (await comm.connect(timeout=10))[0]
        frame = await comm.receive_output(timeout=10)
        await comm.disconnect()
        return frame["text"]

    snapshot = run_async(catch_up)
    assert len(snapshot.encode()) < EVENT_LIMIT
    event = json.loads(snapshot)
    assert event["type"] == "tool_call.result" and event["tool_call"]["size_full"] == size
    # The same summary the API gives: one shape everywhere.
    listed = api.get(f"/api/conversations/{cid}/").json()["tool_calls"]
    assert [c["id"] for c in listed] == [str(call.pk)] and listed[0].keys() == event["tool_call"].keys()


@pytest.mark.usefixtures("celery_worker")
def test_the_result_endpoint_streams_the_stored_json_to_its_owner_only(client, api, user, other_user, app_server, live_app):
    refresh_tools(app_server)
    call = run_call(app_server, "big_text", {"size_mb": 1.5}, user=user)
    assert call.status == "succeeded", call.error
    stored = stored_json_text(call)

    response = api.get(f"/api/tool-calls/{call.pk}/result/")
    assert response.status_code == 200 and response.streaming
    body = streamed_body(response)
    assert body == stored.encode() and int(response["Content-Length"]) == len(body)
    assert response["Content-Type"] == "application/json"
    assert json.loads(body) == ToolResult.objects.get(tool_call=call).raw

    # Through daphne, over real HTTP: the same bytes, announced with their length.
    session = {"Cookie": f"sessionid={client.cookies['sessionid'].value}"}
    with httpx.Client(base_url=live_app.url, headers=session, timeout=30) as http:
        served = http.get(f"/api/tool-calls/{call.pk}/result/")
    assert served.status_code == 200 and served.content == stored.encode()
    assert int(served.headers["content-length"]) == len(served.content) > 1_500_000

    # The detail keeps `full` (documented) unless asked not to.
    assert json.loads(streamed_body(api.get(f"/api/tool-calls/{call.pk}/")))["full"] == json.loads(body)
    lean = api.get(f"/api/tool-calls/{call.pk}/?full=0").json()
    assert "full" not in lean and lean["projection"]["truncated"] is True and lean["result_url"].endswith("/result/")

    # Someone else's call does not exist for them; a call with no result says so.
    failed = ToolCall.objects.create(server=app_server, tool_name="big_text", origin="manual", requested_by=user,
                                     status="failed", error="boom")
    assert api.get(f"/api/tool-calls/{failed.pk}/result/").status_code == 404
    assert "no result" in api.get(f"/api/tool-calls/{failed.pk}/result/").json()["error"]
    client.force_login(other_user)
    assert client.get(f"/api/tool-calls/{call.pk}/result/").status_code == 404
    client.logout()
    assert client.get(f"/api/tool-calls/{call.pk}/result/").status_code == 401


# --- the conversation API at many tool calls ------------------------------------------------------

def build_conversation(user, server, calls: int, raw_bytes: int, text_chars: int) -> Conversation:
    """A finished conversation with `calls` tool calls (user, assistant, tool message each), in bulk."""
    conversation = Conversation.objects.create(owner=user, model="m")
    turn = Turn.objects.create(conversation=conversation, status="completed", steps=calls, finished_at=timezone.now())
    rows = ToolCall.objects.bulk_create([
        ToolCall(**caller(conversation, turn).row_fields(), requested_by=user, origin="llm", server=server, server_name=server.name,
                 tool_name="big_text", llm_tool_call_id=f"c{i}", arguments={"i": i}, status="succeeded")
        for i in range(calls)
    ])
    blob = "r" * raw_bytes
    ToolResult.objects.bulk_create([
        ToolResult(tool_call=c, raw={"content": [{"type": "text", "text": blob}]}, size_bytes=raw_bytes, tokens=raw_bytes // 4)
        for c in rows
    ])
    Projection.objects.bulk_create([
        Projection(tool_call=c, payload={"content": [{"type": "text", "text": "p" * text_chars}]}, text="p" * text_chars,
                   policy="content-first", size_bytes=text_chars, tokens=text_chars // 4)
        for c in rows
    ])
    messages = []
    for i, c in enumerate(rows):
        messages += [
            Message(conversation=conversation, turn=turn, seq=3 * i + 1, role="user", text=f"question {i}"),
            Message(conversation=conversation, turn=turn, seq=3 * i + 2, role="assistant", step=i + 1,
                    tool_calls=[{"id": f"c{i}", "name": "apps__big_text", "arguments": "{}"}]),
            Message(conversation=conversation, turn=turn, seq=3 * i + 3, role="tool", tool_call=c, llm_tool_call_id=f"c{i}"),
        ]
    Message.objects.bulk_create(messages)
    return conversation


def test_the_conversation_api_does_not_grow_with_result_sizes(api, user, app_server):
    small = build_conversation(user, app_server, calls=80, raw_bytes=3_000, text_chars=2_500)
    big = build_conversation(user, app_server, calls=80, raw_bytes=300_000, text_chars=30_000)
    sizes = {}
    for name, conversation in (("small", small), ("big", big)):
        response = api.get(f"/api/conversations/{conversation.pk}/")
        assert response.status_code == 200
        data = response.json()
        assert len(data["tool_calls"]) == 67 and len(data["messages"]) == 200  # the newest page
        assert all(c["projection"]["text_complete"] is False for c in data["tool_calls"])
        assert all(c["result_url"] and "full" not in c for c in data["tool_calls"])
        sizes[name] = len(response.content)
    # 100 times bigger results, the same answer (give or take the digits of the sizes).
    assert abs(sizes["big"] - sizes["small"]) < 0.02 * sizes["small"], sizes
    assert sizes["big"] < 400_000 < 80 * 300_000


def test_the_conversation_api_reads_a_page_in_constant_queries_at_5000_calls(api, user, app_server):
    few = build_conversation(user, app_server, calls=20, raw_bytes=100, text_chars=50)
    many = build_conversation(user, app_server, calls=5000, raw_bytes=100, text_chars=50)

    def read(conversation) -> tuple[int, int, float]:
        with CaptureQueriesContext(connection) as ctx:
            started = time.perf_counter()
            response = api.get(f"/api/conversations/{conversation.pk}/")
            took = time.perf_counter() - started
        assert response.status_code == 200
        sql = " ".join(q["sql"] for q in ctx.captured_queries)
        assert '"raw"' not in sql  # never the full results
        return len(ctx.captured_queries), len(response.content), took

    few_queries, _, _ = read(few)
    many_queries, many_bytes, took = read(many)
    assert many_queries == few_queries
    assert many_bytes < 250_000
    assert took < 2.0, f"{took:.2f} s for the first page of 5000 calls"


def test_pages_return_every_message_exactly_once_and_catch_up_after_a_seq(api, user, app_server):
    conversation = build_conversation(user, app_server, calls=45, raw_bytes=100, text_chars=50)  # 135 messages
    url = f"/api/conversations/{conversation.pk}/"
    all_ids = list(conversation.messages.order_by("seq").values_list("id", flat=True))

    # Backwards from the newest, as the page does with "Load older messages".
    seen, pages = [], 0
    data = api.get(f"{url}?limit=20").json()
    while True:
        pages += 1
        seen = [m["id"] for m in data["messages"]] + seen
        tool_ids = {m["tool_call_id"] for m in data["messages"] if m["tool_call_id"]}
        assert {c["id"] for c in data["tool_calls"]} == tool_ids  # the page's calls, no more, no fewer
        if not data["page"]["has_older"]:
            break
        data = api.get(f"{url}?limit=20&before={data['page']['first_seq']}").json()
    assert seen == all_ids and pages == 7

    # Forwards from a seq, as a reconnecting page does.
    seen, cursor = [], 0
    while True:
        data = api.get(f"{url}?limit=50&after={cursor}").json()
        seen += [m["id"] for m in data["messages"]]
        cursor = data["page"]["last_seq"]
        if not data["page"]["has_newer"]:
            break
    assert seen == all_ids
    assert api.get(f"{url}?after={cursor}").json()["messages"] == []

    # A call of a turn still running comes along with `after`, though its message is older.
    running = Turn.objects.create(conversation=conversation)
    call = ToolCall.objects.create(**caller(conversation, running).row_fields(), requested_by=user, origin="llm",
                                   server=app_server, tool_name="big_text", status="running")
    conversation.append_message(role="tool", turn=running, tool_call=call, llm_tool_call_id="late")
    last = conversation.messages.order_by("-seq").first().seq
    caught_up = api.get(f"{url}?after={last}").json()
    assert caught_up["messages"] == [] and [c["id"] for c in caught_up["tool_calls"]] == [str(call.pk)]

    assert api.get(f"{url}?after=x").status_code == 400
    assert api.get(f"{url}?after=1&before=3").status_code == 400


def test_group_names_come_from_one_place():
    assert chat_events.conversation_group(7) == "conversation.7"
    assert events.tool_call_group("abc") == "toolcall.abc"
    assert Conversation(pk=7).group_name == chat_events.conversation_group(7)


def test_a_socket_waiting_for_a_result_gets_it_even_when_the_event_is_lost(client, user, basic_server, monkeypatch):
    """Publishing never fails the work that produced an event, so an event can be lost (a Redis
    hiccup). A socket waiting for a call's result must still get it: it looks at the database."""
    from tools.consumers import ToolCallConsumer

    monkeypatch.setattr(ToolCallConsumer, "RECHECK_SECONDS", 0.3)
    client.force_login(user)
    call = ToolCall.objects.create(server=basic_server, tool_name="echo", origin="manual", requested_by=user,
                                   status=ToolCall.Status.RUNNING, started_at=timezone.now())

    async def wait_for_result():
        comm = socket(client, f"/ws/tool-calls/{call.pk}/")
        assert (await comm.connect(timeout=10))[0]
        first = await comm.receive_json_from(timeout=10)
        # The call ends with nothing published, as when the event is dropped on its way.
        await asyncio.to_thread(lambda: ToolCall.objects.filter(pk=call.pk).update(
            status=ToolCall.Status.SUCCEEDED, finished_at=timezone.now()))
        later = await comm.receive_json_from(timeout=5)
        assert await comm.receive_nothing(timeout=1)  # once, not again on every recheck
        await comm.disconnect()
        return first, later

    first, later = run_async(wait_for_result)
    assert first["type"] == "tool_call.status" and first["tool_call"]["status"] == "running"
    assert later["type"] == "tool_call.result" and later["tool_call"]["status"] == "succeeded"
