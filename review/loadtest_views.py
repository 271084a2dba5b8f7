"""Load-test pages and their JSON (thin: review/loadtest.py holds the behaviour). Staff only to start."""

from __future__ import annotations

import json

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from inspector.api import api_view
from review import loadtest
from review.models import LoadRun
from tools.lookups import visible_server
from tools.models import Server


def _visible_run(request: HttpRequest, pk) -> LoadRun:
    """A run of a server the user may see."""
    return get_object_or_404(LoadRun.objects.select_related("server", "started_by")
                             .filter(server__in=Server.objects.visible_to(request.user)), pk=pk)


@require_POST
def start(request: HttpRequest, pk: int) -> HttpResponse:
    server = visible_server(request, pk)
    if not request.user.is_staff:
        raise PermissionDenied("Only an admin starts a load test.")
    try:
        arguments = json.loads(request.POST.get("arguments") or "{}")
        calls, concurrency = int(request.POST.get("calls") or 0), int(request.POST.get("concurrency") or 0)
    except ValueError as exc:
        messages.error(request, f"Could not read the form: {exc}")
        return redirect("server_review", pk=server.pk)
    compare_to = LoadRun.objects.filter(server=server, pk=request.POST.get("compare_to")).first() if request.POST.get("compare_to") else None
    try:
        run = loadtest.create(server, request.POST.get("tool", ""), arguments, calls, concurrency, request.user, compare_to)
    except loadtest.BadLoadTest as exc:
        messages.error(request, str(exc))
        return redirect("server_review", pk=server.pk)
    return redirect("loadtest_run", pk=run.pk)


@require_GET
def run_page(request: HttpRequest, pk) -> HttpResponse:
    run = _visible_run(request, pk)
    earlier = LoadRun.objects.filter(server=run.server, tool_name=run.tool_name, created_at__lt=run.created_at).order_by("-created_at")[:10]
    return render(request, "review/loadtest_run.html", {
        "run": run, "server": run.server, "tab": "review", "data": loadtest.run_json(run), "earlier": earlier,
        "can_cancel": request.user.is_staff or run.started_by_id == request.user.pk,
    })


@require_POST
def cancel(request: HttpRequest, pk) -> HttpResponse:
    run = _visible_run(request, pk)
    if not (request.user.is_staff or run.started_by_id == request.user.pk):
        raise PermissionDenied("Only an admin or whoever started it cancels a load test.")
    loadtest.cancel(run)
    return redirect("loadtest_run", pk=run.pk)


@api_view("GET")
def run_json(request: HttpRequest, pk) -> HttpResponse:
    """`GET /api/load-tests/{id}/`: progress and figures (`?compare=<id>` compares with another run)."""
    run = _visible_run(request, pk)
    if request.GET.get("compare"):
        run.compare_to_id = _visible_run(request, request.GET["compare"]).pk
    return JsonResponse(loadtest.run_json(run))
