"""What servers ask of the client mid-call, end to end: a real worker holds the call on its pooled
connection to a real MCP server (tests/mcp_servers/asks.py, legacy handshake), the request is
stored and published, the answer comes through the JSON API and reaches the waiting worker over
Redis. Also progress, log messages with logging/setLevel, roots, and Cancel / Stop."""

from __future__ import annotations

import json
import sys

import pytest

from chat.tool_calls import calls_of
from chat.models import Conversation
from tests.helpers import finished_call, refresh_tools, run_async, start_api_call, wait_for
from tools.models import RpcFrame, Server, ServerLogMessage, ServerRequest, ToolCall

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


@pytest.fixture(scope="session")
def asks_server_http():
    from tests.mcp_servers.launch import start_server

    server = start_server("asks.py", "http", "--legacy")
    yield server
    server.stop()


@pytest.fixture
def asks(asks_server_http, user):
    server = Server.objects.create(name="asks", transport="streamable_http", url=asks_server_http.url, owner=user)
    refresh_tools(server)
    return server


@pytest.fixture
def asks_stdio(user):
    """The same server over stdio (its own process, so its log level is this test's)."""
    from tests.mcp_servers.launch import server_path

    server = Server.objects.create(name="asks-stdio", transport="stdio", command=sys.executable,
                                   args=[server_path("asks.py"), "--legacy"], owner=user)
    refresh_tools(server)
    return server


def pending_request(call_id: str, status: str = "pending") -> ServerRequest:
    return wait_for(lambda: ServerRequest.objects.filter(tool_call_id=call_id, status=status).first(),
                    timeout=20, message=f"a {status} server request")


def result_text(call: ToolCall) -> str:
    return call.full_result.raw["content"][0]["text"]


# --- elicitation ----------------------------------------------------------------------------------

def test_form_elicitation_is_stored_shown_and_answered(api, asks):
    call_id = start_api_call(api, asks, "ask_form", {"question": "Who are you?"})
    row = pending_request(call_id)
    assert row.kind == "elicitation" and row.mode == "form" and row.method == "elicitation/create"
    assert row.params["requestedSchema"]["properties"]["name"]["type"] == "string"
    listed = api.get(f"/api/server-requests/?tool_call={call_id}&open=1").json()["server_requests"]
    assert [r["id"] for r in listed] == [str(row.pk)] and listed[0]["message"] == "Who are you?"
    assert "params" not in listed[0], "summaries stay small: the schema is in the detail"
    detail = api.get(f"/api/server-requests/{row.pk}/").json()
    assert detail["params"]["requestedSchema"]["required"] == ["name"]

    bad = api.post(f"/api/server-requests/{row.pk}/answer/", {"action": "accept", "content": {"name": "Ann", "age": "old"}})
    assert bad.status_code == 400 and "age" in bad.json()["error"]
    extra = api.post(f"/api/server-requests/{row.pk}/answer/", {"action": "accept", "content": {"name": "Ann", "x": 1}})
    assert extra.status_code == 400
    ok = api.post(f"/api/server-requests/{row.pk}/answer/", {"action": "accept", "content": {"name": "Ann", "age": 41}})
    assert ok.status_code == 200, ok.json()
    assert ok.json()["status"] == "answered"

    call = finished_call(call_id)
    assert call.status == "succeeded"
    # `subscribe` was left out: it takes the schema's default (SEP-1034).
    assert result_text(call) == 'accept {"age": 41, "name": "Ann", "subscribe": false}'
    row.refresh_from_db()
    # The worker got the answer from Redis at once, not when its wait ran out (a second before
    # expires_at; the call timeout is 6 s).
    assert (call.finished_at - row.answered_at).total_seconds() < 3
    assert (row.expires_at - call.finished_at).total_seconds() > 1.8
    assert row.action == "accept" and row.response == {
        "result": {"action": "accept", "content": {"name": "Ann", "age": 41, "subscribe": False}}}
    again = api.post(f"/api/server-requests/{row.pk}/answer/", {"action": "decline"})
    assert again.status_code == 409
    # The exchange is in the JSON-RPC log: the server's request and our answer, matched by id.
    frames = wait_for(lambda: len(f := list(RpcFrame.objects.filter(server=asks, method="elicitation/create"))) == 2 and f,
                      timeout=10, message="the elicitation frames")
    assert {(f.direction, f.kind) for f in frames} == {("in", "request"), ("out", "response")}
    assert frames[0].rpc_id == frames[1].rpc_id


