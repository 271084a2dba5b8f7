"""Request gatekeeping: sandbox origin isolation, API tokens, and login for everything else.

Plain synchronous middleware: daphne runs the whole chain in one hop to the request's thread
(inspector/asgi_handler.py says why that costs less than an async chain).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.middleware import LoginRequiredMiddleware as DjangoLoginRequired
from django.http import HttpRequest, HttpResponse, JsonResponse
from opentelemetry.trace import SpanKind

from inspector import tracing

TRACE_HEADERS = ("traceparent", "tracestate")


class Middleware:
    """A plain middleware: `__call__` wraps the next one."""

    def __init__(self, get_response):
        self.get_response = get_response


class TraceMiddleware(Middleware):
    """Each request is where a trace starts (inspector/tracing.py): a span around it, continuing the
    `traceparent` a client sent, current while the view runs, so the tasks it sends and the MCP
    requests a worker makes for it carry its trace id."""

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path == "/healthz":  # a supervisor's probe every few seconds is no user's action
            return self.get_response(request)
        with self.span(request) as span:
            return self.traced(request, span, self.get_response(request))

    @staticmethod
    def span(request: HttpRequest):
        # The trace context only: a client's `baggage` is not passed on to the MCP servers.
        incoming = {k: request.headers[k] for k in TRACE_HEADERS if k in request.headers} or None
        return tracing.span(f"{request.method} {request.path}", parent=incoming, kind=SpanKind.SERVER)

    @staticmethod
    def traced(request: HttpRequest, span, response: HttpResponse) -> HttpResponse:
        if span.is_recording():
            match = request.resolver_match
            if match is not None and match.route:
                span.update_name(f"{request.method} /{match.route}")  # the route, not every id in the path
            span.set_attribute("http.request.method", request.method or "")
            span.set_attribute("http.response.status_code", response.status_code)
        return response


class SandboxHostMiddleware(Middleware):
    """The sandbox origin serves only the widget sandbox proxy and its static files.

    Widgets run on that origin; nothing of the inspector (pages, API, admin) may answer there.
    """

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.refused(request) or self.get_response(request)

    @staticmethod
    def refused(request: HttpRequest) -> HttpResponse | None:
        on_sandbox = request.get_host() == settings.SANDBOX_HOST
        request.on_sandbox_origin = on_sandbox
        if on_sandbox and not request.path.startswith("/sandbox/"):
            return HttpResponse("Not found on the sandbox origin.", status=404, content_type="text/plain")
        if not on_sandbox and request.path.startswith("/sandbox/"):
            return HttpResponse("The sandbox is served only on SANDBOX_ORIGIN.", status=404, content_type="text/plain")
        return None


class ContentSecurityPolicyMiddleware(Middleware):
    """A strict Content-Security-Policy on every response of the app's origin (pages, API, admin).

    Responses on the sandbox origin are left alone: the sandbox proxy sends its own policy.
    """

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.with_policy(request, self.get_response(request))

    @staticmethod
    def with_policy(request: HttpRequest, response: HttpResponse) -> HttpResponse:
        from inspector.csp import app_policy

        if not getattr(request, "on_sandbox_origin", False):
            response["Content-Security-Policy"] = app_policy(request)
        return response


class TokenAuthMiddleware(Middleware):
    """`Authorization: Token <key>` authenticates API requests for scripts and CI."""

    def __call__(self, request: HttpRequest) -> HttpResponse:
        key = self.token(request)
        if key is not None:
            from inspector.models import ApiToken

            if not self.signed_in(request, ApiToken.authenticate(key)):
                return self.invalid()
        return self.get_response(request)

    @staticmethod
    def token(request: HttpRequest) -> str | None:
        header = request.headers.get("Authorization", "")
        return header[len("Token ") :].strip() if header.startswith("Token ") else None

    @staticmethod
    def signed_in(request: HttpRequest, user) -> bool:
        if user is None:
            return False
        request.user = user
        # A token is not sent automatically by browsers, so CSRF does not apply.
        request._dont_enforce_csrf_checks = True
        return True

    @staticmethod
    def invalid() -> JsonResponse:
        return JsonResponse({"error": "Invalid or revoked API token."}, status=401)


class LoginRequiredMiddleware(DjangoLoginRequired):
    """Django's login-required default, with a JSON 401 instead of a redirect for the API."""

    def process_view(self, request, view_func, view_args, view_kwargs):
        if getattr(request, "on_sandbox_origin", False):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)

    def handle_no_permission(self, request, view_func):
        if request.path.startswith("/api/"):
            return JsonResponse({"error": "Authentication required."}, status=401)
        return super().handle_no_permission(request, view_func)
