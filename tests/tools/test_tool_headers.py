"""Tools with an invalid `x-mcp-header` are set aside (issue 26.4), as the `mcp` SDK's client drops
them on a 2026-07-28 connection: stored apart with the reason, shown apart on the server page and
in the API, never callable (not from the tool page's API, not by a replay of an older call).

Real parts: tests/mcp_servers/headers.py over Streamable HTTP (its middleware lists the invalid
tools and notes every call it gets), the suite's Celery worker, the JSON API and the server page.
"""

from __future__ import annotations

import html

import pytest

from tests.helpers import finished_call, start_api_call
from tools.models import Server, ToolCall
from tools.runtime.lifecycle import start_tool_call

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

BAD = {"bad_number", "bad_duplicate", "bad_empty"}


@pytest.fixture(scope="module", params=["modern", "legacy"])
def headers_http(request):
    from tests.mcp_servers.launch import start_server

    server = start_server("headers.py", "http", *(["--legacy"] if request.param == "legacy" else []))
    server.mode = request.param
    yield server
    server.stop()


def test_invalid_x_mcp_header_tools_are_set_aside_with_why_and_cannot_be_called(client, api, user, headers_http):
    server = Server.objects.create(name="headers", transport="streamable_http", url=headers_http.url, owner=user)
    assert api.post(f"/api/servers/{server.pk}/refresh/").status_code == 200
    listing = api.get(f"/api/servers/{server.pk}/tools/").json()
    names = {t["name"] for t in listing["tools"]}
    if headers_http.mode == "legacy":  # 2025-11-25: x-mcp-header means nothing; the SDK keeps every tool too
        assert BAD <= names and listing["set_aside"] == []
        return
    assert names == {"called", "valid_header"}
    reasons = {t["name"]: t["reason"] for t in listing["set_aside"]}
    assert set(reasons) == BAD
    assert "integer/string/boolean" in reasons["bad_number"] and "duplicates" in reasons["bad_duplicate"]
    assert "not an RFC 9110 token" in reasons["bad_empty"]

    page = html.unescape(client.get(f"/servers/{server.pk}/").content.decode())
    assert "Set aside (3)" in page and reasons["bad_number"] in page

    refused = api.post(f"/api/servers/{server.pk}/tools/bad_number/call/", {"arguments": {"score": 1}})
    assert refused.status_code == 409 and "set aside" in refused.json()["error"]
    # A replay (or any call started by name) of a tool since set aside fails in the worker, unsent.
    replayed = start_tool_call(server=server, tool_name="bad_duplicate", arguments={}, origin=ToolCall.Origin.REPLAY,
                               user=user)
    replayed = finished_call(str(replayed.pk))
    assert replayed.status == "failed" and "set aside" in replayed.error

    valid = finished_call(start_api_call(api, server, "valid_header", {"region": "eu"}))
    assert valid.status == "succeeded", valid.error
    seen = finished_call(start_api_call(api, server, "called", {}))
    # No set-aside tool reached the server; the valid one came with its header.
    assert seen.full_result.raw["content"][0]["text"] == "valid_header(Mcp-Param-Region=eu)"


def test_a_connection_that_never_listed_sends_the_stored_tools_headers(headers_http):
    """A worker's connection opened after the refresh (restart, another worker, idle reconnect) has
    not listed tools: the stored input schema still gives the call its `Mcp-Param-Region` header
    (a 2026-07-28 server that checks them refuses a call without it, HTTP 400)."""
    import asyncio

    from tools.mcp.config import ServerConfig
    from tools.mcp.connection import Connection

    schema = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}

    async def call_unlisted() -> tuple[dict, dict]:
        async with Connection(ServerConfig(name="headers", transport="streamable_http", url=headers_http.url)) as conn:
            ran = await conn.call_tool("valid_header", {"region": "eu-west"}, timeout=10, input_schema=schema)
            return ran, await conn.call_tool("called", {}, timeout=10)

    ran, seen = asyncio.run(call_unlisted())
    assert ran["content"][0]["text"] == "valid_header ran"
    if headers_http.mode == "legacy":  # 2025-11-25: no Mcp-Param headers at all
        assert seen["content"][0]["text"].endswith("valid_header")
    else:
        assert seen["content"][0]["text"].endswith("valid_header(Mcp-Param-Region=eu-west)")
