"""Server review pages: versions, the diff of any two, approval, the withholding setting.
Thin: the behaviour is in review/surface.py, diff.py, drift.py."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from review import diff as surface_diff
from review import drift
from review.models import SurfaceVersion
from review.rules import SEVERITIES
from tools.lookups import visible_server


@require_GET
def server_review(request: HttpRequest, pk: int) -> HttpResponse:
    server = visible_server(request, pk)
    state = drift.state(server)
    versions = list(SurfaceVersion.objects.filter(server=server).select_related("created_by").order_by("-number"))
    shown = state.latest
    counts = {s: sum(1 for f in (shown.findings if shown else []) if f["severity"] == s) for s in reversed(SEVERITIES)}
    from review.models import LoadRun

    runs = LoadRun.objects.filter(server=server).select_related("started_by").order_by("-created_at")[:20]
    return render(request, "review/server_review.html", {
        "server": server, "tab": "review", "state": state, "versions": versions, "latest": shown, "counts": counts,
        "can_approve": request.user.is_staff, "can_edit": _can_edit(request, server), "runs": runs,
        "tools": list(server.tools.values_list("name", flat=True)),
    })


@require_GET
def surface_diff_page(request: HttpRequest, pk: int) -> HttpResponse:
    server = visible_server(request, pk)
    versions = SurfaceVersion.objects.filter(server=server)
    to = get_object_or_404(versions, number=request.GET.get("to")) if request.GET.get("to") else versions.order_by("-number").first()
    if to is None:
        return redirect("server_review", pk=server.pk)
    if request.GET.get("from"):
        before = get_object_or_404(versions, number=request.GET["from"])
    else:
        before = drift.state(server).approved or versions.filter(number__lt=to.number).order_by("-number").first() or to
    result = surface_diff.compare(before.surface, to.surface, before.tokens, to.tokens)
    return render(request, "review/diff.html", {
        "server": server, "tab": "review", "before": before, "after": to, "diff": result,
        "versions": versions.order_by("-number"), "counts": {s: result.count(s) for s in surface_diff.ORDER},
    })


@require_POST
def approve(request: HttpRequest, pk: int) -> HttpResponse:
    """Staff only: pin a version (its findings with it)."""
    server = visible_server(request, pk)
    if not request.user.is_staff:
        raise PermissionDenied("Only an admin approves a server's version.")
    version = get_object_or_404(SurfaceVersion, server=server, number=request.POST.get("number"))
    drift.approve(version, request.user)
    messages.success(request, f"Approved v{version.number} ({version.short_hash}).")
    return redirect("server_review", pk=server.pk)


@require_POST
def withhold(request: HttpRequest, pk: int) -> HttpResponse:
    """The per-server setting: withhold tools changed since the approved version (owner or staff)."""
    server = visible_server(request, pk)
    if not _can_edit(request, server):
        raise PermissionDenied("Only the server's owner or an admin changes this setting.")
    names = drift.set_withhold(server, request.POST.get("on") == "1")
    messages.success(request, f"Changed tools are {'withheld' if request.POST.get('on') == '1' else 'offered'}"
                              + (f"; withheld now: {', '.join(names)}." if names else "."))
    return redirect("server_review", pk=server.pk)


def _can_edit(request: HttpRequest, server) -> bool:
    return request.user.is_staff or server.owner_id == request.user.pk
