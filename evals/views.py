"""Eval pages: suites and cases, runs (live progress, cancel), compare, side-by-side chat.

Thin: the behaviour is in evals/runs.py, cases.py, compare.py, suite_file.py, side_by_side.py.
Everyone who signs in reads their own suites and the shared ones; only a suite's owner changes it;
anyone who can read a suite may run it (the run and its conversations are theirs).
"""

from __future__ import annotations

from django.contrib import messages
from django.db.models import Max, Q
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from chat.models import Conversation
from evals import cases, compare, runs, side_by_side, suite_file
from evals.forms import CaseForm, RunForm, SideBySideForm, SuiteForm
from evals.models import Case, Run, Suite


def readable_suite(request: HttpRequest, pk: int) -> Suite:
    return get_object_or_404(Suite.objects.visible_to(request.user).select_related("owner"), pk=pk)


def owned_suite(request: HttpRequest, pk: int) -> Suite:
    return get_object_or_404(Suite, pk=pk, owner=request.user)


def readable_run(request: HttpRequest, pk: int) -> Run:
    """A run: the runner's own, or any run of a suite shared with the team."""
    return get_object_or_404(Run.objects.filter(Q(owner=request.user) | Q(suite__shared=True))
                             .select_related("suite", "owner"), pk=pk)


@require_GET
def suite_list(request: HttpRequest) -> HttpResponse:
    suites = Suite.objects.visible_to(request.user).select_related("owner").prefetch_related("servers").order_by("name", "pk")
    return render(request, "evals/list.html", {"suites": suites})


@require_http_methods(["GET", "POST"])
def suite_new(request: HttpRequest) -> HttpResponse:
    form = SuiteForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        suite = form.save(commit=False)
        suite.owner = request.user
        suite.save()
        form.save_m2m()
        return redirect("evals_suite", pk=suite.pk)
    return render(request, "evals/suite_form.html", {"form": form})


@require_http_methods(["GET", "POST"])
def suite_edit(request: HttpRequest, pk: int) -> HttpResponse:
    suite = owned_suite(request, pk)
    form = SuiteForm(request.POST or None, instance=suite, user=request.user)
    if request.method == "POST" and form.is_valid():
        form.save()
        return redirect("evals_suite", pk=suite.pk)
    return render(request, "evals/suite_form.html", {"form": form, "suite": suite})


@require_POST
def suite_delete(request: HttpRequest, pk: int) -> HttpResponse:
    owned_suite(request, pk).delete()
    return redirect("evals_list")


@require_http_methods(["GET", "POST"])
def suite_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The suite's cases, the form that runs it, and its runs."""
    suite = readable_suite(request, pk)
    form = RunForm(request.POST or None, initial={"repeat": 1})
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            run = runs.start_run(suite, request.user, d["models"], repeat=d["repeat"], api_key=d["api_key"],
                                 concurrency=d["concurrency"])
        except runs.RunError as exc:
            messages.error(request, str(exc))
        else:
            return redirect("evals_run", pk=run.pk)
    suite_runs = suite.runs.filter(Q(owner=request.user) | Q(suite__shared=True)).select_related("owner")[:50]
    return render(request, "evals/suite.html", {
        "suite": suite, "cases": suite.cases.order_by("position", "pk"), "form": form, "runs": suite_runs,
        "is_owner": suite.owner_id == request.user.pk, "servers": suite.servers.order_by("name"),
    })


@require_GET
def suite_export(request: HttpRequest, pk: int) -> HttpResponse:
    suite = readable_suite(request, pk)
    response = JsonResponse(suite_file.export_suite(suite), json_dumps_params={"indent": 2, "ensure_ascii": False})
    response["Content-Disposition"] = f'attachment; filename="eval-suite-{suite.pk}.json"'
    return response


@require_POST
def suite_import(request: HttpRequest) -> HttpResponse:
    upload = request.FILES.get("file")
    if upload is None:
        messages.error(request, "Choose a suite file to import.")
        return redirect("evals_list")
    try:
        suite = suite_file.import_suite(upload.read(), request.user)
    except suite_file.SuiteFileError as exc:
        messages.error(request, str(exc))
        return redirect("evals_list")
    messages.success(request, f"Imported “{suite.name}” with {suite.cases.count()} cases.")
    return redirect("evals_suite", pk=suite.pk)


