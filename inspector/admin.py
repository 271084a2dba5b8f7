from django.contrib import admin

from inspector.models import ApiToken, SignInIdentity


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


@admin.register(SignInIdentity)
class SignInIdentityAdmin(admin.ModelAdmin):
    """Who signed in through the team's provider (inspector/oidc.py); made by sign-ins, deletable to unlink."""

    list_display = ("user", "email", "issuer", "subject", "last_sign_in_at")
    fields = ("user", "email", "issuer", "subject", "created_at", "last_sign_in_at")
    readonly_fields = fields
    list_select_related = ("user",)
    search_fields = ("email", "subject", "user__username")

    def has_add_permission(self, request):
        return False
