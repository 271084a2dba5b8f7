"""Tests for tests/fake_llm.py, driven through litellm exactly as the app will use it.

Run: .venv/bin/python -m pytest tests/test_fake_llm.py -p no:django -q
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

try:  # works both with and without a tests/__init__.py
    from tests.fake_llm import DEFAULT_TEXT, FakeLLMServer, RemoteFakeLLM, fake_llm, fake_llm_server  # noqa: F401
except ImportError:  # pragma: no cover
    from fake_llm import DEFAULT_TEXT, FakeLLMServer, RemoteFakeLLM, fake_llm, fake_llm_server  # noqa: F401

# Importing fake_llm set LITELLM_LOCAL_MODEL_COST_MAP=True before litellm is imported.
import litellm  # noqa: E402
from litellm.exceptions import MidStreamFallbackError  # noqa: E402

litellm.suppress_debug_info = True  # no "Provider List: ..." / "Give Feedback" banners

FAKE_LLM_PY = Path(__file__).with_name("fake_llm.py")
MODEL = "openai/test-model"
MESSAGES = [
    {"role": "system", "content": "You are a tester."},
    {"role": "user", "content": "What's the weather in Paris?"},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "weather__get_forecast",
            "description": "Get a forecast",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "files__read",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    },
]


def call(server, **kwargs):
    params = dict(model=MODEL, api_base=server.url, api_key="sk-test", messages=MESSAGES, max_retries=0)
    params.update(kwargs)
    return litellm.completion(**params)


def accumulate_tool_calls(chunks) -> list[dict]:
    """Accumulate OpenAI-style tool call deltas by hand (what a UI streaming loop does)."""
    calls: dict[int, dict] = {}
    for c in chunks:
        for tc in (c.choices[0].delta.tool_calls or []) if c.choices else []:
            slot = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
            if tc.id:
                slot["id"] = tc.id
            if tc.function is not None:
                if tc.function.name:
                    slot["name"] += tc.function.name
                if tc.function.arguments:
                    slot["arguments"] += tc.function.arguments
    return [calls[i] for i in sorted(calls)]


def http_json(method: str, url: str, payload=None):
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.status, json.loads(resp.read())


# --------------------------------------------------------------------------- text


def test_streamed_text_reassembles(fake_llm):
    text = "Hello there, this reply arrives in several pieces."
    fake_llm.script([{"text": text}])

    chunks = list(call(fake_llm, stream=True))

    deltas = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(deltas) >= 5, deltas  # really split into several deltas
    assert "".join(deltas) == text
    assert chunks[-1].choices[0].finish_reason == "stop"
    built = litellm.stream_chunk_builder(chunks, messages=MESSAGES)
    assert built.choices[0].message.content == text
    assert built.choices[0].finish_reason == "stop"
    assert not built.choices[0].message.tool_calls


def test_single_word_is_still_split_and_chunk_size_is_honoured(fake_llm):
    fake_llm.script([{"text": "Supercalifragilistic"}, {"text": "abcdefghij", "chunk_size": 3}, {"text": ["x", "y", "z"]}])

    first = [c.choices[0].delta.content for c in call(fake_llm, stream=True) if c.choices and c.choices[0].delta.content]
    second = [c.choices[0].delta.content for c in call(fake_llm, stream=True) if c.choices and c.choices[0].delta.content]
    third = [c.choices[0].delta.content for c in call(fake_llm, stream=True) if c.choices and c.choices[0].delta.content]

    assert first == ["Supercalif", "ragilistic"]
    assert second == ["abc", "def", "ghi", "j"]
    assert third == ["x", "y", "z"]


def test_non_stream_text_with_usage(fake_llm):
    fake_llm.script([{"text": "Plain answer", "usage": {"prompt_tokens": 11, "completion_tokens": 7}}])

    resp = call(fake_llm)

    assert resp.choices[0].message.content == "Plain answer"
    assert resp.choices[0].finish_reason == "stop"
    assert resp.id.startswith("chatcmpl-fake")
    assert resp.model == "test-model"
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens, resp.usage.total_tokens) == (11, 7, 18)


def test_empty_queue_replies_default_text(fake_llm):
    fake_llm.script([{"text": "only one"}])

    assert call(fake_llm).choices[0].message.content == "only one"
    assert call(fake_llm).choices[0].message.content == DEFAULT_TEXT
    streamed = litellm.stream_chunk_builder(list(call(fake_llm, stream=True)), messages=MESSAGES)
    assert streamed.choices[0].message.content == "(no scripted reply)"
    assert len(fake_llm.requests) == 3


def test_times_repeats_an_entry_and_pending_shows_the_rest(fake_llm):
    fake_llm.script([{"text": "again", "times": 2}, {"text": "then this"}])

    assert call(fake_llm).choices[0].message.content == "again"
    assert fake_llm.pending == [{"text": "again", "times": 1}, {"text": "then this"}]
    assert call(fake_llm).choices[0].message.content == "again"
    assert call(fake_llm).choices[0].message.content == "then this"
    assert fake_llm.pending == []


def test_script_append_and_add(fake_llm):
    fake_llm.script([{"text": "one"}])
    fake_llm.script([{"text": "two"}], append=True)
    fake_llm.add({"text": "three"})

    assert [call(fake_llm).choices[0].message.content for _ in range(3)] == ["one", "two", "three"]


# --------------------------------------------------------------------------- request recording


def test_request_records_messages_tools_and_headers(fake_llm):
    fake_llm.script([{"text": "ok"}])

    list(call(fake_llm, tools=TOOLS, temperature=0.25, stream=True, stream_options={"include_usage": True}))

    req = fake_llm.requests[0]
    assert req["method"] == "POST"
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["authorization"] == "Bearer sk-test"
    assert req["headers"]["content-type"] == "application/json"
    body = req["body"]
    assert body["model"] == "test-model"  # provider prefix stripped by litellm
    assert body["messages"] == MESSAGES
    assert body["tools"] == TOOLS
    assert body["temperature"] == 0.25
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert fake_llm.bodies == [body]
    assert fake_llm.last_request is req


def test_reset_clears_requests_and_script(fake_llm):
    fake_llm.script([{"text": "a"}, {"text": "b"}])
    call(fake_llm)
    assert len(fake_llm.requests) == 1 and len(fake_llm.pending) == 1

    fake_llm.reset()

    assert fake_llm.requests == [] and fake_llm.pending == []
    assert call(fake_llm).choices[0].message.content == DEFAULT_TEXT


def test_litellm_sends_no_stream_options_unless_asked_so_stream_has_no_usage(fake_llm):
    """Quirk: usage for streams only comes back with stream_options.include_usage."""
    fake_llm.script([{"text": "a b c", "usage": {"prompt_tokens": 5, "completion_tokens": 3}}] * 2)

    plain = list(call(fake_llm, stream=True))
    with_usage = list(call(fake_llm, stream=True, stream_options={"include_usage": True}))

    assert "stream_options" not in fake_llm.requests[0]["body"]
    assert fake_llm.requests[1]["body"]["stream_options"] == {"include_usage": True}
    assert not any(getattr(c, "usage", None) and c.usage.total_tokens for c in plain)
    built = litellm.stream_chunk_builder(with_usage, messages=MESSAGES)
    assert (built.usage.prompt_tokens, built.usage.completion_tokens, built.usage.total_tokens) == (5, 3, 8)


# --------------------------------------------------------------------------- tool calls


def test_streamed_tool_call_is_reassembled(fake_llm):
    args = {"city": "Paris", "days": 3, "note": "a fairly long argument to force several fragments"}
    fake_llm.script([{"tool_calls": [{"name": "weather__get_forecast", "arguments": args, "id": "call_abc"}]}])

    chunks = list(call(fake_llm, tools=TOOLS, stream=True))

    arg_deltas = [
        tc.function.arguments
        for c in chunks if c.choices
        for tc in (c.choices[0].delta.tool_calls or [])
        if tc.function is not None and tc.function.arguments
    ]
    assert len(arg_deltas) >= 3  # arguments really arrive in fragments
    assert accumulate_tool_calls(chunks) == [
        {"id": "call_abc", "name": "weather__get_forecast", "arguments": json.dumps(args)}
    ]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"

    built = litellm.stream_chunk_builder(chunks, messages=MESSAGES)
    msg = built.choices[0].message
    assert built.choices[0].finish_reason == "tool_calls"
    assert len(msg.tool_calls) == 1
    assert msg.tool_calls[0].id == "call_abc"
    assert msg.tool_calls[0].function.name == "weather__get_forecast"
    assert json.loads(msg.tool_calls[0].function.arguments) == args
    assert not msg.content


def test_streamed_parallel_tool_calls_with_text(fake_llm):
    fake_llm.script([{
        "text": "Let me check two things.",
        "tool_calls": [
            {"name": "weather__get_forecast", "arguments": {"city": "Paris"}, "id": "call_1"},
            {"name": "files__read", "arguments": {"path": "/etc/hosts"}, "id": "call_2"},
        ],
    }])

    chunks = list(call(fake_llm, tools=TOOLS, stream=True))

    assert accumulate_tool_calls(chunks) == [
        {"id": "call_1", "name": "weather__get_forecast", "arguments": '{"city": "Paris"}'},
        {"id": "call_2", "name": "files__read", "arguments": '{"path": "/etc/hosts"}'},
    ]
    built = litellm.stream_chunk_builder(chunks, messages=MESSAGES)
    msg = built.choices[0].message
    assert msg.content == "Let me check two things."
    assert [(t.id, t.function.name, json.loads(t.function.arguments)) for t in msg.tool_calls] == [
        ("call_1", "weather__get_forecast", {"city": "Paris"}),
        ("call_2", "files__read", {"path": "/etc/hosts"}),
    ]
    assert built.choices[0].finish_reason == "tool_calls"


def test_non_stream_parallel_tool_calls_and_default_ids(fake_llm):
    fake_llm.script([{"tool_calls": [
        {"name": "weather__get_forecast", "arguments": {"city": "Oslo"}},
        {"name": "files__read", "arguments": '{"path": "broken'},  # raw, malformed JSON on purpose
    ]}])

    resp = call(fake_llm, tools=TOOLS)

    msg = resp.choices[0].message
    assert resp.choices[0].finish_reason == "tool_calls"
    assert msg.content is None
    assert [t.function.name for t in msg.tool_calls] == ["weather__get_forecast", "files__read"]
    assert json.loads(msg.tool_calls[0].function.arguments) == {"city": "Oslo"}
    assert msg.tool_calls[1].function.arguments == '{"path": "broken'
    ids = [t.id for t in msg.tool_calls]
    assert all(i.startswith("call_") for i in ids) and len(set(ids)) == 2


def test_tool_result_round_trip_is_recorded(fake_llm):
    fake_llm.script([
        {"tool_calls": [{"name": "weather__get_forecast", "arguments": {"city": "Rome"}, "id": "call_r"}]},
        {"text": "It is sunny in Rome."},
    ])
    first = call(fake_llm, tools=TOOLS)
    assistant = first.choices[0].message
    followup = MESSAGES + [
        assistant.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "call_r", "content": "sunny"},
    ]

    second = call(fake_llm, tools=TOOLS, messages=followup)

    assert second.choices[0].message.content == "It is sunny in Rome."
    sent = fake_llm.requests[1]["body"]["messages"]
    assert sent[2]["role"] == "assistant"
    assert sent[2]["tool_calls"][0]["id"] == "call_r"
    assert sent[2]["tool_calls"][0]["function"]["name"] == "weather__get_forecast"
    assert sent[3] == {"role": "tool", "tool_call_id": "call_r", "content": "sunny"}


# --------------------------------------------------------------------------- errors

# What litellm 1.106.2 actually raises for a given status (provider "openai").
ERROR_CASES = [
    (400, litellm.BadRequestError),
    (401, litellm.AuthenticationError),
    (403, litellm.APIError),  # NB: not PermissionDeniedError for the openai provider
    (404, litellm.NotFoundError),
    (422, litellm.BadRequestError),
    (429, litellm.RateLimitError),
    (500, litellm.InternalServerError),
    (502, litellm.BadGatewayError),
    (503, litellm.ServiceUnavailableError),
]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("status,exc_class", ERROR_CASES, ids=[str(s) for s, _ in ERROR_CASES])
def test_error_entry_maps_to_litellm_exception(fake_llm, status, exc_class, stream):
    fake_llm.script([{"error": {"status": status, "message": f"scripted failure {status}"}}])

    with pytest.raises(exc_class) as info:
        result = call(fake_llm, stream=stream)
        if stream:
            list(result)

    assert type(info.value) is exc_class
    assert info.value.status_code == status
    assert f"scripted failure {status}" in str(info.value)
    assert len(fake_llm.requests) == 1  # max_retries=0: no retry


def test_error_body_is_openai_shaped(fake_llm):
    fake_llm.script([{"error": {"status": 401, "message": "Invalid API key"}}])

    with pytest.raises(urllib.error.HTTPError) as info:
        http_json("POST", fake_llm.url + "/chat/completions", {"model": "m", "messages": []})

    assert info.value.code == 401
    assert json.loads(info.value.read()) == {
        "error": {"message": "Invalid API key", "type": "authentication_error", "param": None, "code": "invalid_api_key"}
    }


def test_quirk_401_with_invalid_request_error_type(fake_llm):
    """Older litellm mapped by string before status: 'invalid_request_error' => BadRequestError,
    unless the message had OpenAI's real wording 'Incorrect API key provided'; litellm 1.110.2
    maps that 401 to AuthenticationError. chat/llm.py words both for the user, so either is fine;
    anything else (a connection error, no error) is not."""
    fake_llm.script([
        {"error": {"status": 401, "message": "Invalid API key", "type": "invalid_request_error"}},
        {"error": {"status": 401, "message": "Incorrect API key provided: sk-test", "type": "invalid_request_error"}},
    ])

    with pytest.raises((litellm.BadRequestError, litellm.AuthenticationError)):
        call(fake_llm)
    with pytest.raises(litellm.AuthenticationError):
        call(fake_llm)


def test_default_retries_consume_script_entries(fake_llm):
    """Without max_retries=0 the OpenAI SDK retries 429/5xx (2 retries, ~0.5-2 s backoff)."""
    fake_llm.script([{"error": {"status": 429}}, {"text": "recovered"}])

    resp = litellm.completion(model=MODEL, api_base=fake_llm.url, api_key="sk-test", messages=MESSAGES)

    assert resp.choices[0].message.content == "recovered"
    assert [r["headers"]["x-stainless-retry-count"] for r in fake_llm.requests] == ["0", "1"]


def test_dropped_stream_raises_mid_stream(fake_llm):
    fake_llm.script([{"text": "one two three four", "drop_after": 3}])
    received = []

    # Not exported at top level: litellm.exceptions.MidStreamFallbackError(ServiceUnavailableError)
    with pytest.raises(MidStreamFallbackError) as info:
        for c in call(fake_llm, stream=True):
            if c.choices and c.choices[0].delta.content:
                received.append(c.choices[0].delta.content)

    assert isinstance(info.value, litellm.ServiceUnavailableError)
    assert received == ["one ", "two "]
    # httpx's words until openai 3.x; openai 3.57 wraps them as a connection error.
    assert any(words in str(info.value) for words in ("incomplete chunked read", "Connection error"))


def test_invalid_json_request_gets_400_and_is_recorded(fake_llm):
    req = urllib.request.Request(fake_llm.url + "/chat/completions", data=b"{nope", method="POST",
                                 headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, timeout=5)
    assert info.value.code == 400
    assert fake_llm.requests[0]["body"] is None
    assert fake_llm.requests[0]["raw"] == "{nope"


def test_bad_script_entries_are_rejected(fake_llm):
    with pytest.raises(ValueError, match="unknown script entry keys"):
        fake_llm.script([{"txt": "typo"}])
    with pytest.raises(TypeError):
        fake_llm.script(["just a string"])
    with pytest.raises(ValueError, match="name"):
        fake_llm.script([{"tool_calls": [{"arguments": {}}]}])
    with pytest.raises(urllib.error.HTTPError) as info:
        http_json("POST", fake_llm.base_url + "/_script", [{"txt": "typo"}])
    assert info.value.code == 400
    assert fake_llm.pending == []


# --------------------------------------------------------------------------- timing


def test_delay_before_answer(fake_llm):
    fake_llm.script([{"text": "slow", "delay": 0.6}])

    started = time.monotonic()
    resp = call(fake_llm)

    assert time.monotonic() - started >= 0.6
    assert resp.choices[0].message.content == "slow"


def test_delay_longer_than_timeout_raises_timeout(fake_llm):
    fake_llm.script([{"text": "too slow", "delay": 3}])

    started = time.monotonic()
    with pytest.raises(litellm.Timeout):
        call(fake_llm, timeout=0.4)
    assert time.monotonic() - started < 2.5


def test_chunk_delay_holds_stream_open_and_server_stays_responsive(fake_llm):
    fake_llm.script([{"text": "w1 w2 w3 w4 w5", "chunk_delay": 0.15}])
    arrivals: list[float] = []
    control_calls: list[float] = []

    stream = call(fake_llm, stream=True)
    for c in stream:
        if c.choices and c.choices[0].delta.content:
            arrivals.append(time.monotonic())
            if len(arrivals) == 2:  # mid-stream, the control API must still answer quickly
                t0 = time.monotonic()
                status, recorded = http_json("GET", fake_llm.base_url + "/_requests")
                control_calls.append(time.monotonic() - t0)
                assert status == 200 and len(recorded) == 1

    assert len(arrivals) == 5
    assert arrivals[-1] - arrivals[0] >= 4 * 0.15 * 0.9
    assert control_calls and control_calls[0] < 0.5


# --------------------------------------------------------------------------- async


def test_acompletion_stream_and_non_stream(fake_llm):
    fake_llm.script([
        {"text": "async plain"},
        {"text": "async streamed text", "tool_calls": [{"name": "files__read", "arguments": {"path": "a"}, "id": "c9"}]},
    ])

    async def run():
        kw = dict(model=MODEL, api_base=fake_llm.url, api_key="sk-test", messages=MESSAGES, max_retries=0)
        plain = await litellm.acompletion(**kw)
        stream = await litellm.acompletion(stream=True, tools=TOOLS, **kw)
        chunks = [c async for c in stream]
        return plain, chunks

    plain, chunks = asyncio.run(run())

    assert plain.choices[0].message.content == "async plain"
    built = litellm.stream_chunk_builder(chunks, messages=MESSAGES)
    assert built.choices[0].message.content == "async streamed text"
    assert [(t.id, t.function.name, t.function.arguments) for t in built.choices[0].message.tool_calls] == [
        ("c9", "files__read", '{"path": "a"}')
    ]
    assert fake_llm.requests[1]["headers"]["x-stainless-async"].startswith("async")


def test_acompletion_error(fake_llm):
    fake_llm.script([{"error": {"status": 429, "message": "slow down"}}])

    async def run():
        return await litellm.acompletion(model=MODEL, api_base=fake_llm.url, api_key="sk-test",
                                         messages=MESSAGES, max_retries=0)

    with pytest.raises(litellm.RateLimitError, match="slow down"):
        asyncio.run(run())


# --------------------------------------------------------------------------- models + HTTP control API


def test_models_endpoint(fake_llm):
    status, listing = http_json("GET", fake_llm.url + "/models")
    assert status == 200
    assert [m["id"] for m in listing["data"]] == ["test-model"]
    assert listing["object"] == "list"

    http_json("POST", fake_llm.base_url + "/_models", ["a-model", "b-model"])
    _, listing = http_json("GET", fake_llm.base_url + "/models")
    assert [m["id"] for m in listing["data"]] == ["a-model", "b-model"]
    assert [r["path"] for r in fake_llm.other_requests] == ["/v1/models", "/models"]
    assert fake_llm.requests == []  # model listing is not a chat request


def test_http_control_api_in_process(fake_llm):
    remote = RemoteFakeLLM(fake_llm.url)
    remote.script([{"text": "via http"}, {"text": "second"}])
    assert [e["text"] for e in fake_llm.pending] == ["via http", "second"]

    assert call(fake_llm).choices[0].message.content == "via http"
    assert remote.requests[0]["body"]["messages"] == MESSAGES
    assert remote.pending == [{"text": "second"}]
    remote.add({"text": "third"})
    assert [e["text"] for e in remote.pending] == ["second", "third"]

    remote.reset()
    assert fake_llm.requests == [] and fake_llm.pending == []


@pytest.fixture
def standalone_server():
    proc = subprocess.Popen(
        [sys.executable, str(FAKE_LLM_PY), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("FAKE_LLM_URL="), (line, proc.stderr.read() if proc.poll() is not None else "")
        yield RemoteFakeLLM(line.split("=", 1)[1])
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_standalone_server_in_subprocess(standalone_server):
    remote = standalone_server
    remote.script([{"tool_calls": [{"name": "files__read", "arguments": {"path": "x"}, "id": "call_x"}]}])

    chunks = list(litellm.completion(model=MODEL, api_base=remote.url, api_key="sk-other", messages=MESSAGES,
                                     tools=TOOLS, stream=True, max_retries=0))

    assert accumulate_tool_calls(chunks) == [{"id": "call_x", "name": "files__read", "arguments": '{"path": "x"}'}]
    recorded = remote.requests
    assert len(recorded) == 1
    assert recorded[0]["body"]["tools"] == TOOLS
    assert recorded[0]["headers"]["authorization"] == "Bearer sk-other"
    remote.reset()
    assert remote.requests == []


CLIENT_SCRIPT = textwrap.dedent("""
    import json, socket, sys
    outside = []
    def hook(event, args):
        if event == "socket.getaddrinfo":
            host = args[0]
            if host not in ("127.0.0.1", "localhost", "::1", None, b"127.0.0.1"):
                outside.append(("getaddrinfo", str(host)))
        elif event == "socket.connect":
            addr = args[1]
            if isinstance(addr, tuple) and addr and addr[0] not in ("127.0.0.1", "::1"):
                outside.append(("connect", str(addr)))
    sys.addaudithook(hook)
    import litellm
    litellm.suppress_debug_info = True
    url = sys.argv[1]
    kw = dict(model="openai/test-model", api_base=url, api_key="sk-worker", max_retries=0,
              messages=[{"role": "user", "content": "from worker"}])
    chunks = list(litellm.completion(stream=True, stream_options={"include_usage": True}, **kw))
    built = litellm.stream_chunk_builder(chunks, messages=kw["messages"])
    plain = litellm.completion(**kw)
    import time; time.sleep(0.5)  # give any background fetch thread a chance to show up
    print(json.dumps({"streamed": built.choices[0].message.content,
                      "plain": plain.choices[0].message.content,
                      "outside": outside}))
