"""Chat above tools in data too (issue 27 item 4): tools never names chat, a conversation's calls
follow it (shared: readable by the team; deleted: gone), and the migration that moved the
foreign keys into the caller context keeps the data, both ways."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from chat import events as chat_events
from chat.models import Conversation, Turn
from chat.tool_calls import caller, calls_of, calls_of_turn, conversation_key
from tests.helpers import Api
from tools.models import Projection, ToolCall, ToolResult

TOOLS = Path(__file__).resolve().parents[2] / "tools"
MODEL_OR_TASK = re.compile(r"\bchat\.[A-Za-z_]")  # "chat.Conversation", "chat.tasks.run_sampling"


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def chat_references(path: Path) -> list[str]:
    """What in one module of tools names chat: an import of it, a model or task string, an event or group name."""
    tree = ast.parse(path.read_text(), str(path))
    docs = _docstrings(tree)
    chat_names = {v for k, v in vars(chat_events).items() if k.isupper() and isinstance(v, str)}
    group_prefix = chat_events.conversation_group(0)[:-1]  # "conversation."
    found = []
    for node in ast.walk(tree):
        where = f"{path.name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            found += [f"{where} imports {a.name}" for a in node.names if a.name == "chat" or a.name.startswith("chat.")]
        elif isinstance(node, ast.ImportFrom) and node.module and (node.module == "chat" or node.module.startswith("chat.")):
            found.append(f"{where} imports from {node.module}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            text = node.value
            if MODEL_OR_TASK.search(text):
                found.append(f"{where} names {text!r}")
            if text in chat_names or text.startswith(group_prefix):
                found.append(f"{where} spells chat's event or group {text!r}")
    return found


def test_tools_never_names_chat():
    """No import, model string, task name, event or group name of chat anywhere in tools (its
    migrations before 0016 are history: 0001 created the foreign keys 0017 removed)."""
    modules = [p for p in TOOLS.rglob("*.py") if "migrations" not in p.parts]
    assert len(modules) > 40
    found = [ref for path in modules for ref in chat_references(path)]
    assert found == []
    chat_links = [f.name for f in ToolCall._meta.concrete_fields if f.is_relation and f.related_model._meta.app_label == "chat"]
    assert chat_links == []


def test_the_check_sees_what_it_looks_for(tmp_path):
    """The scan above finds each kind of reference (so an empty list means something)."""
    module = tmp_path / "probe.py"
    module.write_text('"""Docstrings may say chat.tasks."""\nfrom chat.models import Conversation\nimport chat.tasks\n'
                      'X = "chat.tasks.run_sampling"\nY = f"conversation.{1}"\nZ = "turn.started"\n')
    assert len(chat_references(module)) == 5


@pytest.mark.django_db
def test_a_shared_conversations_calls_are_read_by_the_team_and_a_deleted_ones_go(client, user, other_user):
    conversation = Conversation.objects.create(owner=user, model="openai/gpt-4o-mini")
    turn = Turn.objects.create(conversation=conversation)
    call = ToolCall.objects.create(tool_name="t", origin="llm", requested_by=user, status="succeeded",
                                   **caller(conversation, turn).row_fields())
    ToolResult.objects.create(tool_call=call, raw={"content": []}, size_bytes=15, tokens=1)
    Projection.objects.create(tool_call=call, payload={}, text="", policy="content-first", size_bytes=0, tokens=0)
    manual = ToolCall.objects.create(tool_name="t", origin="manual", requested_by=user, status="succeeded")
    client.force_login(other_user)
    teammate = Api(client)
    detail = f"/api/tool-calls/{call.pk}/"

    assert list(calls_of_turn(turn)) == [call] and set(calls_of(conversation)) == {call}
    assert teammate.get(detail).status_code == 404
    assert not ToolCall.objects.visible_to(other_user).filter(pk=call.pk).exists()

    conversation.shared = True
    conversation.save(update_fields=["shared"])
    assert teammate.get(detail).status_code == 200
    assert teammate.get(detail).json()["conversation_id"] == conversation.pk
    assert not ToolCall.objects.acted_on_by(other_user).filter(pk=call.pk).exists()  # read, never acted on
    assert teammate.post(f"{detail}cancel/").status_code == 404
    assert not ToolCall.objects.visible_to(other_user).filter(pk=manual.pk).exists()

    conversation.delete()
    assert not ToolCall.objects.filter(pk=call.pk).exists()
    assert not ToolResult.objects.filter(pk=call.pk).exists() and not Projection.objects.filter(pk=call.pk).exists()
    assert ToolCall.objects.filter(pk=manual.pk).exists()  # a call no conversation made stays

    other = Conversation.objects.create(owner=user, model="m")
    kept_by_key = ToolCall.objects.create(tool_name="t", origin="llm", requested_by=user, **caller(other).row_fields())
    user.delete()  # the owner's conversations go, and with them their calls
    assert not ToolCall.objects.filter(pk=kept_by_key.pk).exists()


BEFORE = [("tools", "0015_resource_subscriptions"), ("chat", "0009_conversation_shared")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection).loader.project_state(targets).apps


def _latest():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


@pytest.mark.django_db(transaction=True)
def test_the_migration_moves_conversation_and_turn_into_the_caller_and_back():
    try:
        old = _migrate(BEFORE)
        User = old.get_model("auth", "User")
        owner = User.objects.create(username="mig-owner")
        conv = old.get_model("chat", "Conversation").objects.create(owner=owner, model="openai/gpt-4o-mini")
        turn = old.get_model("chat", "Turn").objects.create(conversation=conv)
        OldCall = old.get_model("tools", "ToolCall")
        in_turn = OldCall.objects.create(tool_name="a", origin="llm", conversation=conv, turn=turn)
        from_view = OldCall.objects.create(tool_name="b", origin="widget", conversation=conv)
        manual = OldCall.objects.create(tool_name="c", origin="manual")

        _migrate(_latest())
        rows = {c.pk: c for c in ToolCall.objects.all()}
        assert rows[in_turn.pk].caller == conversation_key(conv.pk) and rows[in_turn.pk].owner_id == owner.pk
        assert rows[in_turn.pk].context == {
            "model": "openai/gpt-4o-mini", "groups": [f"conversation.{conv.pk}"],
            "refs": {"conversation_id": conv.pk}, "local_refs": {"turn_id": turn.pk},
        }
        new_conv, new_turn = Conversation.objects.get(pk=conv.pk), Turn.objects.get(pk=turn.pk)
        assert rows[in_turn.pk].context == caller(new_conv, new_turn).row_fields()["context"]  # what a new call gets
        assert rows[from_view.pk].context.get("local_refs") is None and rows[from_view.pk].caller == conversation_key(conv.pk)
        assert (rows[manual.pk].caller, rows[manual.pk].owner_id, rows[manual.pk].context) == ("", None, {})

        back = _migrate(BEFORE)
        restored = {c.pk: c for c in back.get_model("tools", "ToolCall").objects.all()}
        assert (restored[in_turn.pk].conversation_id, restored[in_turn.pk].turn_id) == (conv.pk, turn.pk)
        assert (restored[from_view.pk].conversation_id, restored[from_view.pk].turn_id) == (conv.pk, None)
        assert (restored[manual.pk].conversation_id, restored[manual.pk].turn_id) == (None, None)
    finally:
        _migrate(_latest())


@pytest.mark.django_db
def test_a_running_call_counts_with_the_model_its_conversation_changed_to(api, user):
    conversation = Conversation.objects.create(owner=user, model="openai/gpt-4o-mini")
    running = ToolCall.objects.create(tool_name="t", origin="llm", status="running", **caller(conversation).row_fields())
    ended = ToolCall.objects.create(tool_name="t", origin="llm", status="succeeded", **caller(conversation).row_fields())
    assert api.patch(f"/api/conversations/{conversation.pk}/", {"model": "anthropic/claude-x"}).status_code == 200
    running.refresh_from_db()
    ended.refresh_from_db()
    assert running.context["model"] == "anthropic/claude-x" and ended.context["model"] == "openai/gpt-4o-mini"
    assert running.context["groups"] == [f"conversation.{conversation.pk}"]  # the rest is kept


@pytest.mark.django_db
def test_the_workbench_links_a_conversations_call_back_to_its_conversation(client, user):
    conversation = Conversation.objects.create(owner=user, model="m")
    ours = ToolCall.objects.create(tool_name="t", origin="llm", requested_by=user, status="succeeded",
                                   **caller(conversation).row_fields())
    manual = ToolCall.objects.create(tool_name="t", origin="manual", requested_by=user, status="succeeded")
    client.force_login(user)
    link = f'href="/chat/{conversation.pk}/">conversation</a>'
    assert link in client.get(f"/tool-calls/{ours.pk}/workbench/").content.decode()
    assert ">conversation</a>" not in client.get(f"/tool-calls/{manual.pk}/workbench/").content.decode()
