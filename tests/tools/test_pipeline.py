"""The tool-call pipeline with a real Celery worker against real MCP test servers."""

from __future__ import annotations

import json

import pytest
from django.test.utils import CaptureQueriesContext
from django.db import connection

from tests.helpers import refresh_tools, run_call, wait_for
from tools.admin import DurationFilter
from tools.runtime.deadlines import legacy_lease
from tools.models import Projection, RpcFrame, Tool, ToolCall, ToolResult

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


def test_app_tool_full_row_keeps_everything_projection_keeps_neither(app_server):
    refresh_tools(app_server)
    assert Tool.objects.get(server=app_server, name="show_marker").is_app
    call = run_call(app_server, "show_marker", {"label": "pipe"})
    assert call.status == "succeeded", call.error
    full = ToolResult.objects.get(tool_call=call).raw
    assert full["structuredContent"]["secret"] == "STRUCTURED-MARKER-pipe"
    assert full["_meta"]["note"] == "META-MARKER-pipe"
    proj = Projection.objects.get(tool_call=call)
    dumped = json.dumps(proj.payload) + proj.text
    assert "CONTENT-MARKER-pipe" in proj.text
    assert "STRUCTURED-MARKER" not in dumped and "META-MARKER" not in dumped
    assert proj.policy == "app"
    assert {r["path"] for r in proj.removed} >= {"structuredContent", "_meta"}
    assert call.is_app and call.duration_ms is not None and call.started_at <= call.finished_at


def test_non_app_tool_follows_content_first(basic_server):
    refresh_tools(basic_server)
    call = run_call(basic_server, "add", {"a": 2, "b": 40})
    full = ToolResult.objects.get(tool_call=call)
    assert full.raw["structuredContent"] == {"sum": 42}
    assert full.schema_valid is True
    proj = Projection.objects.get(tool_call=call)
    assert proj.policy == "content-first"
    assert "structuredContent" not in proj.payload
    assert "42" in proj.text


def test_a_tools_own_policy_overrides_its_servers(basic_server):
    """The pipeline reads the tool's policy with the call (tools/runtime/pipeline.py `load`): set on one
    tool, it applies to that tool's calls only."""
    refresh_tools(basic_server)
    Tool.objects.filter(server=basic_server, name="add").update(projection_policy="forward-all")
    call = run_call(basic_server, "add", {"a": 2, "b": 40})
    proj = Projection.objects.get(tool_call=call)
    assert proj.policy == "forward-all"
    assert proj.payload["structuredContent"] == {"sum": 42}
    other = Projection.objects.get(tool_call=run_call(basic_server, "echo", {"text": "hi"}))
    assert other.policy == "content-first"


def test_a_manual_call_leaves_no_celery_result_behind(basic_server):
    """Nothing reads a manual call's task result (the rows are the result), so none is stored."""
    from celery.result import AsyncResult

    call = run_call(basic_server, "echo", {"text": "hi"})
    assert call.status == ToolCall.Status.SUCCEEDED and call.celery_task_id
    assert AsyncResult(call.celery_task_id).state == "PENDING"  # the backend's word for "never heard of it"


def test_unknown_fields_survive_in_the_full_row(basic_server):
    refresh_tools(basic_server)
    call = run_call(basic_server, "unknown_fields")
    raw = ToolResult.objects.get(tool_call=call).raw
    assert raw["x-extra"] == {"keep": "me"}
    assert "x-extra" not in json.dumps(Projection.objects.get(tool_call=call).payload)


def test_invalid_output_is_stored_and_flagged(basic_server):
    refresh_tools(basic_server)
    call = run_call(basic_server, "bad_output")
    full = ToolResult.objects.get(tool_call=call)
    assert full.schema_valid is False
    assert "outputSchema" in full.schema_error
    assert "structuredContent" in full.raw


def test_same_task_delivered_twice_calls_the_tool_once(basic_server):
    from tools.runtime.tasks import execute_tool_call

    refresh_tools(basic_server)
    call = ToolCall.objects.create(server=basic_server, tool_name="echo", arguments={"text": "once"}, origin="manual",
                                   requested_by=basic_server.owner)
    first = execute_tool_call.apply_async(args=[str(call.pk)])
    second = execute_tool_call.apply_async(args=[str(call.pk)])
    outcomes = sorted([first.get(timeout=30), second.get(timeout=30)])
    third = execute_tool_call.apply_async(args=[str(call.pk)]).get(timeout=30)
    assert outcomes == ["skipped", "succeeded"] and third == "skipped"
    assert ToolResult.objects.filter(tool_call=call).count() == 1
    assert Projection.objects.filter(tool_call=call).count() == 1
    sent = wait_for(lambda: RpcFrame.objects.filter(server=basic_server, direction="out", method="tools/call").count(),
                    message="the tools/call frame")
    assert sent == 1


