"""A tool call and its two results: the full result exactly as the server sent it, and the projection the model saw."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.db import models
from django.db.models import Q

from inspector import tracing
from tools import callers
from tools.mcp.wire_result import is_ui_resource
from tools.models.servers import Server


class ToolCallQuerySet(models.QuerySet):
    def visible_to(self, user) -> "ToolCallQuerySet":
        """Calls a user may read: theirs, their callers' (a conversation they own), and what a caller lets
        them read (a conversation shared with the team: tools/callers.py)."""
        if not user.is_authenticated:
            return self.none()
        if user.is_superuser:
            return self
        return self.filter(callers.visible_q(user))

    def acted_on_by(self, user) -> "ToolCallQuerySet":
        """Calls a user may act on (run in a view, cancel, answer for): theirs and their callers' (tools/callers.py)."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(Q(requested_by=user) | Q(owner=user))


class ToolCall(models.Model):
    class Origin(models.TextChoices):
        LLM = "llm", "LLM"
        MANUAL = "manual"
        WIDGET = "widget"
        REPLAY = "replay"
        VIEW = "view"  # a tool an App view registered, called by the model and run by the view in the browser
        LOAD = "load"  # a call of a load test (review/loadtest.py): grouped under its run, kept out of everyday lists

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        TIMED_OUT = "timed_out"
        CANCELLED = "cancelled"
        INPUT_REQUIRED = "input_required", "waiting for input (the server asked; the call rests)"

    FINAL = {Status.SUCCEEDED, Status.FAILED, Status.TIMED_OUT, Status.CANCELLED}
    # Not ended yet: a turn waits for these, Stop and Cancel end them.
    ACTIVE = (Status.QUEUED, Status.RUNNING, Status.INPUT_REQUIRED)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    # Who started it, opaque to tools (tools/callers.py): the caller's lookup key, the user whose
    # calls they are (a conversation's owner), and what tools needs from it (model, groups, refs).
    caller = models.CharField(max_length=100, blank=True, db_index=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    context = models.JSONField(default=dict, blank=True)
    origin = models.CharField(max_length=10, choices=Origin.choices, db_index=True)
    # A deleted server leaves its calls behind: conversations are rebuilt from their projections.
    server = models.ForeignKey(Server, null=True, on_delete=models.SET_NULL, related_name="tool_calls")
    server_name = models.CharField(max_length=200, blank=True, help_text="The server's name when the call was made.")
    tool_name = models.CharField(max_length=200, db_index=True)
    llm_tool_call_id = models.CharField(max_length=200, blank=True)
    arguments = models.JSONField(default=dict, blank=True)
    is_app = models.BooleanField("app tool", default=False)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    error = models.TextField(blank=True)
    queued_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.FloatField(null=True, blank=True)
    celery_task_id = models.CharField(max_length=100, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0, help_text="Deliveries that started this call.")
    dispatched_at = models.DateTimeField(null=True, blank=True, help_text="When its task was last sent again by the sweep.")
    replay_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replays")
    # For a call an App view made (origin "widget"): the call whose view it was, so the view's
    # calls can be listed under its tool card.
    view_call = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="view_calls")
    # For origin "view": the chat page that runs it (a random id per page); the first page to
    # claim the call runs it, so two open tabs never run a view's tool twice.
    view_page = models.CharField(max_length=64, blank=True)
    progress = models.JSONField(
        null=True, blank=True, help_text="The server's last notifications/progress for this call: progress, total, message.",
    )
    # Deadlines (tools/runtime/deadlines.py): the timeout is fixed when the call is created (the caller's
    # override, else its server's default; blank: the worker's MCP_CALL_TIMEOUT); the deadline is set when a
    # worker claims it and pushed on by progress. Past it, another delivery or the sweep takes over.
    timeout_s = models.FloatField(
        "timeout (s)", null=True, blank=True,
        help_text="Seconds this call may wait for an answer (without progress): the caller's override, else its "
        "server's default; blank: MCP_CALL_TIMEOUT.",
    )
    deadline_at = models.DateTimeField(
        null=True, blank=True,
        help_text="When the worker running it is presumed gone: started + connect + timeout + margin, pushed on by "
        "progress; while it waits for input, when nobody answering ends it.",
    )
    # Multi round-trip input (2026-07-28, tools/runtime/input_rounds.py): the round the call is in, the
    # server's opaque requestState to echo on the retry (never shown to the model), and one
    # summary per round (its request keys and kinds, the state's size, when).
    input_round = models.PositiveSmallIntegerField(default=0, help_text="How many input-required rounds the server asked.")
    input_state = models.TextField(blank=True, help_text="The latest requestState, echoed verbatim on the retry.")
    input_rounds = models.JSONField(default=list, blank=True, help_text="Per round: keys, kinds, state bytes, at.")
    # Tasks (2025-11-25, tools/runtime/task_calls.py): a call of a tool whose `execution.taskSupport` is
    # "required", or "optional" when the caller asked, is sent task-augmented; the worker follows
    # the task by id (a later worker resumes it) and its result is stored like any call's.
    task_mode = models.CharField(
        max_length=10, blank=True, choices=[("", "plain call"), ("required", "task (the tool requires one)"),
                                            ("optional", "task (asked for; the tool allows one)")],
        help_text="Whether this call is sent as a task (2025-11-25 servers only).",
    )
    task_id = models.CharField(max_length=200, blank=True, help_text="The server's task id, once it created the task.")
    task_status = models.CharField(max_length=20, blank=True, help_text="working, input_required, completed, failed, cancelled.")
    task_history = models.JSONField(default=list, blank=True, help_text="Each status the task reported: status, message, at.")
    # The W3C trace context of the action that started it (inspector/tracing.py): `traceparent`, and
    # `tracestate` if any. The worker runs the call in a child span of it, whichever delivery runs it.
    trace_context = models.JSONField(default=dict, blank=True, help_text="traceparent (and tracestate) of the action that started it.")

    objects = ToolCallQuerySet.as_manager()

    class Meta:
        ordering = ["-queued_at"]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.status})"

    def save(self, *args, **kwargs) -> None:
        if self.server_id and not self.server_name:
            self.server_name = self.server.name
        super().save(*args, **kwargs)

    @property
    def trace_id(self) -> str:
        """The trace id to look the call up by in a tracing backend ("" for calls from before tracing)."""
        return tracing.trace_id(self.trace_context)

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL

    def related_or_none(self, name: str) -> Any:
        """A one-to-one row of this call (`full_result`, `projection`, `model_context`), or None:
        a call that failed, runs, or never had a view has none."""
        try:
            return getattr(self, name)
        except ObjectDoesNotExist:
            return None


