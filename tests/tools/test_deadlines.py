"""Deadlines (issue 17.3): a server's call timeout, a per-call override, progress that extends a
call up to the hard maximum, the sweep that respects a call's own deadline, and the elapsed-time
counter in the browser.

Real parts: the `asks` test server over Streamable HTTP (`wait` sleeps and counts the client's
cancels per tag; `progress` reports progress every `delay` seconds), the suite's Celery worker
(MCP_CALL_TIMEOUT 6 s), and, for the progress and sweep tests at the end, a worker of this
module's own with small values (call timeout 2 s, hard maximum 9 s, a sweep every 0.5 s).
"""

from __future__ import annotations

import re
import time
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chat.models import Conversation
from tests.helpers import stop_process, login_page, refresh_tools, run_call, start_worker, wait_for
from tools.runtime import pipeline
from tools.runtime.lifecycle import start_tool_call
from tools.runtime.deadlines import TimeoutOutOfRange, legacy_lease
from tools.models import Projection, RpcFrame, Server, ToolCall, ToolResult

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def asks_http():
    from tests.mcp_servers.launch import start_server

    server = start_server("asks.py", "http")
    yield server
    server.stop()


@pytest.fixture
def asks(asks_http, user):
    return Server.objects.create(name="asks", transport="streamable_http", url=asks_http.url, owner=user)


def finished(call_id, timeout: float = 40) -> ToolCall:
    wait_for(lambda: ToolCall.objects.get(pk=call_id).is_final, timeout=timeout, message="the call to end")
    return ToolCall.objects.get(pk=call_id)


def cancels_seen_by_server(server: Server, tag: str) -> str:
    return run_call(server, "cancelled", {"tag": tag}).projection.text


# --- no worker: the claim, the lease, the validation ------------------------------------------------------

def test_the_claim_is_one_update_that_sets_the_deadline_from_the_calls_own_timeout(asks, settings):
    """The database adds the row's timeout (an override here, MCP_CALL_TIMEOUT when blank): the claim
    stays one UPDATE, and a second delivery is told to come back when the deadline passes."""
    settings.MCP_CONNECT_TIMEOUT, settings.CALL_LEASE_MARGIN, settings.MCP_CALL_TIMEOUT = 3, 1, 5
    long = start_tool_call(server=asks, tool_name="wait", arguments={}, origin="manual", user=asks.owner,
                           enqueue=False, timeout=300)
    plain = start_tool_call(server=asks, tool_name="wait", arguments={}, origin="manual", user=asks.owner, enqueue=False)
    assert (long.timeout_s, plain.timeout_s) == (300, None)
    with CaptureQueriesContext(connection) as ctx:
        claimed = pipeline._claim(long.pk)
    writes = [q["sql"] for q in ctx.captured_queries if q["sql"].lstrip().upper().startswith("UPDATE")]
    # The UPDATE, then load(): the call with its server and its tool in one SELECT.
    assert len(writes) == 1 and len(ctx.captured_queries) == 2
    assert (claimed.deadline_at - claimed.started_at).total_seconds() == pytest.approx(3 + 300 + 1, abs=0.01)
    plain_claimed = pipeline._claim(plain.pk)
    assert (plain_claimed.deadline_at - plain_claimed.started_at).total_seconds() == pytest.approx(3 + 5 + 1, abs=0.01)

    # Another delivery well past the old fixed lease (9 s) but before this call's deadline: not taken over.
    ToolCall.objects.filter(pk=long.pk).update(started_at=timezone.now() - timedelta(seconds=60),
                                               deadline_at=timezone.now() + timedelta(seconds=240))
    with pytest.raises(pipeline.CallInProgress) as busy:
        pipeline._claim(long.pk)
    assert busy.value.retry_in == 5.0
    # Past its deadline it is: the claim wins again and sets a new deadline.
    ToolCall.objects.filter(pk=long.pk).update(deadline_at=timezone.now() - timedelta(seconds=1))
    again = pipeline._claim(long.pk)
    assert again.attempts == 2 and again.deadline_at > timezone.now() + timedelta(seconds=300)

    # A row claimed before deadline_at existed keeps the old rule.
    ToolCall.objects.filter(pk=plain.pk).update(deadline_at=None, started_at=timezone.now() - legacy_lease() + timedelta(seconds=3))
    with pytest.raises(pipeline.CallInProgress):
        pipeline._claim(plain.pk)
    ToolCall.objects.filter(pk=plain.pk).update(started_at=timezone.now() - legacy_lease() - timedelta(seconds=1))
    assert pipeline._claim(plain.pk).attempts == 2


