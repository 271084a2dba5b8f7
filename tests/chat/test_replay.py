"""Replaying conversations (issue 12): re-runs against today's servers with a structural diff,
stored runs, the JSON API and `manage.py replay`, export/import, the player's data, live re-runs.

Real parts throughout: the drift MCP server (tests/mcp_servers/drift.py: one structuredContent
field read from a file the test writes, every tools/call logged by the server itself), the
Celery worker, the pipeline, and the recording fake LLM.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from django.core.management import call_command

from chat import jsondiff
from chat.tool_calls import calls_of, conversation_of
from chat.models import Conversation, Message, ModelContext, ReplayRun, Turn
from tests.helpers import Api, refresh_tools, streamed_body, wait_for
from tools.models import Projection, Server, ToolCall, ToolResult

MODEL = "openai/test-model"
VOLATILE = ["$.structuredContent.generated_at", "$.structuredContent.request_id"]


# --- the drift server ---------------------------------------------------------------------------------

class Drift:
    def __init__(self, directory: Path, process):
        self.state = directory / "state.json"
        self.log = directory / "calls.log"
        self.process = process

    @property
    def url(self) -> str:
        return self.process.url

    def set_price(self, price) -> None:
        self.state.write_text(json.dumps({"price": price}))

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


@pytest.fixture(scope="module")
def drift_http(tmp_path_factory):
    from tests.mcp_servers.launch import start_server

    directory = tmp_path_factory.mktemp("drift")
    saved = {k: os.environ.get(k) for k in ("DRIFT_STATE", "DRIFT_CALL_LOG")}
    os.environ["DRIFT_STATE"] = str(directory / "state.json")
    os.environ["DRIFT_CALL_LOG"] = str(directory / "calls.log")
    try:
        process = start_server("drift.py", "http")
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    yield Drift(directory, process)
    process.stop()


@pytest.fixture
def drift(drift_http):
    drift_http.set_price(12)
    return drift_http


@pytest.fixture
def drift_server(drift, user):
    server = Server.objects.create(name="drift", transport="streamable_http", url=drift.url + "?token=url-secret-token", owner=user,
                                   headers={"Authorization": "Bearer header-secret-value"})
    refresh_tools(server)
    return server


def record(api, fake_llm, servers, script, texts, **extra) -> int:
    """A conversation recorded through the real chat path (fake LLM, worker, MCP server)."""
    body = {"model": MODEL, "api_base": fake_llm.url, "api_key": "sk-conversation-secret", "server_ids": [s.pk for s in servers],
            **extra}
    resp = api.post("/api/conversations/", body)
    assert resp.status_code == 201, resp.json()
    cid = resp.json()["id"]
    fake_llm.script(script)
    for text in texts:
        assert api.post(f"/api/conversations/{cid}/messages/", {"text": text}).status_code == 202
        wait_for(lambda: api.get(f"/api/conversations/{cid}/").json()["status"] != "running", timeout=40, message="the turn")
    return cid


QUOTE_SCRIPT = [
    {"tool_calls": [{"name": "drift__quote", "arguments": {"item": "apple"}, "id": "q1"}]},
    {"text": "An apple costs 12."},
]


def run_replay(api, cid: int, **body) -> dict:
    resp = api.post(f"/api/conversations/{cid}/replays/", body)
    assert resp.status_code == 202, resp.json()
    run_id = resp.json()["id"]
    return wait_for(lambda: (d := api.get(f"/api/replays/{run_id}/").json())["status"] != "running" and d,
                    timeout=40, message="the replay run")


# --- the structural diff (pure) -------------------------------------------------------------------------

def test_jsondiff_paths_kinds_and_volatile_patterns():
    old = {"content": [{"type": "text", "text": "a"}], "structuredContent": {"ts": 1, "n": 1, "rows": [{"id": 1}, {"id": 2}]},
           "odd key": True}
    new = {"content": [{"type": "text", "text": "b"}, {"type": "text", "text": "extra"}],
           "structuredContent": {"ts": 2, "n": "1", "rows": [{"id": 9}]}, "odd key": True, "added": None}
    changes = {(c["path"], c["kind"]) for c in jsondiff.diff(old, new).changes}
    assert changes == {
        ("$.content[0].text", "changed"), ("$.content[1]", "added"), ("$.structuredContent.ts", "changed"),
        ("$.structuredContent.n", "changed"),  # 1 -> "1": a type change is a change
        ("$.structuredContent.rows[0].id", "changed"), ("$.structuredContent.rows[1]", "removed"), ("$.added", "added"),
    }
    ignored = jsondiff.diff(old, new, ["structuredContent.ts", "$.content[*].text", "$..id", "$.content[1]", '$["added"]'])
    assert [(c["path"], c["kind"]) for c in ignored.changes] == [
        ("$.structuredContent.n", "changed"), ("$.structuredContent.rows[1]", "removed")]
    assert ignored.ignored == 5
    assert jsondiff.diff({"a": [1, {"b": 1.5}]}, {"a": [1, {"b": 1.5}]}).same
    assert not jsondiff.diff(True, 1).same and not jsondiff.diff(0, None).same
    assert jsondiff.format_path(("a b", 0, "c")) == '$["a b"][0].c'
    for bad in ["", "$", "$..", "$.a[", "$.a.", "$.a[x]"]:
        with pytest.raises(jsondiff.PatternError):
            jsondiff.parse_pattern(bad)
    long_value = "x" * 5000
    change = jsondiff.diff({"a": long_value}, {"a": "y"}).changes[0]
    assert change["old"]["$chars"] == 5002 and len(change["old"]["$preview"]) < 400


# --- 12.2 re-run against today's servers ------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_rerun_shows_exactly_the_changed_field_in_the_full_result_and_nothing_in_the_projection(api, fake_llm, drift, drift_server):
    cid = record(api, fake_llm, [drift_server], QUOTE_SCRIPT, ["What does an apple cost?"])
    original = calls_of(cid).get(origin="llm")
    assert original.full_result.raw["structuredContent"]["price"] == 12

    drift.set_price(13)
    run = run_replay(api, cid, ignore_paths=VOLATILE)
    assert run["status"] == "completed" and run["verdict"] == "different", run
    [item] = run["items"]
    assert item["verdict"] == "different"
    assert item["full_diff"]["changes"] == [{"path": "$.structuredContent.price", "kind": "changed", "old": 12, "new": 13}]
    assert item["full_diff"]["ignored"] == 2  # generated_at and request_id changed, and were ignored
    assert item["projection_diff"]["total"] == 0, item["projection_diff"]  # content-first: the model never saw the price
    assert item["before"]["status"] == item["after"]["status"] == "succeeded"
    assert item["after"]["duration_ms"] is not None and item["after"]["tokens_full"] > 0

    # Through the normal pipeline: origin replay, linked to the original, stored.
    rerun = ToolCall.objects.get(pk=item["call_id"])
    assert rerun.origin == "replay" and rerun.replay_of_id == original.pk and rerun.arguments == {"item": "apple"}
    assert ToolResult.objects.filter(tool_call=rerun).exists() and Projection.objects.filter(tool_call=rerun).exists()
    assert drift.calls()[-1] == 'quote {"item": "apple"}'

    # Without the volatile paths the run sees them change too.
    noisy = run_replay(api, cid)
    paths = {c["path"] for c in noisy["items"][0]["full_diff"]["changes"]}
    assert paths == {"$.structuredContent.price", "$.structuredContent.generated_at", "$.structuredContent.request_id"}

    # Back to the recorded price: the same, with the volatile paths ignored.
    drift.set_price(12)
    same = run_replay(api, cid, ignore_paths=VOLATILE)
    assert same["verdict"] == "same" and same["summary"] == {"total": 1, "same": 1, "different": 0, "error": 0}

    # Runs are stored, listed and viewable later; the run page shows the diff.
    listed = api.get(f"/api/conversations/{cid}/replays/").json()["replays"]
    assert [r["id"] for r in listed] == [same["id"], noisy["id"], run["id"]]
    page = api.client.get(f"/chat/replays/{run['id']}/")
    assert page.status_code == 200 and b"$.structuredContent.price" in page.content
    # The recorded conversation itself is untouched: its history has no replayed call.
    assert Message.objects.filter(conversation_id=cid, role="tool").count() == 1
    llm = api.get(f"/api/conversations/{cid}/llm-messages/").json()
    assert sum(1 for m in llm["messages"] if m["role"] == "tool") == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_rerun_reports_status_changes_missing_servers_and_bad_requests(api, fake_llm, drift, drift_server, basic_server, user):
    refresh_tools(basic_server)
    cid = record(api, fake_llm, [drift_server, basic_server], [
        {"tool_calls": [{"name": "drift__quote", "arguments": {"item": "pear"}, "id": "a"},
                        {"name": "basic__echo", "arguments": {"text": "hi"}, "id": "b"}]},
        {"text": "done"},
    ], ["go"])
    assert api.post(f"/api/conversations/{cid}/replays/", {"ignore_paths": ["$.a["]}).status_code == 400
    assert api.post(f"/api/conversations/{cid}/replays/", {"servers": {"nope": basic_server.pk}}).status_code == 400
    assert api.post(f"/api/conversations/{cid}/replays/", {"servers": {"basic": 99999}}).status_code == 404
    assert api.post(f"/api/conversations/{cid}/replays/", {"kind": "other"}).status_code == 400

    # The basic server is gone today: its call cannot run, the run says so (verdict error).
    basic_server.delete()
    run = run_replay(api, cid, ignore_paths=VOLATILE)
    verdicts = {i["tool"]: (i["verdict"], i["error"]) for i in run["items"]}
    assert verdicts["quote"] == ("same", "")
    assert verdicts["echo"][0] == "error" and "No server named “basic”" in verdicts["echo"][1]
    assert run["verdict"] == "error"

    # Mapped onto another server that has no such tool: a status change is a difference.
    run = run_replay(api, cid, ignore_paths=VOLATILE, servers={"basic": drift_server.pk})
    echo = next(i for i in run["items"] if i["tool"] == "echo")
    assert echo["verdict"] == "different" and echo["before"]["status"] == "succeeded" and echo["after"]["status"] == "failed"
    assert run["verdict"] == "different"


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_replays_exports_and_players_are_private(client, api, fake_llm, drift, drift_server, other_user):
    cid = record(api, fake_llm, [drift_server], QUOTE_SCRIPT, ["price?"])
    run = run_replay(api, cid, ignore_paths=VOLATILE)
    call = calls_of(cid).get(origin="llm")
    # The owner's pages run under the strict CSP: no inline script or style.
    for path in [f"/chat/{cid}/replay/", f"/chat/{cid}/replays/", f"/chat/replays/{run['id']}/", "/chat/"]:
        html = api.client.get(path).content.decode()
        assert "<style" not in html and "style=" not in html, path
        for chunk in html.split("<script")[1:]:
            tag = chunk.split(">", 1)[0]
            assert "src=" in tag or 'type="application/json"' in tag, (path, tag)
    client.force_login(other_user)
    bob = Api(client)
    for path in [f"/api/conversations/{cid}/replays/", f"/api/conversations/{cid}/export/", f"/api/conversations/{cid}/player/",
                 f"/api/conversations/{cid}/player/views/{call.pk}/", f"/api/replays/{run['id']}/"]:
        assert bob.get(path).status_code == 404, path
    assert bob.post(f"/api/conversations/{cid}/replays/", {}).status_code == 404
    assert bob.delete(f"/api/replays/{run['id']}/").status_code == 404
    for path in [f"/chat/{cid}/replay/", f"/chat/{cid}/replays/", f"/chat/replays/{run['id']}/"]:
        assert client.get(path).status_code == 404, path
    client.logout()
    assert client.get(f"/api/replays/{run['id']}/").status_code == 401
    assert client.get(f"/chat/{cid}/replay/").status_code == 302  # to the login page
    assert ReplayRun.objects.filter(pk=run["id"]).exists()


# --- 12.5 the management command ---------------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_manage_replay_exits_non_zero_on_differences(api, fake_llm, drift, drift_server, user, tmp_path):
    cid = record(api, fake_llm, [drift_server], QUOTE_SCRIPT, ["price?"])
    out = io.StringIO()
    call_command("replay", str(cid), "--ignore", VOLATILE[0], "--ignore", VOLATILE[1], stdout=out)
    assert "QUOTE: SAME" in out.getvalue().upper() and "Verdict: same" in out.getvalue()

    drift.set_price(99)
    out = io.StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("replay", str(cid), "--ignore", VOLATILE[0], "--ignore", VOLATILE[1], stdout=out)
    assert exited.value.code == 1
    text = out.getvalue()
    assert "$.structuredContent.price: 12 -> 99" in text and "Verdict: different" in text
    assert "changed $.structuredContent.generated_at" not in text and "Ignoring: $.structuredContent.generated_at" in text

    # A file: imported (read-only) for --user, then re-run on the server given by --server.
    export = api.get(f"/api/conversations/{cid}/export/")
    path = tmp_path / "recorded.json"
    path.write_bytes(streamed_body(export))
    drift.set_price(12)
    out = io.StringIO()
    call_command("replay", str(path), "--user", user.username, "--server", f"drift={drift_server.pk}",
                 "--ignore", "$..generated_at", "--ignore", "$..request_id", stdout=out)
    assert "Imported" in out.getvalue() and "Verdict: same" in out.getvalue()
    imported = Conversation.objects.filter(read_only=True).get()
    assert imported.owner == user and ReplayRun.objects.filter(conversation=imported, verdict="same").exists()

    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="No server with id 123456") as failed:
        call_command("replay", str(cid), "--server", "drift=123456", stdout=io.StringIO())
    assert failed.value.returncode == 3  # bad input: the exit status on the command line (issue 28.10)


# --- 12.4 export / import ----------------------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_export_import_round_trips_full_results_byte_for_byte_without_secrets(client, api, fake_llm, drift, drift_server,
                                                                               app_server, other_user, django_user_model):
    refresh_tools(app_server)
    assert "url-secret-token" not in drift_server.url  # kept encrypted, used by the connection only
    cid = record(api, fake_llm, [drift_server, app_server], [
        {"text": "Looking.", "tool_calls": [{"name": "drift__quote", "arguments": {"item": "fig"}, "id": "f1"},
                                             {"name": "apps__show_marker", "arguments": {"label": "x"}, "id": "m1"}]},
        {"text": "Fig: 12.", "usage": {"prompt_tokens": 50, "completion_tokens": 5}},
    ], ["price of a fig?"], api_base=fake_llm.url.replace("http://", "http://user:base-secret@"))
    assert Message.objects.filter(conversation_id=cid, role="assistant", text="Fig: 12.").exists()
    marker = calls_of(cid).get(tool_name="show_marker")
    ModelContext.objects.create(conversation_id=cid, tool_call=marker, content=[{"type": "text", "text": "ctx"}],
                                widget_state={"w": 1})
    # The view was read once (the chat page does); the file carries it.
    assert api.get(f"/api/tool-calls/{marker.pk}/view/").status_code == 200

    export = api.get(f"/api/conversations/{cid}/export/")
    assert export.status_code == 200 and "attachment" in export["Content-Disposition"]
    exported = streamed_body(export)
    text = exported.decode()
    for secret in ["header-secret-value", "url-secret-token", "sk-conversation-secret", "base-secret", drift.url]:
        assert secret not in text, secret
    document = json.loads(text)
    replays_page = api.client.get(f"/chat/{cid}/replays/").content.decode()
    assert "base-secret" not in replays_page and "sk-conversation-secret" not in replays_page
    assert document["conversation"]["api_base"].startswith("http://user:********@")
    assert document["format"] == "mcp-inspector/conversation" and document["version"] == 1
    servers = {s["name"]: s for s in document["servers"]}
    assert {t["name"] for t in servers["drift"]["tools"]} == {"quote", "show_quote"}
    assert servers["apps"]["views"][0]["uri"] == "ui://app/marker.html"
    assert "url" not in servers["drift"] and "headers" not in servers["drift"]

    client.force_login(other_user)
    bob = Api(client)
    counts = ToolCall.objects.count()
    imported = client.post("/api/conversations/import/", data=exported, content_type="application/json")
    assert imported.status_code == 201, imported.json()
    new_id = imported.json()["id"]
    conversation = Conversation.objects.get(pk=new_id)
    assert conversation.owner == other_user and conversation.read_only and conversation.api_key == ""
    assert ToolCall.objects.count() == counts + 2

    # Full results: byte for byte what the original's result endpoint serves.
    pairs = {c.tool_name: c for c in calls_of(cid)}
    for call in calls_of(new_id):
        original = pairs[call.tool_name]
        assert call.pk != original.pk and call.server_id is None and call.server_name == original.server_name
        assert bob.get(f"/api/tool-calls/{call.pk}/result/").status_code == 200
        assert streamed_body(bob.get(f"/api/tool-calls/{call.pk}/result/")) == streamed_body(api_get_as(client, original))
        assert call.projection.payload == original.projection.payload and call.projection.text == original.projection.text
        assert call.queued_at == original.queued_at and call.duration_ms == original.duration_ms
    copy = calls_of(new_id).get(tool_name="show_marker")
    assert ModelContext.objects.get(tool_call=copy).widget_state == {"w": 1}
    old_messages = list(Message.objects.filter(conversation_id=cid).values_list("seq", "role", "text", "usage", "created_at"))
    new_messages = list(Message.objects.filter(conversation_id=new_id).values_list("seq", "role", "text", "usage", "created_at"))
    assert new_messages == old_messages

    # Read-only: no new turn; the chat page sends to the player. The history the model would get is the same.
    assert bob.post(f"/api/conversations/{new_id}/messages/", {"text": "more"}).status_code == 409
    assert client.get(f"/chat/{new_id}/")["Location"] == f"/chat/{new_id}/replay/"
    client.force_login(other_user)
    # The player shows it, App view from the file (no server needed).
    player = bob.get(f"/api/conversations/{new_id}/player/").json()
    kinds = [s["kind"] for t in player["turns"] for s in t["steps"]]
    assert kinds == ["user", "assistant", "tool", "tool", "assistant"]
    view = bob.get(f"/api/conversations/{new_id}/player/views/{copy.pk}/").json()
    assert "Marker App" in view["html"] and view["widget_state"] == {"w": 1}

    # A re-export of the import carries the same results and views.
    again = json.loads(streamed_body(bob.get(f"/api/conversations/{new_id}/export/")))
    assert [c["full_result"] for c in again["tool_calls"]] == [c["full_result"] for c in document["tool_calls"]]
    assert again["servers"] == document["servers"]

    # Re-run on bob's deployment: servers matched by name ("drift"), bob's own.
    bobs = Server.objects.create(name="drift", transport="streamable_http", url=drift.url, owner=other_user)
    refresh_tools(bobs)
    run = run_replay(bob, new_id, ignore_paths=VOLATILE)
    assert run["server_map"]["drift"] == bobs.pk and run["server_map"]["apps"] is None
    verdicts = {i["tool"]: i["verdict"] for i in run["items"]}
    assert verdicts == {"quote": "same", "show_marker": "error"}


def api_get_as(client, call):
    """The original call's result as its owner gets it (the test client is logged in as bob now)."""
    from django.test import Client

    owner = Client()
    owner.force_login(conversation_of(call).owner)
    return owner.get(f"/api/tool-calls/{call.pk}/result/")


