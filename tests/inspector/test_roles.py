"""Roles (inspector/roles.py): a viewer reads what is shared and changes nothing, pages, JSON API
and WebSockets alike; conversations shared with the team are read by others, changed by their owner."""

from __future__ import annotations

import pytest
from channels.testing import WebsocketCommunicator
from django.test import override_settings

from chat.tool_calls import caller
from chat.models import Conversation
from inspector import oidc, roles
from inspector.asgi import application
from inspector.models import ApiToken
from tests.helpers import Api, run_async
from tools.models import Server, ToolCall

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer(django_user_model):
    user = django_user_model.objects.create_user("vera", password="vera-pass-123")
    roles.set_role(user, roles.VIEWER)
    return user


@pytest.fixture
def team(user):
    """alice's servers and conversations: one of each shared with the team, one of each private."""
    shared_server = Server.objects.create(name="shared-srv", transport="streamable_http", url="http://h/mcp", owner=user, shared=True)
    private_server = Server.objects.create(name="private-srv", transport="streamable_http", url="http://h/mcp", owner=user)
    shared = Conversation.objects.create(owner=user, model="m", title="Shared talk", shared=True)
    shared.append_message(role="user", text="SHARED-MESSAGE")
    private = Conversation.objects.create(owner=user, model="m", title="Private talk")
    private.append_message(role="user", text="PRIVATE-MESSAGE")
    call = ToolCall.objects.create(server=shared_server, tool_name="t", origin="llm", **caller(shared).row_fields(),
                                   requested_by=user, status="succeeded")
    return {"shared_server": shared_server, "private_server": private_server, "shared": shared, "private": private,
            "call": call}


def test_roles_are_the_viewer_group_and_staff(user, staff_user, viewer):
    assert [roles.role_of(u) for u in (user, staff_user, viewer)] == ["member", "admin", "viewer"]
    roles.set_role(viewer, roles.MEMBER)
    viewer.refresh_from_db()
    assert roles.role_of(viewer) == "member" and roles.can_change(viewer)
    roles.set_role(viewer, roles.ADMIN)
    viewer.refresh_from_db()
    assert viewer.is_staff and roles.role_of(viewer) == "admin"


def test_a_viewer_reads_what_is_shared_and_nothing_else(client, viewer, team):
    client.force_login(viewer)
    api = Api(client)
    assert [s["name"] for s in api.get("/api/servers/").json()["servers"]] == ["shared-srv"]
    assert api.get(f"/api/servers/{team['private_server'].pk}/").status_code == 404
    assert client.get(f"/servers/{team['shared_server'].pk}/").status_code == 200
    # Conversations: the shared one in the list, its page is the read-only player, its data readable.
    listed = api.get("/api/conversations/").json()["conversations"]
    assert [(c["title"], c["shared"], c["owner"]) for c in listed] == [("Shared talk", True, "alice")]
    assert client.get(f"/chat/{team['shared'].pk}/").url == f"/chat/{team['shared'].pk}/replay/"
    assert client.get(f"/chat/{team['shared'].pk}/replay/").status_code == 200
    page = api.get(f"/api/conversations/{team['shared'].pk}/").json()
    assert "SHARED-MESSAGE" in str(page)
    assert api.get(f"/api/conversations/{team['shared'].pk}/player/").status_code == 200
    assert api.get(f"/api/tool-calls/{team['call'].pk}/").status_code == 200
    assert api.get(f"/api/conversations/{team['private'].pk}/").status_code == 404
    assert client.get(f"/chat/{team['private'].pk}/replay/").status_code == 404
    home = client.get("/").content.decode()
    assert "Shared talk" in home and "Private talk" not in home and "Add a server" not in home