@require_http_methods(["GET", "POST"])
def case_edit(request: HttpRequest, pk: int | None = None, suite_pk: int | None = None) -> HttpResponse:
    """Create (under a suite) or edit a case; the expectations are checked before they are saved."""
    if pk is not None:
        case = get_object_or_404(Case.objects.select_related("suite"), pk=pk, suite__owner=request.user)
        suite = case.suite
    else:
        suite = owned_suite(request, suite_pk)
        case = Case(suite=suite, position=(suite.cases.aggregate(m=Max("position"))["m"] or 0) + 1)
    form = CaseForm(request.POST or None, instance=case)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, f"Saved “{case.name}”.")
        return redirect("evals_suite", pk=suite.pk)
    return render(request, "evals/case_form.html", {"form": form, "case": case, "suite": suite})


@require_POST
def case_delete(request: HttpRequest, pk: int) -> HttpResponse:
    case = get_object_or_404(Case, pk=pk, suite__owner=request.user)
    case.delete()
    return redirect("evals_suite", pk=case.suite_id)


@require_POST
def case_from_conversation(request: HttpRequest, pk: int) -> HttpResponse:
    """One click on a stored conversation: a case whose expected calls are the ones it made."""
    conversation = get_object_or_404(Conversation.objects.visible_to(request.user), pk=pk)
    suite_id = request.POST.get("suite")
    try:
        suite = cases.suite_for(request.user, int(suite_id) if suite_id and suite_id.isdigit() else None)
    except Suite.DoesNotExist:
        messages.error(request, "No such suite of yours.")
        return redirect("chat_player", pk=pk)
    case = cases.case_from_conversation(conversation, suite)
    messages.success(request, f"Case “{case.name}” added to “{suite.name}”: edit its expectations.")
    return redirect("evals_case", pk=case.pk)


@require_GET
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = readable_run(request, pk)
    runs.resume_if_stalled(run)
    summary = runs.summarize(run)
    attempts = list(run.attempts.select_related("conversation"))
    others = Run.objects.filter(suite=run.suite).filter(Q(owner=request.user) | Q(suite__shared=True)).exclude(pk=run.pk)[:50]
    return render(request, "evals/run.html", {
        "run": run, "summary": summary, "attempts": attempts, "others": others,
        "can_cancel": run.owner_id == request.user.pk and run.status == Run.Status.RUNNING,
        "models": [m["model"] for m in run.model_specs], "matrix": _matrix(run, summary),
        "page_data": {"runId": run.pk, "status": run.status},
    })


def _matrix(run: Run, summary: dict) -> list[dict]:
    """Rows of cases, a cell per model, in the run's model order."""
    cells = {(c["case"], c["model"]): c for c in summary["cells"]}
    rows: dict[str, dict] = {}
    for c in sorted(summary["cells"], key=lambda c: c["position"]):
        rows.setdefault(c["case"], {"case": c["case"], "cells": []})
    for row in rows.values():
        row["cells"] = [cells.get((row["case"], m["model"])) for m in run.model_specs]
    return list(rows.values())


@require_POST
def run_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(Run, pk=pk, owner=request.user)
    runs.cancel(run)
    return redirect("evals_run", pk=pk)


@require_GET
def run_compare(request: HttpRequest) -> HttpResponse:
    a, b = request.GET.get("a", ""), request.GET.get("b", "")
    if not (a.isdigit() and b.isdigit()):
        return HttpResponse("Give two runs: ?a=<run id>&b=<run id>.", status=400, content_type="text/plain")
    before, after = readable_run(request, int(a)), readable_run(request, int(b))
    return render(request, "evals/compare.html", {"before": before, "after": after, "result": compare.compare(before, after)})


@require_http_methods(["GET", "POST"])
def side_by_side_page(request: HttpRequest) -> HttpResponse:
    """The same prompt to up to three models, each its own conversation, on one page."""
    form = SideBySideForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        ids = side_by_side.start(request.user, d["prompt"], d["models"], api_key=d["api_key"], servers=list(d["servers"]))
        return redirect(f"{request.path}?c={','.join(map(str, ids))}")
    wanted = [int(i) for i in request.GET.get("c", "").split(",") if i.isdigit()][:3]
    found = {c.pk: c for c in Conversation.objects.visible_to(request.user).filter(pk__in=wanted)}
    columns = [found[i] for i in wanted if i in found]
    return render(request, "evals/side_by_side.html", {
        "form": form, "columns": columns, "page_data": {"conversations": [c.pk for c in columns]}})
