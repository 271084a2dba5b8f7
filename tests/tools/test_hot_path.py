"""What a call's hot path reads, and in how many queries (issue 31.3): the worker's `load`
(SQL through Django's connection, not the ORM's compiled join) and an API token's user with
its role. Behaviour only: the time each saves is measured by bench/hot_path.py, not here."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from inspector.models import ApiToken
from inspector.roles import VIEWER, is_viewer, set_role
from tools.models import Server, Tool, ToolCall
from tools.runtime import pipeline

pytestmark = pytest.mark.django_db


def _call(server: Server, user, tool_name: str) -> ToolCall:
    return ToolCall.objects.create(server=server, server_name=server.name, tool_name=tool_name, arguments={"text": "é"},
                                   origin=ToolCall.Origin.MANUAL, requested_by=user, timeout_s=7)


def test_load_reads_the_call_its_tool_and_its_server_in_two_queries(user):
    server = Server.objects.create(name="s", transport="streamable_http", url="http://127.0.0.1:9/mcp", owner=user)
    Tool.objects.create(server=server, name="echo", output_schema={"type": "object", "required": ["x"]},
                        is_app=True, projection_policy="strict")
    Tool.objects.create(server=server, name="other", is_app=False)
    call = _call(server, user, "echo")

    with CaptureQueriesContext(connection) as queries:
        loaded = pipeline.load(str(call.pk))
        assert loaded.server.name == "s"  # already loaded: no third query
    assert len(queries) == 2
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
