"""Every route crawled (issue 10.4): each URL pattern (admin included) and each WebSocket route,
with real ids of alice's objects filled in, requested anonymously, as bob (another non-staff
user) and, for the admin, as non-staff users. Only login redirects and 401/403/404/405 may come
back, none of alice's data may show, her objects stay as they were, and /healthz tells an
anonymous caller nothing but up or down.

The crawler is tests/faults/route_crawl.py; `test_the_crawl_catches_...` proves it fails on a route
that forgets login or ownership.
"""

from __future__ import annotations

import asyncio
import json
import sys
import types

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Group
from django.contrib.contenttypes.models import ContentType
from django.test import Client, override_settings

from chat import history
from chat.tool_calls import calls_of
from chat.models import Conversation, Message, ModelContext, ProviderKey, ReplayRun, Turn
from evals.models import Attempt, Case, Suite
from evals.models import Run as EvalRun
from inspector.asgi import application
from inspector.models import ApiToken, SignInIdentity
from tests.faults import route_crawl
from tests.helpers import Api, refresh_tools, run_async, run_call, wait_for
from tests.figures import record
from tools.models import RpcFrame, Server, ServerLogMessage, ServerRequest, Tool, ToolCall, UiResource

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

MARK = "ALPHA-PRIVATE"
ORIGIN = (b"origin", b"http://127.0.0.1:8000")


