"""Every call reaches an end state: database settings, the sweep, and a worker killed mid-call.

These tests start workers of their own (the suite's worker sweeps only at start), with
short leases so a lost or orphaned call is recovered within seconds.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from chat.tool_calls import caller
from chat.models import Conversation, Message, Turn
from chat.sweeper import lock_key, lock_ttl
from tests.helpers import kill_and_replace, run_async, run_call, start_worker, stop_process, wait_for, worker_to_kill
from tests.figures import record
from tests.tools.test_connection import text_of
from tools.mcp.config import ServerConfig
from tools.mcp.connection import Connection
from tools.runtime.lifecycle import start_tool_call
from tools.models import Projection, RpcFrame, ToolCall, ToolResult

# Every test here starts real MCP servers or workers of its own.
pytestmark = pytest.mark.worker

# Leases of a few seconds: connect 3 + call 4 + margin 1.
FAST_SWEEP = {"SWEEP_INTERVAL": "0.5", "CALL_RESEND_AFTER": "1", "CALL_LEASE_MARGIN": "1",
              "MCP_CONNECT_TIMEOUT": "3", "MCP_CALL_TIMEOUT": "4"}


def test_sqlite_gets_its_options_however_it_is_configured(tmp_path):
    """DATABASE_URL=sqlite:///… used to drop WAL, IMMEDIATE and the busy timeout ("database is locked")."""
    from inspector.settings import _database

    for url in ("", f"sqlite:///{tmp_path}/elsewhere.sqlite3"):
        db = _database(url)
        assert db["ENGINE"] == "django.db.backends.sqlite3"
        assert db["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
        assert db["OPTIONS"]["timeout"] >= 20
        assert "journal_mode=WAL" in db["OPTIONS"]["init_command"]
        assert str(db["TEST"]["NAME"]).endswith(".sqlite3")  # a file a worker process can open
    assert str(_database(f"sqlite:///{tmp_path}/elsewhere.sqlite3")["NAME"]) == f"{tmp_path}/elsewhere.sqlite3"


def test_postgresql_gets_a_bounded_pool_and_no_persistent_connections():
    from inspector.settings import DB_POOL_MAX, _database

    db = _database("postgres://postgres@127.0.0.1:5432/somewhere")
    assert db["OPTIONS"]["pool"]["max_size"] == DB_POOL_MAX
    assert db["CONN_MAX_AGE"] == 0 and db["CONN_HEALTH_CHECKS"] is True
    assert db["OPTIONS"]["application_name"].startswith("mcp-inspector:")


@pytest.mark.django_db(transaction=True)
def test_a_call_no_worker_takes_fails_at_its_deadline_and_open_pages_hear_it(basic_server):
    """No worker involved: the row alone, past CALL_QUEUE_DEADLINE, is ended by the sweep with an event."""
    from channels.layers import get_channel_layer

    from tools.runtime.sweep import sweep_calls

    call = start_tool_call(server=basic_server, tool_name="echo", arguments={"text": "x"}, origin="manual",
                           user=basic_server.owner, enqueue=False)
    ToolCall.objects.filter(pk=call.pk).update(queued_at=timezone.now() - timedelta(hours=1))

    async def listen_while_sweeping():
        from channels.db import database_sync_to_async

        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(f"toolcall.{call.pk}", channel)
        report = await database_sync_to_async(sweep_calls)()
        message = await layer.receive(channel)
        return report, message["event"]

    report, event = run_async(listen_while_sweeping)
    assert report.ended == 1
    assert event["type"] == "tool_call.result" and event["tool_call"]["status"] == "failed"
    call.refresh_from_db()
    assert call.status == "failed" and "No worker started this call" in call.error
    assert Projection.objects.get(tool_call=call).text.startswith("Tool call failed: No worker started")


@pytest.fixture
def sweeping_worker(django_db_blocker):
    proc = start_worker(f"sweeper-{uuid.uuid4().hex[:8]}@localhost", FAST_SWEEP, "sweeping-worker.log")
    yield proc
    stop_process(proc)


@pytest.mark.django_db(transaction=True)
def test_a_lost_task_is_sent_again_by_the_worker_sweep(basic_server, sweeping_worker):
    """A row whose task never reached the broker (Redis was down, a worker died before the chord).

    The sweep lock is held, as a worker SIGKILLed mid-sweep leaves it: it expires after a few
    intervals (it used to block every sweep for a minute, which timed out the worker-kill test)."""
    with override_settings(SWEEP_INTERVAL=float(FAST_SWEEP["SWEEP_INTERVAL"])):
        ttl = lock_ttl()
    assert ttl <= 5
    redis.Redis.from_url(settings.CELERY_BROKER_URL).set(lock_key(), "killed-holder", px=int(ttl * 1000))
    call = start_tool_call(server=basic_server, tool_name="echo", arguments={"text": "found again"}, origin="manual",
                           user=basic_server.owner, enqueue=False)
    wait_for(lambda: ToolCall.objects.get(pk=call.pk).is_final, timeout=20, message="the sweep to re-send the lost call")
    call.refresh_from_db()
    assert call.status == "succeeded" and call.dispatched_at is not None
    assert "found again" in call.projection.text


def invocations_seen_by(server, tag: str) -> int:
    """The HTTP test server's own count of `slow` calls with `tag`, asked from here (no worker)."""
    async def ask() -> int:
        async with Connection(ServerConfig(name="count", transport="streamable_http", url=server.url)) as conn:
            result = await conn.call_tool("invocations", {"tag": tag})
        return int(text_of(result))

    return run_async(ask)


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_call_the_next_worker_runs_it_again_once(basic_server, celery_worker):
    """SIGKILL during a slow call: the message stays unacknowledged in the broker for an hour;
    the sweep of the next worker re-runs the call after its lease, and it ends exactly once."""
    # The suite's worker must not take the call: the victim takes the `tools` queue.
    with worker_to_kill(celery_worker, "tools", "victim", FAST_SWEEP) as victim:
        tag = uuid.uuid4().hex
        call = start_tool_call(server=basic_server, tool_name="slow", arguments={"seconds": 2.5, "tag": tag},
                               origin="manual", user=basic_server.owner)
        # Killed once the server itself runs the call, so the tool really runs twice. (Its logged
        # frame is not enough: the frame is written when the client hands the request to its
        # transport, and a worker killed at once can die before the POST leaves.)
        wait_for(lambda: RpcFrame.objects.filter(method="tools/call", direction="out", payload__params__arguments__tag=tag).exists(),
                 timeout=20, message="the call to leave the worker")
        wait_for(lambda: invocations_seen_by(basic_server, tag) == 1, timeout=10, message="the server to run the call")
        killed_at, successor = kill_and_replace(victim, "successor", FAST_SWEEP)
        try:
            wait_for(lambda: ToolCall.objects.get(pk=call.pk).is_final, timeout=40, message="the next worker to finish the call")
        finally:
            stop_process(successor)
    call.refresh_from_db()
    assert call.status == "succeeded", call.error
    assert call.attempts == 2
    assert ToolResult.objects.filter(tool_call=call).count() == 1
    assert Projection.objects.filter(tool_call=call).count() == 1
    assert ToolCall.objects.filter(arguments__tag=tag).count() == 1
    # The server saw the call twice (the first run died with its worker), never more.
    invocations = run_call(basic_server, "invocations", {"tag": tag}).projection.text
    record("tool invocations", int(invocations), "worker killed mid-call")
    record("rows per call (ToolResult, Projection)", "1, 1", "worker killed mid-call")
    record("time to recovery, s (kill -> call ended)", round((call.finished_at - killed_at).total_seconds(), 1),
           "worker killed mid-call")
    assert invocations == "2"
    assert (call.finished_at - killed_at).total_seconds() < 30


@pytest.mark.django_db(transaction=True)
def test_a_turn_whose_calls_ended_but_whose_next_step_never_came_is_resumed(api, fake_llm, basic_server, celery_worker):
    """The worker died between a step's commit and its chord: the sweep runs the calls and the next step."""
    from chat.tasks import close_stale_turns

    body = {"model": "openai/scripted", "api_base": fake_llm.url, "api_key": "sk-test", "server_ids": [basic_server.pk]}
    cid = api.post("/api/conversations/", body).json()["id"]
    conversation = Conversation.objects.get(pk=cid)
    long_ago = timezone.now() - timedelta(minutes=1)
    turn = Turn.objects.create(conversation=conversation, steps=1, step_claimed_at=long_ago)
    conversation.append_message(role=Message.Role.USER, text="echo please", turn=turn)
    conversation.append_message(role=Message.Role.ASSISTANT, text="", turn=turn, step=1,
                                tool_calls=[{"id": "call_1", "name": "basic__echo", "arguments": '{"text": "hi"}'}])
    call = run_call(basic_server, "echo", {"text": "hi"})
    ToolCall.objects.filter(pk=call.pk).update(**caller(conversation, turn).row_fields(), llm_tool_call_id="call_1",
                                               origin="llm", started_at=long_ago, finished_at=long_ago)
    conversation.append_message(role=Message.Role.TOOL, turn=turn, tool_call=call, llm_tool_call_id="call_1")
    Turn.objects.filter(pk=turn.pk).update(created_at=long_ago)
    Message.objects.filter(turn=turn).update(created_at=long_ago)
    Conversation.objects.filter(pk=cid).update(status="running")
    fake_llm.script([{"text": "resumed after the lost chord"}])

    assert close_stale_turns() == 0  # not ended: resumed
    wait_for(lambda: Turn.objects.get(pk=turn.pk).status != "running", timeout=30, message="the resumed step")
    turn.refresh_from_db()
    assert turn.status == "completed"
    last = conversation.messages.order_by("-seq").first()
    assert last.text == "resumed after the lost chord" and last.step == 2
    # The model got the stored projection of the call that ran before the worker died.
    assert any(m.get("role") == "tool" and m.get("content") == "hi" for m in fake_llm.bodies[-1]["messages"])


@pytest.mark.django_db(transaction=True)
def test_a_call_the_sweep_queues_again_gets_time_to_be_taken(basic_server, monkeypatch):
    """A running call past its lease is queued again; the next pass must not end it as "no worker
    started it" because its old lease (or its queued_at) is long past."""
    from tools.runtime import sweep
    from tools.runtime.sweep import sweep_calls

    sent = []
    # Only the rule is under test: the task goes nowhere, so no worker takes the call meanwhile.
    monkeypatch.setattr(sweep, "dispatch", lambda pk, task_id: sent.append(task_id) or True)

    call = start_tool_call(server=basic_server, tool_name="echo", arguments={"text": "x"}, origin="manual",
                           user=basic_server.owner, enqueue=False)
    long_ago = timezone.now() - timedelta(hours=1)
    ToolCall.objects.filter(pk=call.pk).update(status="running", started_at=long_ago, queued_at=long_ago, attempts=1,
                                               deadline_at=long_ago + timedelta(minutes=2))
    assert sweep_calls().resent == 1
    call.refresh_from_db()
    assert call.status == "queued" and call.deadline_at > timezone.now()
    assert sweep_calls().ended == 0
    call.refresh_from_db()
    assert call.status == "queued" and sent == [call.celery_task_id]
