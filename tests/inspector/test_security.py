"""Security properties found in review: escaping, key handling, access after unsharing, origins."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from channels.testing import WebsocketCommunicator

from chat import history
from chat.models import Conversation
from inspector.asgi import application
from tests.helpers import run_async
from tools.models import Projection, RpcFrame, Server, Tool, ToolCall, ToolResult

pytestmark = pytest.mark.django_db


def test_admin_tool_call_page_escapes_key_names_from_results(client, admin_user, user):
    server = Server.objects.create(name="evil", transport="streamable_http", url="http://h/mcp", owner=user)
    call = ToolCall.objects.create(server=server, tool_name="t", origin="manual", requested_by=user, status="succeeded")
    evil = "</script><script>window.pwned=1</script>"
    ToolResult.objects.create(tool_call=call, raw={"content": [], evil: 1}, size_bytes=1, tokens=1)
    Projection.objects.create(tool_call=call, payload={"content": []}, text="x", policy="strict",
                              removed=[{"path": evil, "reason": "not part of what the model sees"}], size_bytes=1, tokens=1)
    client.force_login(admin_user)
    page = client.get(f"/admin/tools/toolcall/{call.pk}/change/").content.decode()
    assert "<script>window.pwned" not in page
    assert "window.pwned" in page  # it is shown, escaped


def test_unshared_server_is_no_longer_offered_to_the_model(user, other_user):
    server = Server.objects.create(name="theirs", transport="streamable_http", url="http://h/mcp", owner=other_user,
                                   shared=True, instructions="secret instructions")
    Tool.objects.create(server=server, name="tool", input_schema={"type": "object"}, visibility=["model", "app"])
    conversation = Conversation.objects.create(owner=user, model="m")
    conversation.servers.set([server])
    request = history.build(conversation)
    assert [t["function"]["name"] for t in request.tools] == ["theirs__tool"]
    assert "secret instructions" in json.dumps(request.messages)
    Server.objects.filter(pk=server.pk).update(shared=False)
    request = history.build(conversation)
    assert request.tools == [] and "secret instructions" not in json.dumps(request.messages)


def test_json_rpc_log_of_a_shared_server_stays_with_its_owner(client, user, other_user):
    server = Server.objects.create(name="shared", transport="streamable_http", url="http://h/mcp", owner=user, shared=True)
    RpcFrame.objects.create(server=server, direction="out", method="tools/call", rpc_id="1", kind="request",
                            payload={"params": {"arguments": {"private": "PRIVATE-ARG"}}}, at=dt.datetime.now(dt.timezone.utc))
    client.force_login(user)
    assert "PRIVATE-ARG" in client.get("/rpc-log/export/").content.decode()
    client.force_login(other_user)
    assert "PRIVATE-ARG" not in client.get("/rpc-log/export/").content.decode()
    assert "PRIVATE-ARG" not in client.get("/rpc-log/").content.decode()


@pytest.mark.django_db(transaction=True)
def test_websockets_refuse_the_sandbox_origin(client, user):
    client.force_login(user)
    cookie = (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())

    async def attempt(origin: bytes):
        comm = WebsocketCommunicator(application, "/ws/rpc-log/", headers=[cookie, (b"origin", origin)])
        connected, _ = await comm.connect(timeout=5)
        await comm.disconnect()
        return connected

    assert run_async(attempt, b"http://127.0.0.1:8000") is True
    assert run_async(attempt, b"http://localhost:8001") is False


def test_error_text_loses_url_credentials_and_queries():
    from tools.mcp.url_secrets import redact

    assert redact("could not connect to https://user:pw@example.com/mcp?token=abc") == "could not connect to https://example.com/mcp"
