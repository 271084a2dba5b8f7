"""Load (issue 10, item 7): two daphne and two workers on one database, tool calls through the
API at 20 in flight and concurrent chat turns against the recording LLM, all at once.

Promised: nothing lost (every call ends succeeded with exactly one full row and one projection,
every turn completes with one answer per step), nothing duplicated (the server received each
tools/call once: its frames in the log), no error answer, database connections bounded in every
process; throughput reported. The suite runs a bounded size; `bench/faults.py --only load`
runs the issue's 500 calls and 20 turns (LOAD_CALLS, LOAD_TURNS, LOAD_CONCURRENT).
"""

from __future__ import annotations

import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.conf import settings
from django.db import connection
from django.db.models import Count

from chat.models import Conversation, Message, Turn
from inspector.models import ApiToken
from tests.figures import record
from tests.helpers import peak_db_connections, refresh_tools, start_daphne, start_worker, stop_process, wait_for
from tools.models import RpcFrame, ToolCall

CALLS = int(os.environ.get("LOAD_CALLS", 120))
TURNS = int(os.environ.get("LOAD_TURNS", 8))
CONCURRENT = int(os.environ.get("LOAD_CONCURRENT", 20))
ALLOWANCE = 2

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def second_daphne(django_db_blocker):
    with django_db_blocker.unblock():
        app = start_daphne("load-daphne.log")
    yield app
    stop_process(app.proc)


@pytest.fixture
def second_worker(celery_worker, django_db_blocker):
    with django_db_blocker.unblock():
        worker = start_worker(f"load-{uuid.uuid4().hex[:8]}@localhost", log_name="load-worker.log")
    yield worker
    stop_process(worker)


def test_two_webs_and_two_workers_lose_and_repeat_nothing_under_load(
        live_app, second_daphne, celery_worker, second_worker, basic_server, user, fake_llm):
    refresh_tools(basic_server)
    _, key = ApiToken.issue(user, "load")
    webs = [live_app.url, second_daphne.url]
    pids = {"daphne 1": live_app.proc.pid, "daphne 2": second_daphne.proc.pid,
            "worker 1": celery_worker.pid, "worker 2": second_worker.pid}
    conversations = []
    for i in range(TURNS):
        c = Conversation.objects.create(owner=user, model="openai/test-model", api_base=fake_llm.url, api_key="sk-test",
                                        title=f"load {i}")
        c.servers.set([basic_server])
        conversations.append(c)
    # One entry plays every turn: a tool call, then an answer quoting the tool's result.
    fake_llm.script([{"tool_calls": [{"name": "basic__echo", "arguments": {"text": "from a turn"}}],
                      "after_tool": "Done:", "times": None}])

    if connection.vendor == "postgresql":
        bound = settings.DB_POOL_MAX + ALLOWANCE
    else:  # no pool: a connection per request thread or worker thread (tests/inspector/test_connections.py)
        bound = CONCURRENT + 4 + 8 + ALLOWANCE
    started = time.monotonic()
    # As many kept-alive connections as threads (see test_connections.py: httpcore 1.0.9's pool race).
    limits = httpx.Limits(max_connections=CONCURRENT, max_keepalive_connections=CONCURRENT)
    with peak_db_connections(pids) as peak, httpx.Client(
        headers={"Authorization": f"Token {key}"}, timeout=60, limits=limits
    ) as http:
        def call(i: int) -> int:
            url = f"{webs[i % 2]}/api/servers/{basic_server.pk}/tools/echo/call/"
            return http.post(url, json={"arguments": {"text": f"load {i}"}}).status_code

        def turn(c: Conversation) -> int:
            return http.post(f"{webs[c.pk % 2]}/api/conversations/{c.pk}/messages/", json={"text": "go"}).status_code

        with ThreadPoolExecutor(CONCURRENT) as pool:
            turn_statuses = pool.map(turn, conversations)
            call_statuses = list(pool.map(call, range(CALLS)))
            turn_statuses = list(turn_statuses)
        assert call_statuses.count(202) == CALLS, {s: call_statuses.count(s) for s in set(call_statuses)}
        assert turn_statuses.count(202) == TURNS, {s: turn_statuses.count(s) for s in set(turn_statuses)}

        manual = ToolCall.objects.filter(origin="manual")
        wait_for(lambda: not manual.exclude(status__in=ToolCall.FINAL).exists() and manual.count() == CALLS
                 and not Turn.objects.filter(status=Turn.Status.RUNNING).exists(), timeout=240, interval=0.25,
                 message="every call and turn to end")
        elapsed = time.monotonic() - started

    # Nothing lost: every call succeeded with one full row and one projection; every turn completed.
    calls = ToolCall.objects.filter(server=basic_server)
    assert calls.count() == CALLS + TURNS
    assert dict(calls.values_list("status").annotate(n=Count("pk"))) == {"succeeded": CALLS + TURNS}
    assert calls.filter(full_result__isnull=False, projection__isnull=False).count() == CALLS + TURNS
    assert sorted(Turn.objects.values_list("status", flat=True)) == ["completed"] * TURNS
    for c in conversations:
        roles = list(Message.objects.filter(conversation=c).order_by("seq").values_list("role", flat=True))
        assert roles == ["user", "assistant", "tool", "assistant"], (c.pk, roles)
        assert Message.objects.get(conversation=c, role="assistant", step=2).text == "Done: from a turn"
    # Nothing repeated: the server was sent each tools/call once (its frames, written in batches).
    sent = RpcFrame.objects.filter(server=basic_server, direction="out", method="tools/call")
    wait_for(lambda: sent.count() >= CALLS + TURNS, timeout=30, message="the frame log to catch up")
    assert sent.count() == CALLS + TURNS
    # The model was asked twice per turn, never more.
    assert len(fake_llm.requests) == 2 * TURNS

    print(f"\n{connection.vendor}: {CALLS} calls + {TURNS} turns in {elapsed:.1f} s "
          f"({CALLS / elapsed:.1f} calls/s); peak connections {peak} (bound {bound})")
    record("calls", CALLS, "load")
    record("turns", TURNS, "load")
    record("seconds", round(elapsed, 1), "load")
    record("calls per second", round(CALLS / elapsed, 1), "load")
    record("peak DB connections per process", max(peak.values()), "load")
    assert all(n <= bound for n in peak.values()), (peak, bound)