def test_decline_and_closed_page_cancel(api, asks):
    call_id = start_api_call(api, asks, "ask_form", {"question": "Q1"})
    row = pending_request(call_id)
    assert api.post(f"/api/server-requests/{row.pk}/answer/", {"action": "decline"}).status_code == 200
    assert result_text(finished_call(call_id)) == "decline"

    call_id = start_api_call(api, asks, "ask_form", {"question": "Q2"})
    row = pending_request(call_id)
    # What the page sends when it is closed with a request open.
    assert api.post(f"/api/server-requests/{row.pk}/answer/", {"action": "cancel"}).status_code == 200
    assert result_text(finished_call(call_id)) == "cancel"


def test_unanswered_elicitation_ends_with_cancel_within_the_call_timeout(api, asks):
    call_id = start_api_call(api, asks, "ask_form", {"question": "Anyone?"})
    row = pending_request(call_id)
    assert row.expires_at is not None
    call = finished_call(call_id)  # the worker's MCP_CALL_TIMEOUT is 6 s
    assert call.status == "succeeded" and result_text(call) == "cancel"
    row.refresh_from_db()
    assert row.status == "expired" and row.response == {"result": {"action": "cancel"}}
    assert "time ran out" in row.error
    late = api.post(f"/api/server-requests/{row.pk}/answer/", {"action": "accept", "content": {"name": "late"}})
    assert late.status_code == 409 and "expired" in late.json()["error"]


def test_url_elicitation_shows_http_urls_and_refuses_javascript(api, asks):
    call_id = start_api_call(api, asks, "ask_url", {"url": "https://login.example.com/start?x=1"})
    row = pending_request(call_id)
    summary = api.get(f"/api/server-requests/?tool_call={call_id}").json()["server_requests"][0]
    assert summary["mode"] == "url" and summary["url"] == "https://login.example.com/start?x=1"
    assert api.post(f"/api/server-requests/{row.pk}/answer/", {"action": "accept"}).status_code == 200
    assert result_text(finished_call(call_id)) == "accept"

    call_id = start_api_call(api, asks, "ask_url", {"url": "javascript:alert(document.cookie)"})
    call = finished_call(call_id)
    text = result_text(call)
    assert text.startswith("error -32602: The inspector refused this request: Only http and https URLs"), text
    row = ServerRequest.objects.get(tool_call_id=call_id)
    assert row.status == "refused" and "javascript" in row.error
    assert "url" not in api.get(f"/api/server-requests/{row.pk}/").json(), "a refused URL is never offered as a link"


@pytest.mark.parametrize("kind, why", [("array", 'must be an object schema (type "object"), not type "array"'),
                                       ("nested", "Property “address” has type \"object\"")])
def test_schema_that_is_not_a_flat_object_is_refused_clearly(api, asks, kind, why):
    call = finished_call(start_api_call(api, asks, "ask_schema", {"kind": kind}))
    text = result_text(call)
    assert text.startswith("error -32602: The inspector refused this request:") and why in text, text
    row = ServerRequest.objects.get(tool_call_id=call.pk)
    assert row.status == "refused" and why in row.error
    assert row.params["requestedSchema"]["type"] == ("array" if kind == "array" else "object")


# --- sampling -------------------------------------------------------------------------------------

