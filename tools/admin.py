"""Admin review of servers and tool calls. Stored evidence (calls, results, projections, frames)
is read-only: the admin can look and delete, never add or edit."""

from __future__ import annotations

import json

from django.conf import settings
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, StreamingHttpResponse
from django.template.defaultfilters import filesizeformat
from django.urls import path, reverse
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.timezone import localtime

from inspector.admin import ReadOnlyAdmin
from tools.models import Projection, RpcFrame, Server, ServerLogMessage, ServerRequest, Tool, ToolCall, ToolResult, UiResource
from tools.runtime import stored_result
from tools.runtime.events import tool_call_json
from tools.runtime.lifecycle import start_tool_call


def _pretty(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@admin.register(Server)
class ServerAdmin(admin.ModelAdmin):
    list_display = ("name", "transport", "owner", "shared", "enabled", "projection_policy", "protocol_version", "last_connected_at")
    list_filter = ("transport", "shared", "enabled", "projection_policy")
    search_fields = ("name", "url", "command")
    list_select_related = ("owner",)
    # Secrets are edited on the server pages, where they stay masked; never shown here. The URL
    # shows masked; saving it with the mask keeps the stored secrets (Server.save()).
    exclude = ("env", "headers", "url_secrets", "oauth_client_secret", "oauth_client", "oauth_private_key", "oauth_assertion",
               "oauth_idp_client_secret", "oauth_dpop_key")
    readonly_fields = ("server_info", "protocol_version", "capabilities", "instructions", "last_connected_at", "last_error",
                       "set_aside_tools")


@admin.register(Tool)
class ToolAdmin(admin.ModelAdmin):
    list_display = ("name", "server", "is_app", "ui_resource_uri", "projection_policy", "updated_at")
    list_filter = ("is_app", "server")
    search_fields = ("name", "description")
    list_select_related = ("server",)
    readonly_fields = ("server", "name", "title", "description", "input_schema", "output_schema", "annotations", "meta",
                       "definition", "is_app", "ui_resource_uri", "visibility", "updated_at")
    fields = ("projection_policy", *readonly_fields)

    def has_add_permission(self, request):
        return False


class DurationFilter(admin.SimpleListFilter):
    title = "duration"
    parameter_name = "duration"
    BUCKETS = {"fast": (None, 100), "medium": (100, 1000), "slow": (1000, 10000), "very-slow": (10000, None)}

    def lookups(self, request, model_admin):
        return [("fast", "< 100 ms"), ("medium", "100 ms – 1 s"), ("slow", "1 – 10 s"), ("very-slow", "> 10 s")]

    def queryset(self, request, queryset):
        if self.value() not in self.BUCKETS:
            return queryset
        low, high = self.BUCKETS[self.value()]
        if low is not None:
            queryset = queryset.filter(duration_ms__gte=low)
        if high is not None:
            queryset = queryset.filter(duration_ms__lt=high)
        return queryset


class TokensSavedFilter(admin.SimpleListFilter):
    title = "tokens saved"
    parameter_name = "saved"

    def lookups(self, request, model_admin):
        return [("none", "none"), ("some", "1 – 999"), ("many", "1000 or more")]

    def queryset(self, request, queryset):
        from django.db.models import F

        saved = queryset.annotate(_saved=F("full_result__tokens") - F("projection__tokens"))
        if self.value() == "none":
            return saved.filter(_saved__lte=0)
        if self.value() == "some":
            return saved.filter(_saved__gt=0, _saved__lt=1000)
        if self.value() == "many":
            return saved.filter(_saved__gte=1000)
        return queryset


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdmin):
    # Few, narrow columns: the list must fit a laptop screen next to the filter column.
    list_display = ("tool_name", "server_label", "origin", "status", "app", "duration", "tokens", "queued")
    list_filter = ("status", "origin", "is_app", "server", ("tool_name", admin.AllValuesFieldListFilter),
                   ("projection__policy", admin.AllValuesFieldListFilter), DurationFilter, TokensSavedFilter)
    search_fields = ("tool_name", "arguments", "llm_tool_call_id")
    date_hierarchy = "queued_at"
    list_select_related = ("server", "full_result", "projection")
    change_form_template = "admin/tools/toolcall/change_form.html"
    actions = ["replay"]
    fields = ("id", "server", "server_name", "tool_name", "origin", "status", "error", "caller", "owner", "context", "requested_by",
              "llm_tool_call_id", "is_app", "queued_at", "started_at", "finished_at", "duration_ms", "celery_task_id",
              "trace", "replay_of")
    readonly_fields = fields

    def get_queryset(self, request):
        # The list and the change page read a call's result rows for their sizes and tokens, never
        # the full result itself: a list of 40 MB results loaded every one of them whole.
        qs = super().get_queryset(request).select_related(*self.list_select_related).defer("full_result__raw")
        # Load-test calls (thousands a run) stay out of the everyday list unless asked for by origin.
        match = getattr(request, "resolver_match", None)
        if match is not None and match.url_name == "tools_toolcall_changelist" and "origin__exact" not in request.GET:
            qs = qs.exclude(origin=ToolCall.Origin.LOAD)
        return qs

    def get_urls(self):
        download = path("<path:object_id>/result/", self.admin_site.admin_view(self.result_download),
                        name="tools_toolcall_result")
        return [download, *super().get_urls()]

    def result_download(self, request: HttpRequest, object_id: str) -> StreamingHttpResponse:
        """The full result as stored, streamed as a download (tools/runtime/stored_result.py): the change
        page shows only a preview of a large one."""
        obj = self.get_object(request, object_id)
        if obj is None:
            raise Http404("No such tool call.")
        if not self.has_view_permission(request, obj):
            raise PermissionDenied
        stored = stored_result.open_stored(obj.pk)
        if stored is None:
            raise Http404("This tool call has no result.")
        content = stored_result.ResultBody(stored)
        response = StreamingHttpResponse(content, content_type="application/json")  # Django calls content.close()
        response["Content-Length"] = str(content.content_length())
        response["Content-Disposition"] = f'attachment; filename="tool-call-{obj.pk}-result.json"'
        response["Cache-Control"] = "private, no-store"
        return response

    @admin.action(description="Replay the selected tool calls (same server, tool and arguments)")
    def replay(self, request, queryset):

        if not request.user.is_superuser:
            self.message_user(request, "Only superusers can replay tool calls from the admin.", level="error")
            return
        replays = []
        for call in queryset.select_related("server"):
            if call.server is None:
                self.message_user(request, f"Not replayed: the server “{call.server_name}” of {call.tool_name} was deleted.", level="warning")
                continue
            replays.append(start_tool_call(server=call.server, tool_name=call.tool_name, arguments=call.arguments,
                                           origin=ToolCall.Origin.REPLAY, user=request.user, replay_of=call))
        if replays:
            # A link per new call: the replay is a new row, easy to miss in a long list.
            links = format_html_join(", ", '<a href="{}">{}</a>', (
                (reverse("admin:tools_toolcall_change", args=[r.pk]), f"{r.tool_name} ({str(r.pk)[:8]})") for r in replays))
            self.message_user(request, format_html("Queued {} replay(s): {}.", len(replays), links))

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser

    @admin.display(description="Trace id")
    def trace(self, obj: ToolCall) -> str:
        """The W3C trace id of the action that started the call: paste it into your tracing backend
        (spans are exported when OTEL_EXPORTER_OTLP_ENDPOINT is set; inspector/tracing.py)."""
        if not obj.trace_id:
            return "—"
        return format_html('<code class="trace-id" id="trace-id" title="Select to copy: the trace id to look up in your tracing backend">{}</code>',
                           obj.trace_id)

    @admin.display(description="server", ordering="server_name")
    def server_label(self, obj: ToolCall) -> str:
        return obj.server_name if obj.server_id else f"{obj.server_name} (deleted)"

    @admin.display(description="duration", ordering="duration_ms")
    def duration(self, obj: ToolCall) -> str:
        return f"{obj.duration_ms:.0f} ms" if obj.duration_ms is not None else "—"

    def _full(self, obj):
        try:
            return obj.full_result
        except ToolResult.DoesNotExist:
            return None

    def _proj(self, obj):
        try:
            return obj.projection
        except Projection.DoesNotExist:
            return None

    @admin.display(description="app", boolean=True, ordering="is_app")
    def app(self, obj: ToolCall) -> bool:
        return obj.is_app

    @admin.display(description="tokens: full → model (saved)", ordering="full_result__tokens")
    def tokens(self, obj: ToolCall) -> str:
        full, proj = self._full(obj), self._proj(obj)
        if not full and not proj:
            return "—"
        saved = f" ({max(full.tokens - proj.tokens, 0)})" if full and proj else ""
        return f"{full.tokens if full else '—'} → {proj.tokens if proj else '—'}{saved}"

    @admin.display(description="queued", ordering="queued_at")
    def queued(self, obj: ToolCall) -> str:
        return date_format(localtime(obj.queued_at), "Y-m-d H:i:s")

    def change_view(self, request, object_id, form_url="", extra_context=None):
        obj = self.get_object(request, object_id)
        extra_context = extra_context or {}
        if obj is not None:
            full, proj = self._full(obj), self._proj(obj)
            removed_paths = [r.get("path", "") for r in (proj.removed if proj else [])]
            limit = settings.RESULT_PREVIEW_BYTES
            shown = stored_result.head(obj.pk, limit) if full else None
            preview, octets = shown if shown else ("", 0)
            whole = shown is not None and octets <= limit
            extra_context.update(
                arguments_json=_pretty(obj.arguments),
                # Up to RESULT_PREVIEW_BYTES of the full result: indented when that is all of it,
                # else its first bytes as stored, with its size and a streamed download.
                full_json=(_pretty(json.loads(preview)) if whole else preview) if shown else None,
                full_cut=shown is not None and not whole,
                full_preview_size=filesizeformat(len(preview.encode())),
                full_size=filesizeformat(octets),
                full_download=reverse("admin:tools_toolcall_result", args=[obj.pk]),
                full_row=full,
                projection=proj,
                projection_json=_pretty(proj.payload) if proj else None,
                removed_html=format_html_join(
                    "", "<li><code class='removed-path'>{}</code> — {}</li>",
                    ((r.get("path", ""), r.get("reason", "")) for r in (proj.removed if proj else [])),
                ),
                removed_paths=removed_paths,
                # The workbench renders the view: an App tool's, or an MCP-UI one in the result.
                has_view=tool_call_json(obj)["has_view"],
            )
        return super().change_view(request, object_id, form_url, extra_context)


@admin.register(RpcFrame)
class RpcFrameAdmin(ReadOnlyAdmin):
    list_display = ("at", "server", "direction", "kind", "method", "rpc_id", "size_bytes", "latency_ms")
    list_filter = ("direction", "kind", "server")
    search_fields = ("method", "rpc_id")
    date_hierarchy = "at"
    list_select_related = ("server",)


@admin.register(UiResource)
class UiResourceAdmin(ReadOnlyAdmin):
    list_display = ("uri", "server", "mime_type", "fetched_at")
    list_select_related = ("server",)




@admin.register(ServerRequest)
class ServerRequestAdmin(ReadOnlyAdmin):
    """What servers asked during calls (elicitation, sampling, roots) and what went back."""

    list_display = ("created_at", "server", "kind", "mode", "status", "action", "tool_call", "answered_at")
    list_filter = ("kind", "status", "protocol")
    list_select_related = ("server", "tool_call")
    date_hierarchy = "created_at"


@admin.register(ServerLogMessage)
class ServerLogMessageAdmin(ReadOnlyAdmin):
    list_display = ("at", "server", "level", "logger", "tool_call")
    list_filter = ("level", "server")
    list_select_related = ("server", "tool_call")
