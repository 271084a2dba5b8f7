"""Secrets never shown (issue 10.5): a server's header, env and URL credentials, a saved
provider key and a conversation key, each a distinctive marker, go through a real tool call
on a server that refuses requests without them and through two chat turns. Then every API
answer, every page (the admin's included) as the owner, another user and a superuser, the
worker's and daphne's logs, the JSON-RPC log as anyone sees it, and every request the LLM
received are grepped for them: 0 hits. Every column of every table, read with raw SQL, holds
none of them in clear.
"""

from __future__ import annotations

import json
import sys
import uuid

import httpx
import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection

from chat.tool_calls import calls_of
from chat.models import Conversation, ProviderKey, Turn
from inspector.models import ApiToken
from tests.faults import route_crawl
from tests.helpers import ARTIFACTS, wait_for
from tests.figures import record
from tests.mcp_servers.launch import server_path
from tools.models import RpcFrame, Server, ToolCall

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

RUN = uuid.uuid4().hex[:8]
SECRETS = {
    "header": f"hdr-secret-{RUN}",
    "env": f"env-secret-{RUN}",
    "url password": f"pw-secret-{RUN}",
    "url token": f"tok-secret-{RUN}",
    "provider key": f"sk-provider-secret-{RUN}",
    "conversation key": f"sk-conversation-secret-{RUN}",
}
SERVER_SECRETS = ("header", "env", "url password", "url token")


@pytest.fixture(scope="module")
def guarded_http():
    """The basic test server over HTTP, answering 401 without the URL's token and password."""
    from tests.mcp_servers.launch import start_server

    server = start_server("basic.py", "http", "--require-token", SECRETS["url token"],
                          "--require-basic", f"u:{SECRETS['url password']}")
    yield server
    server.stop()


def hits(text: str, names=tuple(SECRETS)) -> list[str]:
    return [name for name in names if SECRETS[name] in text]


