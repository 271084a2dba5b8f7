"""What a server asked during a call (elicitation, sampling, roots) and the log lines it sent."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from tools.models.calls import ToolCall
from tools.models.servers import LogLevel, Server


class ServerRequestQuerySet(models.QuerySet):
    def visible_to(self, user) -> "ServerRequestQuerySet":
        """Requests of the tool calls the user may see (the people who can answer them)."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(tool_call__in=ToolCall.objects.visible_to(user).values("pk"))


class ServerRequest(models.Model):
    """One thing a server asked of this client during a call: an elicitation, a sampling, its roots.

    One row per request, for both protocol generations. On a legacy connection the request arrives
    inside a live `tools/call` and the worker holding it waits (on Redis) for the answer; on a
    2026-07-28 connection (multi round-trip input) the call's result names the requests and the
    answer queues a retry (`protocol`, `round`, `input_key`). Either way the browser answers
    through the same API and the same cards (tools/runtime/server_requests/).
    """

    class Kind(models.TextChoices):
        ELICITATION = "elicitation"
        SAMPLING = "sampling"
        ROOTS = "roots"

    class Status(models.TextChoices):
        PENDING = "pending", "waiting for the user"
        GENERATING = "generating", "sampling: the model is answering"
        GENERATED = "generated", "sampling: answer shown for approval"
        ANSWERED = "answered"
        REFUSED = "refused", "refused (invalid request, or the user rejected it)"
        CANCELLED = "cancelled"
        EXPIRED = "expired", "expired (the call's time ran out)"

    OPEN = (Status.PENDING, Status.GENERATING, Status.GENERATED)

    class Protocol(models.TextChoices):
        LEGACY = "legacy", "server-to-client request (a worker waits)"
        INPUT_REQUIRED = "input_required", "multi round-trip input (2026-07-28; the call rests)"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tool_call = models.ForeignKey(ToolCall, null=True, blank=True, on_delete=models.CASCADE, related_name="server_requests")
    server = models.ForeignKey(Server, null=True, on_delete=models.SET_NULL, related_name="server_requests")
    kind = models.CharField(max_length=12, choices=Kind.choices)
    method = models.CharField(max_length=60, help_text="The JSON-RPC method, e.g. elicitation/create.")
    mode = models.CharField(max_length=10, blank=True, help_text="Elicitation: form or url.")
    protocol = models.CharField(max_length=16, choices=Protocol.choices, default=Protocol.LEGACY)
    rpc_id = models.CharField(max_length=100, blank=True, help_text="The server's JSON-RPC id of the request (legacy).")
    round = models.PositiveSmallIntegerField(default=0, help_text="Multi round-trip input: which round asked it.")
    input_key = models.CharField(max_length=200, blank=True, help_text="Multi round-trip input: its key in inputRequests.")
    params = models.JSONField(default=dict, help_text="The request's params as the server sent them.")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING, db_index=True)
    action = models.CharField(max_length=10, blank=True, help_text="Elicitation: accept, decline or cancel.")
    answer = models.JSONField(null=True, blank=True, help_text="What the user submitted (form content, approved messages, model).")
    response = models.JSONField(null=True, blank=True, help_text="What went back to the server: a result, or an error.")
    error = models.TextField(blank=True)
    answered_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="When the waiting call gives up.")
    answered_at = models.DateTimeField(null=True, blank=True)

    objects = ServerRequestQuerySet.as_manager()

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"{self.method} ({self.status})"

    @property
    def is_open(self) -> bool:
        return self.status in self.OPEN


class ServerLogMessage(models.Model):
    """A `notifications/message` from a server, kept with the call it arrived during (if any)."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="log_messages")
    tool_call = models.ForeignKey(ToolCall, null=True, blank=True, on_delete=models.CASCADE, related_name="log_messages")
    level = models.CharField(max_length=10, choices=LogLevel.choices)
    logger = models.CharField(max_length=200, blank=True)
    data = models.JSONField(null=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "id"]
