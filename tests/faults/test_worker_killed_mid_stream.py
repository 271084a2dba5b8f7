"""A worker SIGKILLed while the model streams its answer: the next worker's sweep sends the step
again once its lease has run out, the turn completes, and the step has exactly one answer.

The victim and the successor are real Celery workers (the suite's worker stops consuming `llm`
meanwhile), the model is the fake LLM over HTTP holding its stream open.
"""

from __future__ import annotations

import pytest

from chat.models import Message, Turn
from tests.figures import record
from tests.helpers import kill_and_replace, stop_process, wait_for, worker_to_kill

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

# The successor presumes a step dead 3 + 1 s after its claim (or its last streamed beat).
FAST_STEPS = {"SWEEP_INTERVAL": "0.5", "LLM_TIMEOUT": "3", "LLM_STEP_LEASE_MARGIN": "1"}


def test_a_worker_killed_while_the_model_streams_the_next_worker_finishes_the_turn(api, fake_llm, celery_worker):
    body = {"model": "openai/scripted", "api_base": fake_llm.url, "api_key": "sk-test"}
    cid = api.post("/api/conversations/", body).json()["id"]
    words = " ".join(f"w{i}" for i in range(60))
    fake_llm.script([
        {"text": words, "chunk_delay": 0.25},  # 15 s of stream: the victim dies in it
        {"text": "answered after the worker died"},
    ])
    with worker_to_kill(celery_worker, "llm", "victim-llm", {"SWEEP_INTERVAL": "3600"}) as victim:
        assert api.post(f"/api/conversations/{cid}/messages/", {"text": "tell me a long story"}).status_code == 202
        turn = wait_for(lambda: Turn.objects.filter(conversation_id=cid).first(), message="the turn")
        # Killed once the stream is flowing (the model has been asked, the step is claimed).
        wait_for(lambda: len(fake_llm.requests) == 1 and Turn.objects.get(pk=turn.pk).steps == 1, timeout=20,
                 message="the model to be streaming")
        killed_at, successor = kill_and_replace(victim, "successor-llm", FAST_STEPS)
        try:
            wait_for(lambda: Turn.objects.get(pk=turn.pk).status != "running", timeout=40, message="the turn to end")
        finally:
            stop_process(successor)
    turn.refresh_from_db()
    assert turn.status == "completed", turn.error
    answers = list(Message.objects.filter(turn=turn, role="assistant").values_list("step", "text"))
    assert answers == [(1, "answered after the worker died")], "one answer for the step, none half-written"
    assert len(fake_llm.requests) == 2, "the model was asked once more, not more"
    recovered = (turn.finished_at - killed_at).total_seconds() if turn.finished_at else None
    record("LLM requests for one step", len(fake_llm.requests), "worker killed mid-stream")
    record("time to recovery, s (kill -> turn completed)", round(recovered, 1) if recovered else "n/a",
           "worker killed mid-stream")
    assert recovered is not None and recovered < 30
