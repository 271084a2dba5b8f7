"""What a run adds per case beyond the model's own time, on the real stack (bench/evals.py
repeats it with more cases and prints the figures).

Each attempt is one tool call on the basic MCP server and two model requests, and the scripted LLM
holds every request EVALS_BENCH_DELAY seconds before it answers: the model's own time per attempt
is known exactly (2 x the delay). Overhead = the attempt's wall time (its first user message
stored -> its verdict stored) - the model's time: the worker's steps, the tool call, polling,
grading."""

from __future__ import annotations

import os
import statistics

import pytest

from evals import runs
from evals.models import Case, Run, Suite
from tests.figures import record
from tests.helpers import refresh_tools, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

CASES = int(os.environ.get("EVALS_BENCH_CASES", 4))
DELAY = float(os.environ.get("EVALS_BENCH_DELAY", 0.3))
CONCURRENCY = int(os.environ.get("EVALS_BENCH_CONCURRENCY", 4))


def test_overhead_per_case_beyond_the_model(user, fake_llm, basic_server):
    refresh_tools(basic_server)
    suite = Suite.objects.create(owner=user, name="bench")
    suite.servers.set([basic_server])
    for i in range(CASES):
        Case.objects.create(suite=suite, position=i, name=f"case {i}", prompts=[f"{i}+1?"],
                            expectations={"must_call": [{"tool": "add"}], "answer_contains": ["sum"]})
    fake_llm.script([{"delay": DELAY, "after_tool": "The sum:", "tool_calls": [{"name": "basic__add", "arguments": {"a": 1, "b": 1}}],
                      "times": None}])
    run = runs.start_run(suite, user, ["openai/test-model"], api_base=fake_llm.url, concurrency=CONCURRENCY)
    run = wait_for(lambda: (r := Run.objects.get(pk=run.pk)).status != "running" and r, timeout=60 + CASES * 10,
                   message="the bench run")
    attempts = list(run.attempts.all())
    assert run.summary["verdict"] == "pass", [(a.status, a.checks, a.error) for a in attempts]
    model_s = 2 * DELAY
    overhead = [(a.finished_at - a.started_at).total_seconds() - model_s for a in attempts]
    wall = (run.finished_at - run.created_at).total_seconds()
    record("cases", CASES, "evals")
    record("model time per case (s)", model_s, "evals")
    record("overhead per case, median (s)", round(statistics.median(overhead), 3), "evals")
    record("overhead per case, max (s)", round(max(overhead), 3), "evals")
    record("run wall time (s)", round(wall, 2), "evals")
    record("concurrency per provider", CONCURRENCY, "evals")
    assert all(o > 0 for o in overhead)
    assert statistics.median(overhead) < 5, overhead  # a generous bound: polling is 1 s, grading is local
