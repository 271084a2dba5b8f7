"""A 2026-07-28 test server whose tools ask for input through multi round-trip results (SEP-2322).

Run: ``python tests/mcp_servers/rounds.py [--transport stdio|http] [--port N]`` (never ``--legacy``:
on a legacy connection a server asks through requests of its own, see asks.py).

Tools (each answers ``tools/call`` with an ``InputRequiredResult`` until it has what it needs):
* ``trip(topic)`` - round 1 asks a form elicitation (key ``who``) and the client's roots (key
  ``roots``); round 2 asks the client's model (key ``model``), carrying the name in its state;
  round 3 answers "<name> / <model text> / <n> roots / round 3". A declined form ends it at once
  with "declined".
* ``big_state(size)`` - asks a form elicitation with a requestState of ``size`` characters.
* ``mixed()`` - a good form and a forbidden (nested) one in the same round.
* ``endless()`` - asks again every round, forever (the client's round cap must stop it).
* ``seen(tag)`` - what this process saw: the inputResponses and requestState of every round of
  ``trip`` calls with ``topic == tag``, as JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import serve  # noqa: E402
from mcp_types import (  # noqa: E402
    CallToolResult,
    CreateMessageRequest,
    CreateMessageRequestParams,
    ElicitRequest,
    ElicitRequestFormParams,
    InputRequiredResult,
    ListRootsRequest,
    SamplingMessage,
    TextContent,
)

from mcp.server.mcpserver import Context, MCPServer  # noqa: E402

mcp: MCPServer[Any] = MCPServer("rounds-test-server", version="1.0.0")

FORM = {"type": "object", "properties": {"name": {"type": "string", "title": "Your name"}}, "required": ["name"]}
SEEN: dict[str, list[dict[str, Any]]] = {}


def _dump(value: Any) -> Any:
    if value is None:
        return None
    return {k: v.model_dump(mode="json", by_alias=True, exclude_none=True) for k, v in value.items()}


def _text(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)])


def _ask_name(question: str, state: str) -> InputRequiredResult:
    return InputRequiredResult(
        input_requests={
            "who": ElicitRequest(params=ElicitRequestFormParams(message=question, requested_schema=FORM)),
            "roots": ListRootsRequest(),
        },
        request_state=state,
    )


@mcp.tool(structured_output=False)
async def trip(topic: str, ctx: Context) -> CallToolResult | InputRequiredResult:
    """Ask for a name and the roots, then the model, then answer."""
    responses, state = ctx.input_responses, ctx.request_state
    SEEN.setdefault(topic, []).append({"responses": _dump(responses), "state": state})
    if state is None:
        return _ask_name(f"Who is asking about {topic}?", "round-1")
    if state == "round-1":
        who = responses["who"]
        if who.action != "accept":
            return _text(who.action + "d" if who.action == "decline" else who.action)
        roots = len(responses["roots"].roots)
        return InputRequiredResult(
            input_requests={"model": CreateMessageRequest(params=CreateMessageRequestParams(
                messages=[SamplingMessage(role="user", content=TextContent(type="text", text=f"One word about {topic}"))],
                max_tokens=50))},
            request_state=json.dumps({"name": who.content["name"], "roots": roots}),
        )
    known = json.loads(state)
    sampled = responses["model"].content
    return _text(f"{known['name']} / {getattr(sampled, 'text', sampled)} / {known['roots']} roots / round 3")


@mcp.tool(structured_output=False)
async def big_state(size: int, ctx: Context) -> CallToolResult | InputRequiredResult:
    """A round whose requestState is `size` characters."""
    if ctx.request_state is None:
        return InputRequiredResult(
            input_requests={"who": ElicitRequest(params=ElicitRequestFormParams(message="Name?", requested_schema=FORM))},
            request_state="s" * size,
        )
    return _text("got it back")


@mcp.tool(structured_output=False)
async def mixed(ctx: Context) -> CallToolResult | InputRequiredResult:
    """A good form and one with a nested object (which the spec forbids) in the same round."""
    nested = {"type": "object", "properties": {"address": {"type": "object", "properties": {"city": {"type": "string"}}}}}
    return InputRequiredResult(input_requests={
        "good": ElicitRequest(params=ElicitRequestFormParams(message="Name?", requested_schema=FORM)),
        "bad": ElicitRequest(params=ElicitRequestFormParams(message="Address?", requested_schema=nested)),
    }, request_state="x")


@mcp.tool(structured_output=False)
async def endless(ctx: Context) -> CallToolResult | InputRequiredResult:
    """Never satisfied: a roots request every round."""
    rounds = int(ctx.request_state or 0) + 1
    return InputRequiredResult(input_requests={"roots": ListRootsRequest()}, request_state=str(rounds))


@mcp.tool(structured_output=False)
async def seen(tag: str) -> str:
    """What `trip(topic=tag)` received, round by round."""
    return json.dumps(SEEN.get(tag, []))


if __name__ == "__main__":
    serve(mcp)