def test_sampling_in_chat_is_approved_edited_run_on_the_model_and_returned(api, asks, fake_llm):
    conversation = Conversation.objects.create(owner=asks.owner, model="openai/test-model", api_base=fake_llm.url,
                                               api_key="sk-test")
    conversation.servers.set([asks])
    fake_llm.script([
        {"tool_calls": [{"name": "asks__ask_model", "arguments": {"text": "Summarise: cats"}, "id": "s1"}]},
        {"text": "Cats are small."},  # the sampling request
        {"text": "The server got its answer."},
    ])
    assert api.post(f"/api/conversations/{conversation.pk}/messages/", {"text": "go"}).status_code == 202
    call = wait_for(lambda: calls_of(conversation).first(), message="the tool call")
    row = pending_request(str(call.pk))
    assert row.kind == "sampling"
    listed = api.get(f"/api/server-requests/?conversation={conversation.pk}&open=1").json()["server_requests"]
    assert [r["id"] for r in listed] == [str(row.pk)]
    detail = api.get(f"/api/server-requests/{row.pk}/").json()
    assert detail["conversation_model"] == "openai/test-model"
    approve = api.post(f"/api/server-requests/{row.pk}/answer/", {
        "action": "approve", "messages": [{"role": "user", "text": "Summarise: cats, briefly (edited)"}]})
    assert approve.status_code == 200, approve.json()
    generated = pending_request(str(call.pk), "generated")
    assert generated.answer["result"]["content"]["text"] == "Cats are small."
    sampled = fake_llm.requests[1]["body"]
    assert sampled["messages"] == [{"role": "system", "content": "You are terse."},
                                   {"role": "user", "content": "Summarise: cats, briefly (edited)"}]
    assert sampled["max_tokens"] == 200 and not sampled.get("stream")
    sent = api.post(f"/api/server-requests/{row.pk}/answer/", {"action": "send", "text": "Cats are small (checked)."})
    assert sent.status_code == 200
    done = finished_call(str(call.pk))
    assert result_text(done) == "model openai/test-model said: Cats are small (checked)."


def test_sampling_without_a_model_is_refused_clearly_and_can_be_rejected(api, asks):
    call_id = start_api_call(api, asks, "ask_model", {"text": "hello"})
    row = pending_request(call_id)
    no_model = api.post(f"/api/server-requests/{row.pk}/answer/", {"action": "approve", "messages": [{"role": "user", "text": "hello"}]})
    assert no_model.status_code == 400 and "No model is configured" in no_model.json()["error"]
    assert api.post(f"/api/server-requests/{row.pk}/answer/", {"action": "reject"}).status_code == 200
    assert result_text(finished_call(call_id)) == "error -1: The user rejected the sampling request."


def test_unanswered_sampling_ends_with_an_error(api, asks):
    call = finished_call(start_api_call(api, asks, "ask_model", {"text": "hello"}))
    assert result_text(call) == "error -1: The sampling request was not answered: The call's time ran out before anyone answered."
    assert ServerRequest.objects.get(tool_call=call).status == "expired"


def test_a_megabyte_of_sampling_text_is_refused_with_a_clear_message(api, asks):
    call = finished_call(start_api_call(api, asks, "ask_model", {"text": "x" * 1000, "repeat": 1000}))
    text = result_text(call)
    assert "carries 1,000,014 characters of text; the inspector accepts at most 100,000" in text, text[:300]
    row = ServerRequest.objects.get(tool_call=call)
    assert row.status == "refused"
    summary = api.get(f"/api/server-requests/?tool_call={call.pk}").json()["server_requests"][0]
    assert len(json.dumps(summary)) < 5000


# --- roots, progress, log -----------------------------------------------------------------------------

def test_roots_are_answered_from_the_server_settings(api, asks):
    resp = api.patch(f"/api/servers/{asks.pk}/", {"roots": ["file:///srv/project", {"uri": "file:///tmp/x", "name": "tmp"}]})
    assert resp.status_code == 200, resp.json()
    bad = api.patch(f"/api/servers/{asks.pk}/", {"roots": ["https://example.com"]})
    assert bad.status_code == 400 and "file://" in bad.json()["error"] + json.dumps(bad.json())
    call = finished_call(start_api_call(api, asks, "list_roots", {}))
    assert json.loads(result_text(call)) == [{"uri": "file:///srv/project", "name": None}, {"uri": "file:///tmp/x", "name": "tmp"}]
    row = ServerRequest.objects.get(tool_call=call)
    assert row.kind == "roots" and row.status == "answered"


