"""What review keeps: each distinct surface a server showed, the version a person approved, and load-test runs."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from tools.models import Server


class SurfaceVersion(models.Model):
    """One distinct surface of a server (review/surface.py): stored when a refresh's canonical hash
    differs from the server's latest version. Its findings (review/rules/) are computed then, so what
    is approved is the surface and what the rules said about it."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="surface_versions")
    number = models.PositiveIntegerField(help_text="1, 2, … per server.")
    hash = models.CharField(max_length=64, db_index=True, help_text="SHA-256 of the canonical surface JSON.")
    surface = models.JSONField(help_text="Server info, instructions, capabilities, tools, resources, templates, prompts.")
    tokens = models.PositiveIntegerField(default=0, help_text="What the tools offered to the model cost per request.")
    findings = models.JSONField(default=list, blank=True, help_text="The description review's findings for this surface.")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    source = models.CharField(max_length=20, default="refresh", help_text="refresh, list_changed or command.")

    class Meta:
        ordering = ["server", "-number"]
        constraints = [models.UniqueConstraint(fields=["server", "number"], name="unique_surface_number")]

    def __str__(self) -> str:
        return f"{self.server.name} v{self.number} ({self.hash[:12]})"

    @property
    def short_hash(self) -> str:
        return self.hash[:12]

    def findings_at_or_above(self, severity: str) -> list[dict]:
        from review.rules import at_or_above

        return [f for f in self.findings if at_or_above(f.get("severity", ""), severity)]


class ServerReview(models.Model):
    """A server's review state: the approved version (its hash pinned) and whether tools that changed
    since are withheld from the model."""

    server = models.OneToOneField(Server, on_delete=models.CASCADE, related_name="review", primary_key=True)
    approved = models.ForeignKey(SurfaceVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    approved_hash = models.CharField(max_length=64, blank=True, help_text="Pinned: drift is any later hash but this one.")
    approved_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")
    approved_at = models.DateTimeField(null=True, blank=True)
    withhold_changed = models.BooleanField(
        "withhold changed tools", default=False,
        help_text="While the latest surface is not the approved one, tools added or changed since are not offered to the model.",
    )

    def __str__(self) -> str:
        return f"review of {self.server.name}"


class LoadRun(models.Model):
    """A load test: N calls of one tool at concurrency C through the ordinary pipeline
    (tools/runtime/lifecycle.py, origin "load"), driven by a Celery task (review/tasks.py)."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded", "finished"
        CANCELLED = "cancelled"
        FAILED = "failed"

    ACTIVE = (Status.QUEUED, Status.RUNNING)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="load_runs")
    tool_name = models.CharField(max_length=200)
    arguments = models.JSONField(default=dict, blank=True)
    calls = models.PositiveIntegerField(help_text="How many calls (at most LOADTEST_MAX_CALLS).")
    concurrency = models.PositiveIntegerField(help_text="How many in flight at once (at most LOADTEST_MAX_CONCURRENCY).")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED, db_index=True)
    error = models.TextField(blank=True)
    started_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    compare_to = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                                   help_text="An earlier run its page compares with.")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    dispatched = models.PositiveIntegerField(default=0, help_text="Calls started so far.")
    done = models.PositiveIntegerField(default=0, help_text="Calls ended so far.")
    errors = models.PositiveIntegerField(default=0, help_text="Calls that ended other than succeeded.")
    cancel_requested = models.BooleanField(default=False)
    stats = models.JSONField(default=dict, blank=True, help_text="The figures at the end (review/loadtest.py `figures`).")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"load test {self.tool_name} ×{self.calls} @{self.concurrency} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE


class LoadCall(models.Model):
    """One call of a run: groups the run's ToolCall rows under it (tools knows nothing of runs)."""

    run = models.ForeignKey(LoadRun, on_delete=models.CASCADE, related_name="load_calls")
    tool_call = models.OneToOneField("tools.ToolCall", on_delete=models.CASCADE, related_name="load_call")
    seq = models.PositiveIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="unique_load_call_seq")]