def test_a_viewer_changes_nothing_through_pages_or_api(client, viewer, team):
    client.force_login(viewer)
    api = Api(client)
    shared, server = team["shared"], team["shared_server"]
    refused = [
        api.post("/api/servers/", {"name": "mine", "transport": "streamable_http", "url": "http://h/mcp"}),
        api.post(f"/api/servers/{server.pk}/tools/t/call/", {"arguments": {}}),
        api.post("/api/conversations/", {"model": "m"}),
        api.post(f"/api/conversations/{shared.pk}/messages/", {"text": "hi"}),
        api.patch(f"/api/conversations/{shared.pk}/", {"title": "mine now"}),
        api.delete(f"/api/conversations/{shared.pk}/"),
        api.post(f"/api/tool-calls/{team['call'].pk}/replay/"),
    ]
    assert [r.status_code for r in refused] == [403] * len(refused)
    assert all(r.json()["error"] == roles.READ_ONLY_MESSAGE for r in refused)
    for path in ("/servers/new/", f"/chat/{shared.pk}/rename/", "/account/tokens/new/", "/chat/new/"):
        response = client.post(path, {"title": "x", "name": "x"})
        assert response.status_code == 403, path
        assert "viewer" in response.content.decode()
    assert Server.objects.count() == 2 and Conversation.objects.count() == 2
    assert ToolCall.objects.count() == 1 and not ApiToken.objects.exists()
    assert Conversation.objects.get(pk=shared.pk).title == "Shared talk"
    # Signing out is still allowed.
    assert client.post("/logout/").status_code == 302


def test_a_viewer_with_an_api_token_is_still_read_only(client, viewer, team):
    _, key = ApiToken.issue(viewer)
    headers = {"HTTP_AUTHORIZATION": f"Token {key}"}
    assert client.get("/api/servers/", **headers).status_code == 200
    response = client.post("/api/conversations/", data={"model": "m"}, content_type="application/json", **headers)
    assert response.status_code == 403


def test_a_member_reads_a_shared_conversation_but_only_its_owner_changes_it(client, user, other_user, team):
    client.force_login(other_user)
    api = Api(client)
    shared = team["shared"]
    assert client.get(f"/chat/{shared.pk}/").url == f"/chat/{shared.pk}/replay/"
    assert api.get(f"/api/conversations/{shared.pk}/").status_code == 200
    assert api.post(f"/api/conversations/{shared.pk}/messages/", {"text": "hi"}).status_code == 404
    assert api.patch(f"/api/conversations/{shared.pk}/", {"shared": False}).status_code == 404
    assert client.post(f"/chat/{shared.pk}/share/", {"shared": "0"}).status_code == 404
    # The owner stops sharing: the others lose it.
    client.force_login(user)
    assert client.post(f"/chat/{shared.pk}/share/", {"shared": "0"}).status_code == 302
    assert Conversation.objects.get(pk=shared.pk).shared is False
    client.force_login(other_user)
    assert api.get(f"/api/conversations/{shared.pk}/").status_code == 404
    assert api.get(f"/api/tool-calls/{team['call'].pk}/").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_a_viewer_follows_a_shared_conversation_live_but_not_a_private_one(client, viewer, user):
    shared = Conversation.objects.create(owner=user, model="m", shared=True)
    private = Conversation.objects.create(owner=user, model="m")
    client.force_login(viewer)
    cookie = (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())

    async def attempt(pk: int):
        comm = WebsocketCommunicator(application, f"/ws/conversations/{pk}/",
                                     headers=[cookie, (b"origin", b"http://127.0.0.1:8000")])
        connected, code = await comm.connect(timeout=5)
        await comm.disconnect()
        return connected, code

    assert run_async(attempt, shared.pk)[0] is True
    assert run_async(attempt, private.pk) == (False, 4404)


@override_settings(OIDC_ADMIN_GROUPS=["ops"], OIDC_VIEWER_GROUPS=["readers"], OIDC_GROUPS_CLAIM="groups",
                   OIDC_ALLOWED_DOMAINS=["team.example"], OIDC_ALLOWED_GROUPS=[])
def test_provider_groups_and_domains_decide_admission_and_role():
    assert oidc.role_from_groups({"groups": ["readers", "ops"]}) == "admin"
    assert oidc.role_from_groups({"groups": "readers"}) == "viewer"
    assert oidc.role_from_groups({"groups": ["devs"]}) == "member"
    assert oidc.admission_refusal({"email": "a@team.example", "email_verified": True}) is None
    assert "elsewhere.example" in oidc.admission_refusal({"email": "a@elsewhere.example"})
    assert "not verified" in oidc.admission_refusal({"email": "a@team.example", "email_verified": False})
    with override_settings(OIDC_ALLOWED_GROUPS=["devs"]):
        assert oidc.admission_refusal({"email": "a@team.example", "groups": ["devs"]}) is None
        assert "none of the groups" in oidc.admission_refusal({"email": "a@team.example", "groups": ["x"]})
