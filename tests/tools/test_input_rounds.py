"""Multi round-trip input (2026-07-28): a call that asks for input rests in the database while a
person answers, and is retried with the answers and the server's state echoed verbatim.

Real parts: tests/mcp_servers/rounds.py over Streamable HTTP on the 2026-07-28 protocol, the
suite's Celery worker, the JSON API, and the fake LLM for sampling and chat.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from chat.tool_calls import calls_of
from chat.models import Conversation
from tests.helpers import finished_call, refresh_tools, start_api_call, wait_for
from tools.runtime.input_rounds import problem
from tools.models import Projection, RpcFrame, Server, ServerRequest, ToolCall, ToolResult


# --- the checks, before anything is stored ------------------------------------------------------

@pytest.mark.parametrize("raw, why", [
    ({"resultType": "input_required", "requestState": "s" * 10_000_000}, "requestState is 10,000,000 bytes"),
    ({"resultType": "input_required", "requestState": 12345}, "must be a string, not int"),
    ({"resultType": "input_required", "inputRequests": ["a"]}, "must be a JSON object of requests, not list"),
    ({"resultType": "input_required", "inputRequests": {"x": {"method": "tools/call"}}}, "“x” is not an elicitation"),
    ({"resultType": "input_required", "inputRequests": {f"k{i}": {"method": "roots/list"} for i in range(21)}},
     "asks 21 things at once"),
    ({"resultType": "input_required"}, "neither inputRequests nor requestState"),
])
def test_hostile_input_required_results_are_refused_with_the_reason(raw, why):
    assert why in problem(raw)


def test_an_elicitation_mode_that_does_not_exist_is_refused():
    from tools.runtime.server_requests import refusal

    assert "only form and url exist" in refusal("elicitation", {"mode": "form" + "x" * 20, "message": "?"})


def test_a_well_formed_round_passes_the_checks():
    assert problem({"resultType": "input_required", "requestState": "abc",
                    "inputRequests": {"who": {"method": "elicitation/create", "params": {}}, "r": {"method": "roots/list"}}}) == ""


# --- end to end -----------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def rounds_server_http():
    from tests.mcp_servers.launch import start_server

    server = start_server("rounds.py", "http")
    yield server
    server.stop()


@pytest.fixture
def rounds(rounds_server_http, user):
    server = Server.objects.create(name="rounds", transport="streamable_http", url=rounds_server_http.url, owner=user)
    refresh_tools(server)
    return server


def resting(call_id: str, round_: int) -> ToolCall:
    return wait_for(lambda: (c := ToolCall.objects.get(pk=call_id)).status == "input_required" and c.input_round == round_ and c,
                    timeout=20, message=f"the call to rest in round {round_}")


def answer(api, row: ServerRequest, body: dict) -> dict:
    resp = api.post(f"/api/server-requests/{row.pk}/answer/", body)
    assert resp.status_code == 200, resp.json()
    return resp.json()


def seen_by_server(server: Server, tag: str) -> list[dict]:
    from tests.helpers import run_call

    return json.loads(run_call(server, "seen", {"tag": tag}).full_result.raw["content"][0]["text"])


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_a_call_asks_in_two_rounds_rests_between_them_and_ends_once(api, rounds, fake_llm):
    from inspector.celery import app

    assert api.patch(f"/api/servers/{rounds.pk}/", {"roots": ["file:///srv/a", "file:///srv/b"]}).status_code == 200
    tag = uuid.uuid4().hex
    call_id = start_api_call(api, rounds, "trip", {"topic": tag})

    # Round 1: a form and the roots. The roots are answered at once; the form waits for a person.
    call = resting(call_id, 1)
    rows = {r.input_key: r for r in ServerRequest.objects.filter(tool_call_id=call_id)}
    assert {k: (r.kind, r.status, r.protocol, r.round) for k, r in rows.items()} == {
        "who": ("elicitation", "pending", "input_required", 1), "roots": ("roots", "answered", "input_required", 1)}
    assert [r["uri"] for r in rows["roots"].response["result"]["roots"]] == ["file:///srv/a", "file:///srv/b"]
    # No worker holds the call while it rests, and it may rest for MCP_INPUT_TIMEOUT. (The task
    # returns just after the row says `input_required`: seen still active once in CI, so a
    # few seconds are allowed; a worker holding the call would stay active for 900 s.)
    def held() -> list:
        active = app.control.inspect(timeout=1).active() or {}
        return [t for tasks in active.values() for t in tasks if call_id in json.dumps(t.get("args"))]

    wait_for(lambda: not held(), timeout=10, interval=0.5, message="no worker to hold the resting call")
    assert (call.deadline_at - timezone.now()).total_seconds() > 600
    state_1 = call.input_state
    assert state_1 and call.input_rounds[0]["state_bytes"] == len(state_1.encode())
    summary = api.get(f"/api/tool-calls/{call_id}/").json()
    assert summary["status"] == "input_required"
    assert state_1 not in json.dumps(summary), "the opaque state is not part of the call's JSON"

    answer(api, rows["who"], {"action": "accept", "content": {"name": "Ann"}})

    # Round 2: the model, through the same sampling cards as a legacy server's request.
    resting(call_id, 2)
    sampling = ServerRequest.objects.get(tool_call_id=call_id, round=2)
    assert (sampling.kind, sampling.input_key, sampling.status) == ("sampling", "model", "pending")
    fake_llm.script([{"text": "Purr."}])
    answer(api, sampling, {"action": "approve", "model": "openai/test-model", "api_base": fake_llm.url,
                           "messages": [{"role": "user", "text": f"One word about {tag}"}]})
    wait_for(lambda: ServerRequest.objects.get(pk=sampling.pk).status == "generated", message="the sampled answer")
    answer(api, sampling, {"action": "send"})

    call = finished_call(call_id)
    assert call.status == "succeeded", call.error
    result = ToolResult.objects.get(tool_call=call)
    assert result.raw["content"][0]["text"] == "Ann / Purr. / 2 roots / round 3"
    assert Projection.objects.filter(tool_call=call).count() == 1
    assert [r["round"] for r in call.input_rounds] == [1, 2]
    assert [r["kinds"] for r in call.input_rounds] == [["elicitation", "roots"], ["sampling"]]

    # What the server received: the answers keyed as it asked, and its state back verbatim.
    rounds_seen = seen_by_server(rounds, tag)
    assert [r["responses"] and sorted(r["responses"]) for r in rounds_seen] == [None, ["roots", "who"], ["model"]]
    assert rounds_seen[1]["responses"]["who"] == {"action": "accept", "content": {"name": "Ann"}}
    assert rounds_seen[2]["responses"]["model"]["content"]["text"] == "Purr."
    def sent_calls() -> list:
        return [f.payload["params"] for f in RpcFrame.objects.filter(server=rounds, method="tools/call", direction="out")
                .order_by("at") if f.payload["params"]["arguments"].get("topic") == tag]

    sent = wait_for(lambda: s if len(s := sent_calls()) >= 3 else None, timeout=10, message="3 calls in the frame log")
    assert len(sent) == 3 and "requestState" not in sent[0]
    assert sent[1]["requestState"] == state_1, "the state went back byte for byte"


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_a_declined_form_is_an_answer_and_a_rejected_sampling_ends_the_call(api, rounds):
    call_id = start_api_call(api, rounds, "trip", {"topic": "decline"})
    resting(call_id, 1)
    answer(api, ServerRequest.objects.get(tool_call_id=call_id, input_key="who"), {"action": "decline"})
    call = finished_call(call_id)
    assert call.status == "succeeded" and call.full_result.raw["content"][0]["text"] == "declined"

    call_id = start_api_call(api, rounds, "trip", {"topic": "reject"})
    resting(call_id, 1)
    answer(api, ServerRequest.objects.get(tool_call_id=call_id, input_key="who"), {"action": "accept", "content": {"name": "B"}})
    resting(call_id, 2)
    answer(api, ServerRequest.objects.get(tool_call_id=call_id, input_key="model"), {"action": "reject"})
    call = finished_call(call_id)
    assert call.status == "failed"
    assert "“model” was not answered: The user rejected the sampling request." in call.error
    assert call.projection.text.startswith("Tool call failed: The server's sampling request")


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_hostile_state_and_endless_rounds_end_the_call_clearly(api, rounds):
    call = finished_call(start_api_call(api, rounds, "big_state", {"size": 10_000_000}))
    assert call.status == "failed" and "requestState is" in call.error and "(MCP_INPUT_STATE_MAX_BYTES)" in call.error
    assert not ServerRequest.objects.filter(tool_call=call).exists()
    assert call.input_state == ""

    # One forbidden request ends the call; nobody is asked the rest of the round.
    call = finished_call(start_api_call(api, rounds, "mixed", {}))
    assert call.status == "failed" and "refused the server's request for input “bad”: Property “address”" in call.error
    assert dict(ServerRequest.objects.filter(tool_call=call).values_list("input_key", "status")) == {
        "good": "cancelled", "bad": "refused"}

    # Roots-only rounds are answered by the inspector itself, round after round, up to the cap.
    call = finished_call(start_api_call(api, rounds, "endless", {}))
    assert call.status == "failed" and "more than 10 times" in call.error
    assert call.input_round == 10 and ServerRequest.objects.filter(tool_call=call, kind="roots").count() == 10


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_cancel_and_the_input_deadline_end_a_resting_call(api, rounds):
    from tools.runtime.sweep import sweep_calls

    call_id = start_api_call(api, rounds, "trip", {"topic": "cancel"})
    resting(call_id, 1)
    assert api.post(f"/api/tool-calls/{call_id}/cancel/", {}).status_code == 202
    call = ToolCall.objects.get(pk=call_id)
    assert call.status == "cancelled"
    assert ServerRequest.objects.get(tool_call_id=call_id, input_key="who").status == "cancelled"
    # No worker holds a resting call: the model's note is written by the Cancel itself.
    assert "cancelled" in Projection.objects.get(tool_call_id=call_id).text

    call_id = start_api_call(api, rounds, "trip", {"topic": "nobody"})
    resting(call_id, 1)
    ToolCall.objects.filter(pk=call_id).update(deadline_at=timezone.now() - timedelta(seconds=1))
    assert sweep_calls().ended == 1
    call = ToolCall.objects.get(pk=call_id)
    assert call.status == "failed" and "Nobody answered the server's request for input" in call.error
    row = ServerRequest.objects.get(tool_call_id=call_id, input_key="who")
    assert row.status == "expired"
    late = api.post(f"/api/server-requests/{row.pk}/answer/", {"action": "accept", "content": {"name": "late"}})
    assert late.status_code == 409


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_a_chat_turn_waits_for_a_resting_call_and_the_model_never_sees_the_state(api, rounds, fake_llm):
    conversation = Conversation.objects.create(owner=rounds.owner, model="openai/test-model", api_base=fake_llm.url,
                                               api_key="sk-test")
    conversation.servers.set([rounds])
    fake_llm.script([
        {"tool_calls": [{"name": "rounds__trip", "arguments": {"topic": "chat"}, "id": "t1"}]},
        {"text": "Meow."},  # the sampling request of round 2
        {"text": "All done."},
    ])
    assert api.post(f"/api/conversations/{conversation.pk}/messages/", {"text": "go"}).status_code == 202
    call = wait_for(lambda: calls_of(conversation).first(), message="the tool call")
    call = resting(str(call.pk), 1)
    state_1 = call.input_state
    time.sleep(2)  # the step's task keeps polling; the next step must not start meanwhile
    assert len(fake_llm.requests) == 1 and conversation.turns.get().status == "running"
    answer(api, ServerRequest.objects.get(tool_call=call, input_key="who"), {"action": "accept", "content": {"name": "Cy"}})
    resting(str(call.pk), 2)
    sampling = ServerRequest.objects.get(tool_call=call, round=2)
    answer(api, sampling, {"action": "approve", "messages": [{"role": "user", "text": "One word about chat"}]})
    wait_for(lambda: ServerRequest.objects.get(pk=sampling.pk).status == "generated", message="the sampled answer")
    answer(api, sampling, {"action": "send"})
    wait_for(lambda: conversation.turns.get().status != "running", timeout=30, message="the turn to end")
    assert conversation.turns.get().status == "completed"
    order = [[m.get("role") for m in r["body"]["messages"]] for r in fake_llm.requests]
    assert order == [["user"], ["user"], ["user", "assistant", "tool"]], "step 2 came after the sampling, once the call ended"
    last = fake_llm.requests[-1]["body"]
    tool_messages = [m for m in last["messages"] if m.get("role") == "tool"]
    assert tool_messages and tool_messages[0]["content"] == "Cy / Meow. / 0 roots / round 3"
    sent = json.dumps(last["messages"])  # (the tools' descriptions may say anything)
    assert state_1 not in sent and "inputRequests" not in sent and "requestState" not in sent
