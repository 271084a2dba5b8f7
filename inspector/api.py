"""Plumbing for the JSON API: one decorator that turns errors into clear JSON answers."""

from __future__ import annotations

import functools
import json
from typing import Any, Callable

from django.core.exceptions import PermissionDenied, ValidationError
from django.forms import ValidationError as FormValidationError
from django.http import Http404, HttpRequest, JsonResponse


class ApiError(Exception):
    def __init__(self, message: str, status: int = 400, **extra: Any):
        super().__init__(message)
        self.status = status
        self.extra = extra


def json_body(request: HttpRequest) -> dict[str, Any]:
    if not request.body:
        return {}
    try:
        body = json.loads(request.body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(f"The request body is not valid JSON: {exc}.")
    if not isinstance(body, dict):
        raise ApiError("The request body must be a JSON object.")
    return body


def api_view(*methods: str) -> Callable:
    """Allow `methods`, require a logged-in user, and map exceptions to JSON errors."""

    def decorator(view: Callable) -> Callable:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args, **kwargs):
            if request.method not in methods:
                return JsonResponse({"error": f"Method {request.method} not allowed."}, status=405, headers={"Allow": ", ".join(methods)})
            if not request.user.is_authenticated:
                return JsonResponse({"error": "Authentication required."}, status=401)
            try:
                return view(request, *args, **kwargs)
            except ApiError as exc:
                return JsonResponse({"error": str(exc), **exc.extra}, status=exc.status)
            except PermissionDenied as exc:
                return JsonResponse({"error": str(exc) or "You do not have permission to do that."}, status=403)
            except Http404 as exc:
                return JsonResponse({"error": str(exc) or "Not found."}, status=404)
            except (ValidationError, FormValidationError) as exc:
                return JsonResponse({"error": " ".join(exc.messages), "details": exc.messages}, status=400)

        return wrapper

    return decorator