def test_a_call_queued_again_between_the_claim_and_its_read_is_retried_not_skipped(asks, monkeypatch):
    """A chat step's task polls a resting call. If the answer queues the call again between the
    claim's UPDATE (which saw it resting) and the read that follows, the task must retry: taking
    the queued call for finished returned "skipped", the chord moved on, and the model was asked
    for the next step while the call was still to run (a CI failure of test_input_rounds)."""
    call = start_tool_call(server=asks, tool_name="wait", arguments={}, origin="manual", user=asks.owner, enqueue=False)
    ToolCall.objects.filter(pk=call.pk).update(status=ToolCall.Status.INPUT_REQUIRED)
    load = pipeline.load
    reads = []

    def answered_meanwhile(tool_call_id):
        reads.append(tool_call_id)
        if len(reads) == 2:  # the claim reads the call, its UPDATE finds it resting, then it reads it again
            ToolCall.objects.filter(pk=tool_call_id).update(status=ToolCall.Status.QUEUED)
        return load(tool_call_id)

    monkeypatch.setattr(pipeline, "load", answered_meanwhile)
    with pytest.raises(pipeline.CallInProgress):
        pipeline._claim(call.pk)
    monkeypatch.setattr(pipeline, "load", load)
    assert pipeline._claim(call.pk).status == ToolCall.Status.RUNNING  # the retry takes it


def test_a_timeout_out_of_range_is_a_clear_400_and_starts_nothing(api, client, asks, settings):
    from tools.models import Tool

    settings.MCP_MAX_CALL_TIMEOUT = 600
    Tool.objects.create(server=asks, name="wait", input_schema={"type": "object"})
    url = f"/api/servers/{asks.pk}/tools/wait/call/"
    for bad, says in [(0, "between 1 and 600 seconds"), (601, "between 1 and 600 seconds"),
                      ("30", "valid number"), (True, "valid number")]:
        resp = api.post(url, {"arguments": {"seconds": 1}, "timeout": bad})
        assert resp.status_code == 400, bad
        assert "`timeout`" in resp.json()["error"] and says in resp.json()["error"], resp.json()
    assert not ToolCall.objects.exists()
    with pytest.raises(TimeoutOutOfRange):
        start_tool_call(server=asks, tool_name="wait", arguments={}, origin="manual", user=asks.owner, enqueue=False, timeout=0.5)

    # The server's default: the same range, through the API (and so the form).
    for bad in (0, 601):
        resp = api.patch(f"/api/servers/{asks.pk}/", {"call_timeout": bad})
        assert resp.status_code == 400 and "call_timeout" in resp.json()["fields"], resp.json()
    resp = api.patch(f"/api/servers/{asks.pk}/", {"call_timeout": 90})
    assert resp.status_code == 200 and resp.json()["call_timeout"] == 90
    page = client.get(f"/servers/{asks.pk}/").content.decode()
    assert "90 s" in page and "up to 600 s" in page
    form = client.get(f"/servers/{asks.pk}/edit/").content.decode()
    assert 'name="call_timeout"' in form and 'value="90"' in form and 'max="600"' in form
    resp = client.post(f"/servers/{asks.pk}/edit/", {"name": "asks", "transport": "streamable_http", "url": asks.url,
                                                     "projection_policy": "content-first", "call_timeout": "601"})
    assert resp.status_code == 200 and "between 1 and 600 seconds" in resp.content.decode()
    assert api.patch(f"/api/servers/{asks.pk}/", {"call_timeout": None}).json()["call_timeout"] is None


# --- the suite's worker: MCP_CALL_TIMEOUT 6 s ----------------------------------------------------------------

@pytest.mark.usefixtures("celery_worker")
def test_an_override_longer_than_the_default_succeeds(api, asks):
    refresh_tools(asks)
    resp = api.post(f"/api/servers/{asks.pk}/tools/wait/call/", {"arguments": {"seconds": 7.5}, "timeout": 10})
    assert resp.status_code == 202, resp.json()
    call = finished(resp.json()["id"])
    assert call.status == "succeeded", call.error
    assert call.timeout_s == 10 and call.duration_ms > 7000  # past the worker's MCP_CALL_TIMEOUT (6 s)
    # Its deadline was the worker's connect (6) + its own timeout + the margin (30).
    assert (call.deadline_at - call.started_at).total_seconds() == pytest.approx(6 + 10 + 30, abs=0.5)
    detail = api.get(f"/api/tool-calls/{call.pk}/?full=0").json()
    assert detail["timeout_s"] == 10 and detail["started_at"] and detail["deadline_at"]


