"""The LLM history build (chat/history.py) and the real token counts stored by the pipeline.

The history is rebuilt at every LLM step and on every "What the model sees" view: it must cost
the same three queries at any length, never read the full-result table, and cap widget context
with the model's real tokenizer. The pipeline stores token counts by that tokenizer too.
"""

from __future__ import annotations

import json
import random
import uuid

import litellm
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chat import history
from chat.tool_calls import caller
from chat.models import Conversation, Message, ModelContext
from tests.helpers import refresh_tools, run_call, wait_for
from tools.mcp import tokens
from tools.models import Projection, Server, Tool, ToolCall, ToolResult


def _uuid_json(count: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    return json.dumps(
        [{"id": str(uuid.UUID(int=rng.getrandbits(128))), "value": round(rng.uniform(-1e6, 1e6), 4)} for _ in range(count)],
        separators=(",", ":"),
    )


def _conversation(user, n_calls: int, model: str = "openai/gpt-4o-mini") -> Conversation:
    """A conversation of `n_calls` tool calls (rows written directly: the build only reads them)."""
    server = Server.objects.create(name="hist", url="http://127.0.0.1:9/mcp", owner=user, instructions="Say please.")
    Tool.objects.create(server=server, name="look", description="Look things up.", input_schema={"type": "object"},
                        visibility=["model", "app"])
    Tool.objects.create(server=server, name="widget_only", input_schema={"type": "object"}, visibility=["app"])
    conversation = Conversation.objects.create(owner=user, model=model, system_prompt="Be brief.")
    conversation.servers.set([server])
    seq = 0
    for i in range(n_calls):
        status = ToolCall.Status.CANCELLED if i == 1 else ToolCall.Status.SUCCEEDED
        call = ToolCall.objects.create(**caller(conversation).row_fields(), origin="llm", server=server, tool_name="look",
                                       llm_tool_call_id=f"c{i}", status=status)
        ToolResult.objects.create(tool_call=call, raw={"content": [], "structuredContent": {"secret": "FULL-ONLY"}},
                                  size_bytes=1, tokens=1)
        if i != 1:  # the cancelled call never got a projection
            Projection.objects.create(tool_call=call, payload={}, text=f"answer {i}", policy="content-first", size_bytes=8, tokens=2)
        seq += 1
        Message.objects.create(conversation=conversation, seq=seq, role="user", text=f"question {i}")
        seq += 1
        Message.objects.create(conversation=conversation, seq=seq, role="assistant", text="",
                               tool_calls=[{"id": f"c{i}", "name": "hist__look", "arguments": "{}"}])
        seq += 1
        Message.objects.create(conversation=conversation, seq=seq, role="tool", tool_call=call, llm_tool_call_id=f"c{i}")
        if i % 10 == 0:
            ModelContext.objects.create(conversation=conversation, tool_call=call, content=[{"type": "text", "text": f"view {i}"}])
    return conversation


@pytest.mark.django_db
def test_history_build_takes_three_queries_at_any_length_and_never_reads_full_results(user):
    counts = []
    for n in (3, 60):
        conversation = _conversation(user, n)
        with CaptureQueriesContext(connection) as ctx:
            request = history.build(conversation)
        sql = " ".join(q["sql"] for q in ctx.captured_queries).lower()
        assert "tools_toolresult" not in sql and "FULL-ONLY" not in json.dumps(request.messages)
        assert len(ctx.captured_queries) <= 3, [q["sql"] for q in ctx.captured_queries]
        counts.append(len(ctx.captured_queries))
        server = conversation.servers.get()

        # The same request as before: instructions, contexts, messages, projection texts, notes.
        assert request.messages[:2] == [{"role": "system", "content": "Be brief."},
                                        {"role": "system", "content": "Instructions from the MCP server “hist”:\nSay please."}]
        assert request.messages[2]["content"] == "Context from the interactive view of the tool “look”:\nview 0"
        tool_messages = [m for m in request.messages if m["role"] == "tool"]
        assert [m["tool_call_id"] for m in tool_messages] == [f"c{i}" for i in range(n)]
        assert tool_messages[0]["content"] == "answer 0"
        assert tool_messages[1]["content"] == history.CANCELLED_NOTE
        assert [t["function"]["name"] for t in request.tools] == ["hist__look"]  # not the app-only tool
        assert request.tools[0]["function"]["description"] == "Look things up."
        assert request.tool_map == {"hist__look": (str(server.pk), "look")}
        Server.objects.filter(pk=server.pk).delete()
    assert counts[0] == counts[1]


@pytest.mark.django_db
@pytest.mark.parametrize("model", ["openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5"])
def test_widget_context_is_capped_with_the_real_count(user, settings, model):
    settings.PROJECTION_TOKEN_CAP = 300
    conversation = _conversation(user, 1, model=model)
    ModelContext.objects.filter(conversation=conversation).update(structured=json.loads(_uuid_json(400)))
    request = history.build(conversation)
    prefix = "Context from the interactive view of the tool “look”:\n"
    context = next(m["content"] for m in request.messages if m["content"] and m["content"].startswith(prefix))
    text = context.removeprefix(prefix)
    assert "[truncated: " in text
    assert litellm.token_counter(model=tokens.counting_name(model), text=text) <= 300


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_pipeline_stores_real_token_counts_for_the_calls_model(basic_server, user):
    from django.conf import settings

    refresh_tools(basic_server)
    payload = _uuid_json(1500)  # 90 KB of JSON, about 45,000 real tokens: over the 8,000-token cap
    call = run_call(basic_server, "echo", {"text": payload})
    assert call.status == "succeeded", call.error
    full = ToolResult.objects.get(tool_call=call)
    proj = Projection.objects.get(tool_call=call)
    # A manual call has no conversation: counted as TOKEN_COUNT_MODEL's tokens.
    model = settings.TOKEN_COUNT_MODEL
    # Counted on the result as it came; PostgreSQL's jsonb hands the keys back in its own order,
    # which tokenises a couple of tokens differently (52,601 vs 52,603 seen): exact up to that.
    counted_again = tokens.estimate(json.dumps(full.raw, ensure_ascii=False, separators=(",", ":")), model)
    assert abs(full.tokens - counted_again) <= 10, (full.tokens, counted_again)
    assert full.tokens > len(json.dumps(full.raw)) / 3  # JSON: far more than four characters a token
    assert proj.truncated
    assert proj.tokens == litellm.token_counter(model=tokens.counting_name(model), text=proj.text) <= settings.PROJECTION_TOKEN_CAP
    assert proj.payload == {"content": [{"type": "text", "text": proj.text}]}  # what the model got, not 90 KB

    # A call in a conversation is counted with the conversation's model.
    conversation = Conversation.objects.create(owner=user, model="anthropic/claude-sonnet-4-5")
    from tools.runtime.lifecycle import start_tool_call

    queued = start_tool_call(server=basic_server, tool_name="echo", arguments={"text": payload}, origin="llm", user=user,
                             caller=caller(conversation), llm_tool_call_id="x1")
    wait_for(lambda: ToolCall.objects.get(pk=queued.pk).is_final, message="the conversation's call")
    proj = Projection.objects.get(tool_call_id=queued.pk)
    assert proj.tokens == litellm.token_counter(model="claude-sonnet-4-5", text=proj.text) <= settings.PROJECTION_TOKEN_CAP
    assert proj.tokens != litellm.token_counter(model="gpt-4o-mini", text=proj.text)
