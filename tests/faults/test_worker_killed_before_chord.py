"""A worker SIGKILLed after it stored a step that asked for tools and before it scheduled their
chord (issue 10, item 1): the step's answer and its queued calls are in the database, nothing is
in the broker. The next worker's sweep sends the calls (they were queued, never sent), they run
once each, the turn's next step is resumed, and the turn completes with one answer per step.

The victim waits FAULT_PAUSE_BEFORE_CHORD seconds in exactly that window, so the kill lands
there every time; the suite's worker stops consuming `llm` meanwhile.
"""

from __future__ import annotations

import pytest

from chat.tool_calls import calls_of_turn
from chat.models import Message, Turn
from tests.figures import record
from tests.helpers import kill_and_replace, refresh_tools, stop_process, wait_for, worker_to_kill
from tools.models import RpcFrame, ToolCall

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

# The successor re-sends a queued call whose task was never sent after 1 s, sweeps every 0.5 s.
FAST_SWEEP = {"SWEEP_INTERVAL": "0.5", "CALL_RESEND_AFTER": "1"}


def test_a_worker_killed_between_a_steps_commit_and_its_chord(api, fake_llm, celery_worker, basic_server):
    refresh_tools(basic_server)
    body = {"model": "openai/scripted", "api_base": fake_llm.url, "api_key": "sk-test", "server_ids": [basic_server.pk]}
    cid = api.post("/api/conversations/", body).json()["id"]
    fake_llm.script([
        {"tool_calls": [{"name": "basic__echo", "arguments": {"text": "one"}, "id": "a"},
                        {"name": "basic__echo", "arguments": {"text": "two"}, "id": "b"}]},
        {"text": "both echoed"},
    ])
    with worker_to_kill(celery_worker, "llm", "victim-chord", {"SWEEP_INTERVAL": "3600", "FAULT_PAUSE_BEFORE_CHORD": "60"}) as victim:
        assert api.post(f"/api/conversations/{cid}/messages/", {"text": "echo twice"}).status_code == 202
        turn = wait_for(lambda: Turn.objects.filter(conversation_id=cid).first(), message="the turn")
        # The step is stored with its two calls, queued and never sent: the victim is in its pause.
        wait_for(lambda: calls_of_turn(turn).filter(status="queued").count() == 2
                 and Message.objects.filter(turn=turn, role="assistant", step=1).exists(), timeout=20,
                 message="the step to be stored")
        assert not calls_of_turn(turn).filter(dispatched_at__isnull=False).exists()
        killed_at, successor = kill_and_replace(victim, "successor-chord", FAST_SWEEP)
        try:
            wait_for(lambda: Turn.objects.get(pk=turn.pk).status != "running", timeout=60, message="the turn to end")
        finally:
            stop_process(successor)
    turn.refresh_from_db()
    assert turn.status == "completed", turn.error
    answers = list(Message.objects.filter(turn=turn, role="assistant").order_by("step").values_list("step", "text"))
    assert [step for step, _ in answers] == [1, 2] and answers[1][1] == "both echoed", answers
    calls = calls_of_turn(turn)
    assert sorted(calls.values_list("status", flat=True)) == ["succeeded", "succeeded"]
    assert calls.filter(full_result__isnull=False, projection__isnull=False).count() == 2
    sent = RpcFrame.objects.filter(server=basic_server, direction="out", method="tools/call")
    wait_for(lambda: sent.count() >= 2, timeout=10, message="the frame log")
    assert sent.count() == 2, "each call ran once"
    assert len(fake_llm.requests) == 2, "the model was asked once per step"
    recovered = (turn.finished_at - killed_at).total_seconds()
    record("tool invocations per call", sent.count() / 2, "worker killed before the chord")
    record("time to recovery, s (kill -> turn completed)", round(recovered, 1), "worker killed before the chord")
    assert recovered < 45
