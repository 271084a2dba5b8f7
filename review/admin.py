"""Admin review of servers' surfaces: versions (read-only, approvable), review states, load tests."""

from __future__ import annotations

import json

from django.contrib import admin, messages
from django.utils.html import format_html

from inspector.admin import ReadOnlyAdmin
from review import drift
from review.models import LoadRun, ServerReview, SurfaceVersion


def _pretty(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@admin.register(SurfaceVersion)
class SurfaceVersionAdmin(ReadOnlyAdmin):
    list_display = ("server", "number", "short_hash", "created_at", "created_by", "source", "tool_count", "tokens",
                    "finding_count", "approved")
    list_filter = ("server", "source")
    list_select_related = ("server", "created_by")
    fields = ("server", "number", "hash", "created_at", "created_by", "source", "tokens", "findings_shown", "surface_shown")
    readonly_fields = fields
    actions = ["approve"]

    @admin.display(description="tools")
    def tool_count(self, obj: SurfaceVersion) -> int:
        return len(obj.surface.get("tools") or [])

    @admin.display(description="findings")
    def finding_count(self, obj: SurfaceVersion) -> str:
        high = sum(1 for f in obj.findings if f.get("severity") == "high")
        return f"{len(obj.findings)} ({high} high)" if obj.findings else "0"

    @admin.display(boolean=True)
    def approved(self, obj: SurfaceVersion) -> bool:
        return ServerReview.objects.filter(server=obj.server_id, approved=obj).exists()

    @admin.display(description="findings")
    def findings_shown(self, obj: SurfaceVersion) -> str:
        return format_html("<pre>{}</pre>", _pretty(obj.findings))

    @admin.display(description="surface")
    def surface_shown(self, obj: SurfaceVersion) -> str:
        return format_html("<pre>{}</pre>", _pretty(obj.surface))

    @admin.action(description="Approve the selected version (one per server)")
    def approve(self, request, queryset):
        if not request.user.is_staff:
            return
        for version in queryset.order_by("server", "-number").distinct():
            drift.approve(version, request.user)
            self.message_user(request, f"{version.server.name}: approved v{version.number}.", messages.SUCCESS)


@admin.register(ServerReview)
class ServerReviewAdmin(admin.ModelAdmin):
    list_display = ("server", "approved", "approved_by", "approved_at", "drift", "withhold_changed")
    list_select_related = ("server", "approved", "approved_by")
    fields = ("server", "approved", "approved_hash", "approved_by", "approved_at", "withhold_changed")
    readonly_fields = ("server", "approved", "approved_hash", "approved_by", "approved_at")

    def has_add_permission(self, request):
        return False

    @admin.display(description="drift")
    def drift(self, obj: ServerReview) -> str:
        state = drift.state(obj.server)
        if not state.drifted:
            return "none"
        return f"v{state.latest.number} differs; changed tools: {', '.join(state.changed_tools) or '—'}"

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        drift.apply(obj.server)


@admin.register(LoadRun)
class LoadRunAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "server", "tool_name", "calls", "concurrency", "status", "done", "errors", "started_by")
    list_filter = ("status", "server")
    list_select_related = ("server", "started_by")
    fields = ("id", "server", "tool_name", "arguments", "calls", "concurrency", "status", "error", "started_by", "compare_to",
              "created_at", "started_at", "finished_at", "dispatched", "done", "errors", "cancel_requested", "stats")
    readonly_fields = fields
