"""What a call's hot path reads, and in how many queries (issue 31.3): the worker's `load`
(SQL through Django's connection, not the ORM's compiled join), the API's start and finished
reads (tools/call_sql.py) and an API token's user with its role. Behaviour only: the time each saves is measured by bench/hot_path.py, not here."""

from __future__ import annotations

import json

import pytest
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection
from django.http import Http404
from django.test.utils import CaptureQueriesContext

from inspector.models import ApiToken
from inspector.settings import _database
from inspector.roles import VIEWER, is_viewer, set_role
from tools import call_sql
from tools.models import Projection, Server, ServerLogMessage, ServerRequest, Tool, ToolCall, ToolResult
from tools.runtime import pipeline
from tools.runtime.events import tool_call_json

pytestmark = pytest.mark.django_db


def _call(server: Server, user, tool_name: str) -> ToolCall:
    return ToolCall.objects.create(server=server, server_name=server.name, tool_name=tool_name, arguments={"text": "é"},
                                   origin=ToolCall.Origin.MANUAL, requested_by=user, timeout_s=7)


def test_load_reads_the_call_its_tool_and_its_server_in_one_query(user):
    server = Server.objects.create(name="s", transport="streamable_http", url="http://127.0.0.1:9/mcp", owner=user,
                                   headers={"Authorization": "Bearer k"})
    Tool.objects.create(server=server, name="echo", output_schema={"type": "object", "required": ["x"]},
                        is_app=True, projection_policy="strict")
    Tool.objects.create(server=server, name="other", is_app=False)
    call = _call(server, user, "echo")

    with CaptureQueriesContext(connection) as queries:
        loaded = pipeline.load(str(call.pk))
        assert loaded.server.name == "s" and loaded.server.headers == {"Authorization": "Bearer k"}  # no second query
    assert len(queries) == 1
    assert loaded.pk == call.pk and loaded.arguments == {"text": "é"} and loaded.status == ToolCall.Status.QUEUED
    assert loaded.queued_at == call.queued_at and loaded.timeout_s == 7
    assert loaded.tool_output_schema == {"type": "object", "required": ["x"]}
    assert bool(loaded.tool_is_app) is True and loaded.tool_policy == "strict"


def test_load_of_a_call_whose_tool_is_gone_or_which_does_not_exist(user):
    server = Server.objects.create(name="s", transport="streamable_http", url="http://127.0.0.1:9/mcp", owner=user)
    call = _call(server, user, "vanished")
    loaded = pipeline.load(call.pk)
    assert loaded.tool_output_schema is None and not loaded.tool_is_app and loaded.tool_policy is None
    assert pipeline.load("00000000-0000-0000-0000-000000000000") is None


@pytest.mark.parametrize("role", ["viewer", "member"])
def test_a_token_tells_its_users_role_in_the_same_query(django_user_model, role):
    person = django_user_model.objects.create_user(f"{role}-person")
    if role == VIEWER:
        set_role(person, VIEWER)
    key = ApiToken.issue(person, "t")[1]
    ApiToken.authenticate(key)  # the first use writes last_used_at; the next ones only read

    with CaptureQueriesContext(connection) as queries:
        found = ApiToken.authenticate(key)
        assert is_viewer(found) is (role == VIEWER)
    assert len(queries) == 1
    assert found.pk == person.pk


def test_the_start_reads_a_visible_server_and_its_tool_in_one_query(user, other_user):
    server = Server.objects.create(name="mine", transport="stdio", command="python", env={"SECRET": "s3"}, owner=user,
                                   call_timeout=42, set_aside_tools=[{"name": "odd", "reason": "bad schema"}])
    Tool.objects.create(server=server, name="echo", is_app=True, definition={"name": "echo", "execution": {"taskSupport": "required"}})
    Tool.objects.create(server=server, name="other")
    shared = Server.objects.create(name="team", transport="streamable_http", url="http://h/mcp", owner=other_user, shared=True)
    private = Server.objects.create(name="theirs", transport="streamable_http", url="http://h/mcp", owner=other_user)

    with CaptureQueriesContext(connection) as queries:
        found, tool = call_sql.visible_server_and_tool(user, server.pk, "echo")
        assert (found.pk, found.name, found.enabled, found.call_timeout) == (server.pk, "mine", True, 42)
        assert found.set_aside_tools == [{"name": "odd", "reason": "bad schema"}]
        assert (tool.name, tool.is_app, tool.task_support, tool.server is found) == ("echo", True, "required", True)
    assert len(queries) == 1
    assert found.env == {"SECRET": "s3"}  # left deferred, read (and decrypted) when asked for
    assert call_sql.visible_server_and_tool(user, server.pk, "missing")[1] is None
    assert call_sql.visible_server_and_tool(user, shared.pk, "echo")[0].pk == shared.pk
    for pk in (private.pk, 999999):
        with pytest.raises(Http404):
            call_sql.visible_server_and_tool(user, pk, "echo")


