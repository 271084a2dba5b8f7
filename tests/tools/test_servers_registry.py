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
        "signed": {"url": "https://auth.example/mcp", "oauth": {"enabled": True, "clientId": "inspector-app",
                                                                "clientSecret": "client-sekret-3", "scopes": ["mcp", "read"]}},
        "bad-oauth": {"url": "https://auth.example/mcp", "oauth": {"scopes": "mcp", "clientId": 0}},
        "stringly-off": {"url": "https://auth.example/mcp", "oauth": {"enabled": "false"}},
        "off": {"url": "https://auth.example/plain", "oauth": {"enabled": False, "clientId": "unused"}},
        "local-oauth": {"command": "npx", "oauth": {"enabled": True}},
    }}
    resp = api.post("/api/servers/import/", document)
    assert resp.status_code == 207
    body = resp.json()
    assert sorted(s["name"] for s in body["created"]) == ["legacy", "off", "remote", "signed"]
    errors = {e["name"]: e["error"] for e in body["errors"]}
    assert errors["bad-oauth"] == "`oauth.clientId` must be a string"
    assert errors["stringly-off"] == "`oauth.enabled` must be true or false"
    assert errors["local-oauth"] == "`oauth` is for HTTP and SSE servers (`url`), not for `command`"
    assert Server.objects.get(name="off").auth == "none"
    signed = Server.objects.get(name="signed")
    assert (signed.auth, signed.oauth_client_id, signed.oauth_scope, signed.oauth_client_secret) == (
        "oauth", "inspector-app", "mcp read", "client-sekret-3")
    assert "Only staff users" in errors["local"]
    assert "needs either `command`" in errors["broken"]
    assert Server.objects.get(name="legacy").transport == "sse"
    exported = api.get("/api/servers/export/").json()
    assert exported["mcpServers"]["remote"] == {"url": "https://example.com/mcp", "headers": {"Authorization": MASK}}
    assert exported["mcpServers"]["legacy"]["type"] == "sse"
    # OAuth settings travel, the client secret does not (each user signs in again).
    assert exported["mcpServers"]["signed"] == {"url": "https://auth.example/mcp",
                                                "oauth": {"enabled": True, "clientId": "inspector-app", "scopes": ["mcp", "read"]}}
    assert "oauth" not in exported["mcpServers"]["remote"] and "client-sekret-3" not in json.dumps(exported)


def test_delete_server(api):
    pk = api.post("/api/servers/", HTTP_SERVER).json()["id"]
    assert api.delete(f"/api/servers/{pk}/").status_code == 204
    assert api.get(f"/api/servers/{pk}/").status_code == 404


# --- Secrets in the URL (user:password@, ?token=) -----------------------------------------------

SECRET_URL = "https://u:pw-sekret-1@host.example/mcp?token=tok-sekret-2&x=1"
MASKED_URL = f"https://u:{MASK}@host.example/mcp?token={MASK}&x=1"
URL_SECRETS = ("pw-sekret-1", "tok-sekret-2")


