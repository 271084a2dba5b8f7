"""The call API's two hot reads as SQL through Django's connection (issue 31.3).

py-spy under bench/hot_path.py (`--gil`): compiling the ORM's queries was most of daphne's
Python time per `POST …/call/?wait=`: starting the call ~29% (the visible server, then its
tool) and reading the finished call ~34% (a select_related join with a Case/Cast annotation).
Each SELECT here is built once from the models' own table and column names; its rows become
model instances with every field converted as the ORM converts it (inspector/sql_columns.py),
so what the view does with them afterwards is unchanged.
"""

from __future__ import annotations

import functools
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Model
from django.http import Http404

from inspector.sql_columns import Columns
from tools.models import Projection, Server, ServerLogMessage, ServerRequest, Tool, ToolCall, ToolResult


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


def _column(model: type[Model], name: str) -> str:
    return _q(model._meta.get_field(name).column)


def _encrypted(field) -> bool:
    return type(field).__name__.startswith("Encrypted")


@functools.cache
def _start_query() -> tuple[Columns, Columns, str]:
    # The server's encrypted fields (env, headers, URL secrets) are left deferred: starting a
    # call reads none of them, and each would be decrypted on every request.
    server = Columns(Server, "s", keep=lambda f: not _encrypted(f))
    tool = Columns(Tool, "t", keep=lambda f: f.name in ("server", "name", "is_app", "definition"))
    sql = (
        f"SELECT {server.sql}, {tool.sql} FROM {_q(Server._meta.db_table)} s "
        f"LEFT JOIN {_q(Tool._meta.db_table)} t ON t.{_column(Tool, 'server')} = s.{_q(Server._meta.pk.column)} "
        f"AND t.{_column(Tool, 'name')} = %s "
        f"WHERE s.{_q(Server._meta.pk.column)} = %s AND (s.{_column(Server, 'owner')} = %s OR s.{_column(Server, 'shared')})"
    )
    return server, tool, sql


def visible_server_and_tool(user, server_pk: int, tool_name: str) -> tuple[Server, Tool | None]:
    """A server the user may see (theirs or shared: `Server.objects.visible_to`) and its tool
    named `tool_name` (None if it has none), in one query; someone else's private server is a 404."""
    if not user.is_authenticated:
        raise Http404("No Server matches the given query.")
    server_columns, tool_columns, sql = _start_query()
    with connection.cursor() as cursor:
        cursor.execute(sql, [tool_name, server_pk, user.pk])
        row = cursor.fetchone()
    if row is None:
        raise Http404("No Server matches the given query.")
    server = server_columns.build(row[: len(server_columns)])
    tool_values = row[len(server_columns):]
    tool = tool_columns.build_or_none(tool_values)
    if tool is not None:
        Tool.server.field.set_cached_value(tool, server)
    return server, tool


@functools.cache
def _finished_query() -> tuple[Columns, Columns, Columns, str]:
    call = Columns(ToolCall, "c")
    result = Columns(ToolResult, "r", keep=lambda f: f.name != "raw")  # the raw result is never read whole here
    projection = Columns(Projection, "p")
    call_id = _q(ToolCall._meta.pk.column)
    sql = (
        f"SELECT {call.sql}, {result.sql}, {projection.sql}, "
        f"CASE WHEN r.{_column(ToolResult, 'size_bytes')} <= %s THEN CAST(r.{_column(ToolResult, 'raw')} AS text) END, "
        f"EXISTS (SELECT 1 FROM {_q(ServerLogMessage._meta.db_table)} l WHERE l.{_column(ServerLogMessage, 'tool_call')} = c.{call_id}), "
        f"EXISTS (SELECT 1 FROM {_q(ServerRequest._meta.db_table)} q WHERE q.{_column(ServerRequest, 'tool_call')} = c.{call_id}) "
        f"FROM {_q(ToolCall._meta.db_table)} c "
        f"LEFT JOIN {_q(ToolResult._meta.db_table)} r ON r.{_column(ToolResult, 'tool_call')} = c.{call_id} "
        f"LEFT JOIN {_q(Projection._meta.db_table)} p ON p.{_column(Projection, 'tool_call')} = c.{call_id} "
        f"WHERE c.{call_id} = %s"
    )
    return call, result, projection, sql


def call_with_results(pk: Any) -> tuple[ToolCall | None, str | None]:
    """A call with its full result's row (without the result itself) and its projection, and the
    result's stored JSON text when it is at most WS_INLINE_RESULT_MAX_BYTES, in one query; also
    whether the call has log messages and server requests (`has_logs`, `has_server_requests` on
    the call), so a page need not ask for what is not there."""
    call_columns, result_columns, projection_columns, sql = _finished_query()
    with connection.cursor() as cursor:
        cursor.execute(sql, [settings.WS_INLINE_RESULT_MAX_BYTES, ToolCall._meta.pk.get_db_prep_value(pk, connection)])
        row = cursor.fetchone()
    if row is None:
        return None, None
    call = call_columns.build(row[: len(call_columns)])
    at = len(call_columns)
    for descriptor, columns in ((ToolCall.full_result, result_columns), (ToolCall.projection, projection_columns)):
        values = row[at: at + len(columns)]
        at += len(columns)
        descriptor.related.set_cached_value(call, columns.build_or_none(values))
    call.has_logs, call.has_server_requests = bool(row[at + 1]), bool(row[at + 2])
    return call, row[at]
