"""MCP tasks (2025-11-25): a tool that requires a task is called as one, followed live, and its
result stored like any call's; one that allows a task is when asked; a task that needs input
asks through the usual cards; Cancel sends tasks/cancel; a worker killed while it follows a task
leaves it to the next worker, which follows the same task (the tool runs once).

Real parts: tests/mcp_servers/tasks.py over Streamable HTTP (a 2025-11-25 handshake), the
suite's Celery worker, the JSON API and the tool call's WebSocket; the kill test starts workers
of its own.
"""

from __future__ import annotations

import json
import uuid

import pytest

from chat.tool_calls import calls_of
from chat.models import Conversation
from tests.helpers import (
    finished_call, kill_and_replace, refresh_tools, run_async, start_api_call, stop_process, wait_for, worker_to_kill,
)
from tests.figures import record
from tools.models import Projection, RpcFrame, Server, ServerRequest, Tool, ToolCall, ToolResult

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

# Leases of a few seconds for the kill test: connect 3 + call 4 + margin 1.
FAST_SWEEP = {"SWEEP_INTERVAL": "0.5", "CALL_RESEND_AFTER": "1", "CALL_LEASE_MARGIN": "1",
              "MCP_CONNECT_TIMEOUT": "3", "MCP_CALL_TIMEOUT": "4"}


@pytest.fixture(scope="module")
def tasks_http():
    from tests.mcp_servers.launch import start_server

    server = start_server("tasks.py", "http", "--legacy")
    yield server
    server.stop()


@pytest.fixture
def tasks(tasks_http, user):
    server = Server.objects.create(name="tasks", transport="streamable_http", url=tasks_http.url, owner=user)
    refresh_tools(server)
    return server


def text_of(call: ToolCall) -> str:
    return call.full_result.raw["content"][0]["text"]


def counts(api, server: Server, tag: str) -> dict:
    return json.loads(text_of(finished_call(start_api_call(api, server, "task_counts", {"tag": tag}))))


def sent(server: Server, method: str, **payload) -> list[RpcFrame]:
    return list(RpcFrame.objects.filter(server=server, direction="out", method=method, **payload))


def test_a_tool_that_requires_a_task_runs_as_one_with_its_status_live(client, api, tasks):
    assert {t.name: t.task_support for t in Tool.objects.filter(server=tasks)} == {
        "slow_report": "required", "needs_input": "required", "maybe_task": "optional", "task_counts": "forbidden"}
    tag = uuid.uuid4().hex
    call_id = start_api_call(api, tasks, "slow_report", {"seconds": 3, "tag": tag})
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()

    async def listen():
        from channels.testing import WebsocketCommunicator

        from inspector.asgi import application

        comm = WebsocketCommunicator(application, f"/ws/tool-calls/{call_id}/",
                                     headers=[(b"cookie", cookie), (b"origin", b"http://127.0.0.1:8000")])
        assert (await comm.connect(timeout=10))[0]
        seen = []
        while not seen or seen[-1]["type"] != "tool_call.result":
            seen.append(await comm.receive_json_from(timeout=20))
        await comm.disconnect()
        return seen

    seen = run_async(listen)
    live = [e["tool_call"]["task"] for e in seen if e["type"] == "tool_call.status" and e["tool_call"].get("task")]
    assert any(t["status"] == "working" and t["message"].startswith("step ") for t in live), live
    call = finished_call(call_id)
    assert call.status == "succeeded", call.error
    assert text_of(call) == f"done after 3 s ({tag})"
    assert call.task_mode == "required" and call.task_id and call.task_status == "completed"
    history = [(h["status"], h["message"]) for h in call.task_history]
    assert ("working", "step 1 of 3") in history and ("working", "step 3 of 3") in history and history[-1][0] == "completed"
    # On the wire: a task-augmented tools/call with a TTL, polls, then the result by task id.
    created = sent(tasks, "tools/call", payload__params__arguments__tag=tag)
    assert len(created) == 1 and created[0].payload["params"]["task"]["ttl"] > 0
    assert sent(tasks, "tasks/get", payload__params__taskId=call.task_id)
    assert len(sent(tasks, "tasks/result", payload__params__taskId=call.task_id)) == 1
    # Stored as any call: one full result, one projection; the model sees the text, not the task's _meta.
    assert ToolResult.objects.filter(tool_call=call).count() == 1 and Projection.objects.filter(tool_call=call).count() == 1
    assert "related-task" not in call.projection.text
    detail = api.get(f"/api/tool-calls/{call_id}/").json()
    assert detail["task"]["id"] == call.task_id and detail["task"]["history"][-1]["status"] == "completed"
    assert counts(api, tasks, tag) == {"started": 1, "cancelled": 0, "results": 1}


def test_a_tool_that_allows_a_task_is_sent_as_one_only_when_asked(api, tasks):
    plain = finished_call(start_api_call(api, tasks, "maybe_task", {"text": "a"}))
    assert text_of(plain) == "plain: a" and plain.task_mode == "" and not plain.task_id
    resp = api.post(f"/api/servers/{tasks.pk}/tools/maybe_task/call/", {"arguments": {"text": "b"}, "task": True})
    assert resp.status_code == 202
    asked = finished_call(resp.json()["id"])
    assert text_of(asked) == "task: b" and asked.task_mode == "optional" and asked.task_status == "completed"
    # A tool that forbids tasks says so instead of sending one.
    refused = api.post(f"/api/servers/{tasks.pk}/tools/task_counts/call/", {"arguments": {"tag": "x"}, "task": True})
    assert refused.status_code == 400 and "does not run as a task" in refused.json()["error"]
    # Re-running a call asked as a task asks again.
    again = api.post(f"/api/tool-calls/{asked.pk}/replay/")
    assert again.status_code == 202
    assert text_of(finished_call(again.json()["id"])) == "task: b"