def alice_world(client, user, server_url: str, fake_llm) -> tuple[route_crawl.Owned, list[str]]:
    """Alice's objects, made the way she would make them: a private server with its tools, a
    manual call, a chat turn that calls a tool, a view's model context, keys and a token."""
    server = Server.objects.create(name=f"{MARK}-srv", transport="streamable_http", url=server_url, owner=user,
                                   instructions=f"{MARK}-instructions")
    refresh_tools(server)
    call = run_call(server, "echo", {"text": f"{MARK}-manual-arg"})
    assert call.status == "succeeded", call.error

    client.force_login(user)
    api = Api(client)
    conversation = api.post("/api/conversations/", {
        "model": "openai/test-model", "api_base": fake_llm.url, "api_key": f"{MARK}-conv-key",
        "system_prompt": f"{MARK}-system", "server_ids": [server.pk]}).json()["id"]
    Conversation.objects.filter(pk=conversation).update(title=f"{MARK}-title")
    tool_name = next(n for n in history.build(Conversation.objects.get(pk=conversation)).tool_map
                     if n.endswith("__echo"))
    fake_llm.script([{"tool_calls": [{"name": tool_name, "arguments": {"text": f"{MARK}-llm-arg"}, "id": "call_a"}]},
                     {"text": f"{MARK}-reply"}])
    assert api.post(f"/api/conversations/{conversation}/messages/", {"text": f"{MARK}-question"}).status_code == 202
    wait_for(lambda: Turn.objects.filter(conversation_id=conversation).exclude(status="running").exists(),
             timeout=40, message="alice's turn")
    turn = Turn.objects.get(conversation_id=conversation)
    assert turn.status == "completed", turn.error
    llm_call = calls_of(conversation).get()
    assert api.post(f"/api/tool-calls/{llm_call.pk}/widget/model-context/",
                    {"content": [{"type": "text", "text": f"{MARK}-context"}]}).status_code == 200
    client.logout()

    ui = UiResource.objects.create(server=server, uri="ui://alpha/view.html", html=f"<p>{MARK}-view</p>")
    key = ProviderKey.objects.create(user=user, provider="alpha-private-provider", api_key=f"{MARK}-provider-key")
    token, _ = ApiToken.issue(user, f"{MARK}-token")
    group = Group.objects.create(name=f"{MARK}-group")
    identity = SignInIdentity.objects.create(user=user, issuer="https://idp.example", subject=f"{MARK}-subject",
                                             email=f"{MARK}@team.example")
    frame = RpcFrame.objects.filter(server=server).first()
    # A server's request for input during alice's call, a log line of it, and a replay of her conversation.
    asked = ServerRequest.objects.create(tool_call=llm_call, server=server, kind=ServerRequest.Kind.ELICITATION,
                                         method="elicitation/create", mode="form",
                                         params={"message": f"{MARK}-question-from-server", "requestedSchema": {"type": "object"}})
    log_line = ServerLogMessage.objects.create(server=server, tool_call=llm_call, level="info", data=f"{MARK}-log-line")
    run = ReplayRun.objects.create(conversation_id=conversation, created_by=user, status=ReplayRun.Status.COMPLETED,
                                   summary={"note": f"{MARK}-replay"})
    suite = Suite.objects.create(owner=user, name=f"{MARK}-suite", judge_api_key=f"{MARK}-judge-key")
    suite.servers.set([server])
    case = Case.objects.create(suite=suite, name=f"{MARK}-case", prompts=[f"{MARK}-prompt"])
    eval_run = EvalRun.objects.create(suite=suite, owner=user, model_specs=[{"model": "openai/test-model", "api_base": ""}],
                                      api_key=f"{MARK}-run-key", status=EvalRun.Status.COMPLETED)
    attempt = Attempt.objects.create(run=eval_run, case=case, case_name=f"{MARK}-case", prompts=[f"{MARK}-prompt"],
                                     model="openai/test-model", status=Attempt.Status.PASSED, conversation_id=conversation,
                                     answer=f"{MARK}-answer")
    # Her server's review: the version her refresh recorded, an approval, a load test.
    from review.models import LoadRun, ServerReview, SurfaceVersion

    version = SurfaceVersion.objects.get(server=server)
    review = ServerReview.objects.create(server=server, approved=version, approved_hash=version.hash)
    load_run = LoadRun.objects.create(server=server, tool_name="echo", arguments={"text": f"{MARK}-load"}, calls=1,
                                      concurrency=1, started_by=user, status=LoadRun.Status.SUCCEEDED)
    owned = route_crawl.Owned(
        eval_suite=suite.pk, eval_case=case.pk, eval_run=eval_run.pk,
        server=server.pk, tool="echo", call=str(llm_call.pk), conversation=conversation, turn=turn.pk,
        token=token.pk, user=user.pk, server_request=str(asked.pk), replay_run=run.pk, load_run=str(load_run.pk),
        content_type_of_server=ContentType.objects.get_for_model(Server).pk,
        admin_objects={
            ("auth", "group"): group.pk, ("auth", "user"): user.pk, ("inspector", "apitoken"): token.pk,
            ("inspector", "signinidentity"): identity.pk,
            ("tools", "server"): server.pk, ("tools", "tool"): Tool.objects.get(server=server, name="echo").pk,
            ("tools", "toolcall"): call.pk, ("tools", "rpcframe"): frame.pk, ("tools", "uiresource"): ui.pk,
            ("chat", "conversation"): conversation, ("chat", "turn"): turn.pk,
            ("chat", "modelcontext"): ModelContext.objects.get(tool_call=llm_call).pk, ("chat", "providerkey"): key.pk,
            ("evals", "suite"): suite.pk, ("evals", "case"): case.pk, ("evals", "run"): eval_run.pk,
            ("evals", "attempt"): attempt.pk,
            ("tools", "serverrequest"): asked.pk, ("tools", "serverlogmessage"): log_line.pk, ("chat", "replayrun"): run.pk,
            ("review", "surfaceversion"): version.pk, ("review", "serverreview"): review.pk, ("review", "loadrun"): load_run.pk,
        },
    )
    # Strings only alice's objects hold; the ids that are not small integers.
    markers = [MARK, str(call.pk), str(llm_call.pk), str(asked.pk), server_url]
    return owned, markers


def snapshot(user) -> dict:
    """What bob's requests must not have changed."""
    return {
        "servers": sorted(Server.objects.filter(owner=user).values_list("pk", "name", "enabled", "url", "shared")),
        "conversations": sorted(Conversation.objects.filter(owner=user).values_list("pk", "title", "model", "api_base")),
        "messages": Message.objects.filter(conversation__owner=user).count(),
        "calls": ToolCall.objects.count(),
        "contexts": sorted(ModelContext.objects.values_list("pk", "content")),
        "tokens": ApiToken.objects.filter(user=user).count(),
        "keys": ProviderKey.objects.filter(user=user).count(),
    }


