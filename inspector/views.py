"""Project-level pages: home, health, account tokens, and the widget sandbox proxy."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.clickjacking import xframe_options_exempt
from django.views.decorators.http import require_GET, require_POST

from inspector import health
from inspector.models import ApiToken


@login_not_required
@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Public for load balancers and monitors; the details (errors, worker names) are for staff.

    `?role=web` checks only what this web process needs (database, Redis): a proxy's check."""
    healthy, body = health.report(role="web" if request.GET.get("role") == "web" else "all",
                                  every_worker=request.user.is_staff)
    if not request.user.is_staff:
        body = health.summary(body)
    return JsonResponse(body, status=200 if healthy else 503)


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    from chat.models import Conversation
    from tools.models import Server, ToolCall

    servers = Server.objects.visible_to(request.user).order_by("name")
    return render(
        request,
        "home.html",
        {
            "servers": servers,
            "conversations": Conversation.objects.visible_to(request.user).order_by("-updated_at")[:8],
            "recent_calls": ToolCall.objects.visible_to(request.user).select_related("server").order_by("-queued_at")[:8],
        },
    )


@require_GET
def tokens(request: HttpRequest) -> HttpResponse:
    new_key = request.session.pop("new_api_key", None)
    return render(request, "account/tokens.html", {"tokens": request.user.api_tokens.all(), "new_key": new_key})


@require_POST
def token_create(request: HttpRequest) -> HttpResponse:
    name = (request.POST.get("name") or "default").strip()[:100]
    _, key = ApiToken.issue(request.user, name)
    # Shown once on the next page, then gone from the session.
    request.session["new_api_key"] = key
    messages.success(request, f"Token “{name}” created. Copy it now: it will not be shown again.")
    return redirect("tokens")


@require_POST
def token_delete(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    token.delete()
    messages.success(request, "Token revoked.")
    return redirect("tokens")


@login_not_required
@xframe_options_exempt
@require_GET
def sandbox_proxy(request: HttpRequest) -> HttpResponse:
    """The widget sandbox proxy page, served only on SANDBOX_ORIGIN and framable only by the app."""
    response = render(request, "sandbox/proxy.html", {"host_origin": settings.PUBLIC_URL})
    response["Content-Security-Policy"] = f"frame-ancestors {settings.PUBLIC_URL}"
    response["Cache-Control"] = "no-store"
    return response
