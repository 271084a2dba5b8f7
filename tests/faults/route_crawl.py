"""The route crawler behind tests/faults/test_route_crawl.py and bench/faults.py.

It lists every URL pattern of the project (admin included) and every WebSocket route, fills
their parameters with real ids of one user's objects, and requests each one as somebody else:
anonymous, another user, a non-staff user on the staff-only admin. What may come back is
small and explicit (`ALLOWED_REFUSALS`, `PUBLIC`); anything else, or any of the owner's
marker strings in a body, is a problem the crawl reports.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable
from urllib.parse import urlsplit

from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RegexPattern, RoutePattern

# What a refused request may answer.
ALLOWED_REFUSALS = {401, 403, 404, 405}
LOGIN_PAGES = {"/login/", "/admin/login/"}

# Routes anybody may open (exact route strings as Django lists them). Keep this small.
#  - healthz: for load balancers (checked separately: it must leak nothing to anonymous users);
#  - the login pages;
#  - the OAuth Client ID Metadata Document (tools/runtime/cimd.py): authorization servers fetch it with no
#    session; it is metadata, no secret;
#  - the widget sandbox proxy: answers only on SANDBOX_ORIGIN (a 404 on the app's host).
# Static files are served by ASGIStaticFilesHandler, outside the URL resolver.
PUBLIC = {"healthz", "login/", "admin/login/", "oauth/client-metadata.json"}
SANDBOX_ONLY = {"sandbox/proxy/"}

# Bodies that would do something if the view forgot to check who asks.
INTRUDER = "BOB-WAS-HERE"
POST_BODIES: dict[str, dict[str, Any]] = {
    "call/": {"arguments": {"text": INTRUDER}},
    "widget/tools-call/": {"name": "echo", "arguments": {"text": INTRUDER}},
    "widget/resources-read/": {"uri": "text://hello"},
    "widget/model-context/": {"content": [{"type": "text", "text": INTRUDER}]},
    "messages/": {"text": INTRUDER},
    "rename/": {"title": INTRUDER},
    "edit/": {"name": INTRUDER, "transport": "streamable_http", "url": "http://127.0.0.1:9/mcp"},
    "prompts/": {"prompt": "greet", "arg_name": INTRUDER},
    "api/servers/<int:pk>/": {"name": INTRUDER},
    "api/conversations/<int:pk>/": {"title": INTRUDER},
}

_PARAM = re.compile(r"<(?:(?P<conv>\w+):)?(?P<name>\w+)>")
_ADMIN_OBJECT = re.compile(r"^admin/(?P<app>\w+)/(?P<model>\w+)/<")


def url_routes(resolver: URLResolver | None = None, prefix: str = "") -> list[str]:
    """Every leaf route of the URL configuration, as its full pattern string."""
    resolver = resolver or get_resolver()
    routes: list[str] = []
    for entry in resolver.url_patterns:
        pattern = entry.pattern
        text = str(pattern)
        if isinstance(entry, URLResolver):
            routes.extend(url_routes(entry, prefix + text))
        elif isinstance(entry, URLPattern):
            if not isinstance(pattern, (RoutePattern, RegexPattern)):
                raise AssertionError(f"unknown pattern type {type(pattern)} for {prefix + text}")
            routes.append(prefix + text)
    return routes


def websocket_routes() -> list[str]:
    from inspector.routing import websocket_urlpatterns

    return [str(entry.pattern) for entry in websocket_urlpatterns]


@dataclass
class Owned:
    """Real ids of the owner's objects, by what a route parameter names."""

    server: int
    tool: str
    call: str
    conversation: int
    turn: int
    token: int
    user: int
    server_request: str = ""  # a ServerRequest of the owner's call (uuid)
    replay_run: int = 0
    eval_suite: int = 0  # an eval suite of the owner's, a case of it, and a run of it
    eval_case: int = 0
    eval_run: int = 0
    load_run: str = ""  # a LoadRun of the owner's server (uuid)
    admin_objects: dict[tuple[str, str], Any] = field(default_factory=dict)
    content_type_of_server: int = 0


def asked_and_replayed(call, conversation_id: int, user, text: str = "") -> dict[str, Any]:
    """A server request of `call`, a replay run of the conversation and a load test of its server:
    the ids the server-request, replay and load-test routes name (Owned.server_request,
    Owned.replay_run, Owned.load_run)."""
    from chat.models import ReplayRun
    from tools.models import ServerRequest

    asked = ServerRequest.objects.create(tool_call=call, server_id=call.server_id, kind=ServerRequest.Kind.ELICITATION,
                                         method="elicitation/create", mode="form",
                                         params={"message": text or "a question", "requestedSchema": {"type": "object"}})
    run = ReplayRun.objects.create(conversation_id=conversation_id, created_by=user, status=ReplayRun.Status.COMPLETED)
    from review.models import LoadRun  # and a load test of the call's server (Owned.load_run)

    load_run = LoadRun.objects.create(server_id=call.server_id, tool_name=call.tool_name, calls=1, concurrency=1,
                                      started_by=user, status=LoadRun.Status.SUCCEEDED)
    return {"server_request": str(asked.pk), "replay_run": run.pk, "load_run": str(load_run.pk)}