def test_every_route_refuses_anonymous_users_other_users_and_non_staff(client, user, other_user, staff_user,
                                                                       basic_server_http, fake_llm):
    owned, markers = alice_world(client, user, basic_server_http.url, fake_llm)
    before = snapshot(user)
    routes = route_crawl.url_routes()
    assert len(routes) > 100 and "admin/tools/toolcall/<path:object_id>/change/" in routes

    report = route_crawl.crawl(client, routes, owned, markers, as_who="anonymous", login=None)
    route_crawl.crawl(client, routes, owned, markers, as_who="bob", login=lambda: client.force_login(other_user),
                      methods=("GET", "POST"), report=report, admin_login_only=True)
    # Alice herself is not staff: the admin is closed to her, her own objects included.
    admin_routes = [r for r in routes if r.startswith("admin/")]
    route_crawl.crawl(client, admin_routes, owned, [], as_who="alice (non-staff)",
                      login=lambda: client.force_login(user), report=report, admin_login_only=True)
    # Staff without model permissions: the admin opens, but shows none of alice's objects.
    route_crawl.crawl(client, admin_routes, owned, markers, as_who="staff", login=lambda: client.force_login(staff_user),
                      methods=("GET",), report=report, refuse_owner_ids=False)

    record("routes", len(routes), "route crawl")
    record("requests", report.requests, "route crawl")
    record("problems", len(report.problems), "route crawl")
    record("leaks", report.leaks, "route crawl")
    assert report.problems == [], "\n".join(report.problems[:60])
    assert snapshot(user) == before
    assert not ToolCall.objects.filter(requested_by=other_user).exists()
    assert not Message.objects.filter(text__contains=route_crawl.INTRUDER).exists()


def test_a_shared_server_is_seen_by_others_but_only_its_owner_changes_it(client, user, other_user, basic_server_http):
    server = Server.objects.create(name="team-srv", transport="streamable_http", url=basic_server_http.url, owner=user,
                                   shared=True, headers={"X-Team": "team-header-secret"})
    client.force_login(other_user)
    api = Api(client)
    assert api.get(f"/api/servers/{server.pk}/").status_code == 200
    for method, path, body in [("patch", f"/api/servers/{server.pk}/", {"name": "taken"}),
                               ("delete", f"/api/servers/{server.pk}/", None)]:
        answer = getattr(api, method)(path, body) if body else getattr(api, method)(path)
        assert answer.status_code == 403, (path, answer.content)
        assert "error" in answer.json()
    for path in (f"/servers/{server.pk}/edit/", f"/servers/{server.pk}/delete/", f"/servers/{server.pk}/toggle/"):
        assert client.post(path, {"name": "taken", "transport": "streamable_http", "url": "http://x/mcp"}).status_code == 403, path
    server.refresh_from_db()
    assert (server.name, server.enabled, server.headers) == ("team-srv", True, {"X-Team": "team-header-secret"})


def test_healthz_tells_anonymous_callers_only_up_or_down(client, staff_user, celery_worker):
    anonymous = client.get("/healthz")
    assert anonymous.status_code in (200, 503)
    body = anonymous.json()
    assert set(body) == {"status", "checks"}
    for name, check in body["checks"].items():
        assert set(check) <= {"ok", "workers"}, (name, check)
        assert isinstance(check.get("workers", 0), int)
    assert celery_worker.hostname not in anonymous.content.decode()
    # The same probe as staff has the details: the test above would see them if they leaked.
    client.force_login(staff_user)
    assert celery_worker.hostname in client.get("/healthz").content.decode()


def _socket(path: str, cookie: str | None) -> WebsocketCommunicator:
    headers = [ORIGIN] + ([(b"cookie", f"sessionid={cookie}".encode())] if cookie else [])
    return WebsocketCommunicator(application, path, headers=headers)


def _session(who) -> str:
    """A session of its own (logging another user in on the same client would end it)."""
    client = Client()
    client.force_login(who)
    return client.cookies["sessionid"].value