def test_timeout_ends_timed_out_with_a_projection_saying_so(basic_server):
    refresh_tools(basic_server)
    call = run_call(basic_server, "slow", {"seconds": 30})
    assert call.status == "timed_out"
    proj = Projection.objects.get(tool_call=call)
    assert "timed out" in proj.text
    assert not ToolResult.objects.filter(tool_call=call).exists()
    # The worker stays healthy: the next call on the same server works.
    assert run_call(basic_server, "echo", {"text": "after"}).status == "succeeded"


def test_api_tool_call_shape(api, app_server):
    refresh_tools(app_server)
    resp = api.post(f"/api/servers/{app_server.pk}/tools/show_marker/call/", {"arguments": {"label": "api"}})
    assert resp.status_code == 202
    pk = resp.json()["id"]
    wait_for(lambda: ToolCall.objects.get(pk=pk).is_final, message="the call")
    body = api.get(f"/api/tool-calls/{pk}/").json()
    assert {"id", "status", "arguments", "full", "projection", "tokens_full", "tokens_projection", "duration_ms", "policy"} <= set(body)
    assert body["full"]["structuredContent"]["secret"] == "STRUCTURED-MARKER-api"
    assert "STRUCTURED-MARKER" not in json.dumps(body["projection"])
    assert body["tokens_full"] > body["tokens_projection"] > 0
    assert body["origin"] == "manual" and body["policy"] == "app"


def test_admin_tool_call_list_has_no_n_plus_one(client, admin_user, basic_server):
    refresh_tools(basic_server)
    for i in range(3):
        run_call(basic_server, "echo", {"text": f"n{i}"})
    client.force_login(admin_user)

    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get("/admin/tools/toolcall/").status_code == 200
        return len(ctx.captured_queries)

    few = count()
    for i in range(5):
        run_call(basic_server, "echo", {"text": f"m{i}"})
    assert count() == few


def test_admin_detail_shows_full_and_projection_and_is_read_only(client, admin_user, app_server):
    refresh_tools(app_server)
    call = run_call(app_server, "show_marker", {"label": "adm"})
    client.force_login(admin_user)
    page = client.get(f"/admin/tools/toolcall/{call.pk}/change/").content.decode()
    assert "STRUCTURED-MARKER-adm" in page and "CONTENT-MARKER-adm" in page
    assert 'id="projection-text"' in page and "removed-path" in page
    assert client.get("/admin/tools/toolcall/add/").status_code == 403
    resp = client.post(f"/admin/tools/toolcall/{call.pk}/change/", {"tool_name": "changed"})
    assert resp.status_code == 403
    assert ToolCall.objects.get(pk=call.pk).tool_name == "show_marker"


def test_replay_runs_the_call_again_as_a_new_row(api, client, admin_user, basic_server):
    refresh_tools(basic_server)
    original = run_call(basic_server, "echo", {"text": "again"})
    resp = api.post(f"/api/tool-calls/{original.pk}/replay/")
    assert resp.status_code == 202
    replay = wait_for(lambda: ToolCall.objects.filter(pk=resp.json()["id"], status="succeeded").first(), message="the replay")
    assert replay.origin == "replay" and replay.replay_of_id == original.pk and replay.arguments == {"text": "again"}
    assert ToolResult.objects.get(tool_call=replay).raw["content"] == ToolResult.objects.get(tool_call=original).raw["content"]
    client.force_login(admin_user)
    client.post("/admin/tools/toolcall/", {"action": "replay", "_selected_action": [str(original.pk)]})
    assert ToolCall.objects.filter(replay_of=original).count() == 2


