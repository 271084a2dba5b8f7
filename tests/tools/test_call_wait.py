"""`POST /api/servers/{id}/tools/{tool}/call/?wait=SECONDS`: a script's call in one round trip (issue 31.1).

Through real daphne, a real worker and the basic test server over Streamable HTTP, with an API
token as a script would. A call that ends within the wait is answered whole (summary, projection,
the full result inline up to WS_INLINE_RESULT_MAX_BYTES, else its result_url); one that does not is
a 202 as without `wait`, and goes on.
"""

from __future__ import annotations

import time

import httpx
import pytest

from inspector.models import ApiToken
from tests.helpers import refresh_tools
from tools.models import ToolCall

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def script(live_app, user):
    _, key = ApiToken.issue(user, "wait-test")
    with httpx.Client(base_url=live_app.url, headers={"Authorization": f"Token {key}"}, timeout=60) as client:
        yield client


def test_a_call_that_ends_within_the_wait_is_answered_whole_in_one_round_trip(script, basic_server, celery_worker):
    refresh_tools(basic_server)
    started = time.monotonic()
    answer = script.post(f"/api/servers/{basic_server.pk}/tools/echo/call/?wait=20", json={"arguments": {"text": "hi"}})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "succeeded" and body["tool"] == "echo"
    assert body["full"]["content"] == [{"type": "text", "text": "hi"}]
    assert body["projection"]["text"] == "hi"
    assert ToolCall.objects.get(pk=body["id"]).status == "succeeded"
    assert time.monotonic() - started < 20


def test_a_call_longer_than_the_wait_is_a_202_and_goes_on(script, basic_server, celery_worker):
    refresh_tools(basic_server)
    answer = script.post(f"/api/servers/{basic_server.pk}/tools/slow/call/?wait=0.5", json={"arguments": {"seconds": 3}})
    assert answer.status_code == 202, answer.text
    call_id = answer.json()["id"]
    assert answer.json()["status"] in ("queued", "running")
    deadline = time.monotonic() + 30
    while ToolCall.objects.get(pk=call_id).status != "succeeded":
        assert time.monotonic() < deadline, "the call did not go on after the wait"
        time.sleep(0.2)


def test_a_result_too_big_to_push_is_referenced_not_inlined(script, basic_server, celery_worker):
    refresh_tools(basic_server)
    answer = script.post(f"/api/servers/{basic_server.pk}/tools/big_text/call/?wait=30", json={"arguments": {"megabytes": 1}})
    assert answer.status_code == 200, answer.text[:500]
    body = answer.json()
    assert body["status"] == "succeeded" and "full" not in body
    assert body["result_url"] == f"/api/tool-calls/{body['id']}/result/"
    assert len(answer.content) < 64 * 1024


def test_a_bad_wait_is_refused_and_starts_nothing(script, basic_server, celery_worker):
    refresh_tools(basic_server)
    for bad in ("soon", "-1", "100000"):
        answer = script.post(f"/api/servers/{basic_server.pk}/tools/echo/call/?wait={bad}", json={"arguments": {"text": "x"}})
        assert answer.status_code == 400 and "`wait`" in answer.json()["error"], answer.text
    assert not ToolCall.objects.filter(tool_name="echo").exists()
    nobody = httpx.post(f"{script.base_url}/api/servers/{basic_server.pk}/tools/echo/call/?wait=1", json={})
    assert nobody.status_code in (401, 403)  # (403: the CSRF check answers first for a cookie-less POST)


def test_manage_py_call_prints_the_finished_call_and_says_how_it_ended(basic_server, celery_worker, live_app):
    """The same for shell and CI callers, as a process: 0 succeeded, 1 ended otherwise, 2 still running, 3 bad input."""
    import json
    import subprocess

    from tests.helpers import manage_here, manage_process

    refresh_tools(basic_server)

    def call(*args: str) -> subprocess.CompletedProcess:  # through the entry point, in this process
        return manage_here("call", *args)

    ok = manage_process("call", str(basic_server.pk), "echo", "--args", '{"text": "hello"}', "--wait", "30")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["full"]["content"] == [{"type": "text", "text": "hello"}]
    timed_out = call("basic", "slow", "--args", '{"seconds": 5}', "--timeout", "1", "--wait", "30")
    assert timed_out.returncode == 1 and json.loads(timed_out.stdout)["status"] == "timed_out", timed_out.stderr
    running = call("basic", "slow", "--args", '{"seconds": 3}', "--wait", "0.2")
    assert running.returncode == 2 and json.loads(running.stdout)["status"] in ("queued", "running")
    assert call("basic", "no_such_tool").returncode == 3
    assert call("basic", "echo", "--args", "[1]").returncode == 3
    assert call("basic", "echo", "--wait", "soon").returncode == 3  # an option error too: 2 means still running