def raw_url_columns(pk: int) -> tuple[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT url, url_secrets FROM tools_server WHERE id = %s", [pk])
        return cursor.fetchone()


def assert_no_url_secret(body: str, where: str) -> None:
    for secret in URL_SECRETS:
        assert secret not in body, f"{secret} shown by {where}"


def test_url_secrets_are_encrypted_at_rest(api):
    resp = api.post("/api/servers/", {"name": "remote", "transport": "streamable_http", "url": SECRET_URL})
    assert resp.status_code == 201, resp.json()
    pk = resp.json()["id"]
    url_cell, secrets_cell = raw_url_columns(pk)
    assert url_cell == MASKED_URL
    assert_no_url_secret(url_cell + secrets_cell, "the database")
    server = Server.objects.get(pk=pk)
    assert server.url == MASKED_URL
    assert server.config().url == SECRET_URL  # the connection, and only it, gets the real URL


def test_url_secrets_are_masked_in_every_answer_and_page(client, user, other_user, admin_user):
    client.force_login(user)
    created = client.post("/api/servers/", data=json.dumps(
        {"name": "remote", "transport": "streamable_http", "url": SECRET_URL, "shared": True}), content_type="application/json")
    assert created.status_code == 201
    assert created.json()["url"] == MASKED_URL
    pk = created.json()["id"]
    patched = client.patch(f"/api/servers/{pk}/", data=json.dumps({"name": "renamed"}), content_type="application/json")
    assert patched.status_code == 200 and patched.json()["url"] == MASKED_URL
    exported = client.get("/api/servers/export/").json()
    assert exported["mcpServers"]["renamed"]["url"] == MASKED_URL
    pages = (f"/api/servers/{pk}/", "/api/servers/", "/api/servers/export/", "/servers/", f"/servers/{pk}/", f"/servers/{pk}/edit/")
    for path in pages:
        resp = client.get(path)
        assert resp.status_code == 200, path
        assert_no_url_secret(resp.content.decode(), path)
    assert MASKED_URL in client.get(f"/servers/{pk}/edit/").content.decode().replace("&amp;", "&")
    # A shared server is seen by the whole team: masked for them too.
    client.force_login(other_user)
    for path in (f"/api/servers/{pk}/", "/api/servers/", f"/servers/{pk}/", "/servers/"):
        assert_no_url_secret(client.get(path).content.decode(), f"{path} (another user)")
    client.force_login(admin_user)
    for path in ("/admin/tools/server/", f"/admin/tools/server/{pk}/change/", "/admin/tools/server/?q=host"):
        resp = client.get(path)
        assert resp.status_code == 200, path
        assert_no_url_secret(resp.content.decode(), path)
    assert_no_url_secret(created.content.decode() + patched.content.decode(), "the create and PATCH answers")


def test_url_mask_round_trip_keeps_secrets_new_value_replaces_clearing_removes(api):
    pk = api.post("/api/servers/", {"name": "remote", "transport": "streamable_http", "url": SECRET_URL}).json()["id"]
    # The masked URL back, with the host, the path and a plain parameter changed: secrets kept.
    moved = f"https://u:{MASK}@other.example/v2/mcp?x=2&token={MASK}&region=eu"
    resp = api.patch(f"/api/servers/{pk}/", {"url": moved})
    assert resp.status_code == 200, resp.json()
    assert resp.json()["url"] == moved
    assert Server.objects.get(pk=pk).config().url == "https://u:pw-sekret-1@other.example/v2/mcp?x=2&token=tok-sekret-2&region=eu"
    # PATCH without `url` keeps it whole.
    api.patch(f"/api/servers/{pk}/", {"name": "renamed"})
    assert Server.objects.get(pk=pk).config().url.endswith("token=tok-sekret-2&region=eu")
    # A typed value replaces the stored one; the other secret stays.
    api.patch(f"/api/servers/{pk}/", {"url": f"https://u:{MASK}@other.example/v2/mcp?token=tok-new-3"})
    server = Server.objects.get(pk=pk)
    assert server.config().url == "https://u:pw-sekret-1@other.example/v2/mcp?token=tok-new-3"
    assert "tok-new-3" not in "".join(raw_url_columns(pk))
    # Left out: removed.
    api.patch(f"/api/servers/{pk}/", {"url": "https://other.example/v2/mcp"})
    server = Server.objects.get(pk=pk)
    assert server.config().url == "https://other.example/v2/mcp" and server.url_secrets == {}
    # A mask where nothing is stored cannot be guessed: a clear error, nothing changed.
    resp = api.patch(f"/api/servers/{pk}/", {"url": f"https://other.example/v2/mcp?api_key={MASK}"})
    assert resp.status_code == 400
    assert "no such value is stored" in " ".join(resp.json()["fields"]["url"])
    assert Server.objects.get(pk=pk).url == "https://other.example/v2/mcp"


def test_url_mask_round_trip_through_the_edit_page(client, user):
    client.force_login(user)
    server = Server.objects.create(name="remote", transport="streamable_http", url=SECRET_URL, owner=user)
    form = {"name": "remote", "transport": "streamable_http", "url": MASKED_URL.replace("x=1", "x=5"),
            "projection_policy": "content-first", "enabled": "on", "headers": "", "env": "", "args": "[]"}
    resp = client.post(f"/servers/{server.pk}/edit/", form)
    assert resp.status_code == 302, resp.content.decode()[:2000]
    server.refresh_from_db()
    assert server.config().url == SECRET_URL.replace("x=1", "x=5")
    resp = client.post(f"/servers/{server.pk}/edit/", {**form, "url": f"https://{MASK}@host.example/mcp"})
    assert resp.status_code == 200
    assert "no user part is stored" in resp.content.decode()
    client.post(f"/servers/{server.pk}/edit/", {**form, "url": "https://u:pw-typed-4@host.example/mcp?token=" + MASK})
    server.refresh_from_db()
    assert server.config().url == "https://u:pw-typed-4@host.example/mcp?token=tok-sekret-2"


def test_import_stores_url_secrets_encrypted_and_export_masks_them(api):
    resp = api.post("/api/servers/import/", {"mcpServers": {"remote": {"url": SECRET_URL}}})
    assert resp.status_code == 201, resp.json()
    assert_no_url_secret(resp.content.decode(), "the import answer")
    server = Server.objects.get(name="remote")
    assert_no_url_secret("".join(raw_url_columns(server.pk)), "the database")
    assert server.config().url == SECRET_URL
    assert api.get("/api/servers/export/").json()["mcpServers"]["remote"] == {"url": MASKED_URL}


def test_admin_save_keeps_masked_url_secrets(client, admin_user):
    server = Server.objects.create(name="remote", transport="streamable_http", url=SECRET_URL, owner=admin_user)
    client.force_login(admin_user)
    page = client.get(f"/admin/tools/server/{server.pk}/change/").content.decode()
    assert_no_url_secret(page, "the admin form")
    resp = client.post(f"/admin/tools/server/{server.pk}/change/", {
        "name": "remote", "transport": "streamable_http", "command": "", "args": "[]", "cwd": "", "url": MASKED_URL,
        "owner": admin_user.pk, "enabled": "on", "projection_policy": "content-first", "auth": "none",
        "server_info": "{}", "capabilities": "{}",
    })
    assert resp.status_code == 302, resp.content.decode()[:3000]
    assert Server.objects.get(pk=server.pk).config().url == SECRET_URL


def test_migration_moves_existing_url_secrets(user):
    """0004 on a row written before it existed (the whole URL in clear in the `url` column)."""
    import importlib

    from django.db.migrations.executor import MigrationExecutor

    migration = importlib.import_module("tools.migrations.0004_server_url_secrets")
    server = Server.objects.create(name="old", transport="streamable_http", url="https://h/mcp", owner=user)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE tools_server SET url = %s WHERE id = %s", [SECRET_URL, server.pk])
    apps = MigrationExecutor(connection).loader.project_state(("tools", "0004_server_url_secrets")).apps
    migration.encrypt_url_secrets(apps, None)
    url_cell, secrets_cell = raw_url_columns(server.pk)
    assert url_cell == MASKED_URL
    assert_no_url_secret(secrets_cell, "the migrated secrets column")
    assert Server.objects.get(pk=server.pk).config().url == SECRET_URL
    migration.restore_clear_urls(apps, None)
    assert raw_url_columns(server.pk)[0] == SECRET_URL


@pytest.mark.parametrize(
    "url, masked",
    [
        ("https://h/mcp?v=2", "https://h/mcp?v=2"),
        ("https://tok@h/mcp", f"https://{MASK}@h/mcp"),
        ("https://u:@h/mcp", "https://u:@h/mcp"),
        ("https://h/mcp?ACCESS_TOKEN=a&Api-Key=b&sig=c&code=d&client_secret=e&github_token=f&page=1",
         f"https://h/mcp?ACCESS_TOKEN={MASK}&Api-Key={MASK}&sig={MASK}&code={MASK}&client_secret={MASK}&github_token={MASK}&page=1"),
        ("https://h/mcp?token=&flag", "https://h/mcp?token=&flag"),
        ("https://h/mcp?token=a&token=b#top", f"https://h/mcp?token={MASK}&token={MASK}#top"),
    ],
)
def test_url_secret_rules(url, masked):
    from tools.mcp import url_secrets

    shown, secrets = url_secrets.resolve(url, None)
    assert shown == masked
    assert url_secrets.reveal(shown, secrets) == url
