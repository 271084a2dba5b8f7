"""JSON API of the evals: suites (list, export, import), runs (start, read, cancel)."""

from __future__ import annotations

from typing import Any

from django.db.models import Q
from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404
from pydantic import Field, StrictInt

from evals import runs, suite_file
from evals.models import Run, Suite
from inspector.api import ApiError, Body, api_view, json_body, parse_body


class RunBody(Body):
    models: list[Any] = Field(min_length=1)
    api_base: str = ""
    api_key: str = ""
    repeat: StrictInt = 1
    concurrency: StrictInt | None = None


def suite_json(s: Suite) -> dict[str, Any]:
    return {"id": s.pk, "name": s.name, "owner": s.owner.get_username(), "shared": s.shared,
            "cases": s.cases.count(), "servers": sorted(x.name for x in s.servers.all())}


def _run(request: HttpRequest, pk: int) -> Run:
    return get_object_or_404(Run.objects.filter(Q(owner=request.user) | Q(suite__shared=True)).select_related("suite"), pk=pk)


@api_view("GET")
def suites(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"suites": [suite_json(s) for s in Suite.objects.visible_to(request.user).select_related("owner")]})


@api_view("GET")
def suite_export(request: HttpRequest, pk: int) -> JsonResponse:
    return JsonResponse(suite_file.export_suite(get_object_or_404(Suite.objects.visible_to(request.user), pk=pk)))


@api_view("POST")
def suite_import(request: HttpRequest) -> JsonResponse:
    try:
        suite = suite_file.import_suite(json_body(request), request.user)
    except suite_file.SuiteFileError as exc:
        raise ApiError(str(exc)) from None
    return JsonResponse(suite_json(suite), status=201)


@api_view("POST")
def start(request: HttpRequest, pk: int) -> JsonResponse:
    suite = get_object_or_404(Suite.objects.visible_to(request.user), pk=pk)
    body = parse_body(request, RunBody)
    try:
        run = runs.start_run(suite, request.user, body.models, repeat=body.repeat, api_base=body.api_base,
                             api_key=body.api_key, concurrency=body.concurrency)
    except runs.RunError as exc:
        raise ApiError(str(exc)) from None
    return JsonResponse(runs.run_json(run), status=202)


@api_view("GET")
def run_detail(request: HttpRequest, pk: int) -> JsonResponse:
    run = _run(request, pk)
    runs.resume_if_stalled(run)
    return JsonResponse(runs.run_json(run))


@api_view("POST")
def cancel(request: HttpRequest, pk: int) -> JsonResponse:
    run = get_object_or_404(Run, pk=pk, owner=request.user)
    if run.status != Run.Status.RUNNING:
        raise ApiError("The run has ended.", status=409)
    runs.cancel(run)
    run.refresh_from_db()
    return JsonResponse(runs.run_json(run), status=202)