@pytest.mark.usefixtures("celery_worker")
def test_a_short_override_times_out_with_a_clear_message_and_the_server_is_told(api, asks):
    refresh_tools(asks)
    tag = uuid.uuid4().hex
    resp = api.post(f"/api/servers/{asks.pk}/tools/wait/call/", {"arguments": {"seconds": 5, "tag": tag}, "timeout": 1})
    call = finished(resp.json()["id"])
    assert call.status == "timed_out"
    assert "no answer and no progress within 1 s" in call.error, call.error
    assert call.duration_ms < 4000
    assert Projection.objects.get(tool_call=call).text.startswith("Tool call timed out: asks: no answer and no progress within 1 s")
    assert not ToolResult.objects.filter(tool_call=call).exists()
    # The server was sent notifications/cancelled for the abandoned request.
    wait_for(lambda: cancels_seen_by_server(asks, tag) == "1", timeout=10, message="the server to count the cancel")


@pytest.mark.usefixtures("celery_worker")
def test_the_servers_default_applies_and_an_override_beats_it(api, asks):
    refresh_tools(asks)
    assert api.patch(f"/api/servers/{asks.pk}/", {"call_timeout": 2}).status_code == 200
    asks.refresh_from_db()
    call = run_call(asks, "wait", {"seconds": 5})
    assert call.timeout_s == 2 and call.status == "timed_out"
    assert "no answer and no progress within 2 s" in call.error
    resp = api.post(f"/api/servers/{asks.pk}/tools/wait/call/", {"arguments": {"seconds": 3}, "timeout": 8})
    call = finished(resp.json()["id"])
    assert call.status == "succeeded" and call.timeout_s == 8


# --- the browser: the elapsed counter ----------------------------------------------------------------------

def _seconds(text: str) -> int:
    match = re.search(r"running (\d+) s", text)
    return int(match.group(1)) if match else -1


def text_of(page, selector: str) -> str:
    element = page.query_selector(selector)  # polled from here: the page's CSP forbids wait_for_function's eval
    return (element.text_content() or "") if element else ""


def wait_ticking(page, selector: str, of: str) -> str:
    """The counter shows "running N s of <of>", then a larger N: it ticks."""
    shown = wait_for(lambda: re.search(rf"running [1-9]\d* s of {of}", text_of(page, selector)) and text_of(page, selector),
                     timeout=20, message=f"{selector} to show the elapsed time")
    wait_for(lambda: _seconds(text_of(page, selector)) > _seconds(shown), timeout=5, message=f"{selector} to tick")
    return shown


@pytest.mark.browser
@pytest.mark.usefixtures("celery_worker")
def test_the_elapsed_counter_ticks_on_the_tool_page_and_the_chat_card(browser, live_app, asks, user, fake_llm, screenshots):
    refresh_tools(asks)
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.goto(f"{live_app.url}/servers/{asks.pk}/tools/wait/")
    assert page.get_attribute("#run-timeout", "placeholder") == "6"  # the default (the server has none)
    page.click("[data-mode=json]")
    page.fill("#raw-args", '{"seconds": 4}')
    page.fill("#run-timeout", "30")
    page.click("#run-tool")
    wait_ticking(page, "#run-elapsed", "30 s")
    page.screenshot(path=str(screenshots / "deadline-tool-page-running.png"), full_page=True)
    page.wait_for_selector("#run-status.succeeded", timeout=20000)
    assert page.inner_text("#run-elapsed") == ""  # an ended call shows its duration in the result instead
    assert ToolCall.objects.get(tool_name="wait").timeout_s == 30

    # A timeout out of range: the API's message, and no call.
    page.fill("#run-timeout", "99999")
    page.click("#run-tool")
    page.wait_for_selector("#run-status.failed", timeout=10000)
    assert "between 1 and 3600 seconds" in page.inner_text("#run-status")
    assert ToolCall.objects.count() == 1

    # The chat: the card of a running call ticks too, with the server's own default.
    Server.objects.filter(pk=asks.pk).update(call_timeout=20)
    conversation = Conversation.objects.create(owner=user, model="openai/test-model", api_base=fake_llm.url, api_key="sk-test")
    conversation.servers.set([asks])
    fake_llm.script([
        {"text": "Waiting.", "tool_calls": [{"name": "asks__wait", "arguments": {"seconds": 4}, "id": "w1"}]},
        {"text": "Done waiting."},
    ])
    page.goto(f"{live_app.url}/chat/{conversation.pk}/")
    page.wait_for_selector("#conn-state.ok")
    page.fill("#composer-text", "wait a bit")
    page.press("#composer-text", "Enter")
    wait_ticking(page, ".tool-card .duration", "20 s")
    page.screenshot(path=str(screenshots / "deadline-chat-card-running.png"), full_page=True)
    page.wait_for_selector(".tool-card .status.succeeded", timeout=20000)
    assert re.fullmatch(r"\d+ ms", page.inner_text(".tool-card .duration"))

    # The server's own default, on its form and its page.
    page.goto(f"{live_app.url}/servers/{asks.pk}/edit/")
    assert page.input_value("#id_call_timeout") == "20"
    page.locator(".field-call_timeout").screenshot(path=str(screenshots / "deadline-server-form-field.png"))
    page.goto(f"{live_app.url}/servers/{asks.pk}/")
    assert page.inner_text("#call-timeout").startswith("20 s")
    page.context.close()


