"""What review keeps: each distinct surface a server showed, the version a person approved, and load-test runs."""

from __future__ import annotations

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