def test_admin_filters_by_duration_and_tokens_saved(client, admin_user, app_server):
    refresh_tools(app_server)
    call = run_call(app_server, "show_marker", {"label": "f"})
    client.force_login(admin_user)
    # The call's own bucket (a loaded CI machine can take it past "fast"), and one it is not in.
    bucket = next(name for name, (low, high) in DurationFilter.BUCKETS.items()
                  if (low is None or call.duration_ms >= low) and (high is None or call.duration_ms < high))
    page = client.get("/admin/tools/toolcall/", {"saved": "some", "duration": bucket, "origin__exact": "manual"}).content.decode()
    assert str(call.pk) in page
    other = "very-slow" if bucket != "very-slow" else "fast"
    assert str(call.pk) not in client.get("/admin/tools/toolcall/", {"duration": other}).content.decode()
    none = client.get("/admin/tools/toolcall/", {"saved": "none"}).content.decode()
    assert str(call.pk) not in none


def test_a_database_error_while_storing_the_result_is_retried_and_a_lasting_one_is_swept(basic_server, monkeypatch):
    """Issue 16.1: a ToolCall must never stay `running` because storing its result failed."""
    from datetime import timedelta

    from django.db import OperationalError
    from django.utils import timezone

    from tools.runtime import pipeline
    from tools.runtime.projection import Outcome
    from tools.runtime.sweep import sweep_calls

    monkeypatch.setattr(pipeline.time, "sleep", lambda seconds: None)
    real_write = pipeline._write_rows
    failures = {"left": 2}

    def flaky_write(*args, **kwargs):
        if failures["left"]:
            failures["left"] -= 1
            raise OperationalError("database is locked")
        return real_write(*args, **kwargs)

    def running_call(text: str) -> ToolCall:
        return ToolCall.objects.create(server=basic_server, tool_name="echo", origin="manual", arguments={"text": text},
                                       status=ToolCall.Status.RUNNING, started_at=timezone.now(), attempts=1)

    raw = {"content": [{"type": "text", "text": "kept"}]}
    outcome = Outcome(payload=raw, text="kept", policy="content-first")
    monkeypatch.setattr(pipeline, "_write_rows", flaky_write)
    call = running_call("locked twice")
    assert pipeline._finish(pipeline.load(call.pk), ToolCall.Status.SUCCEEDED, outcome, raw) is True
    call.refresh_from_db()
    assert call.status == "succeeded" and ToolResult.objects.get(tool_call=call).raw == raw
    assert Projection.objects.filter(tool_call=call).count() == 1

    # The database stays unusable: the error reaches the task (which Celery retries), and the call
    # does not stay `running`: past its lease the sweep runs it again, at the limit it fails it.
    failures["left"] = 10_000
    stuck = running_call("locked for good")
    with pytest.raises(OperationalError):
        pipeline._finish(pipeline.load(stuck.pk), ToolCall.Status.SUCCEEDED, outcome, raw)
    monkeypatch.setattr(pipeline, "_write_rows", real_write)
    ToolCall.objects.filter(pk=stuck.pk).update(attempts=pipeline.MAX_ATTEMPTS,
                                                started_at=timezone.now() - legacy_lease() - timedelta(seconds=1))
    assert sweep_calls().ended == 1
    stuck.refresh_from_db()
    assert stuck.status == "failed" and "stopped before it finished" in stuck.error
    assert "stopped before it finished" in Projection.objects.get(tool_call=stuck).text


def test_a_result_with_nul_characters_is_stored_on_every_database(basic_server):
    """PostgreSQL's jsonb and text refuse U+0000; a tool may still return it (C strings, binary
    data read as text). The call must end with its result, not fail to store it."""
    refresh_tools(basic_server)
    call = run_call(basic_server, "echo", {"text": "before\u0000after"})
    assert call.status == "succeeded", call.error
    # SQLite keeps it; PostgreSQL stores U+FFFD instead (inspector/pg_nul.py), from the
    # arguments on, so the server echoed U+FFFD there.
    expected = "before\ufffdafter" if connection.vendor == "postgresql" else "before\u0000after"
    assert ToolCall.objects.get(pk=call.pk).arguments == {"text": expected}
    assert ToolResult.objects.get(tool_call=call).raw["content"][0]["text"] == expected
    projection = Projection.objects.get(tool_call=call)
    assert projection.payload["content"][0]["text"] == expected and expected in projection.text
    frames = RpcFrame.objects.filter(server=basic_server, method="tools/call")
    wait_for(lambda: {f.direction for f in frames} == {"in", "out"}, timeout=10, message="both frames in the log (written in batches)")