class UnfillableRoute(AssertionError):
    pass


def fill(route: str, owned: Owned) -> list[str]:
    """The concrete paths to request for `route` (a leading slash, parameters filled)."""
    if isinstance_regex(route):
        return [_fill_regex(route)]

    def value(match: re.Match) -> str:
        name, before = match.group("name"), route[: match.start()]
        if route.startswith("admin/"):
            if before == "admin/r/":
                return str(owned.content_type_of_server)
            if before.startswith("admin/r/"):
                return str(owned.server)
            if before == "admin/auth/user/":
                return str(owned.user)
            found = _ADMIN_OBJECT.match(route)
            if found and (found["app"], found["model"]) in owned.admin_objects:
                return str(owned.admin_objects[(found["app"], found["model"])])
        elif name == "name":
            return owned.tool
        elif name == "suite_pk":
            return str(owned.eval_suite)
        elif name == "call_id":
            return owned.call  # a call of the owner's conversation
        elif name == "pk":
            last = before.rstrip("/").rsplit("/", 1)[-1]
            by_segment = {"servers": owned.server, "tool-calls": owned.call, "conversations": owned.conversation,
                          "chat": owned.conversation, "turns": owned.turn, "tokens": owned.token,
                          "server-requests": owned.server_request, "replays": owned.replay_run,
                          "evals": owned.eval_suite, "suites": owned.eval_suite, "cases": owned.eval_case,
                          "runs": owned.eval_run, "from-conversation": owned.conversation,
                          "load-tests": owned.load_run}
            if last in by_segment and by_segment[last] != "":
                return str(by_segment[last])
        raise UnfillableRoute(f"The crawl cannot fill <{match.group(0)[1:-1]}> in {route!r}: teach tests/faults/route_crawl.py "
                              "which object it names, so the new route is crawled with a real id.")

    return ["/" + _PARAM.sub(value, route)]


def isinstance_regex(route: str) -> bool:
    return "(?P<" in route or route.endswith("$")


def _fill_regex(route: str) -> str:
    """Admin's two regex routes: the app index and the catch-all."""
    app_index = re.search(r"\^\(\?P<app_label>([\w|]+)\)/\$", route)
    if app_index:
        return "/" + route[: app_index.start()] + app_index.group(1).split("|")[0] + "/"
    if route.endswith("(?P<url>.*)$"):
        return "/" + route.replace("(?P<url>.*)$", "no-such-page/")
    raise UnfillableRoute(f"The crawl cannot fill the regex route {route!r}.")


def has_owner_ids(route: str) -> bool:
    return bool(_PARAM.search(route)) or "(?P<url>" in route


def body_for(route: str) -> dict[str, Any]:
    if route in POST_BODIES:
        return POST_BODIES[route]
    for suffix, body in POST_BODIES.items():
        if route.endswith(suffix) and "<" not in suffix:
            return body
    return {}


@dataclass
class Answer:
    method: str
    path: str
    status: int
    location: str
    body: str


def send(client, method: str, route: str, path: str, host: str | None = None) -> Answer:
    """One request through Django's whole middleware stack (CSRF not enforced: the views' own
    checks are what is under test)."""
    extra: dict[str, Any] = {}
    if host:
        extra["HTTP_HOST"] = host
    body = body_for(route)
    if path.startswith("/api/"):
        response = getattr(client, method.lower())(path, data=json.dumps(body) if method != "GET" else None,
                                                   content_type="application/json", **extra) \
            if method != "GET" else client.get(path, **extra)
    elif method == "GET":
        response = client.get(path, **extra)
    else:
        response = getattr(client, method.lower())(path, data=body, **extra)
    if getattr(response, "streaming", False):
        import warnings

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="StreamingHttpResponse must consume")
            text = b"".join(response).decode("utf-8", "replace")
    else:
        text = response.content.decode("utf-8", "replace")
    return Answer(method, path, response.status_code, response.get("Location", ""), text)


def is_login_redirect(answer: Answer) -> bool:
    """A redirect to a login page; or, from the admin's logout, to the admin's index, which is
    where Django sends a user without admin access (and which sends them to its login page)."""
    if answer.status != 302:
        return False
    target = urlsplit(answer.location).path
    return target in LOGIN_PAGES or (urlsplit(answer.path).path == "/admin/logout/" and target == "/admin/")


