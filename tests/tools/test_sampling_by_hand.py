"""A sampling request answered by hand through the API (issue 28.2), on both protocol generations:
a legacy server's waiting request (tests/mcp_servers/asks.py) and a 2026-07-28 input-required
round (tests/mcp_servers/rounds.py). The typed CreateMessageResult reaches the server as written
and is stored like a model's answer; a malformed one is refused and the request stays open."""

from __future__ import annotations

import json

import pytest

from tests.helpers import finished_call, refresh_tools, start_api_call, wait_for
from tools.models import Server, ServerRequest

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


@pytest.fixture(scope="module")
def asks_server_http():
    from tests.mcp_servers.launch import start_server

    server = start_server("asks.py", "http", "--legacy")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def rounds_server_http():
    from tests.mcp_servers.launch import start_server

    server = start_server("rounds.py", "http")
    yield server
    server.stop()


def pending(call_id: str, **where) -> ServerRequest:
    return wait_for(lambda: ServerRequest.objects.filter(tool_call_id=call_id, status="pending", **where).first(),
                    timeout=20, message="a pending server request")


def test_a_legacy_request_answered_by_hand_reaches_the_server_as_typed(api, user, asks_server_http):
    asks = Server.objects.create(name="asks", transport="streamable_http", url=asks_server_http.url, owner=user)
    refresh_tools(asks)
    call_id = start_api_call(api, asks, "ask_model_verbatim", {"text": "Name a dog."})
    row = pending(call_id, kind="sampling")
    url = f"/api/server-requests/{row.pk}/answer/"
    for body, why in [({"text": "  "}, "Type the answer's text"), ({"text": "Rex", "role": "system", "model": "m"}, "`role`"),
                      ({"text": "Rex"}, "Name the model"), ({"text": "Rex", "model": "m", "stopReason": 3}, "`stopReason`")]:
        refused = api.post(url, {"action": "by_hand", **body})
        assert refused.status_code == 400 and why in refused.json()["error"], refused.json()
    assert ServerRequest.objects.get(pk=row.pk).status == "pending"

    ok = api.post(url, {"action": "by_hand", "role": "user", "text": "Rex", "model": " me ", "stopReason": ""})
    assert ok.status_code == 200 and ok.json()["action"] == "by_hand"
    sent = {"role": "user", "content": {"type": "text", "text": "Rex"}, "model": "me"}  # an empty reason is left out
    assert json.loads(finished_call(call_id).full_result.raw["content"][0]["text"]) == sent
    again = api.post(url, {"action": "by_hand", "text": "Max", "model": "me"})
    assert again.status_code == 409


def test_an_input_required_round_answered_by_hand_goes_on(api, user, rounds_server_http):
    rounds = Server.objects.create(name="rounds", transport="streamable_http", url=rounds_server_http.url, owner=user)
    refresh_tools(rounds)
    call_id = start_api_call(api, rounds, "trip", {"topic": "hand"})
    who = pending(call_id, input_key="who")
    assert api.post(f"/api/server-requests/{who.pk}/answer/", {"action": "accept", "content": {"name": "Cy"}}).status_code == 200
    model = pending(call_id, input_key="model")
    answered = api.post(f"/api/server-requests/{model.pk}/answer/", {"action": "by_hand", "text": "Typed.", "model": "human"})
    assert answered.status_code == 200, answered.json()
    call = finished_call(call_id)
    assert call.status == "succeeded", call.error
    assert call.full_result.raw["content"][0]["text"].startswith("Cy / Typed. / ")
    row = ServerRequest.objects.get(pk=model.pk)
    assert row.response["result"] == {"role": "assistant", "content": {"type": "text", "text": "Typed."},
                                      "model": "human", "stopReason": "endTurn"}
