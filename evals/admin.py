"""Admin review of eval suites, cases and runs. Attempts are evidence: read-only."""

from django.contrib import admin

from evals.models import Attempt, Case, Run, Suite
from inspector.admin import ReadOnlyAdmin


class CaseInline(admin.StackedInline):
    model = Case
    fields = ("position", "name", "prompts", "expectations", "threshold", "source_conversation")
    raw_id_fields = ("source_conversation",)
    extra = 0


@admin.register(Suite)
class SuiteAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "shared", "judge_model", "updated_at")
    list_filter = ("shared",)
    search_fields = ("name", "description")
    exclude = ("judge_api_key",)
    filter_horizontal = ("servers",)
    inlines = [CaseInline]


class AttemptInline(admin.TabularInline):
    model = Attempt
    fields = ("case_name", "model", "repeat_index", "status", "conversation", "steps", "tokens_in", "tokens_out",
              "cost_usd", "latency_ms", "error")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ("id", "suite", "owner", "status", "repeat", "created_at", "finished_at")
    list_filter = ("status",)
    list_select_related = ("suite", "owner")
    exclude = ("api_key",)
    inlines = [AttemptInline]


@admin.register(Attempt)
class AttemptAdmin(ReadOnlyAdmin):
    list_display = ("id", "run", "case_name", "model", "repeat_index", "status", "cost_usd", "latency_ms")
    list_filter = ("status", "model")
    list_select_related = ("run",)
