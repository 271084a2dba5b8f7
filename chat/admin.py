"""Admin review of conversations. Messages are stored evidence: read-only."""

from django.contrib import admin

from chat.models import Conversation, Message, ModelContext, ProviderKey, ReplayItem, ReplayRun, Turn
from inspector.admin import ReadOnlyAdmin


class MessageInline(admin.TabularInline):
    model = Message
    fields = ("seq", "role", "text", "tool_calls", "tool_call", "model", "usage", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ("__str__", "owner", "model", "status", "updated_at")
    list_filter = ("status", "model")
    search_fields = ("title", "messages__text")
    list_select_related = ("owner",)
    date_hierarchy = "created_at"
    exclude = ("api_key",)
    readonly_fields = ("owner", "status", "created_at", "updated_at")
    inlines = [MessageInline]


@admin.register(Turn)
class TurnAdmin(ReadOnlyAdmin):
    list_display = ("id", "conversation", "status", "steps", "created_at", "finished_at")
    list_filter = ("status",)
    list_select_related = ("conversation",)


@admin.register(ModelContext)
class ModelContextAdmin(ReadOnlyAdmin):
    list_display = ("tool_call", "conversation", "updated_at")
    list_select_related = ("tool_call", "conversation")


@admin.register(ProviderKey)
class ProviderKeyAdmin(admin.ModelAdmin):
    list_display = ("user", "provider", "masked", "updated_at")
    fields = ("user", "provider")
    readonly_fields = ("user", "provider")

    def has_add_permission(self, request):
        return False


class ReplayItemInline(admin.TabularInline):
    model = ReplayItem
    fields = ("position", "server_name", "tool_name", "verdict", "error", "original", "call")
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(ReplayRun)
class ReplayRunAdmin(ReadOnlyAdmin):
    """Stored replays (chat/replay.py, chat/live.py): evidence, read-only like the rest."""

    list_display = ("id", "conversation", "kind", "status", "verdict", "created_by", "created_at")
    list_filter = ("kind", "status", "verdict")
    list_select_related = ("conversation", "created_by")
    inlines = [ReplayItemInline]
