"""Cache hints (2026-07-28 `ttlMs`/`cacheScope`, issue 26.6): a list or a resource read the
server said is still fresh is not asked for again; the server page says until when; an explicit
"refresh anyway" asks the server. Real parts: tests/mcp_servers/cached.py over Streamable HTTP
(it counts every list and read it answers), the suite's Celery worker, the API and the pages.
"""

from __future__ import annotations

import html
import json

import pytest

from tests.helpers import finished_call, start_api_call
from tools.mcp.cache_hints import CacheHint
from tools.models import CachedResult, Server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


@pytest.fixture(scope="module")
def cached_http():
    from tests.mcp_servers.launch import start_server

    server = start_server("cached.py", "http")
    yield server
    server.stop()


def answered(api, server: Server) -> dict:
    """How many lists and reads the test server answered so far (a tool call lists nothing)."""
    call = finished_call(start_api_call(api, server, "counts", {}))
    assert call.status == "succeeded", call.error
    return json.loads(call.full_result.raw["content"][0]["text"])


def test_a_refresh_within_the_ttl_reuses_the_stored_list_until_forced(client, api, user, cached_http):
    server = Server.objects.create(name="cached", transport="streamable_http", url=cached_http.url, owner=user)
    first = api.post(f"/api/servers/{server.pk}/refresh/")
    assert first.status_code == 200 and "cached" not in first.json()
    listed = answered(api, server)["tools/list"]

    again = api.post(f"/api/servers/{server.pk}/refresh/")
    assert again.status_code == 200 and again.json()["cached"]["scope"] == "public"
    assert [t["name"] for t in again.json()["tools"]] == ["counts"]
    assert answered(api, server)["tools/list"] == listed  # the server was not asked

    page = html.unescape(client.get(f"/servers/{server.pk}/").content.decode())
    assert "Cached, fresh until" in page and "Refresh anyway" in page
    test_button = client.post(f"/servers/{server.pk}/test/", follow=True).content.decode()
    assert "Not listed again" in html.unescape(test_button)
    assert answered(api, server)["tools/list"] == listed

    forced = api.post(f"/api/servers/{server.pk}/refresh/?force=1")
    assert forced.status_code == 200 and "cached" not in forced.json()
    assert answered(api, server)["tools/list"] == listed + 1


def test_resource_and_prompt_pages_reuse_fresh_results(client, api, user, cached_http):
    server = Server.objects.create(name="cached", transport="streamable_http", url=cached_http.url, owner=user)
    assert api.post(f"/api/servers/{server.pk}/refresh/?force=1").status_code == 200
    before = answered(api, server)
    for _ in range(2):
        page = html.unescape(client.get(f"/servers/{server.pk}/resources/?uri=note://today").content.decode())
        assert "nothing new" in page
        assert "greet" in client.get(f"/servers/{server.pk}/prompts/").content.decode()
    assert "Cached, fresh until" in page
    after = answered(api, server)
    for method in ("resources/list", "resources/read", "prompts/list"):
        assert after.get(method, 0) == before.get(method, 0) + 1, (method, before, after)
    # The read is private: kept for the server (one connection serves every user here), not per user.
    assert CachedResult.objects.get(server=server, method="resources/read").key == "note://today"

    client.get(f"/servers/{server.pk}/resources/?uri=note://today&refresh=1")
    assert answered(api, server)["resources/read"] == after["resources/read"] + 1


def test_hints_of_the_pages_of_a_list_combine_as_the_spec_says():
    assert CacheHint.of({"ttlMs": 5000, "cacheScope": "public"}) == CacheHint(5000, "public")
    assert CacheHint.of({}) == CacheHint(0, "private")  # absent: stale at once
    assert CacheHint.of({"ttlMs": -1, "cacheScope": "everyone"}) == CacheHint(0, "private")
    assert CacheHint.of({"ttlMs": True}).ttl_ms == 0
    assert CacheHint(5000, "public").combine(CacheHint(3000, "private")) == CacheHint(3000, "private")