class StoredJSONField(models.JSONField):
    """A JSONField without SQLite's `JSON_VALID` CHECK constraint.

    Every value is checked JSON before it is written (a worker's own serialisation, or a large
    result's bytes that msgspec checked, tools/mcp/wire_result.py). The constraint re-parsed a 40 MB
    result inside SQLite on every insert, and it refused the zeroblob a large result is written
    into piece by piece (tools/runtime/stored_result.py `create`)."""

    def db_check(self, connection):
        return None


class ToolResult(models.Model):
    """The full CallToolResult exactly as received: what browsers and widgets get."""

    tool_call = models.OneToOneField(ToolCall, on_delete=models.CASCADE, related_name="full_result", primary_key=True)
    raw = StoredJSONField(help_text="The JSON-RPC `result` as on the wire, unknown fields kept.")
    size_bytes = models.PositiveIntegerField()
    tokens = models.PositiveIntegerField()
    schema_valid = models.BooleanField(null=True, help_text="Null when the tool declares no outputSchema.")
    schema_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)


class Projection(models.Model):
    """What the LLM sees of a tool result. The LLM history is rebuilt from these rows only."""

    tool_call = models.OneToOneField(ToolCall, on_delete=models.CASCADE, related_name="projection", primary_key=True)
    payload = models.JSONField(help_text="The projected result object.")
    text = models.TextField(help_text="The exact tool-message content sent to the model.")
    policy = models.CharField(max_length=20)
    removed = models.JSONField(default=list, help_text="What was removed or truncated, as JSON paths with reasons.")
    truncated = models.BooleanField(default=False)
    size_bytes = models.PositiveIntegerField()
    tokens = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)


def embedded_ui_resource(result: dict | None) -> dict | None:
    """The first MCP-UI `ui://` embedded resource in a result's content, if any."""
    for block in (result or {}).get("content") or []:
        if isinstance(block, dict) and is_ui_resource(block):
            return block["resource"]
    return None