def _minimal() -> dict:
    return {
        "format": "mcp-inspector/conversation", "version": 1,
        "conversation": {"title": "t", "model": "m"},
        "servers": [], "turns": [{"status": "completed"}],
        "messages": [{"seq": 1, "role": "user", "turn": 0, "text": "hi"}],
        "tool_calls": [],
    }


def _with(**changes):
    doc = _minimal()
    for dotted, value in changes.items():
        target = doc
        parts = dotted.split("__")
        for part in parts[:-1]:
            target = target[int(part)] if part.isdigit() else target[part]
        target[int(parts[-1]) if parts[-1].isdigit() else parts[-1]] = value
    return json.dumps(doc).encode()


BAD_FILES = {
    "not json": (b"{nope", "not valid JSON"),
    "not utf-8": (b"\xff\xfe{}", "not UTF-8"),
    "an array": (b"[]", "not a conversation export"),
    "foreign format": (json.dumps({"format": "something-else", "version": 1}).encode(), "not a conversation export"),
    "mcpServers file": (json.dumps({"mcpServers": {}}).encode(), "not a conversation export"),
    "newer version": (_with(version=2), "newer inspector"),
    "no version": (_with(version="1"), "no format version"),
    "deeply nested": (b'{"format": "mcp-inspector/conversation", "version": 1, "x": ' + b"[" * 200_000 + b"]" * 200_000 + b"}",
                      "nested too deeply"),
    "NaN": (_with(conversation__temperature=0.5).replace(b"0.5", b"NaN"), "NaN"),
    "unknown tool call": (_with(messages__0__tool_call="ghost"), "no tool call with id 'ghost'"),
    "bad role": (_with(messages__0__role="root"), "messages[0].role"),
    "bad turn index": (_with(messages__0__turn=7), "messages[0].turn"),
    "duplicate seq": (_with(messages=[{"seq": 1, "role": "user"}, {"seq": 1, "role": "user"}]), "used twice"),
    "no model": (_with(conversation={"title": "x"}), "conversation.model"),
    "bad raw": (_with(tool_calls=[{"id": "a", "tool": "t", "origin": "llm", "status": "succeeded", "full_result": {"raw": "x"}}]),
                "full_result.raw"),
    "replay origin": (_with(tool_calls=[{"id": "a", "tool": "t", "origin": "replay", "status": "succeeded"}]), "origin"),
    "bad time": (_with(messages__0__created_at="yesterday"), "messages[0].created_at"),
    "huge title": (_with(conversation__title="x" * 1000), "conversation.title"),
    "temperature out of range": (_with(conversation__temperature=3), "conversation.temperature"),
    "a boolean for a number": (_with(messages__0__seq=True), "messages[0].seq"),
    "a string for a number": (_with(messages__0__step="1"), "messages[0].step"),
    "a tool that is not an object": (_with(servers=[{"name": "s", "tools": ["echo"]}]), "servers[0].tools[0]"),
    "an answer's call without a name string": (_with(messages__0__tool_calls=[{"id": "1", "name": 5}]), "messages[0].tool_calls[0].name"),
    "two answers in a step": (_with(messages=[{"seq": 1, "role": "assistant", "turn": 0, "step": 1},
                                              {"seq": 2, "role": "assistant", "turn": 0, "step": 1}]), "same step"),
}


