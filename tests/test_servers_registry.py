"""The server registry: validation, permissions, secrets at rest, import and export (no MCP traffic)."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from tools.forms import MASK
from tools.models import Server

pytestmark = pytest.mark.django_db

HTTP_SERVER = {"name": "weather", "transport": "streamable_http", "url": "http://127.0.0.1:9/mcp",
               "headers": {"Authorization": "Bearer sekret-header-token"}}
STDIO_SERVER = {"name": "local", "transport": "stdio", "command": "python", "args": ["server.py"],
                "env": {"API_TOKEN": "sekret-env-value"}}


def test_user_creates_http_server_and_sees_it(api, user):
    resp = api.post("/api/servers/", HTTP_SERVER)
    assert resp.status_code == 201, resp.json()
    body = resp.json()
    assert body["owner"] == "alice" and body["transport"] == "streamable_http"
    assert body["headers"] == {"Authorization": MASK}
    listed = api.get("/api/servers/").json()["servers"]
    assert [s["name"] for s in listed] == ["weather"]


def test_non_staff_cannot_create_stdio_server(api):
    resp = api.post("/api/servers/", STDIO_SERVER)
    assert resp.status_code == 403
    assert "Only staff users can create or edit stdio servers" in resp.json()["error"]
    assert not Server.objects.exists()


def test_non_staff_gets_403_page_for_stdio(client, user):
    client.force_login(user)
    resp = client.post("/servers/new/", {"name": "x", "transport": "stdio", "command": "sh", "projection_policy": "content-first"})
    assert resp.status_code == 403
    assert "Only staff users" in resp.content.decode()


def test_non_staff_cannot_turn_http_server_into_stdio(api):
    pk = api.post("/api/servers/", HTTP_SERVER).json()["id"]
    resp = api.patch(f"/api/servers/{pk}/", {"transport": "stdio", "command": "sh"})
    assert resp.status_code == 403
    assert Server.objects.get(pk=pk).transport == "streamable_http"


def test_staff_creates_stdio_server(staff_api):
    resp = staff_api.post("/api/servers/", STDIO_SERVER)
    assert resp.status_code == 201, resp.json()
    assert resp.json()["env"] == {"API_TOKEN": MASK}


@pytest.mark.parametrize(
    "payload, field, message",
    [
        ({"name": "x", "transport": "streamable_http", "url": "ftp://example.com/mcp"}, "url", "Only http:// and https://"),
        ({"name": "x", "transport": "sse", "url": ""}, "url", "needs a URL"),
        ({"name": "x", "transport": "streamable_http", "url": "http://h/mcp", "headers": "{not json"}, "headers", "must be a JSON object"),
        ({"name": "x", "transport": "streamable_http", "url": "http://h/mcp", "headers": ["a"]}, "headers", "must be a JSON object"),
        ({"name": "", "transport": "streamable_http", "url": "http://h/mcp"}, "name", "required"),
    ],
)
def test_validation_messages(api, payload, field, message):
    resp = api.post("/api/servers/", payload)
    assert resp.status_code == 400
    errors = resp.json()["fields"]
    assert field in errors and message in " ".join(errors[field]), errors


def test_stdio_needs_a_command(staff_api):
    resp = staff_api.post("/api/servers/", {"name": "x", "transport": "stdio", "command": "  "})
    assert resp.status_code == 400
    assert "needs a command" in " ".join(resp.json()["fields"]["command"])


def test_unknown_fields_and_bad_json_are_clear_errors(api, client):
    resp = api.post("/api/servers/", {**HTTP_SERVER, "colour": "red"})
    assert resp.status_code == 400 and "Unknown field(s): colour" in resp.json()["error"]
    raw = client.post("/api/servers/", data="{nope", content_type="application/json")
    assert raw.status_code == 400 and "not valid JSON" in raw.json()["error"]


def test_secrets_are_encrypted_at_rest_and_masked_everywhere(staff_api, client):
    pk = staff_api.post("/api/servers/", STDIO_SERVER).json()["id"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT env, headers FROM tools_server WHERE id = %s", [pk])
        env_cell, headers_cell = cursor.fetchone()
    assert "sekret-env-value" not in env_cell and "API_TOKEN" not in env_cell
    assert Server.objects.get(pk=pk).env == {"API_TOKEN": "sekret-env-value"}
    for path in (f"/api/servers/{pk}/", "/api/servers/", f"/servers/{pk}/edit/", f"/servers/{pk}/", "/servers/", "/api/servers/export/"):
        body = client.get(path).content.decode()
        assert "sekret-env-value" not in body, path


def test_patch_with_mask_keeps_secret_and_new_value_replaces_it(api):
    pk = api.post("/api/servers/", HTTP_SERVER).json()["id"]
    api.patch(f"/api/servers/{pk}/", {"name": "renamed", "headers": {"Authorization": MASK, "X-Extra": "1"}})
    server = Server.objects.get(pk=pk)
    assert server.name == "renamed"
    assert server.headers == {"Authorization": "Bearer sekret-header-token", "X-Extra": "1"}
    api.patch(f"/api/servers/{pk}/", {"headers": {"Authorization": "Bearer new"}})
    assert Server.objects.get(pk=pk).headers == {"Authorization": "Bearer new"}


def test_private_servers_are_404_to_others_and_shared_are_read_only(client, user, other_user):
    mine = Server.objects.create(name="mine", transport="streamable_http", url="http://h/mcp", owner=user)
    shared = Server.objects.create(name="shared", transport="streamable_http", url="http://h/mcp", owner=user, shared=True)
    client.force_login(other_user)
    assert client.get(f"/api/servers/{mine.pk}/").status_code == 404
    assert client.get(f"/servers/{mine.pk}/").status_code == 404
    assert client.post(f"/api/servers/{mine.pk}/tools/echo/call/", data={}, content_type="application/json").status_code == 404
    assert client.get(f"/api/servers/{shared.pk}/").status_code == 200
    assert [s["name"] for s in client.get("/api/servers/").json()["servers"]] == ["shared"]
    resp = client.patch(f"/api/servers/{shared.pk}/", data=json.dumps({"name": "x"}), content_type="application/json")
    assert resp.status_code == 403
    assert client.delete(f"/api/servers/{shared.pk}/").status_code == 403


def test_import_and_export_mcpservers_format(api, user):
    document = {"mcpServers": {
        "remote": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer abc"}},
        "legacy": {"url": "http://127.0.0.1:1234/sse", "type": "sse"},
        "local": {"command": "npx", "args": ["-y", "thing"]},
        "broken": {"nothing": True},
    }}
    resp = api.post("/api/servers/import/", document)
    assert resp.status_code == 207
    body = resp.json()
    assert sorted(s["name"] for s in body["created"]) == ["legacy", "remote"]
    errors = {e["name"]: e["error"] for e in body["errors"]}
    assert "Only staff users" in errors["local"]
    assert "needs either `command`" in errors["broken"]
    assert Server.objects.get(name="legacy").transport == "sse"
    exported = api.get("/api/servers/export/").json()
    assert exported["mcpServers"]["remote"] == {"url": "https://example.com/mcp", "headers": {"Authorization": MASK}}
    assert exported["mcpServers"]["legacy"]["type"] == "sse"


def test_delete_server(api):
    pk = api.post("/api/servers/", HTTP_SERVER).json()["id"]
    assert api.delete(f"/api/servers/{pk}/").status_code == 204
    assert api.get(f"/api/servers/{pk}/").status_code == 404