# --- a worker of this module's own: call timeout 2 s, hard maximum 9 s, sweep every 0.5 s ----------------------

SMALL = {"MCP_CALL_TIMEOUT": "2", "MCP_MAX_CALL_TIMEOUT": "9", "MCP_CONNECT_TIMEOUT": "3", "CALL_LEASE_MARGIN": "1",
         "SWEEP_INTERVAL": "0.5", "CALL_RESEND_AFTER": "1"}


@pytest.fixture(scope="module")
def small_worker(celery_worker, django_db_blocker):
    """Takes every tool call (the suite's worker stops consuming `tools`) and sweeps every 0.5 s:
    under the old fixed lease (3 + 2 + 1 s) it would take over any call running 6 s."""
    from inspector.celery import app

    app.control.cancel_consumer("tools", destination=[celery_worker.hostname], reply=True)
    with django_db_blocker.unblock():
        worker = start_worker(f"deadlines-{uuid.uuid4().hex[:8]}@localhost", SMALL, "deadlines-worker.log")
    yield worker
    app.control.add_consumer("tools", destination=[celery_worker.hostname], reply=True)
    stop_process(worker)


def test_progress_keeps_a_call_alive_past_its_timeout_but_not_past_the_hard_maximum(asks, small_worker):
    refresh_tools(asks)
    start = lambda tool, args: start_tool_call(server=asks, tool_name=tool, arguments=args, origin="manual", user=asks.owner)  # noqa: E731
    working = start("progress", {"steps": 14, "delay": 0.5})   # 7 s, progress every 0.5 s
    endless = start("progress", {"steps": 40, "delay": 0.5})   # 20 s: stopped at the maximum
    silent = start("wait", {"seconds": 6})                     # no progress: stopped at its timeout

    # While it works, its deadline on the row moves on (the sweep reads it).
    first = wait_for(lambda: ToolCall.objects.get(pk=working.pk).deadline_at, timeout=20, message="the claim")
    wait_for(lambda: ToolCall.objects.get(pk=working.pk).deadline_at > first + timedelta(seconds=2), timeout=10,
             message="progress to push the deadline on")

    silent = finished(silent.pk, 30)
    assert silent.status == "timed_out" and "no answer and no progress within 2 s" in silent.error, silent.error
    working = finished(working.pk, 30)
    assert working.status == "succeeded", working.error
    assert working.attempts == 1 and working.duration_ms > 6500  # past its timeout and the old lease, one run
    assert working.progress["progress"] == 14
    endless = finished(endless.pk, 30)
    assert endless.status == "timed_out" and endless.attempts == 1
    assert "within the hard maximum of 9 s" in endless.error, endless.error
    assert 8500 < endless.duration_ms < 12000


def test_the_sweep_leaves_a_call_with_a_long_override_alone(asks, small_worker):
    refresh_tools(asks)
    tag = uuid.uuid4().hex
    call = start_tool_call(server=asks, tool_name="wait", arguments={"seconds": 7.5, "tag": tag}, origin="manual",
                           user=asks.owner, timeout=8.5)
    began = time.monotonic()
    call = finished(call.pk, 40)
    assert call.status == "succeeded", call.error
    assert time.monotonic() - began > 7
    assert call.attempts == 1  # never taken over (a takeover counts an attempt and sends tools/call again)
    sent = RpcFrame.objects.filter(method="tools/call", direction="out", payload__params__arguments__tag=tag)
    wait_for(sent.exists, timeout=10, message="the call in the frame log (written in batches)")
    assert sent.count() == 1