@pytest.mark.django_db
@pytest.mark.parametrize("name", list(BAD_FILES))
def test_import_of_a_malformed_or_hostile_file_changes_nothing(api, name):
    data, expected = BAD_FILES[name]
    before = [m.objects.count() for m in (Conversation, Message, Turn, ToolCall, ToolResult, Projection, ModelContext)]
    resp = api.client.post("/api/conversations/import/", data=data, content_type="application/json")
    assert resp.status_code == 400, resp.content
    assert expected in resp.json()["error"], resp.json()
    assert [m.objects.count() for m in (Conversation, Message, Turn, ToolCall, ToolResult, Projection, ModelContext)] == before


@pytest.mark.django_db
def test_import_limits_size_and_the_page_form_reports_errors(api, settings):
    settings.REPLAY_IMPORT_MAX_BYTES = 100
    resp = api.client.post("/api/conversations/import/", data=_with(conversation__title="x" * 150), content_type="application/json")
    assert resp.status_code == 400 and "larger than 100 bytes" in resp.json()["error"]
    settings.REPLAY_IMPORT_MAX_BYTES = 1_000_000
    page = api.client.post("/chat/import/", {"file": io.BytesIO(b"[1, 2]")}, follow=True)
    assert "Nothing was imported" in page.content.decode() and Conversation.objects.count() == 0
    upload = io.BytesIO(_with())
    upload.name = "c.json"
    page = api.client.post("/chat/import/", {"file": upload})
    conversation = Conversation.objects.get()
    assert page["Location"] == f"/chat/{conversation.pk}/replay/" and conversation.read_only


