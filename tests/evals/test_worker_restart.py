"""A run survives its worker: the worker that holds the run's next advance (and runs its turns) is
SIGKILLed mid-run; the next worker's sweep sends the run on from the database, the lost turn
steps are sent again like any turn's, and every attempt ends graded, each exactly once.

The victim and the successor are real Celery workers (the suite's worker stops consuming
`default`, where the evals' tasks run, meanwhile)."""

from __future__ import annotations

import pytest

from chat.models import Message
from evals import runs
from evals.models import Case, Run, Suite
from tests.figures import record
from tests.helpers import kill_and_replace, refresh_tools, stop_process, wait_for, worker_to_kill

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

FAST = {"SWEEP_INTERVAL": "0.5", "LLM_TIMEOUT": "3", "LLM_STEP_LEASE_MARGIN": "1", "EVALS_STALL_SECONDS": "2",
        "EVALS_REGRADE_SECONDS": "3"}


def test_a_run_goes_on_after_its_worker_is_killed(user, fake_llm, basic_server, celery_worker):
    refresh_tools(basic_server)
    suite = Suite.objects.create(owner=user, name="restart")
    suite.servers.set([basic_server])
    for i in range(3):
        Case.objects.create(suite=suite, position=i, name=f"case {i}", prompts=["1+1?"],
                            expectations={"must_call": [{"tool": "add"}], "answer_contains": ["sum"]})
    fake_llm.script([{"delay": 1.0, "after_tool": "The sum:", "tool_calls": [{"name": "basic__add", "arguments": {"a": 1, "b": 1}}],
                      "times": None}])
    with worker_to_kill(celery_worker, "default", "victim-evals", {"SWEEP_INTERVAL": "3600"}) as victim:
        run = runs.start_run(suite, user, ["openai/test-model"], api_base=fake_llm.url, concurrency=1)
        wait_for(lambda: run.attempts.filter(status="running").exists(), timeout=30, message="the first attempt to start")
        killed_at, successor = kill_and_replace(victim, "successor-evals", FAST)
        try:
            run = wait_for(lambda: (r := Run.objects.get(pk=run.pk)).status != "running" and r, timeout=90,
                           message="the run to end after the kill")
        finally:
            stop_process(successor)
    attempts = list(run.attempts.all())
    assert run.status == "completed" and run.summary["verdict"] == "pass", [(a.status, a.error, a.checks) for a in attempts]
    for a in attempts:  # one conversation each, one turn, one answer per step: nothing ran twice
        assert a.conversation.turns.count() == 1
        steps = list(Message.objects.filter(conversation=a.conversation, role="assistant").values_list("step", flat=True))
        assert steps == sorted(set(steps))
    recovered = (run.finished_at - killed_at).total_seconds()
    record("time to the run's end after the kill, s", round(recovered, 1), "evals worker killed")
    assert recovered < 60
