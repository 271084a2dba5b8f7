"""The tool-call pipeline: run one queued ToolCall in a worker and store its two result rows.

Every tool call, whoever asked (the LLM, a person, a widget, a replay), goes through
`execute()`. It is idempotent under redelivery (`acks_late`): once a projection exists the
tool is never called again and no second row is written.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from datetime import timedelta
from typing import Any

import jsonschema
from django.conf import settings
from django.db import IntegrityError, InterfaceError, OperationalError, close_old_connections, connection, transaction
from django.utils import timezone

from inspector import sql_columns, tracing
from inspector.sql_columns import Columns
from tools import callers
from tools.mcp import tokens, tool_headers
from tools.mcp.errors import CallTimeout
from tools.mcp.url_secrets import redact
from tools.mcp.wire_result import LargeJSON, WireResult
from tools.models import Projection, ResourceSubscription, Server, Tool, ToolCall
from tools.runtime import deadlines, events, input_rounds, live_calls, remote, stored_result
from tools.runtime.projection import Outcome, project

log = logging.getLogger(__name__)


def validate_output(schema: dict | None, raw: dict[str, Any]) -> tuple[bool | None, str]:
    """Check structuredContent against the tool's outputSchema; a failure is recorded, never fatal."""
    if not schema or raw.get("isError"):
        return None, ""
    if "structuredContent" not in raw:
        return False, "The tool declares an outputSchema but the result has no structuredContent."
    structured = raw["structuredContent"]
    if isinstance(structured, LargeJSON):  # a large result read lean (tools/mcp/wire_result.py)
        limit = settings.OUTPUT_SCHEMA_CHECK_MAX_BYTES
        if structured.wire_bytes > limit:
            return None, (f"Not checked against the outputSchema: its structuredContent is {structured.wire_bytes:,} "
                          f"bytes, over OUTPUT_SCHEMA_CHECK_MAX_BYTES ({limit:,}).")
        structured = structured.decode()
    try:
        jsonschema.validate(structured, schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        return False, f"structuredContent does not match the outputSchema at {where}: {exc.message}"
    except jsonschema.SchemaError as exc:
        return False, f"The tool's outputSchema is itself invalid: {exc.message}"
    return True, ""


class CallResting(Exception):
    """The call waits for someone to answer the server's request for input (tools/runtime/input_rounds.py)."""


class CallInProgress(Exception):
    """Another delivery of this task holds the call's lease; look again when it may have expired."""

    def __init__(self, retry_in: float):
        super().__init__(f"another delivery is running this call; retry in {retry_in:.0f} s")
        self.retry_in = retry_in


def load(tool_call_id) -> ToolCall | None:
    """The call, its server and what the pipeline needs of its tool, in one query.

    Written as SQL through Django's connection (issue 31.3): the ORM compiled its version of this
    query (a FilteredRelation join on (server, name)) on every call, and that was the worker's
    largest single cost per call (py-spy under bench/hot_path.py: 28% of the worker's Python time);
    then the server's own read was the next (~10%). The call's and the server's columns become
    instances as the ORM makes them (inspector/sql_columns.py); the tool's three columns are
    attributes of the call (`tool_is_app`, `tool_policy`, `tool_output_schema`, `tool_input_schema`),
    and whether anyone subscribed to one of the server's resources is `server.has_subscriptions`
    (most servers have none: their calls then skip that query).
    """
    call_columns, server_columns, sql = _load_query()
    with connection.cursor() as cursor:
        cursor.execute(sql, [ToolCall._meta.pk.get_db_prep_value(tool_call_id, connection)])
        row = cursor.fetchone()
    if row is None:
        return None
    call = call_columns.build(row[: len(call_columns)])
    server = server_columns.build_or_none(row[len(call_columns): len(call_columns) + len(server_columns)])
    call.tool_is_app, call.tool_policy, output_schema, input_schema, subscribed = row[len(call_columns) + len(server_columns):]
    if server is not None:
        server.has_subscriptions = bool(subscribed)  # remote.subscription_uris reads them only then
    # Extra columns: no JSON field converts them.
    call.tool_output_schema = json.loads(output_schema) if isinstance(output_schema, (str, bytes)) else output_schema
    call.tool_input_schema = json.loads(input_schema) if isinstance(input_schema, (str, bytes)) else input_schema
    ToolCall.server.field.set_cached_value(call, server)
    return call


@functools.cache
def _load_query() -> tuple[Columns, Columns, str]:
    """The SELECT of `load`, built once from the models' own table and column names."""
    c, t, s, rs = ToolCall._meta, Tool._meta, Server._meta, ResourceSubscription._meta
    call_columns, server_columns = Columns(ToolCall, "c"), Columns(Server, "s")

    def col(meta, name: str) -> str:
        return connection.ops.quote_name(meta.get_field(name).column)

    q = connection.ops.quote_name
    sql = (
        f"SELECT {call_columns.sql}, {server_columns.sql}, t.{col(t, 'is_app')}, t.{col(t, 'projection_policy')}, "
        f"t.{col(t, 'output_schema')}, t.{col(t, 'input_schema')}, "
        f"EXISTS (SELECT 1 FROM {q(rs.db_table)} rs WHERE rs.{col(rs, 'server')} = c.{col(c, 'server')}) "
        f"FROM {q(c.db_table)} c "
        f"LEFT JOIN {q(s.db_table)} s ON s.{q(s.pk.column)} = c.{col(c, 'server')} "
        f"LEFT JOIN {q(t.db_table)} t ON t.{col(t, 'server')} = c.{col(c, 'server')} AND t.{col(t, 'name')} = c.{col(c, 'tool_name')} "
        f"WHERE c.{q(c.pk.column)} = %s"
    )
    return call_columns, server_columns, sql


def token_model(call: ToolCall) -> str:
    """The model whose tokenizer counts this call's tokens: its caller's (a conversation's), else TOKEN_COUNT_MODEL."""
    return callers.model(call) or tokens.default_model()


def _claim(tool_call_id) -> ToolCall | None:
    """Mark the call running, unless it is finished or another delivery is running it right now.

    The claim is one conditional UPDATE (queued, or running past its deadline), so two
    deliveries can never both win; it also sets the call's deadline (tools/runtime/deadlines.py). A
    second delivery before the deadline raises CallInProgress and the task retries: if the first
    delivery's worker died meanwhile, a retry after the deadline takes the call over.
    """
    now = timezone.now()
    call = load(tool_call_id)  # first: the deadline comes from the call's own timeout
    if call is None:
        log.warning("tool call %s does not exist", tool_call_id)
        return None
    deadline = deadlines.deadline_on_claim(now, call.timeout_s)
    expired, expired_params = deadlines.expired_sql(now)
    with connection.cursor() as cursor:
        cursor.execute(_claim_sql().format(expired=expired), [
            ToolCall.Status.RUNNING, _datetime(now), _datetime(deadline),
            ToolCall._meta.pk.get_db_prep_value(call.pk, connection), ToolCall.Status.QUEUED, *expired_params,
        ])
        won = cursor.fetchone()
    if won:
        call.status, call.started_at, call.deadline_at, call.attempts = ToolCall.Status.RUNNING, now, deadline, won[0]
        # Its result rows are written with the final status, so a call just claimed has none:
        # said here, serialising it for the "running" event reads nothing more.
        ToolCall.full_result.related.set_cached_value(call, None)
        ToolCall.projection.related.set_cached_value(call, None)
        return call
    call = load(tool_call_id)  # lost: as it is now, not as it was before the UPDATE
    if call is None:
        return None
    if call.status == ToolCall.Status.RUNNING and call.started_at:
        deadline = call.deadline_at or call.started_at + deadlines.legacy_lease()
        remaining = (deadline - now).total_seconds()
        raise CallInProgress(min(max(remaining, 0.5), 5.0))
    if call.status == ToolCall.Status.INPUT_REQUIRED:
        raise CallResting()
    if call.status == ToolCall.Status.QUEUED:
        # Queued again between the UPDATE and this read (an answer resumed a resting call):
        # not finished, so the task retries; returning here would let a chord move on.
        raise CallInProgress(0.5)
    return None  # finished, or cancelled before it started


RUNNING_ONLY = (ToolCall.Status.RUNNING,)


# The claim's UPDATE and the final status's, as SQL (issue 31.3): the ORM compiled each on every
# call (py-spy under bench/hot_path.py: the claim's UPDATE alone was ~12% of the worker's Python time).
@functools.cache
def _claim_sql() -> str:
    c, q = ToolCall._meta, connection.ops.quote_name
    return (
        f"UPDATE {q(c.db_table)} SET {_col('status')} = %s, {_col('started_at')} = %s, "
        f"{_col('attempts')} = {_col('attempts')} + 1, {_col('deadline_at')} = %s "
        f"WHERE {q(c.pk.column)} = %s AND ({_col('status')} = %s OR {{expired}}) RETURNING {_col('attempts')}"
    )


@functools.cache
def _final_status_sql(statuses: int) -> str:
    c, q = ToolCall._meta, connection.ops.quote_name
    return (
        f"UPDATE {q(c.db_table)} SET {_col('status')} = %s, {_col('error')} = %s, {_col('finished_at')} = %s, "
        f"{_col('duration_ms')} = %s WHERE {q(c.pk.column)} = %s AND {_col('status')} IN ({', '.join(['%s'] * statuses)})"
    )


def _col(name: str) -> str:
    return connection.ops.quote_name(ToolCall._meta.get_field(name).column)


def _datetime(value):
    return connection.ops.adapt_datetimefield_value(value)


def _serialise(call: ToolCall, raw: dict) -> tuple[Any, int, int]:
    """The full result as JSON text, with its size in bytes and tokens: the one serialisation
    of it, measured here and stored as it is (a 40 MB result must not be copied again). A large
    result read lean is stored as the bytes its server sent (tools/mcp/wire_result.py)."""
    if isinstance(raw, WireResult):
        return raw.wire, len(raw.wire), tokens.estimate_utf8(raw.wire, token_model(call))
    text = stored_result.serialise(raw)
    return text, stored_result.utf8_length(text), tokens.estimate(text, token_model(call))


def _write_rows(call: ToolCall, status: str, outcome: Outcome, raw: dict | None, schema: tuple[bool | None, str],
                serialised: tuple[Any, int, int], error: str, ending: tuple[str, ...]) -> bool:
    now = timezone.now()
    # The call's own start: the row was claimed with it (a call ended before it started has none).
    duration = round((now - (call.started_at or now)).total_seconds() * 1000, 2)
    with transaction.atomic():
        # The final status first, only from a status this delivery may end: one statement that
        # both takes the row's lock and says whether the rows are this delivery's to write.
        with connection.cursor() as cursor:
            cursor.execute(_final_status_sql(len(ending)), [
                status, error, _datetime(now), duration, ToolCall._meta.pk.get_db_prep_value(call.pk, connection), *ending,
            ])
            won = cursor.rowcount
        if not won:
            current = ToolCall.objects.select_for_update().filter(pk=call.pk).values("status", "error").first()
            if current is None or current["status"] != ToolCall.Status.CANCELLED:
                return False  # finished by another delivery, or ended by the sweep
            if Projection.objects.filter(tool_call_id=call.pk).exists():
                return False
            # The result is kept as evidence, but the model is told what the user did.
            status, error = ToolCall.Status.CANCELLED, current["error"]
            note = "The user cancelled this tool call; its result was not used."
            outcome = Outcome(payload={"content": [{"type": "text", "text": note}], "isError": True}, text=note,
                              policy="cancelled", removed=[{"path": "(all)", "reason": "cancelled by the user"}])
            ToolCall.objects.filter(pk=call.pk).update(finished_at=now, duration_ms=duration)
        full = None
        if raw is not None:
            text, size_bytes, size_tokens = serialised
            full = stored_result.create(
                call, text, size_bytes=size_bytes, tokens=size_tokens, schema_valid=schema[0], schema_error=schema[1],
            )
            full.raw = raw
        projection = Projection(
            tool_call=call, payload=outcome.payload, text=outcome.text, policy=outcome.policy, removed=outcome.removed,
            truncated=outcome.truncated, size_bytes=outcome.size_bytes, tokens=outcome.tokens,
        )
        sql_columns.insert(projection)
        # What is published is what was just written: no second read.
        call.status, call.error, call.finished_at, call.duration_ms = status, error, now, duration
        if full is not None:
            call.full_result = full
        call.projection = projection
        pushed = events.pushed_text(serialised[0], serialised[1]) if full is not None else None
        transaction.on_commit(lambda: publish_result(call, pushed))
    return True


FINISH_ATTEMPTS = 5


def _finish(call: ToolCall, status: str, outcome: Outcome, raw: dict | None, error: str = "",
            ending: tuple[str, ...] = RUNNING_ONLY) -> bool:
    """Write the full row, the projection row and the final status in one transaction.

    A database error here (SQLite "database is locked", a dropped PostgreSQL connection) is
    retried with backoff: the result is in hand and must not be lost. If the database stays
    unusable the error propagates, the task is retried, and the sweep ends the call at its
    deadline whatever happens.
    """
    schema = validate_output(call.tool_output_schema, raw) if raw is not None else (None, "")
    serialised = _serialise(call, raw) if raw is not None else ("", 0, 0)
    for attempt in range(FINISH_ATTEMPTS):
        try:
            return _write_rows(call, status, outcome, raw, schema, serialised, error, ending)
        except IntegrityError:
            if Projection.objects.filter(tool_call_id=call.pk).exists():
                return False  # another delivery wrote the rows first
            raise  # anything else refused the rows: not to be mistaken for that
        except (OperationalError, InterfaceError) as exc:
            if attempt == FINISH_ATTEMPTS - 1:
                raise
            log.warning("storing the result of tool call %s failed (%s); retrying", call.pk, exc)
            close_old_connections()
            time.sleep(0.2 * 2**attempt)
    return False


def failure_outcome(status: str, message: str) -> Outcome:
    """What the model is told of a call that ended without a result."""
    # The model gets the first line only: a server's stderr tail is for the people debugging it.
    first_line = redact(message).strip().splitlines()[0] if message.strip() else "no details"
    text = f"Tool call {'timed out' if status == ToolCall.Status.TIMED_OUT else 'failed'}: {first_line}"
    return Outcome(payload={"content": [{"type": "text", "text": text}], "isError": True}, text=text, policy="error")


MAX_ATTEMPTS = 3


def end_call(tool_call_id, status: str, message: str, ending: tuple[str, ...] = ToolCall.ACTIVE) -> bool:
    """End a call that cannot finish by itself (the sweep, a Cancel of a resting call), exactly
    as a failed call ends: a projection telling the model why, the status, and the event. Only
    from the statuses in `ending` (a cancelled call gets the cancelled note)."""
    call = load(tool_call_id)
    if call is None:
        return False
    outcome = failure_outcome(status, message)
    return _finish(call, status, outcome, None, message, ending=ending)


def execute(tool_call_id) -> str:
    """Run the call through the worker's warm connection pool. Returns the final status."""
    call = _claim(tool_call_id)
    if call is None:
        return "skipped"
    # A child of the action that started the call (its stored context), whichever delivery runs it:
    # every MCP request below carries this trace in `_meta.traceparent` (inspector/tracing.py).
    with tracing.span(f"tool call {call.tool_name}", parent=call.trace_context,
                      attributes={"mcp.tool.name": call.tool_name, "inspector.tool_call_id": str(call.pk)}):
        return _execute(call)


def _execute(call: ToolCall) -> str:
    publish_status(call)
    server: Server | None = call.server
    timeout, hard_max = deadlines.call_timeout(call), deadlines.max_timeout()
    if call.origin == ToolCall.Origin.VIEW:
        return _wait_for_view(call, timeout)
    started = time.monotonic()
    try:
        if server is None:
            raise RuntimeError(f"The server “{call.server_name}” was deleted.")
        if not server.enabled:
            raise RuntimeError(f"The server “{server.name}” is disabled.")
        if (aside := tool_headers.find(server, call.tool_name)) is not None:  # a replay of a tool since set aside
            raise RuntimeError(f"The tool {call.tool_name!r} was set aside and cannot be called: {aside['reason']}.")
        if call.attempts > MAX_ATTEMPTS:
            raise RuntimeError(f"Gave up after {MAX_ATTEMPTS} attempts: the worker running this call stopped each time.")
        raw = _call_through_rounds(call, server, timeout, hard_max)
        if raw is None:
            return ToolCall.Status.INPUT_REQUIRED  # it rests until someone answers; no worker waits
    except input_rounds.InputRefused as exc:
        message = str(exc)
        _finish(call, ToolCall.Status.FAILED, failure_outcome(ToolCall.Status.FAILED, message), None, message)
        return ToolCall.Status.FAILED
    except live_calls.Cancelled as exc:
        # The row already says `cancelled` (set by whoever cancelled it): the note for the model is written here.
        _finish(call, ToolCall.Status.CANCELLED, failure_outcome(ToolCall.Status.CANCELLED, str(exc)), None, str(exc))
        return ToolCall.Status.CANCELLED
    except (CallTimeout, TimeoutError) as exc:
        message = redact(str(exc)) or f"no answer within {timeout:g} s"
        _finish(call, ToolCall.Status.TIMED_OUT, failure_outcome(ToolCall.Status.TIMED_OUT, message), None, message)
        return ToolCall.Status.TIMED_OUT
    except Exception as exc:  # noqa: BLE001 - any failure must end the call with a clear error
        message = redact(str(exc)) or exc.__class__.__name__
        log.info("tool call %s failed after %.0f ms: %s", call.pk, (time.monotonic() - started) * 1000, message)
        _finish(call, ToolCall.Status.FAILED, failure_outcome(ToolCall.Status.FAILED, message), None, message)
        return ToolCall.Status.FAILED

    return finish_with_result(call, raw, server.projection_policy)


def finish_with_result(call: ToolCall, raw: dict, server_policy: str) -> str:
    """Project a result the call received and store both rows with the final status."""
    policy = call.tool_policy or server_policy
    is_app = bool(call.tool_is_app) or call.is_app
    try:
        outcome = project(raw, is_app=is_app, policy=policy, token_cap=settings.PROJECTION_TOKEN_CAP, model=token_model(call))
    except Exception as exc:  # noqa: BLE001 - never lose a result because it cannot be projected
        log.exception("projection failed for tool call %s", call.pk)
        text = f"The tool returned a result that could not be prepared for the model ({exc.__class__.__name__})."
        outcome = Outcome(payload={"content": [{"type": "text", "text": text}]}, text=text, policy="error",
                          removed=[{"path": "(all)", "reason": f"projection failed: {exc}"}])
    status = ToolCall.Status.FAILED if raw.get("isError") else ToolCall.Status.SUCCEEDED
    error = outcome.text if raw.get("isError") else ""
    _finish(call, status, outcome, raw, error)
    return status


def _wait_for_view(call: ToolCall, timeout: float) -> str:
    """A tool an App view registered runs in the view, in the browser: the chat page showing the
    view claims the call, runs it and posts the result (tools/view_calls.py). No worker waits;
    the chat step's task looks again every second (CallInProgress). Its deadline is its timeout
    from when the model asked (no connection to wait for): past it, the next look claims the
    call again and ends it."""
    deadline = call.queued_at + timedelta(seconds=timeout)
    if timezone.now() >= deadline:
        message = (f"No open page ran the view's tool within {timeout:g} s: the chat must be open "
                   "with the view shown for the model to use the view's own tools.")
        _finish(call, ToolCall.Status.TIMED_OUT, failure_outcome(ToolCall.Status.TIMED_OUT, message), None, message)
        return ToolCall.Status.TIMED_OUT
    ToolCall.objects.filter(pk=call.pk, status=ToolCall.Status.RUNNING).update(deadline_at=deadline)
    raise CallInProgress(1.0)


STATE_ONLY_PAUSE = 0.25  # seconds before retrying a round that carried only a requestState


def _call_through_rounds(call: ToolCall, server: Server, timeout: float, hard_max: float) -> dict | None:
    """`tools/call`, again for every input round the inspector answers by itself (roots, a
    state-only round); None when a person must answer first (the call now rests)."""
    responses, state = input_rounds.answers(call) if call.input_round else (None, None)
    while True:
        # Progress can keep the call going up to the hard maximum: the outer bound allows it.
        raw = remote.run(server, lambda conn: live_calls.call(conn, call, timeout, hard_max, responses, state),
                         timeout=max(timeout, hard_max) + settings.MCP_CONNECT_TIMEOUT + 5, user_id=call.requested_by_id)
        if not input_rounds.is_input_required(raw):
            return raw
        if isinstance(raw, WireResult):
            raw = raw.whole()  # a large input round is stored as data: read it all
        if input_rounds.store_round(call, raw).pending:
            return None
        if not raw.get("inputRequests"):
            time.sleep(STATE_ONLY_PAUSE)
        responses, state = input_rounds.answers(call)


def publish_status(call: ToolCall) -> None:
    """Tell pages the call is running (from the claimed row in hand: no second read)."""
    events.publish_loaded_tool_call(events.TOOL_CALL_STATUS, call)


def publish_result(call: ToolCall, result_text: str | None = None) -> None:
    """Tell pages the call ended: a summary of the rows just written (no second read), and the
    full result as the text just stored when it is small enough to push (tools/runtime/events.py)."""
    events.publish_loaded_tool_call(events.TOOL_CALL_RESULT, call, result_text)
