"""Load tests through the workers (issue 29.5): a run of N calls at concurrency C driven by the
review.tasks.run_load_test task on the real worker, each call an ordinary stored ToolCall (origin
"load") of the real surface test server over stdio; figures from the stored calls and the server's
JSON-RPC log; cancel; the command's exit codes; load calls kept out of the admin's default list."""

from __future__ import annotations

import json
import subprocess

import pytest
from django.test import override_settings

from review import loadtest
from review.models import LoadCall, LoadRun
from tests.helpers import manage_here, manage_process, refresh_tools, wait_for
from tools.models import ToolCall


def _ended(run: LoadRun, timeout: float = 120) -> LoadRun:
    wait_for(lambda: not LoadRun.objects.get(pk=run.pk).is_active, timeout=timeout, message="the load test to end")
    return LoadRun.objects.get(pk=run.pk)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_forty_calls_at_four_through_the_pipeline_with_figures_and_cancel(client, surface_server, staff_user, user):
    refresh_tools(surface_server)
    client.force_login(user)  # a member may not start one
    assert client.post(f"/servers/{surface_server.pk}/load-tests/new/",
                       {"tool": "slow", "arguments": '{"ms": 20}', "calls": 40, "concurrency": 4}).status_code == 403
    client.force_login(staff_user)
    response = client.post(f"/servers/{surface_server.pk}/load-tests/new/",
                           {"tool": "slow", "arguments": '{"ms": 20}', "calls": 40, "concurrency": 4})
    assert response.status_code == 302
    run = _ended(LoadRun.objects.get())
    assert run.status == LoadRun.Status.SUCCEEDED, run.error
    assert (run.dispatched, run.done, run.errors) == (40, 40, 0)
    calls = ToolCall.objects.filter(load_call__run=run)
    assert calls.count() == 40 and set(calls.values_list("origin", "status").distinct()) == {("load", "succeeded")}
    f = run.stats
    assert f["ended"] == 40 and f["error_rate"] == 0 and f["calls_per_s"] > 0
    # The server's own time: each response's latency in the JSON-RPC log, at least the 20 ms it sleeps.
    assert f["wire_ms"]["n"] >= 40 and f["wire_ms"]["p50"] >= 20
    assert f["end_to_end_ms"]["p50"] >= f["wire_ms"]["p50"] and f["end_to_end_ms"]["p99"] >= f["end_to_end_ms"]["p50"]
    # Never more than 4 in flight: no call was queued before the 4th-previous one ended.
    rows = sorted(calls.values_list("queued_at", "finished_at"))
    for i in range(4, len(rows)):
        finished_before = sum(1 for q, fin in rows[:i] if fin <= rows[i][0])
        assert finished_before >= i - 4, i

    # The admin's everyday list leaves them out; its origin filter shows them.
    client.force_login(staff_user.__class__.objects.create_superuser("admin2", "a@example.com", "pw-admin2-123"))
    everyday = client.get("/admin/tools/toolcall/").content.decode()
    assert "0 tool calls" in everyday or "slow" not in everyday.split('id="result_list"')[-1]
    assert "40 tool calls" in client.get("/admin/tools/toolcall/?origin__exact=load").content.decode()

    # The run page and its JSON, compared with the first run; a cancelled run stops starting calls.
    slow = loadtest.create(surface_server, "slow", {"ms": 300}, 200, 2, staff_user, compare_to=run)
    wait_for(lambda: LoadRun.objects.get(pk=slow.pk).done >= 4, message="some calls to end")
    client.force_login(staff_user)
    data = client.get(f"/api/load-tests/{slow.pk}/").json()
    assert data["status"] == "running" and data["compare_to"]["figures"]["ended"] == 40
    assert client.post(f"/load-tests/{slow.pk}/cancel/").status_code == 302
    slow = _ended(slow, timeout=60)
    assert slow.status == LoadRun.Status.CANCELLED and slow.dispatched < 200
    assert not ToolCall.objects.filter(load_call__run=slow, status__in=ToolCall.ACTIVE).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_loadtest_command_prints_figures_and_exits_past_the_error_rate(surface_server, admin_user):
    refresh_tools(surface_server)

    def loadtest_cmd(*args: str) -> subprocess.CompletedProcess:  # through the entry point, in this process
        return manage_here("loadtest", surface_server.name, *args)

    done = manage_process("loadtest", surface_server.name, "flaky", "--args", '{"fail": true}', "--calls", "12", "--concurrency", "3", "--format", "json")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.strip(), done.stderr
    data = json.loads(done.stdout)
    assert data["error_rate"] == 1.0 and data["errors_by_kind"] == {"failed: Tool error: failed on purpose": 12}
    done = loadtest_cmd("flaky", "--args", '{"fail": true}', "--calls", "4", "--concurrency", "2", "--max-error-rate", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "calls/s" in done.stdout and "wire" in done.stdout
    for bad in (["nope"], ["slow", "--args", "[1"], ["slow", "--calls", "0"], ["slow", "--concurrency", "65"],
                ["slow", "--max-error-rate", "2"]):
        done = loadtest_cmd(*bad)
        assert done.returncode == 3, (bad, done.stdout, done.stderr)
    assert LoadRun.objects.count() == 2 and LoadCall.objects.count() == 16


@pytest.mark.django_db
def test_bounds_come_from_settings(surface_server, staff_user):
    from tools.models import Tool

    Tool.objects.create(server=surface_server, name="slow")
    with override_settings(LOADTEST_MAX_CALLS=50, LOADTEST_MAX_CONCURRENCY=5):
        with pytest.raises(loadtest.BadLoadTest, match="LOADTEST_MAX_CALLS"):
            loadtest.create(surface_server, "slow", {}, 51, 1, staff_user, dispatch=False)
        with pytest.raises(loadtest.BadLoadTest, match="LOADTEST_MAX_CONCURRENCY"):
            loadtest.create(surface_server, "slow", {}, 50, 6, staff_user, dispatch=False)
        assert loadtest.create(surface_server, "slow", {}, 50, 5, staff_user, dispatch=False).calls == 50
    assert loadtest.percentile([5, 1, 3, 2, 4], 50) == 3 and loadtest.percentile([], 95) is None
    assert loadtest.percentile(list(range(1, 101)), 99) == 99