def test_edited_roots_are_announced_to_the_server_before_its_next_request(api, asks):
    """A legacy connection gets notifications/roots/list_changed once after an edit, and not
    otherwise; then roots/list answers the new roots, on the same connection."""
    changes = lambda: int(result_text(finished_call(start_api_call(api, asks, "roots_changes", {}))))  # noqa: E731
    before = changes()
    assert changes() == before  # unchanged roots: nothing announced
    assert api.patch(f"/api/servers/{asks.pk}/", {"roots": ["file:///srv/new"]}).status_code == 200
    assert changes() == before + 1
    assert changes() == before + 1  # announced once
    sent = RpcFrame.objects.filter(server=asks, direction="out", method="notifications/roots/list_changed")
    wait_for(lambda: sent.exists(), timeout=10, message="the notification in the frame log (written in batches)")
    assert sent.count() == 1
    call = finished_call(start_api_call(api, asks, "list_roots", {}))
    assert json.loads(result_text(call)) == [{"uri": "file:///srv/new", "name": None}]


def test_progress_and_log_messages_reach_the_call_and_its_socket(client, api, asks_stdio):
    from channels.testing import WebsocketCommunicator

    from inspector.asgi import application

    call_id = start_api_call(api, asks_stdio, "progress", {"steps": 4, "delay": 0.3})
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()

    async def listen():
        comm = WebsocketCommunicator(application, f"/ws/tool-calls/{call_id}/",
                                     headers=[(b"cookie", cookie), (b"origin", b"http://127.0.0.1:8000")])
        connected, _ = await comm.connect(timeout=10)
        assert connected
        seen = []
        while True:
            event = await comm.receive_json_from(timeout=20)
            seen.append(event)
            if event["type"] == "tool_call.result":
                break
        await comm.disconnect()
        return seen

    seen = run_async(listen)
    progress = [e["progress"] for e in seen if e["type"] == "tool_call.progress"]
    assert progress and progress[-1] == {"progress": 4, "total": 4, "message": "step 4 of 4"}
    # The socket opens once the call exists, maybe after the first step: what it got is the rest, in order.
    live_logs = [e["log"]["text"] for e in seen if e["type"] == "tool_call.log"]
    assert len(live_logs) >= 2 and live_logs == [f"working on step {i}" for i in range(1, 5)][-len(live_logs):]
    call = ToolCall.objects.get(pk=call_id)
    assert call.progress == {"progress": 4, "total": 4, "message": "step 4 of 4"}
    logs = api.get(f"/api/tool-calls/{call_id}/logs/").json()["logs"]
    assert [(entry["level"], entry["text"]) for entry in logs] == [("info", f"working on step {i}") for i in range(1, 5)]
    frame = wait_for(lambda: RpcFrame.objects.filter(server=asks_stdio, method="tools/call", direction="out").order_by("-at").first(),
                     timeout=10, message="the call in the frame log")
    assert "progressToken" in frame.payload["params"]["_meta"]

    # logging/setLevel per server: debug lets the server's debug lines through (applied on the live connection at its next use).
    # (a stdio server is edited by staff only: the setting is written directly here; the API's check is below)
    Server.objects.filter(pk=asks_stdio.pk).update(log_level="debug")
    call_id = start_api_call(api, asks_stdio, "progress", {"steps": 2, "delay": 0.05})
    finished_call(call_id)
    # Each notification is stored by a task of its own (tools/server_requests.handle): the last may land
    # just after the call's end.
    wait_for(lambda: ServerLogMessage.objects.filter(tool_call_id=call_id).count() >= 4, timeout=10, message="4 log rows")
    levels = list(ServerLogMessage.objects.filter(tool_call_id=call_id).order_by("pk").values_list("level", flat=True))
    assert levels == ["info", "debug", "info", "debug"]
    wait_for(RpcFrame.objects.filter(server=asks_stdio, method="logging/setLevel", direction="out",
                                     payload__params__level="debug").exists, timeout=10, message="logging/setLevel in the frame log")
    bad = api.post("/api/servers/", {"name": "x", "transport": "streamable_http", "url": "http://127.0.0.1:1/mcp", "log_level": "loud"})
    assert bad.status_code == 400 and "log_level" in bad.json()["fields"]


