"""Surface history, approval and drift end to end (issue 29.1-29.3): a real stdio MCP server
(tests/mcp_servers/surface.py) refreshed by the real Celery worker; each refresh's surface is
recorded by review's receiver of tools' `server_listed` signal in the worker; the pages compare
versions; an approved version is pinned and, with withholding on, the tools that changed are kept
out of the model's tool list (chat/history.py) until the new version is approved."""

from __future__ import annotations

import pytest

from chat import history
from chat.models import Conversation
from review.models import ServerReview, SurfaceVersion
from tests.helpers import refresh_tools
from tools.models import Tool


def _llm_tool_names(conversation) -> set[str]:
    tools, names = history.offered_tools(conversation)
    return {names[t["function"]["name"]][1] for t in tools}


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_refreshes_store_versions_and_drift_withholds_changed_tools_until_approved(
        client, surface_server, surface_state, staff_user, user):
    refresh_tools(surface_server)
    v1 = SurfaceVersion.objects.get(server=surface_server)
    assert v1.number == 1 and v1.source == "refresh" and v1.tokens > 0
    assert [t["name"] for t in v1.surface["tools"]] == ["export", "flaky", "legacy", "search", "slow"]
    assert [p["name"] for p in v1.surface["prompts"]] == ["summarize"]
    assert [r["uri"] for r in v1.surface["resources"]] == ["surface://readme"]
    assert v1.surface["instructions"] == "A catalogue server." and v1.findings == []

    refresh_tools(surface_server)  # the same surface: no new version
    assert SurfaceVersion.objects.filter(server=surface_server).count() == 1

    # Approve v1 (staff), turn withholding on.
    client.force_login(staff_user)
    assert client.post(f"/servers/{surface_server.pk}/review/approve/", {"number": 1}).status_code == 302
    assert client.post(f"/servers/{surface_server.pk}/review/withhold/", {"on": "1"}).status_code == 302
    review = ServerReview.objects.get(server=surface_server)
    assert review.approved_hash == v1.hash and review.withhold_changed and review.approved_by == staff_user

    conversation = Conversation.objects.create(owner=staff_user, model="openai/gpt-4o-mini")
    conversation.servers.add(surface_server)
    assert _llm_tool_names(conversation) == {"export", "flaky", "legacy", "search", "slow"}

    # The server changes its tools after review.
    surface_state.set("v2")
    refresh_tools(surface_server)
    v2 = SurfaceVersion.objects.get(server=surface_server, number=2)
    assert v2.hash != v1.hash
    withheld = set(Tool.objects.filter(server=surface_server).exclude(withheld="").values_list("name", flat=True))
    assert withheld == {"archive", "export", "search"}  # added or changed; legacy is gone, slow/flaky unchanged
    assert _llm_tool_names(conversation) == {"flaky", "slow"}

    # The pages say so: the server page, the review page, the diff, the chat.
    page = client.get(f"/servers/{surface_server.pk}/").content.decode()
    assert "Unapproved drift" in page and "withheld from the model" in page
    diff_page = client.get(f"/servers/{surface_server.pk}/review/diff/").content.decode()
    assert "v1" in diff_page and "v2" in diff_page
    for rule in ("tool-removed", "input-made-required", "input-enum-values-removed", "read-only-dropped", "tool-added"):
        assert f'data-rule="{rule}"' in diff_page, rule
    assert "8 breaking" in diff_page and "3 risky" in diff_page
    chat_page = client.get(f"/chat/{conversation.pk}/").content.decode()
    assert "3 withheld: archive, export, search" in chat_page

    # A member can read the review but not approve.
    client.force_login(user)
    assert client.post(f"/servers/{surface_server.pk}/review/approve/", {"number": 2}).status_code == 403

    # Approving v2 lifts it.
    client.force_login(staff_user)
    client.post(f"/servers/{surface_server.pk}/review/approve/", {"number": 2})
    assert not Tool.objects.filter(server=surface_server).exclude(withheld="").exists()
    assert _llm_tool_names(conversation) == {"archive", "export", "flaky", "search", "slow"}
    assert "Unapproved drift" not in client.get(f"/servers/{surface_server.pk}/").content.decode()
