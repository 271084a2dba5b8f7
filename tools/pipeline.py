"""The tool-call pipeline: run one queued ToolCall in a worker and store its two result rows.

Every tool call, whoever asked (the LLM, a person, a widget, a replay), goes through
`execute()`. It is idempotent under redelivery (`acks_late`): once a projection exists the
tool is never called again and no second row is written.
"""

from __future__ import annotations

import json
import logging
import re
import time
from datetime import timedelta
from typing import Any

import jsonschema
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from inspector.events import publish
from tools.models import Projection, Server, Tool, ToolCall, ToolResult
from tools.projection import Outcome, approx_tokens, json_size, project

log = logging.getLogger(__name__)


def validate_output(tool: Tool | None, raw: dict[str, Any]) -> tuple[bool | None, str]:
    """Check structuredContent against the tool's outputSchema; a failure is recorded, never fatal."""
    schema = tool.output_schema if tool else None
    if not schema or raw.get("isError"):
        return None, ""
    if "structuredContent" not in raw:
        return False, "The tool declares an outputSchema but the result has no structuredContent."
    try:
        jsonschema.validate(raw["structuredContent"], schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        return False, f"structuredContent does not match the outputSchema at {where}: {exc.message}"
    except jsonschema.SchemaError as exc:
        return False, f"The tool's outputSchema is itself invalid: {exc.message}"
    return True, ""


class CallInProgress(Exception):
    """Another delivery of this task holds the call's lease; look again when it may have expired."""

    def __init__(self, retry_in: float):
        super().__init__(f"another delivery is running this call; retry in {retry_in:.0f} s")
        self.retry_in = retry_in


def _claim(tool_call_id) -> ToolCall | None:
    """Mark the call running, unless it is finished or another delivery is running it right now.

    A second delivery inside the lease raises CallInProgress, and the task retries after the
    lease: if the first delivery's worker died meanwhile, the retry takes the call over.
    """
    with transaction.atomic():
        call = ToolCall.objects.select_for_update(of=("self",)).select_related("server").filter(pk=tool_call_id).first()
        if call is None:
            log.warning("tool call %s does not exist", tool_call_id)
            return None
        if Projection.objects.filter(tool_call_id=call.pk).exists() or call.is_final:
            return None
        lease = timedelta(seconds=settings.MCP_CONNECT_TIMEOUT + settings.MCP_CALL_TIMEOUT + 30)
        if call.status == ToolCall.Status.RUNNING and call.started_at and timezone.now() - call.started_at < lease:
            remaining = (lease - (timezone.now() - call.started_at)).total_seconds()
            raise CallInProgress(min(max(remaining, 0.5), 5.0))
        call.status = ToolCall.Status.RUNNING
        call.started_at = timezone.now()
        call.save(update_fields=["status", "started_at"])
        return call


def _finish(call: ToolCall, status: str, outcome: Outcome, raw: dict | None, tool: Tool | None, error: str = "") -> bool:
    """Write the full row, the projection row and the final status in one transaction."""
    schema_valid, schema_error = validate_output(tool, raw) if raw is not None else (None, "")
    now = timezone.now()
    with transaction.atomic():
        locked = ToolCall.objects.select_for_update().get(pk=call.pk)
        if Projection.objects.filter(tool_call_id=call.pk).exists():
            return False
        if locked.status == ToolCall.Status.CANCELLED:
            # The result is kept as evidence, but the model is told what the user did.
            status, error = ToolCall.Status.CANCELLED, locked.error
            note = "The user cancelled this tool call; its result was not used."
            outcome = Outcome(payload={"content": [{"type": "text", "text": note}], "isError": True}, text=note,
                              policy="cancelled", removed=[{"path": "(all)", "reason": "cancelled by the user"}])
        if raw is not None:
            ToolResult.objects.create(
                tool_call=call, raw=raw, size_bytes=json_size(raw), tokens=approx_tokens(json.dumps(raw, ensure_ascii=False)),
                schema_valid=schema_valid, schema_error=schema_error,
            )
        Projection.objects.create(
            tool_call=call, payload=outcome.payload, text=outcome.text, policy=outcome.policy, removed=outcome.removed,
            truncated=outcome.truncated, size_bytes=outcome.size_bytes, tokens=outcome.tokens,
        )
        started = locked.started_at or now
        ToolCall.objects.filter(pk=call.pk).update(
            status=status, error=error, finished_at=now, duration_ms=round((now - started).total_seconds() * 1000, 2)
        )
        transaction.on_commit(lambda: publish_result(call.pk))
    return True


_URL_SECRETS = re.compile(r"(?P<scheme>https?://)(?:[^/@\s]+@)?(?P<rest>[^\s?#]*)(?:\?[^\s#]*)?")


def redact(message: str) -> str:
    """Error text without URL credentials or query strings (tokens often travel there)."""
    return _URL_SECRETS.sub(lambda m: m["scheme"] + m["rest"], message)


def _failure_outcome(call: ToolCall, status: str, message: str) -> Outcome:
    # The model gets the first line only: a server's stderr tail is for the people debugging it.
    first_line = redact(message).strip().splitlines()[0] if message.strip() else "no details"
    text = f"Tool call {'timed out' if status == ToolCall.Status.TIMED_OUT else 'failed'}: {first_line}"
    return Outcome(payload={"content": [{"type": "text", "text": text}], "isError": True}, text=text, policy="error")


def execute(tool_call_id) -> str:
    """Run the call through the worker's warm connection pool. Returns the final status."""
    from tools import remote
    from tools.connection import CallTimeout

    call = _claim(tool_call_id)
    if call is None:
        return "skipped"
    publish_status(call)
    server: Server | None = call.server
    # The server comes along: a server deleted mid-call must not break the policy lookup below.
    tool = Tool.objects.filter(server=server, name=call.tool_name).select_related("server").first() if server else None
    timeout = settings.MCP_CALL_TIMEOUT
    started = time.monotonic()
    try:
        if server is None:
            raise RuntimeError(f"The server “{call.server_name}” was deleted.")
        if not server.enabled:
            raise RuntimeError(f"The server “{server.name}” is disabled.")
        raw = remote.run(server, lambda conn: conn.call_tool(call.tool_name, call.arguments or {}, timeout), timeout=timeout + settings.MCP_CONNECT_TIMEOUT + 5)
    except (CallTimeout, TimeoutError) as exc:
        message = redact(str(exc)) or f"no answer within {timeout:g} s"
        _finish(call, ToolCall.Status.TIMED_OUT, _failure_outcome(call, ToolCall.Status.TIMED_OUT, message), None, tool, message)
        return ToolCall.Status.TIMED_OUT
    except Exception as exc:  # noqa: BLE001 - any failure must end the call with a clear error
        message = redact(str(exc)) or exc.__class__.__name__
        log.info("tool call %s failed after %.0f ms: %s", call.pk, (time.monotonic() - started) * 1000, message)
        _finish(call, ToolCall.Status.FAILED, _failure_outcome(call, ToolCall.Status.FAILED, message), None, tool, message)
        return ToolCall.Status.FAILED

    policy = tool.effective_policy() if tool else server.projection_policy
    is_app = bool(tool and tool.is_app) or call.is_app
    try:
        outcome = project(raw, is_app=is_app, policy=policy, token_cap=settings.PROJECTION_TOKEN_CAP)
    except Exception as exc:  # noqa: BLE001 - never lose a result because it cannot be projected
        log.exception("projection failed for tool call %s", call.pk)
        text = f"The tool returned a result that could not be prepared for the model ({exc.__class__.__name__})."
        outcome = Outcome(payload={"content": [{"type": "text", "text": text}]}, text=text, policy="error",
                          removed=[{"path": "(all)", "reason": f"projection failed: {exc}"}])
    status = ToolCall.Status.FAILED if raw.get("isError") else ToolCall.Status.SUCCEEDED
    error = outcome.text if raw.get("isError") else ""
    _finish(call, status, outcome, raw, tool, error)
    return status


def groups_for(call: ToolCall) -> list[str]:
    groups = [f"toolcall.{call.pk}"]
    if call.conversation_id:
        groups.append(f"conversation.{call.conversation_id}")
    return groups


def publish_status(call: ToolCall) -> None:
    event = {"type": "tool_call.status", "tool_call_id": str(call.pk), "status": call.status}
    for group in groups_for(call):
        publish(group, event)


def publish_result(tool_call_id) -> None:
    """Send the FULL result (structuredContent and _meta included) to browsers and widgets."""
    call = ToolCall.objects.select_related("full_result", "projection").get(pk=tool_call_id)
    event = {"type": "tool_call.result", **result_event(call)}
    for group in groups_for(call):
        publish(group, event)


def result_event(call: ToolCall) -> dict[str, Any]:
    """The shape both the live event and the catch-up API use for a finished call."""
    try:
        full = call.full_result
    except ToolResult.DoesNotExist:
        full = None
    try:
        proj = call.projection
    except Projection.DoesNotExist:
        proj = None
    from tools.models import embedded_ui_resource

    return {
        "tool_call_id": str(call.pk),
        "has_view": call.is_app or embedded_ui_resource(full.raw if full else None) is not None,
        "status": call.status,
        "error": call.error,
        "duration_ms": call.duration_ms,
        "result": full.raw if full else None,
        "schema_valid": full.schema_valid if full else None,
        "schema_error": full.schema_error if full else "",
        "tokens_full": full.tokens if full else 0,
        "projection": (
            {"text": proj.text, "payload": proj.payload, "policy": proj.policy, "removed": proj.removed,
             "truncated": proj.truncated, "tokens": proj.tokens}
            if proj else None
        ),
    }