def leaks(answer: Answer, markers: Iterable[str]) -> list[str]:
    return [m for m in markers if m in answer.body]


@dataclass
class CrawlReport:
    requests: int = 0
    routes: int = 0
    websocket_routes: int = 0
    problems: list[str] = field(default_factory=list)
    leaks: int = 0

    def problem(self, text: str) -> None:
        self.problems.append(text)


def crawl(client, routes: list[str], owned: Owned, markers: list[str], *, as_who: str,
          login: Callable[[], None] | None, methods: tuple[str, ...] = ("GET", "POST"),
          report: CrawlReport | None = None, admin_login_only: bool = False,
          refuse_owner_ids: bool = True) -> CrawlReport:
    """Request every route as `as_who` and record what should not have happened.

    `login` (None: anonymous) runs before every request, since some routes (logout) end the
    session. Routes naming the owner's objects must refuse; the others may answer, but never
    with the owner's data. With `admin_login_only` (a non-staff user) every admin route but its
    login page must send to the login page. `refuse_owner_ids=False` (staff in the admin, who
    may be given model permissions) only looks for the owner's data in the answers.
    """
    from django.conf import settings

    report = report or CrawlReport()
    # A view that raises is a 500 to report, not the end of the crawl.
    client.raise_request_exception = False
    for route in routes:
        if route in SANDBOX_ONLY:
            # On the app's own host the sandbox proxy does not exist.
            answer = send(client, "GET", route, fill(route, owned)[0])
            report.requests += 1
            if answer.status != 404:
                report.problem(f"{as_who} GET /{route} on the app's host -> {answer.status}, expected 404")
            continue
        public = route in PUBLIC
        for path in fill(route, owned):
            for method in methods + (("PATCH", "DELETE") if path.startswith("/api/") else ()):
                if login is None:
                    client.logout()
                else:
                    login()
                answer = send(client, method, route, path)
                report.requests += 1
                where = f"{as_who} {method} {path} -> {answer.status} {answer.location}".rstrip()
                if answer.status >= 500:
                    report.problem(f"{where}: server error")
                found = leaks(answer, markers)
                if found:
                    report.leaks += 1
                    report.problem(f"{where}: shows the owner's {found}")
                if public:
                    continue
                refused = answer.status in ALLOWED_REFUSALS or is_login_redirect(answer)
                if login is None and not refused:
                    report.problem(f"{where}: answered an anonymous request (add login, or list it in PUBLIC)")
                elif admin_login_only and route.startswith("admin/") and not is_login_redirect(answer):
                    report.problem(f"{where}: the admin answered a non-staff user")
                elif login is not None and refuse_owner_ids and has_owner_ids(route) and not refused:
                    report.problem(f"{where}: answered a request for another user's object")
    # The sandbox origin serves the sandbox proxy and nothing else, logged in or not.
    sandbox = settings.SANDBOX_HOST
    for route in routes:
        for path in fill(route, owned):
            if login is not None:
                login()
            answer = send(client, "GET", route, path, host=sandbox)
            report.requests += 1
            expected = 200 if route in SANDBOX_ONLY else 404
            if answer.status != expected:
                report.problem(f"{as_who} GET {path} on the sandbox origin -> {answer.status}, expected {expected}")
            if leaks(answer, markers):
                report.leaks += 1
                report.problem(f"{as_who} GET {path} on the sandbox origin shows the owner's data")
    report.routes = len(routes)
    return report


def get_every_route(client, routes: list[str], owned: Owned, login: Callable[[], None]) -> list[Answer]:
    """GET every route (parameters filled) as one user: the answers, for a grep of what they show."""
    client.raise_request_exception = False
    answers = []
    for route in routes:
        if route in SANDBOX_ONLY:
            continue
        for path in fill(route, owned):
            login()
            answers.append(send(client, "GET", route, path))
    return answers


def admin_objects(**chosen: Any) -> dict[tuple[str, str], Any]:
    """The pk to fill in for every model registered in the admin: `chosen` ("tools.server": pk)
    where given, else the newest row (0 for an empty table, which the admin answers with a 404)."""
    from django.contrib import admin

    out = {}
    for model in admin.site._registry:  # noqa: SLF001 - the admin's own list of models
        label = (model._meta.app_label, model._meta.model_name)
        if f"{label[0]}.{label[1]}" in chosen:
            out[label] = chosen[f"{label[0]}.{label[1]}"]
        else:
            newest = model.objects.order_by("-pk").values_list("pk", flat=True).first()
            out[label] = newest if newest is not None else 0
    return out
