#!/usr/bin/env python
"""How many queries and how long does rebuilding one LLM request (`chat.history.build`) take?

    .venv/bin/python bench/history.py [--calls 1000 5000] [--repeat 7]

Runs on the configured database engine (DATABASE_URL, else SQLite) but never on its data: it
creates Django's test database for it (for SQLite a temporary file, for PostgreSQL
`<name>_bench_history`), fills it with one conversation of N tool calls (a user message every
ten calls, an assistant message with the call, the ToolCall, its full ToolResult and its
Projection of about 1 KB, the tool message, a widget model context every 50 calls, and two
servers with ten tools each), then times `history.build` (best and median of --repeat runs,
warm) and counts its queries with CaptureQueriesContext. The test database is dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

PROJECTION_TEXT = '{"rows": [' + ", ".join(f'{{"id": "{uuid.UUID(int=i)}", "n": {i}}}' for i in range(20)) + "]}"


def fill(n_calls: int):
    """One conversation with `n_calls` finished tool calls, written in bulk."""
    from django.contrib.auth import get_user_model

    from chat.models import Conversation, Message, ModelContext
    from chat.tool_calls import caller
    from tools.models import Projection, Server, Tool, ToolCall, ToolResult

    user, _ = get_user_model().objects.get_or_create(username=f"bench-{n_calls}")
    servers = [
        Server.objects.create(name=f"bench{i}-{n_calls}", url="http://127.0.0.1:9/mcp", owner=user, instructions=f"Server {i} says hi.")
        for i in range(2)
    ]
    Tool.objects.bulk_create(
        Tool(server=s, name=f"tool{j}", description=f"Tool {j}.", input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
             visibility=["model", "app"])
        for s in servers for j in range(10)
    )
    conversation = Conversation.objects.create(owner=user, model="openai/gpt-4o-mini", system_prompt="Be brief.")
    conversation.servers.set(servers)

    calls, results, projections, messages, contexts = [], [], [], [], []
    seq = 0
    for i in range(n_calls):
        if i % 10 == 0:
            seq += 1
            messages.append(Message(conversation=conversation, seq=seq, role=Message.Role.USER, text=f"question {i}"))
        call = ToolCall(**caller(conversation).row_fields(), origin=ToolCall.Origin.LLM, server=servers[i % 2], server_name=servers[i % 2].name,
                        tool_name=f"tool{i % 10}", llm_tool_call_id=f"c{i}", arguments={"q": str(i)}, status=ToolCall.Status.SUCCEEDED)
        calls.append(call)
        raw = {"content": [{"type": "text", "text": PROJECTION_TEXT}], "structuredContent": {"i": i}}
        results.append(ToolResult(tool_call=call, raw=raw, size_bytes=len(PROJECTION_TEXT), tokens=600))
        projections.append(Projection(tool_call=call, payload={"content": raw["content"]}, text=PROJECTION_TEXT, policy="content-first",
                                      removed=[{"path": "structuredContent", "reason": "content already carries the result"}],
                                      size_bytes=len(PROJECTION_TEXT), tokens=600))
        seq += 1
        messages.append(Message(conversation=conversation, seq=seq, role=Message.Role.ASSISTANT, text="",
                                tool_calls=[{"id": f"c{i}", "name": f"{servers[i % 2].name}__tool{i % 10}", "arguments": f'{{"q": "{i}"}}'}]))
        seq += 1
        messages.append(Message(conversation=conversation, seq=seq, role=Message.Role.TOOL, tool_call=call, llm_tool_call_id=f"c{i}"))
        if i % 50 == 0:
            contexts.append(ModelContext(conversation=conversation, tool_call=call, content=[{"type": "text", "text": f"view {i} state"}],
                                         structured={"selected": i}))
    ToolCall.objects.bulk_create(calls, batch_size=500)
    ToolResult.objects.bulk_create(results, batch_size=500)
    Projection.objects.bulk_create(projections, batch_size=500)
    Message.objects.bulk_create(messages, batch_size=500)
    ModelContext.objects.bulk_create(contexts, batch_size=500)
    return Conversation.objects.get(pk=conversation.pk)


def measure(n_calls: int, repeat: int) -> None:
    from chat import history

    conversation = fill(n_calls)
    history.build(conversation)  # warm: imports, tokenizer, prepared statements
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        request = history.build(conversation)
        times.append((time.perf_counter() - started) * 1000)
    with CaptureQueriesContext(connection) as ctx:
        history.build(conversation)
    full_result_reads = sum("tools_toolresult" in q["sql"].lower() for q in ctx.captured_queries)
    print(f"N={n_calls:>6}  messages={len(request.messages):>6}  tools={len(request.tools):>3}  "
          f"queries={len(ctx.captured_queries)}  best={min(times):7.1f} ms  median={statistics.median(times):7.1f} ms  "
          f"full-result reads={full_result_reads}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    db = settings.DATABASES["default"]
    tmp = None
    if db["ENGINE"].endswith("sqlite3"):
        tmp = tempfile.TemporaryDirectory(prefix="bench-history-")
        db.setdefault("TEST", {})["NAME"] = str(Path(tmp.name) / "bench.sqlite3")
    else:
        db.setdefault("TEST", {})["NAME"] = f"{db['NAME']}_bench_history"
    print(f"database: {connection.vendor} (test database {db['TEST']['NAME']})")
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        for n in args.calls:
            measure(n, args.repeat)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
        if tmp:
            tmp.cleanup()


if __name__ == "__main__":
    main()
