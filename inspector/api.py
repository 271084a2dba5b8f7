"""Plumbing for the JSON API: one decorator that turns errors into clear JSON answers."""

from __future__ import annotations

import functools
import json
from typing import Any, Callable, TypeVar

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, ValidationError
from django.forms import ValidationError as FormValidationError
from django.http import Http404, HttpRequest, JsonResponse
from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as BodyError

from inspector.errors import Conflict, Invalid, Problem, Unavailable

# The HTTP status of each kind of domain problem (inspector/errors.py), here and nowhere else.
PROBLEM_STATUS: dict[type[Problem], int] = {Invalid: 400, Conflict: 409, Unavailable: 504}


class ApiError(Exception):
    def __init__(self, message: str, status: int = 400, **extra: Any):
        super().__init__(message)
        self.status = status
        self.extra = extra


def json_body(request: HttpRequest) -> dict[str, Any]:
    """The request's JSON object; anything else (too big, not JSON, not storable) is a 4xx ApiError."""
    try:
        raw = request.body
    except RequestDataTooBig:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE / (1024 * 1024)
        raise ApiError(f"The request body is larger than the {limit:g} MB this API accepts.", status=413) from None
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(f"The request body is not valid JSON: {exc}.") from None
    except RecursionError:
        raise ApiError("The request body is not valid JSON: it is nested too deeply.") from None
    if not isinstance(body, dict):
        raise ApiError("The request body must be a JSON object.")
    unstorable = _unstorable_text(body)
    if unstorable:
        raise ApiError(unstorable)
    return body


def _unstorable_text(value: Any) -> str:
    """Why a string in `value` cannot be stored (a NUL, which PostgreSQL refuses in text and JSON,
    or a lone surrogate, which is not UTF-8), or "" when every string can."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            if "\x00" in item:
                return "The request body contains a NUL character (\\u0000), which cannot be stored; remove it."
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "The request body contains a lone UTF-16 surrogate (\\ud800-\\udfff), which is not valid Unicode text."
    return ""


class Body(BaseModel):
    """A JSON request body: declared fields only (an unknown field is a typo the caller must hear of)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class LenientBody(BaseModel):
    """A body sent by code we do not control (an App view): extra protocol fields are ignored."""

    model_config = ConfigDict(extra="ignore")


B = TypeVar("B", bound=BaseModel)


def parse_body(request: HttpRequest, model: type[B]) -> B:
    """The request's JSON object validated as `model`; any problem is a 400 `{"error": ...}` naming the fields."""
    try:
        return model.model_validate(json_body(request))
    except BodyError as exc:
        raise ApiError(describe_body_error(exc)) from None


def describe_body_error(exc: BodyError) -> str:
    """One sentence per problem, fields in backticks, unknown fields listed together."""
    unknown, problems = [], []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "body"
        if error["type"] == "extra_forbidden":
            unknown.append(where)
        elif error["type"] == "missing":
            problems.append(f"`{where}` is required.")
        else:
            message = error["msg"].removeprefix("Value error, ")
            problems.append(f"`{where}`: {message[0].lower() + message[1:]}.")
    if unknown:
        problems.insert(0, f"Unknown field(s): {', '.join(unknown)}.")
    return " ".join(problems)


def problem_status(exc: Problem) -> int:
    """The HTTP status a domain problem is answered with (400 for a kind not listed)."""
    return next((status for kind, status in PROBLEM_STATUS.items() if isinstance(exc, kind)), 400)


def refused(request: HttpRequest, methods: tuple[str, ...], user) -> JsonResponse | None:
    """The answer to a request this endpoint does not take (a method not allowed, nobody signed in), or None."""
    if request.method not in methods:
        return JsonResponse({"error": f"Method {request.method} not allowed."}, status=405, headers={"Allow": ", ".join(methods)})
    if not user.is_authenticated:
        return JsonResponse({"error": "Authentication required."}, status=401)
    return None


def error_answer(exc: Exception) -> JsonResponse | None:
    """The JSON answer to an exception a view raised on purpose, or None for any other (a bug: a 500)."""
    if isinstance(exc, ApiError):
        return JsonResponse({"error": str(exc), **exc.extra}, status=exc.status)
    if isinstance(exc, Problem):
        return JsonResponse({"error": str(exc), **exc.extra}, status=problem_status(exc))
    if isinstance(exc, PermissionDenied):
        return JsonResponse({"error": str(exc) or "You do not have permission to do that."}, status=403)
    if isinstance(exc, Http404):
        return JsonResponse({"error": str(exc) or "Not found."}, status=404)
    if isinstance(exc, (ValidationError, FormValidationError)):
        return JsonResponse({"error": " ".join(exc.messages), "details": exc.messages}, status=400)
    return None


def api_view(*methods: str) -> Callable:
    """Allow `methods`, require a logged-in user, and map exceptions to JSON errors."""

    def decorator(view: Callable) -> Callable:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args, **kwargs):
            answer = refused(request, methods, request.user)
            if answer is not None:
                return answer
            try:
                return view(request, *args, **kwargs)
            except Exception as exc:
                answer = error_answer(exc)
                if answer is None:
                    raise
                return answer

        return wrapper

    return decorator