# --- 12.3 re-run with a model -------------------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_live_rerun_compares_the_trajectory_and_answers(api, fake_llm, drift, drift_server):
    cid = record(api, fake_llm, [drift_server], [
        {"tool_calls": [{"name": "drift__quote", "arguments": {"item": "apple"}, "id": "a1"}]},
        {"text": "Apple: 12."},
        {"text": "You're welcome."},
    ], ["apple price?", "thanks"])
    # The new model asks for another item in turn 1, and answers turn 2 the same.
    fake_llm.script([
        {"tool_calls": [{"name": "drift__quote", "arguments": {"item": "pear"}, "id": "b1"}]},
        {"text": "Pear: 12."},
        {"text": "You're welcome."},
    ])
    resp = api.post(f"/api/conversations/{cid}/replays/", {"kind": "live", "model": "openai/other-model", "api_base": fake_llm.url,
                                                           "api_key": "sk-x"})
    assert resp.status_code == 202, resp.json()
    run = wait_for(lambda: (d := api.get(f"/api/replays/{resp.json()['id']}/").json())["status"] != "running" and d,
                   timeout=60, message="the live run")
    assert run["status"] == "completed" and run["verdict"] == "different", run
    comparison = run["comparison"]
    first, second = comparison["turns"]
    assert first["tools_same"] and not first["arguments_same"]
    assert first["argument_diffs"][0]["changes"] == [{"path": "$.item", "kind": "changed", "old": "apple", "new": "pear"}]
    assert not first["answer_same"] and second["same"] and second["answer_same"]
    new = Conversation.objects.get(pk=run["live_conversation_id"])
    assert new.model == "openai/other-model" and list(new.servers.all()) == [drift_server]
    assert [m.text for m in new.messages.filter(role="user").order_by("seq")] == ["apple price?", "thanks"]
    # One user message per turn, each sent after the previous turn ended.
    turns = list(new.turns.order_by("created_at"))
    assert len(turns) == 2 and turns[0].finished_at <= turns[1].created_at
    requests = [r["body"]["model"] for r in fake_llm.requests[-3:]]
    assert requests == ["other-model"] * 3
    page = api.client.get(f"/chat/replays/{run['id']}/")
    assert page.status_code == 200 and b"Pear: 12." in page.content and b"Apple: 12." in page.content


