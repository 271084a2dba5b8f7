"""PostgreSQL with parameters bound on the server (inspector/settings.py, inspector/postgresql/):
at most 65,535 parameters a statement, so every batch Django makes must fit, and a pooler that
cannot carry prepared statements can turn them off. Run on both suites: on SQLite the deletion
goes through Django's SQLite batching, on PostgreSQL through ours."""

from __future__ import annotations

import uuid

from django.db import connection

from chat.models import Conversation, Turn
from inspector.postgresql.base import MAX_QUERY_PARAMS
from inspector.settings import _database, _prepare_threshold


def test_a_postgresql_url_gets_the_backend_that_batches_within_the_parameter_limit():
    db = _database("postgres://u@127.0.0.1:5432/db")
    assert db["ENGINE"] == "inspector.postgresql"
    assert _database("")["ENGINE"] == "django.db.backends.sqlite3"
    assert (_prepare_threshold(""), _prepare_threshold("off"), _prepare_threshold(" None "), _prepare_threshold("2")) \
        == (5, None, None, 2)
    if connection.vendor == "postgresql":
        assert connection.ops.bulk_batch_size(["turn"], range(100_000)) == MAX_QUERY_PARAMS
        assert connection.ops.bulk_batch_size(["a", "b", "c"], range(100_000)) == MAX_QUERY_PARAMS // 3
        assert connection.ops.bulk_batch_size(["a"], range(10)) == 10


def test_a_conversation_with_more_turns_than_a_statement_takes_parameters_is_deleted(user):
    """An imported conversation may hold 100,000 turns. Deleting it makes Django look for the
    messages of its turns (`Message.turn` is SET_NULL): with Django's stock PostgreSQL backend
    that was one `turn_id IN (…)` with a parameter per turn, refused by PostgreSQL past 65,535."""
    conversation = Conversation.objects.create(owner=user, model="openai/gpt-4o-mini")
    Turn.objects.bulk_create([Turn(conversation=conversation) for _ in range(MAX_QUERY_PARAMS + 500)])
    assert Turn.objects.filter(conversation=conversation).count() == MAX_QUERY_PARAMS + 500
    conversation.delete()
    assert not Turn.objects.filter(conversation_id=conversation.pk).exists()


def test_an_in_lookup_longer_than_a_statement_takes_parameters_finds_its_rows(user):
    """`pk__in=` 70,000 ids (a UUID key), and a relation's `__in` (an integer key): on PostgreSQL
    one array parameter each (inspector/postgresql/lookups.py); short lists keep Django's SQL."""
    from tools.models import Server, ToolCall

    server = Server.objects.create(name="s", transport="streamable_http", url="http://127.0.0.1:9/mcp", owner=user)
    calls = ToolCall.objects.bulk_create([ToolCall(server=server, server_name="s", tool_name=f"t{i}", arguments={},
                                                   requested_by=user) for i in range(3)])
    wanted = [uuid.uuid4() for _ in range(70_000)] + [calls[0].pk, calls[2].pk, None, calls[0].pk]
    assert set(ToolCall.objects.filter(pk__in=wanted).values_list("tool_name", flat=True)) == {"t0", "t2"}
    assert ToolCall.objects.exclude(pk__in=wanted).get().tool_name == "t1"
    servers = [server.pk] + list(range(10**6, 10**6 + 70_000))
    assert ToolCall.objects.filter(server__in=servers).count() == 3
    assert ToolCall.objects.filter(server__in=[None] * 2000).count() == 0
    short = str(ToolCall.objects.filter(pk__in=[calls[1].pk]).query)
    assert "IN (" in short and "ANY(" not in short