""")


@pytest.mark.worker
def test_other_process_client_reaches_server_without_outside_network(fake_llm, tmp_path):
    """A separate process (like a Celery worker) using litellm against the in-pytest server.

    Also checks that, with LITELLM_LOCAL_MODEL_COST_MAP=True (inherited from this
    process, set by importing fake_llm), litellm resolves/connects to nothing but loopback.
    """
    fake_llm.script([{"text": "streamed to worker"}, {"text": "plain to worker"}])
    script = tmp_path / "client.py"
    script.write_text(CLIENT_SCRIPT)
    env = dict(os.environ)
    assert env.get("LITELLM_LOCAL_MODEL_COST_MAP") == "True"

    out = subprocess.run([sys.executable, str(script), fake_llm.url], env=env, capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)

    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["streamed"] == "streamed to worker"
    assert result["plain"] == "plain to worker"
    assert result["outside"] == [], result["outside"]
    assert [r["body"]["messages"][0]["content"] for r in fake_llm.requests] == ["from worker"] * 2
    assert fake_llm.requests[0]["headers"]["authorization"] == "Bearer sk-worker"


def test_server_context_manager_uses_free_ports_and_stops():
    with FakeLLMServer() as a, FakeLLMServer() as b:
        assert a.port != b.port
        assert a.url == f"http://127.0.0.1:{a.port}/v1"
        a.script([{"text": "from a"}])
        assert call(a).choices[0].message.content == "from a"
        assert call(b).choices[0].message.content == DEFAULT_TEXT
        url = a.base_url
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/_requests", timeout=2)