# --- the player's data: nothing runs ------------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_player_api_runs_nothing(api, fake_llm, drift, drift_server):
    cid = record(api, fake_llm, [drift_server], [
        {"text": "Looking.", "tool_calls": [{"name": "drift__show_quote", "arguments": {"item": "kiwi"}, "id": "k1"}],
         "usage": {"prompt_tokens": 30, "completion_tokens": 4}},
        {"text": "Kiwi: 12."},
    ], ["kiwi?"])
    calls_before, requests_before = len(drift.calls()), len(fake_llm.requests)
    rows_before = ToolCall.objects.count()
    data = api.get(f"/api/conversations/{cid}/player/").json()
    [turn] = data["turns"]
    assert [s["kind"] for s in turn["steps"]] == ["user", "assistant", "tool", "assistant"]
    assert turn["status"] == "completed" and turn["duration_ms"] > 0
    assert turn["steps"][1]["usage"]["prompt_tokens"] == 30
    assert turn["tokens"]["prompt"] == sum(s["usage"]["prompt_tokens"] for s in turn["steps"] if s["role"] == "assistant")
    tool = turn["steps"][2]["tool_call"]
    assert tool["tool"] == "show_quote" and tool["has_view"] and tool["projection"]["text"] == "Quote for kiwi"
    assert tool["duration_ms"] is not None and tool["tokens_full"] > tool["tokens_projection"]
    view = api.get(f"/api/conversations/{cid}/player/views/{tool['id']}/").json()
    assert 'id="price"' in view["html"]
    assert len(drift.calls()) == calls_before and len(fake_llm.requests) == requests_before
    assert ToolCall.objects.count() == rows_before
    assert api.client.get(f"/chat/{cid}/replay/").status_code == 200


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_a_rerun_compares_results_of_a_megabyte_or_more_as_stored_text(api, fake_llm, basic_server):
    """Parsed and diffed, two 40 MB results cost the worker ~20x their size (issue 25.6): from
    1 MB (tools/mcp/wire_result.py LARGE_BYTES) the stored texts are compared by digest, and a
    difference is one change at `$` with the start of each."""
    from tools.runtime import stored_result

    refresh_tools(basic_server)
    script = [{"tool_calls": [{"name": "basic__big_text", "arguments": {"megabytes": 2}, "id": "b1"}]}, {"text": "Big."}]
    cid = record(api, fake_llm, [basic_server], script, ["Something big"])
    original = calls_of(cid).get(origin="llm")
    size = ToolResult.objects.only("size_bytes").get(pk=original.pk).size_bytes
    assert original.status == "succeeded" and size > 2 * 1024 * 1024

    # The export streams each full result as stored, spliced into the document, never parsed.
    export = api.get(f"/api/conversations/{cid}/export/")
    assert export.streaming and "attachment" in export["Content-Disposition"]
    exported = streamed_body(export)
    # All of the stored text (PostgreSQL's jsonb text is longer than size_bytes, the compact form's length).
    stored = stored_result.open_stored(original.pk).whole().decode()
    assert ('"raw": ' + stored + ', "size_bytes": ').encode() in exported
    assert json.loads(exported)["tool_calls"][0]["full_result"]["size_bytes"] == size

    same = run_replay(api, cid)
    assert same["verdict"] == "same", same
    assert same["items"][0]["full_diff"] == {"changes": [], "total": 0, "ignored": 0, "truncated": False}

    # The recorded result made different (one character, near its end): found, shown by its start.
    text = stored_result.open_stored(original.pk).whole().decode()  # all of it, on either database
    at = text.rindex("0123456789abcdef")
    changed = text[:at] + "X" + text[at + 1:]
    assert len(changed) == len(text) and changed != text
    ToolResult.objects.filter(pk=original.pk).update(raw=stored_result.JSONText(changed))
    run = run_replay(api, cid)
    assert run["verdict"] == "different", run
    [change] = run["items"][0]["full_diff"]["changes"]
    assert change["path"] == "$" and change["kind"] == "changed"
    assert change["old"]["$chars"] == change["new"]["$chars"] == len(text.encode())  # the stored text's bytes
    assert change["old"]["$preview"] == text[:jsondiff.PREVIEW_CHARS] + "…" == change["new"]["$preview"]
    page = api.client.get(f"/chat/replays/{run['id']}/")
    assert page.status_code == 200 and len(page.content) < 200_000