def test_every_websocket_route_refuses_others_and_the_log_carries_no_one_elses_frames(client, user, other_user,
                                                                                     basic_server_http, fake_llm):
    owned, markers = alice_world(client, user, basic_server_http.url, fake_llm)
    routes = route_crawl.websocket_routes()
    assert {"ws/conversations/<int:pk>/", "ws/rpc-log/", "ws/tool-calls/<uuid:pk>/"} <= set(routes)
    bob, alice = _session(other_user), _session(user)

    async def attempt(path: str, cookie: str | None):
        comm = _socket(path, cookie)
        connected, code = await comm.connect(timeout=5)
        await comm.disconnect()
        return connected, code

    refused = 0
    for route in routes:
        path = route_crawl.fill(route, owned)[0]
        for who, cookie in (("anonymous", None), ("bob", bob)):
            connected, code = run_async(attempt, path, cookie)
            if "<" in route:  # names alice's object: refused for both
                assert not connected, f"{who} opened {path}"
                assert code == (4401 if cookie is None else 4404), (who, path, code)
                refused += 1
            elif cookie is None:
                assert not connected and code == 4401, (who, path, code)
                refused += 1
        assert run_async(attempt, path, alice)[0], f"alice could not open her own {path}"
    record("websocket routes", len(routes), "route crawl")
    record("websocket refusals", refused, "route crawl")

    # bob's live JSON-RPC log hears his own server, never alice's: alice's call runs first and
    # her own socket gets its frames; then bob's call; bob's socket must get his frames only.
    bob_server = Server.objects.create(name="bob-srv", transport="streamable_http", url=basic_server_http.url,
                                       owner=other_user)
    refresh_tools(bob_server)
    alice_server = Server.objects.get(pk=owned.server)

    async def scenario():
        alice_log, bob_log = _socket("/ws/rpc-log/", alice), _socket("/ws/rpc-log/", bob)
        assert (await alice_log.connect(timeout=5))[0] and (await bob_log.connect(timeout=5))[0]
        await asyncio.to_thread(_closing_run_call, alice_server, f"{MARK}-live-arg")
        await _until(alice_log, f"{MARK}-live-arg")
        await asyncio.to_thread(_closing_run_call, bob_server, "bob-live-arg")
        heard = await _until(bob_log, "bob-live-arg")
        await alice_log.disconnect()
        await bob_log.disconnect()
        return heard

    heard = run_async(scenario)
    assert not [m for m in markers if m in heard], "bob's JSON-RPC log socket carried alice's frames"
    assert all(f["server_id"] == bob_server.pk for e in map(json.loads, heard.split("\n")) for f in e.get("frames", []))


def _closing_run_call(server, text):
    from django.db import connections

    try:
        return run_call(server, "echo", {"text": text})
    finally:
        connections.close_all()


async def _until(comm: WebsocketCommunicator, text: str, timeout: float = 30) -> str:
    """Every event the socket received until one contains `text`, as JSON lines."""
    loop = asyncio.get_running_loop()
    deadline, seen = loop.time() + timeout, []
    while loop.time() < deadline:
        event = await comm.receive_json_from(timeout=max(0.1, deadline - loop.time()))
        seen.append(json.dumps(event))
        if text in seen[-1]:
            return "\n".join(seen)
    raise AssertionError(f"no event with {text!r}")


# --- The crawl can fail -----------------------------------------------------------------------------

def _leaky_urlconf() -> str:
    """The project's URLs plus two mistakes: a page without login, an API view without an owner check."""
    from django.contrib.auth.decorators import login_not_required
    from django.http import JsonResponse
    from django.urls import include, path

    from inspector.api import api_view

    @login_not_required
    def forgot_login(request):
        return JsonResponse({"servers": list(Server.objects.values_list("name", flat=True))})

    @api_view("GET")
    def forgot_owner(request, pk):
        return JsonResponse({"name": Server.objects.get(pk=pk).name})

    module = types.ModuleType("tests._leaky_urls")
    module.urlpatterns = [
        path("forgot-login/", forgot_login),
        path("api/servers/<int:pk>/forgot-owner/", forgot_owner),
        path("", include("inspector.urls")),
    ]
    sys.modules[module.__name__] = module
    return module.__name__


def test_the_crawl_catches_a_route_that_forgets_login_or_ownership(client, user, other_user):
    server = Server.objects.create(name=f"{MARK}-srv", transport="streamable_http", url="http://127.0.0.1:9/mcp", owner=user)
    owned = route_crawl.Owned(server=server.pk, tool="echo", call="00000000-0000-0000-0000-000000000000",
                              conversation=0, turn=0, token=0, user=user.pk)
    with override_settings(ROOT_URLCONF=_leaky_urlconf()):
        routes = [r for r in route_crawl.url_routes() if "forgot" in r]
        assert len(routes) == 2
        anonymous = route_crawl.crawl(client, routes, owned, [MARK], as_who="anonymous", login=None)
        bob = route_crawl.crawl(client, routes, owned, [MARK], as_who="bob", login=lambda: client.force_login(other_user))
    assert any("GET /forgot-login/" in p and "answered an anonymous request" in p for p in anonymous.problems), anonymous.problems
    assert any("/forgot-owner/" in p and "another user's object" in p for p in bob.problems), bob.problems
    assert bob.leaks >= 2  # both show alice's server name to bob
    # A new route whose parameter the crawl cannot fill is an error, not a route silently skipped.
    with pytest.raises(route_crawl.UnfillableRoute):
        route_crawl.fill("api/widgets/<int:widget_id>/", owned)