# --- cancellation ---------------------------------------------------------------------------------

def test_cancel_sends_notifications_cancelled_and_ends_the_call_cancelled(api, asks):
    call_id = start_api_call(api, asks, "wait", {"seconds": 5, "tag": "manual-cancel"})
    wait_for(lambda: ToolCall.objects.get(pk=call_id).status == "running", message="the call to run")
    wait_for(lambda: RpcFrame.objects.filter(server=asks, method="tools/call", payload__params__arguments__tag="manual-cancel").exists(),
             message="the tools/call frame")
    resp = api.post(f"/api/tool-calls/{call_id}/cancel/")
    assert resp.status_code == 202 and resp.json()["status"] == "cancelled"
    call = wait_for(lambda: (c := ToolCall.objects.select_related("projection").get(pk=call_id)) and hasattr(c, "projection") and c,
                    timeout=10, message="the cancelled call's projection")
    assert call.status == "cancelled" and "cancelled" in call.projection.text
    assert wait_for(lambda: RpcFrame.objects.filter(server=asks, method="notifications/cancelled", direction="out").exists(),
                    timeout=10, message="notifications/cancelled")
    assert result_text(finished_call(start_api_call(api, asks, "cancelled", {"tag": "manual-cancel"}))) == "1"
    assert api.post(f"/api/tool-calls/{call_id}/cancel/").status_code == 409


def test_chat_stop_cancels_the_running_call_on_the_server(api, asks, fake_llm):
    conversation = Conversation.objects.create(owner=asks.owner, model="openai/test-model", api_base=fake_llm.url, api_key="k")
    conversation.servers.set([asks])
    fake_llm.script([{"tool_calls": [{"name": "asks__wait", "arguments": {"seconds": 5, "tag": "chat-stop"}, "id": "w1"}]}])
    api.post(f"/api/conversations/{conversation.pk}/messages/", {"text": "wait"})
    call = wait_for(lambda: calls_of(conversation).filter(status="running").first(), message="a running call")
    wait_for(lambda: RpcFrame.objects.filter(server=asks, payload__params__arguments__tag="chat-stop").exists(), message="the call frame")
    assert api.post(f"/api/conversations/{conversation.pk}/stop/").status_code in (200, 202)
    wait_for(lambda: ToolCall.objects.get(pk=call.pk).status == "cancelled", timeout=5, message="the call cancelled")
    assert wait_for(lambda: result_text(finished_call(start_api_call(api, asks, "cancelled", {"tag": "chat-stop"}))) == "1",
                    timeout=15, message="the server to count the cancel")


# --- who may see and answer ---------------------------------------------------------------------------

def test_only_the_calls_owner_sees_and_answers_its_requests(api, asks, client, other_user):
    call_id = start_api_call(api, asks, "ask_form", {"question": "private?"})
    row = pending_request(call_id)
    client.logout()
    assert client.get(f"/api/server-requests/{row.pk}/").status_code == 401
    client.force_login(other_user)
    assert client.get(f"/api/server-requests/{row.pk}/").status_code == 404
    assert client.post(f"/api/server-requests/{row.pk}/answer/", data=json.dumps({"action": "decline"}),
                       content_type="application/json").status_code == 404
    assert client.get(f"/api/server-requests/?tool_call={call_id}").json()["server_requests"] == []
    assert client.post(f"/api/tool-calls/{call_id}/cancel/").status_code == 404
    client.force_login(asks.owner)
    assert client.post(f"/api/server-requests/{row.pk}/answer/", data=json.dumps({"action": "decline"}),
                       content_type="application/json").status_code == 200
    finished_call(call_id)