def test_a_task_that_needs_input_asks_through_the_card_and_goes_on(api, tasks):
    tag = uuid.uuid4().hex
    call_id = start_api_call(api, tasks, "needs_input", {"tag": tag})
    row = wait_for(lambda: ServerRequest.objects.filter(tool_call_id=call_id, status="pending").first(),
                   timeout=20, message="the task's elicitation")
    assert row.kind == "elicitation" and row.params["message"] == "What is your name?"
    assert ToolCall.objects.get(pk=call_id).task_status == "input_required"
    assert api.post(f"/api/server-requests/{row.pk}/answer/", {"action": "accept", "content": {"name": "Cy"}}).status_code == 200
    call = finished_call(call_id)
    assert call.status == "succeeded" and text_of(call) == "hello Cy"
    statuses = [h["status"] for h in call.task_history]
    assert statuses.index("input_required") < len(statuses) - 1 and statuses[-1] == "completed"


def test_cancel_sends_tasks_cancel_and_the_call_ends_cancelled(api, tasks):
    tag = uuid.uuid4().hex
    call_id = start_api_call(api, tasks, "slow_report", {"seconds": 20, "tag": tag})
    wait_for(lambda: ToolCall.objects.get(pk=call_id).task_status == "working", timeout=20, message="the task to work")
    assert api.post(f"/api/tool-calls/{call_id}/cancel/").status_code == 202
    call = wait_for(lambda: (c := ToolCall.objects.select_related("projection").get(pk=call_id)) and hasattr(c, "projection") and c,
                    timeout=15, message="the cancelled call's projection")
    assert call.status == "cancelled"
    task_id = call.task_id
    wait_for(lambda: sent(tasks, "tasks/cancel", payload__params__taskId=task_id), timeout=10, message="tasks/cancel on the wire")
    assert counts(api, tasks, tag) == {"started": 1, "cancelled": 1, "results": 0}


def test_a_chat_turn_runs_a_required_task_and_an_optional_one_when_the_conversation_asks(api, tasks, fake_llm):
    conversation = Conversation.objects.create(owner=tasks.owner, model="openai/test-model", api_base=fake_llm.url,
                                               api_key="sk-test")
    conversation.servers.set([tasks])
    fake_llm.script([
        {"tool_calls": [{"name": "tasks__slow_report", "arguments": {"seconds": 1, "tag": "chat"}, "id": "t1"},
                        {"name": "tasks__maybe_task", "arguments": {"text": "c"}, "id": "t2"}]},
        {"text": "Done."},
    ])
    assert api.patch(f"/api/conversations/{conversation.pk}/", {"use_tasks": True}).json()["use_tasks"] is True
    assert api.post(f"/api/conversations/{conversation.pk}/messages/", {"text": "go"}).status_code == 202
    wait_for(lambda: conversation.turns.get().status != "running", timeout=40, message="the turn to end")
    assert conversation.turns.get().status == "completed"
    modes = dict(calls_of(conversation).values_list("tool_name", "task_mode"))
    assert modes == {"slow_report": "required", "maybe_task": "optional"}
    tool_messages = {m["tool_call_id"]: m["content"] for m in fake_llm.requests[-1]["body"]["messages"] if m["role"] == "tool"}
    assert tool_messages == {"t1": "done after 1 s (chat)", "t2": "task: c"}


@pytest.mark.worker
def test_a_worker_killed_while_it_follows_a_task_the_next_worker_follows_the_same_task(api, tasks, celery_worker):
    tag = uuid.uuid4().hex
    with worker_to_kill(celery_worker, "tools", "victim-task", FAST_SWEEP) as victim:
        call_id = start_api_call(api, tasks, "slow_report", {"seconds": 8, "tag": tag})
        wait_for(lambda: ToolCall.objects.get(pk=call_id).task_id, timeout=20, message="the task to be created")
        # Its tools/call is in the JSON-RPC log (written by the worker's log thread, which a busy
        # machine can hold back past the task's creation): the count below must see it.
        wait_for(lambda: sent(tasks, "tools/call", payload__params__arguments__tag=tag), timeout=10, message="the tools/call frame")
        killed_at, successor = kill_and_replace(victim, "successor-task", FAST_SWEEP)
        try:
            call = finished_call(call_id, timeout=60)
        finally:
            stop_process(successor)
    assert call.status == "succeeded", call.error
    assert text_of(call) == f"done after 8 s ({tag})"
    assert call.attempts == 2
    assert ToolResult.objects.filter(tool_call=call).count() == 1 and Projection.objects.filter(tool_call=call).count() == 1
    # The tool ran once: the next worker followed the task by its id instead of calling the tool again.
    assert len(sent(tasks, "tools/call", payload__params__arguments__tag=tag)) == 1
    seen = counts(api, tasks, tag)
    assert seen == {"started": 1, "cancelled": 0, "results": 1}, (seen, call.task_history, call.attempts)
    recovery = (call.finished_at - killed_at).total_seconds()
    record("tasks started per call / result rows per call", f"{seen['started']} / 1", "worker killed following a task")
    record("time to recovery, s (kill -> call ended; the task runs 8 s)", round(recovery, 1), "worker killed following a task")
    assert recovery < 40