def test_the_finished_read_is_the_orms_call_in_one_query_with_small_text_inline(user, settings):
    server = Server.objects.create(name="s", transport="streamable_http", url="http://127.0.0.1:9/mcp", owner=user)
    call = _call(server, user, "echo")
    ToolCall.objects.filter(pk=call.pk).update(status=ToolCall.Status.SUCCEEDED)
    ToolResult.objects.create(tool_call=call, raw={"content": [{"type": "text", "text": "é"}]}, size_bytes=48, tokens=3,
                              schema_valid=True)
    Projection.objects.create(tool_call=call, payload={"content": "é"}, text="é", policy="strict", removed=["$.x"],
                              size_bytes=20, tokens=1)
    orm = ToolCall.objects.select_related("full_result", "projection").get(pk=call.pk)

    with CaptureQueriesContext(connection) as queries:
        read, inline = call_sql.call_with_results(str(call.pk))
        shown = json.dumps(tool_call_json(read, detail=True), cls=DjangoJSONEncoder)
    assert len(queries) == 1
    assert shown == json.dumps(tool_call_json(orm, detail=True), cls=DjangoJSONEncoder)
    assert json.loads(inline) == {"content": [{"type": "text", "text": "é"}]}
    assert (read.has_logs, read.has_server_requests) == (False, False)  # the page then asks for neither
    ServerLogMessage.objects.create(server=server, tool_call=call, level="info", data="hi")
    assert (call_sql.call_with_results(call.pk)[0].has_logs, call_sql.call_with_results(call.pk)[0].has_server_requests) == (True, False)
    ServerRequest.objects.create(tool_call=call, server=server, kind="roots", method="roots/list")
    assert call_sql.call_with_results(call.pk)[0].has_server_requests is True
    settings.WS_INLINE_RESULT_MAX_BYTES = 47  # the result is bigger now: never read here
    assert call_sql.call_with_results(call.pk)[1] is None

    running = _call(server, user, "echo")
    read, inline = call_sql.call_with_results(running.pk)
    assert read.related_or_none("full_result") is None and read.related_or_none("projection") is None and inline is None
    assert call_sql.call_with_results("00000000-0000-0000-0000-000000000000") == (None, None)


def test_postgresql_binds_on_the_server_and_prepares_a_statement_run_again(user):
    """Server-side binding with `prepare_threshold` (inspector/settings.py): after a few runs on a
    connection, the hot path's statements run as prepared statements. Planning them on every run
    was most of PostgreSQL's CPU per call (bench/hot_path.py). The options a PostgreSQL URL gets are
    checked on either database; on PostgreSQL, also what the server holds."""
    options = _database("postgres://u@127.0.0.1:5432/db")["OPTIONS"]
    assert options["server_side_binding"] is True and options["prepare_threshold"] == 5
    assert "prepare_threshold" not in _database("")["OPTIONS"]  # SQLite's module keeps compiled statements itself
    if connection.vendor != "postgresql":
        return
    server = Server.objects.create(name="s", transport="streamable_http", url="http://127.0.0.1:9/mcp", owner=user)
    call = _call(server, user, "echo")
    for _ in range(6):
        assert pipeline.load(str(call.pk)).tool_name == "echo"
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements WHERE from_sql = false")
        prepared = [row[0] for row in cursor.fetchall()]
    assert any(statement.startswith(pipeline._load_query()[2].split(" FROM ")[0][:40]) for statement in prepared), prepared
