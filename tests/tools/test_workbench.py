"""The workbench page without a browser: who may open it and what it hands the page."""

from __future__ import annotations

import json
import re

import pytest

from tools.models import Projection, Server, Tool, ToolCall, ToolResult

pytestmark = pytest.mark.django_db


@pytest.fixture
def app_call(user):
    server = Server.objects.create(name="apps", transport="streamable_http", url="http://h/mcp?token=SECRET-IN-URL",
                                   owner=user, headers={"Authorization": "Bearer SECRET-HEADER"})
    Tool.objects.create(server=server, name="show", input_schema={"type": "object"}, is_app=True,
                        ui_resource_uri="ui://x/view.html", visibility=["model", "app"],
                        meta={"ui": {"resourceUri": "ui://x/view.html"}})
    call = ToolCall.objects.create(server=server, tool_name="show", origin="manual", requested_by=user,
                                   status="succeeded", is_app=True, arguments={"label": "a"})
    ToolResult.objects.create(tool_call=call, raw={"content": [], "structuredContent": {"s": 1}}, size_bytes=1, tokens=1)
    Projection.objects.create(tool_call=call, payload={"content": []}, text="", policy="app", size_bytes=1, tokens=1)
    return call


def page_data(response) -> dict:
    found = re.search(r'<script id="workbench-data" type="application/json">(.*?)</script>', response.content.decode(), re.S)
    assert found, "the page carries its data"
    return json.loads(found.group(1))


def test_workbench_needs_login_and_is_only_for_who_may_see_the_call(client, user, other_user, app_call):
    url = f"/tool-calls/{app_call.pk}/workbench/"
    assert client.get(url).status_code == 302
    client.force_login(other_user)
    assert client.get(url).status_code == 404
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200
    data = page_data(response)
    assert data["call"]["id"] == str(app_call.pk) and data["call"]["arguments"] == {"label": "a"}
    assert data["tool"]["ui_resource_uri"] == "ui://x/view.html"
    assert data["sandboxUrl"].endswith("/sandbox/proxy/")
    # The server's secrets stay on the server.
    assert "SECRET" not in response.content.decode()


def test_a_call_whose_server_was_deleted_still_opens(client, user, app_call):
    Server.objects.filter(pk=app_call.server_id).delete()
    client.force_login(user)
    response = client.get(f"/tool-calls/{app_call.pk}/workbench/")
    assert response.status_code == 200
    assert page_data(response)["tool"] is None
    assert "deleted or no longer shared" in response.content.decode()


def test_admin_change_page_links_to_the_workbench(client, admin_user, app_call):
    client.force_login(admin_user)
    page = client.get(f"/admin/tools/toolcall/{app_call.pk}/change/").content.decode()
    assert f"/tool-calls/{app_call.pk}/workbench/" in page