class Answers:
    """Every body read during the test, with where it came from."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def add(self, where: str, body: str | bytes) -> str:
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        self.seen.append((where, text))
        return text

    def problems(self) -> list[str]:
        return [f"{where}: {found}" for where, text in self.seen if (found := hits(text))]


def wait_turn(conversation_id: int) -> Turn:
    wait_for(lambda: Turn.objects.filter(conversation_id=conversation_id).exclude(status="running").exists(),
             timeout=40, message="the turn to end")
    return Turn.objects.get(conversation_id=conversation_id)


def test_secrets_appear_in_no_answer_page_log_llm_request_or_clear_column(
        client, user, other_user, staff_user, admin_user, live_app, fake_llm, guarded_http):
    seen = Answers()
    _, alice_key = ApiToken.issue(user, "secrets")
    _, staff_key = ApiToken.issue(staff_user, "secrets")
    alice = httpx.Client(base_url=live_app.url, headers={"Authorization": f"Token {alice_key}"}, timeout=40)
    staff = httpx.Client(base_url=live_app.url, headers={"Authorization": f"Token {staff_key}"}, timeout=40)

    def call(http: httpx.Client, method: str, path: str, body=None, status=(200,)) -> dict:
        response = http.request(method, path, json=body)
        seen.add(f"{method} {path} (daphne)", response.content)
        assert response.status_code in status, (path, response.status_code, response.text[:500])
        return response.json() if response.content else {}

    # Servers with every kind of server secret, made through the API on daphne.
    url = f"http://u:{SECRETS['url password']}@127.0.0.1:{guarded_http.port}/mcp?token={SECRETS['url token']}&v=1"
    http_server = call(alice, "POST", "/api/servers/", {
        "name": "secret-srv", "transport": "streamable_http", "url": url, "shared": True,
        "headers": {"X-Api-Key": SECRETS["header"]}}, status=(201,))["id"]
    stdio_server = call(staff, "POST", "/api/servers/", {
        "name": "secret-stdio", "transport": "stdio", "command": sys.executable, "args": [server_path("basic.py")],
        "env": {"INSPECTOR_TEST_SECRET": SECRETS["env"]}}, status=(201,))["id"]
    # The refresh connects with the secrets (the guarded server refuses requests without them).
    assert "echo" in [t["name"] for t in call(alice, "POST", f"/api/servers/{http_server}/refresh/")["tools"]]
    assert "echo" in [t["name"] for t in call(staff, "POST", f"/api/servers/{stdio_server}/refresh/")["tools"]]

    # A manual tool call on each, through the worker.
    manual = call(alice, "POST", f"/api/servers/{http_server}/tools/echo/call/", {"arguments": {"text": "manual"}},
                  status=(202,))["id"]
    stdio_call = call(staff, "POST", f"/api/servers/{stdio_server}/tools/echo/call/", {"arguments": {"text": "stdio"}},
                      status=(202,))["id"]
    for pk in (manual, stdio_call):
        wait_for(lambda: ToolCall.objects.get(pk=pk).is_final, message="the manual call")
        assert ToolCall.objects.get(pk=pk).status == "succeeded", ToolCall.objects.get(pk=pk).error

    # A saved provider key (the page form), a conversation key (the API): two chat turns.
    client.force_login(user)
    assert client.post("/account/provider-keys/", {"provider": "openai", "api_key": SECRETS["provider key"]}).status_code == 302
    with_key = call(alice, "POST", "/api/conversations/", {
        "model": "openai/test-model", "api_base": fake_llm.url, "api_key": SECRETS["conversation key"],
        "server_ids": [http_server]}, status=(201,))["id"]
    with_saved_key = call(alice, "POST", "/api/conversations/", {
        "model": "openai/test-model", "api_base": fake_llm.url, "server_ids": [http_server]}, status=(201,))["id"]
    fake_llm.script([
        {"tool_calls": [{"name": "secret-srv__echo", "arguments": {"text": "from the model"}, "id": "call_s"}]},
        {"text": "Echoed."},
        {"text": "Hello with the saved key."},
    ])
    call(alice, "POST", f"/api/conversations/{with_key}/messages/", {"text": "echo something"}, status=(202,))
    assert wait_turn(with_key).status == "completed", Turn.objects.get(conversation_id=with_key).error
    call(alice, "POST", f"/api/conversations/{with_saved_key}/messages/", {"text": "hello"}, status=(202,))
    assert wait_turn(with_saved_key).status == "completed", Turn.objects.get(conversation_id=with_saved_key).error
    llm_call = calls_of(with_key).get()
    assert llm_call.status == "succeeded", llm_call.error

    # Every API answer the owner reads, over daphne.
    for path in ("/api/servers/", f"/api/servers/{http_server}/", f"/api/servers/{http_server}/tools/",
                 "/api/servers/export/", "/api/conversations/", f"/api/conversations/{with_key}/",
                 f"/api/conversations/{with_key}/llm-messages/", f"/api/conversations/{with_saved_key}/",
                 f"/api/tool-calls/{manual}/", f"/api/tool-calls/{manual}/result/", f"/api/tool-calls/{llm_call.pk}/",
                 f"/api/tool-calls/{llm_call.pk}/result/"):
        call(alice, "GET", path)
    for path in (f"/api/servers/{stdio_server}/", "/api/servers/export/", f"/api/tool-calls/{stdio_call}/"):
        call(staff, "GET", path)

    # Every page and API route, GET, as the owner, as another user (the server is shared with
    # him), as the stdio server's staff owner, and as a superuser (the admin's pages too).
    routes = route_crawl.url_routes()
    key = ProviderKey.objects.get(user=user)
    requests = 0
    for server_pk, call_pk, owner in ((http_server, llm_call.pk, user), (stdio_server, stdio_call, staff_user)):
        owned = route_crawl.Owned(
            server=server_pk, tool="echo", call=str(call_pk), conversation=with_key,
            turn=Turn.objects.get(conversation_id=with_key).pk, token=0, user=owner.pk,
            **route_crawl.asked_and_replayed(ToolCall.objects.get(pk=call_pk), with_key, owner),
            content_type_of_server=ContentType.objects.get_for_model(Server).pk,
            admin_objects=route_crawl.admin_objects(**{
                "tools.server": server_pk, "tools.toolcall": call_pk, "chat.conversation": with_key,
                "chat.providerkey": key.pk, "tools.rpcframe": RpcFrame.objects.filter(server_id=server_pk).first().pk}),
        )
        for who in (owner, other_user, admin_user):
            for answer in route_crawl.get_every_route(client, routes, owned, lambda who=who: client.force_login(who)):
                assert answer.status < 500, (who.username, answer.path, answer.status)
                seen.add(f"{who.username} GET {answer.path}", answer.body)
                requests += 1
    # The JSON-RPC log as the owner (export included) and as bob, who sees the shared server.
    for who in (user, other_user, admin_user):
        client.force_login(who)
        for path in ("/rpc-log/", "/rpc-log/export/", f"/rpc-log/?server={http_server}"):
            seen.add(f"{who.username} GET {path}", client.get(path).content)

    # The logs the worker and daphne wrote.
    for name in ("worker.log", "daphne.log"):
        seen.add(f"test-artifacts/{name}", (ARTIFACTS / name).read_text(errors="replace"))

    record("answers and pages grepped", len(seen.seen), "secrets")
    record("secret hits in answers, pages, logs", len(seen.problems()), "secrets")
    assert requests > 400
    assert seen.problems() == [], "\n".join(seen.problems()[:40])

    # The LLM got the key meant for it, in its Authorization header only, and nothing else.
    llm_requests = fake_llm.requests + list(fake_llm.other_requests)
    assert len(fake_llm.requests) == 3
    llm_hits = [f"request {i} body: {found}" for i, r in enumerate(llm_requests)
                if (found := hits(json.dumps(r.get("body")) + (r.get("raw") or "") + r.get("path", "")))]
    llm_hits += [f"request {i} headers: {found}" for i, r in enumerate(llm_requests)
                 if (found := hits(json.dumps(r["headers"]), SERVER_SECRETS))]
    assert [r["headers"].get("authorization") for r in fake_llm.requests] == [
        f"Bearer {SECRETS['conversation key']}"] * 2 + [f"Bearer {SECRETS['provider key']}"]
    record("secret hits in LLM requests", len(llm_hits), "secrets")
    assert llm_hits == []

    # Every column of every table, raw: no secret in clear.
    clear = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            for row in cursor.fetchall():
                if found := hits(" ".join(str(v) for v in row)):
                    clear.append(f"{table}: {found}")
    record("secrets in clear in the database", len(clear), "secrets")
    assert clear == [], clear
    # ... and the encrypted columns do hold them (the model reads them back).
    server = Server.objects.get(pk=http_server)
    assert server.headers == {"X-Api-Key": SECRETS["header"]} and server.real_url() == url
    assert Server.objects.get(pk=stdio_server).env == {"INSPECTOR_TEST_SECRET": SECRETS["env"]}
    assert Conversation.objects.get(pk=with_key).api_key == SECRETS["conversation key"]
    assert key.api_key == SECRETS["provider key"]
