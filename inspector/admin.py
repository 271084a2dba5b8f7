from django.contrib import admin

from inspector.models import ApiToken


class ReadOnlyAdmin(admin.ModelAdmin):
    """For stored evidence: the admin can look (and a superuser delete), never add or edit."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are issued by their users or `manage.py create_api_token`; here they can be revoked."""

    list_display = ("user", "name", "prefix", "created_at", "last_used_at")
    fields = ("user", "name", "prefix", "created_at", "last_used_at")
    readonly_fields = fields
    list_select_related = ("user",)

    def has_add_permission(self, request):
        return False
