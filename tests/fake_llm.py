"""A recording, scripted, OpenAI-compatible LLM stand-in for tests.

The server speaks just enough of the OpenAI HTTP API for ``litellm`` (provider
``openai/...`` with ``api_base=server.url``) or the ``openai`` SDK:

* ``POST /v1/chat/completions`` (also ``/chat/completions``), streaming (SSE) and
  non-streaming;
* ``GET /v1/models`` (also ``/models``).

Every chat-completion request is recorded (parsed JSON body + headers) and answered
with the next entry of a scripted queue.  Because the caller may live in another
process (e.g. a Celery worker), the server can also be driven over HTTP:

* ``GET  /_requests``  -> JSON list of recorded chat-completion requests
* ``GET  /_script``    -> JSON list of script entries not yet consumed
* ``POST /_script``    -> body: a list of entries (replaces the queue) or
  ``{"entries": [...], "append": true}``
* ``POST /_reset``     -> clears recorded requests and the script
* ``POST /_models``    -> body: list of model ids served by ``GET /v1/models``

Script entries (plain JSON-able dicts, no callables)::

    {"text": "Hello"}                                   # assistant text
    {"text": ["Hel", "lo"]}                             # explicit stream deltas
    {"tool_calls": [{"name": "srv__tool", "arguments": {"a": 1}, "id": "call_1"}]}
    {"tool_calls": [{...}, {...}]}                      # parallel tool calls
    {"text": "Let me check.", "tool_calls": [...]}      # both
    {"error": {"status": 401, "message": "Invalid API key"}}   # OpenAI error body
    {"delay": 2.0, "text": "slow"}                      # sleep before answering
    {"text": "a b c d", "chunk_delay": 0.2}             # hold the stream open
    {"text": "partial answer", "drop_after": 2}         # stream: close the connection after
                                                        # N SSE chunks (the first one is the
                                                        # role chunk), no finish/[DONE]
Optional keys on any non-error entry:
    "finish_reason": override ("stop" / "tool_calls" are chosen automatically)
    "usage": {"prompt_tokens": int, "completion_tokens": int}
    "model": model name to report (default: echo the request's model)
    "chunk_size": split text into pieces of this many characters when streaming
                  (default: one piece per word; a single word is split in two)
    "times": serve this entry N times before moving on (default 1; null = forever)
             -- handy when the client retries (e.g. 429/5xx with the SDK's retries).
    "after_tool": when the request's last message is a tool result, answer the text
             "<after_tool> <that result>" instead (one entry with "times": null then
             plays a whole tool-then-answer turn for any number of concurrent chats).
Optional keys of "error":
    "status" (default 500), "message", "type", "code", "param",
    "headers": extra response headers, e.g. {"retry-after": "0"}.
Tool call "arguments" may be a dict/list (JSON-encoded for you) or a raw string
(sent verbatim, so malformed JSON can be tested).  "id" defaults to
``call_<n>`` (unique per server).

When the queue is empty the reply is the text ``"(no scripted reply)"``.

Pytest usage (in ``tests/conftest.py`` or a test module)::

    from tests.fake_llm import fake_llm, fake_llm_server  # noqa: F401  (fixtures)

    def test_x(fake_llm):
        fake_llm.script([{"text": "Hi"}])
        litellm.completion(model="openai/test-model", api_base=fake_llm.url,
                           api_key="sk-test", messages=[...])
        assert fake_llm.requests[0]["body"]["messages"][0]["content"] == ...

``fake_llm_server`` is session scoped (one port for the whole run, so a Celery
worker started once per session can be pointed at it); ``fake_llm`` is the same
object, reset before and after each test.

Standalone / other process::

    python tests/fake_llm.py --port 8765        # prints FAKE_LLM_URL=http://127.0.0.1:8765/v1
    remote = RemoteFakeLLM("http://127.0.0.1:8765/v1")
    remote.script([...]); remote.requests; remote.reset()

litellm needs ``LITELLM_LOCAL_MODEL_COST_MAP=True`` in the environment *before it is
imported*, otherwise ``import litellm`` tries to download the model cost map from
GitHub (and keeps retrying in a background thread).  Importing this module sets it
(``os.environ.setdefault``) so that processes spawned later inherit it too.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import os
import re
import socket
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterable

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

DEFAULT_TEXT = "(no scripted reply)"
DEFAULT_MODELS = ("test-model",)

# status -> (type, code, message).  NB: litellm maps OpenAI errors partly by *string*:
# a body containing "invalid_request_error" becomes litellm.BadRequestError whatever
# the status (unless the message contains "Incorrect API key provided"), and a message
# mentioning "rate limit" becomes RateLimitError.  The defaults below avoid those
# strings so that litellm maps by HTTP status; override "type" to test the quirks.
_ERROR_DEFAULTS = {
    400: ("invalid_request_error", None, "Bad request"),
    401: ("authentication_error", "invalid_api_key", "Invalid API key"),
    403: ("permission_error", None, "Permission denied"),
    404: ("not_found_error", "model_not_found", "The model does not exist"),
    408: ("timeout_error", None, "Request timed out"),
    409: ("conflict_error", None, "Conflict"),
    422: ("unprocessable_entity_error", None, "Unprocessable entity"),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests"),
    500: ("server_error", None, "The server had an error while processing your request"),
    502: ("server_error", None, "Bad gateway"),
    503: ("server_error", None, "Service unavailable"),
    504: ("server_error", None, "Gateway timeout"),
}


class _ClientGone(Exception):
    """The client closed the connection while we were writing."""


# --------------------------------------------------------------------------- helpers


def _split_text(text: str | list[str], chunk_size: int | None) -> list[str]:
    if isinstance(text, list):
        return [str(t) for t in text]
    if not text:
        return []
    if chunk_size:
        return [text[i : i + chunk_size] for i in range(0, len(text), chunk_size)]
    pieces = re.findall(r"\S+\s*|\s+", text)
    if len(pieces) < 2 and len(text) >= 2:
        mid = len(text) // 2
        pieces = [text[:mid], text[mid:]]
    return pieces


def _split_args(arguments: str, size: int = 8) -> list[str]:
    if not arguments:
        return [""]
    return [arguments[i : i + size] for i in range(0, len(arguments), size)]


def _approx_tokens(value: Any) -> int:
    if value is None:
        return 0
    if not isinstance(value, str):
        value = json.dumps(value)
    return max(1, len(value) // 4) if value else 0


# --------------------------------------------------------------------------- server


class _QuietHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        """A client that hangs up mid-stream (Stop, a timeout) is expected; anything else is not."""
        import sys

        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


class FakeLLMServer:
    """Threaded fake OpenAI server; see the module docstring."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, models: Iterable[str] = DEFAULT_MODELS):
        self.host = host
        self._requested_port = port
        self.models: list[str] = list(models)
        self.requests: list[dict] = []  # chat-completion requests, in order
        self.other_requests: list[dict] = []  # GET /v1/models and unknown paths
        self._queue: list[dict] = []
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._ids = itertools.count(1)
        self._httpd: _QuietHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle
    def start(self) -> "FakeLLMServer":
        if self._httpd is not None:
            return self
        handler = type("_BoundHandler", (_Handler,), {"fake": self})
        httpd = _QuietHTTPServer((self.host, self._requested_port), handler)
        self._httpd = httpd
        self._stop.clear()
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._stop.set()  # wake up delayed / slow-streaming handlers
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> "FakeLLMServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (no /v1)."""
        return f"http://{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """The ``api_base`` to hand to litellm / the OpenAI SDK."""
        return f"{self.base_url}/v1"

    # ---- scripting
    def script(self, entries: Iterable[dict], append: bool = False) -> "FakeLLMServer":
        entries = [_validate_entry(e) for e in entries]
        with self._lock:
            if not append:
                self._queue.clear()
            self._queue.extend(copy.deepcopy(entries))
        return self

    def add(self, *entries: dict) -> "FakeLLMServer":
        return self.script(entries, append=True)

    @property
    def pending(self) -> list[dict]:
        """Script entries not consumed yet."""
        with self._lock:
            return copy.deepcopy(self._queue)

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.other_requests.clear()
            self.models = list(DEFAULT_MODELS)

    # ---- convenience accessors
    @property
    def bodies(self) -> list[dict]:
        return [r["body"] for r in self.requests]

    @property
    def last_request(self) -> dict:
        assert self.requests, "no chat completion request recorded"
        return self.requests[-1]

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.requests) >= n:
                return list(self.requests)
            time.sleep(0.01)
        raise AssertionError(f"expected {n} requests, got {len(self.requests)}")

    # ---- internals used by the handler
    def _next_entry(self) -> dict:
        with self._lock:
            if not self._queue:
                return {"text": DEFAULT_TEXT}
            entry = self._queue[0]
            times = entry.get("times", 1)
            if times is not None and times <= 1:
                self._queue.pop(0)
            elif times is not None:
                entry["times"] = times - 1
            return copy.deepcopy(entry)

    def _next_id(self) -> int:
        return next(self._ids)

    def _sleep(self, seconds: float) -> None:
        if seconds and seconds > 0:
            self._stop.wait(seconds)


def _validate_entry(entry: Any) -> dict:
    if not isinstance(entry, dict):
        raise TypeError(f"script entry must be a dict, got {type(entry).__name__}: {entry!r}")
    known = {
        "text", "tool_calls", "error", "delay", "chunk_delay", "chunk_size", "drop_after",
        "finish_reason", "usage", "model", "times", "after_tool",
    }
    unknown = set(entry) - known
    if unknown:
        raise ValueError(f"unknown script entry keys {sorted(unknown)} in {entry!r}")
    for tc in entry.get("tool_calls") or []:
        if not isinstance(tc, dict) or "name" not in tc:
            raise ValueError(f"tool call needs at least a 'name': {tc!r}")
    return entry


# --------------------------------------------------------------------------- handler


class _Handler(BaseHTTPRequestHandler):
    fake: FakeLLMServer  # set on the bound subclass
    protocol_version = "HTTP/1.1"
    server_version = "FakeLLM/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep quiet
        pass

    # ---- plumbing
    def _read_body(self) -> tuple[bytes, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return raw, None
        try:
            return raw, json.loads(raw)
        except ValueError:
            return raw, None

    def _send_json(self, status: int, payload: Any, headers: dict | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _path(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/") or "/"

    def _record(self, body: Any, raw: bytes) -> dict:
        return {
            "method": self.command,
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": body,
            "raw": raw.decode("utf-8", "replace") if body is None and raw else None,
            "received_at": time.time(),
        }

    # ---- routing
    def do_GET(self) -> None:  # noqa: N802
        path = self._path()
        fake = self.fake
        if path == "/_requests":
            with fake._lock:
                return self._send_json(200, list(fake.requests))
        if path == "/_script":
            return self._send_json(200, fake.pending)
        if path in ("/v1/models", "/models"):
            with fake._lock:
                fake.other_requests.append(self._record(None, b""))
            created = 1700000000
            return self._send_json(200, {
                "object": "list",
                "data": [{"id": m, "object": "model", "created": created, "owned_by": "fake-llm"}
                         for m in fake.models],
            })
        if path in ("/", "/health", "/_health"):
            return self._send_json(200, {"ok": True})
        with fake._lock:
            fake.other_requests.append(self._record(None, b""))
        self._send_error_body(404, f"Unknown path {self.path}", "invalid_request_error", None, None)

    def do_POST(self) -> None:  # noqa: N802
        path = self._path()
        fake = self.fake
        raw, body = self._read_body()
        if path == "/_reset":
            fake.reset()
            return self._send_json(200, {"ok": True})
        if path == "/_script":
            try:
                if isinstance(body, list):
                    fake.script(body)
                elif isinstance(body, dict) and isinstance(body.get("entries"), list):
                    fake.script(body["entries"], append=bool(body.get("append")))
                else:
                    raise ValueError("expected a list of entries or {'entries': [...], 'append': bool}")
            except (TypeError, ValueError) as exc:
                return self._send_json(400, {"error": str(exc)})
            return self._send_json(200, {"ok": True, "pending": len(fake.pending)})
        if path == "/_models":
            if not isinstance(body, list):
                return self._send_json(400, {"error": "expected a list of model ids"})
            fake.models = [str(m) for m in body]
            return self._send_json(200, {"ok": True})
        if path in ("/v1/chat/completions", "/chat/completions"):
            with fake._lock:
                fake.requests.append(self._record(body, raw))
            if not isinstance(body, dict):
                return self._send_error_body(400, "Request body is not valid JSON", "invalid_request_error", None, None)
            try:
                return self._chat(body)
            except (_ClientGone, BrokenPipeError, ConnectionResetError):
                self.close_connection = True
                return None
        with fake._lock:
            fake.other_requests.append(self._record(body, raw))
        self._send_error_body(404, f"Unknown path {self.path}", "invalid_request_error", None, None)

    # ---- chat completions
    def _send_error_body(self, status: int, message: str, type_: str | None, code: Any, param: Any,
                         headers: dict | None = None) -> None:
        self._send_json(status, {"error": {"message": message, "type": type_, "param": param, "code": code}},
                        headers=headers)

    def _chat(self, body: dict) -> None:
        fake = self.fake
        entry = fake._next_entry()
        messages = body.get("messages") if isinstance(body, dict) else None
        if "after_tool" in entry and messages and isinstance(messages[-1], dict) and messages[-1].get("role") == "tool":
            entry = {"text": f"{entry['after_tool']} {messages[-1].get('content')}"}
        fake._sleep(float(entry.get("delay") or 0))
        if fake._stop.is_set():
            self.close_connection = True
            return

        if "error" in entry:
            err = entry["error"] or {}
            status = int(err.get("status", 500))
            d_type, d_code, d_msg = _ERROR_DEFAULTS.get(status, ("api_error", None, "Error"))
            return self._send_error_body(
                status,
                err.get("message", d_msg),
                err.get("type", d_type),
                err.get("code", d_code),
                err.get("param"),
                headers=err.get("headers"),
            )

        seq = fake._next_id()
        completion_id = f"chatcmpl-fake{seq:06d}"
        model = entry.get("model") or body.get("model") or "test-model"
        created = int(time.time())
        text = entry.get("text")
        tool_calls = []
        for i, tc in enumerate(entry.get("tool_calls") or []):
            args = tc.get("arguments", {})
            if not isinstance(args, str):
                args = json.dumps(args)
            tool_calls.append({
                "id": tc.get("id") or f"call_{seq}_{i}",
                "type": "function",
                "function": {"name": tc["name"], "arguments": args},
            })
        if text is None and not tool_calls:
            text = ""
        full_text = "".join(text) if isinstance(text, list) else text
        finish_reason = entry.get("finish_reason") or ("tool_calls" if tool_calls else "stop")

        usage_override = entry.get("usage") or {}
        prompt_tokens = int(usage_override.get("prompt_tokens", _approx_tokens(body.get("messages"))))
        completion_tokens = int(usage_override.get(
            "completion_tokens",
            _approx_tokens(full_text) + sum(_approx_tokens(t["function"]["arguments"]) + 1 for t in tool_calls),
        ))
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }

        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": full_text, "refusal": None}
            if tool_calls:
                message["tool_calls"] = tool_calls
            return self._send_json(200, {
                "id": completion_id,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "system_fingerprint": "fp_fake",
                "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
                "usage": usage,
            })

        # ---- streaming (SSE over chunked transfer encoding)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        chunk_delay = float(entry.get("chunk_delay") or 0)
        drop_after = entry.get("drop_after")

        def chunk(delta: dict, finish: str | None = None) -> dict:
            return {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": "fp_fake",
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            }

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        pieces = _split_text(text, entry.get("chunk_size")) if text is not None else []
        first_delta: dict[str, Any] = {"role": "assistant", "content": "" if text is not None else None}
        if text is None:
            first_delta["refusal"] = None
        events: list[dict] = []
        if text is not None:
            events.append(chunk(first_delta))
            events.extend(chunk({"content": p}) for p in pieces)
        for i, tc in enumerate(tool_calls):
            head = {"index": i, "id": tc["id"], "type": "function",
                    "function": {"name": tc["function"]["name"], "arguments": ""}}
            if i == 0 and text is None:
                events.append(chunk({**first_delta, "tool_calls": [head]}))
            else:
                events.append(chunk({"tool_calls": [head]}))
            events.extend(
                chunk({"tool_calls": [{"index": i, "function": {"arguments": frag}}]})
                for frag in _split_args(tc["function"]["arguments"])
            )
        events.append(chunk({}, finish_reason))
        if include_usage:
            events.append({**chunk({}), "choices": [], "usage": usage})

        for n, event in enumerate(events):
            if n and chunk_delay:
                fake._sleep(chunk_delay)
            if fake._stop.is_set():
                break
            if drop_after is not None and n >= int(drop_after):
                # Simulate a dropped connection: no finish chunk, no [DONE], and the
                # chunked body is never terminated.
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                break
            self._write_chunk(b"data: " + json.dumps(event).encode() + b"\n\n")
        else:
            self._write_chunk(b"data: [DONE]\n\n")
            self._write_chunk(b"")  # end of chunked body
            return
        self.close_connection = True

    def _write_chunk(self, data: bytes) -> None:
        try:
            self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError) as exc:
            raise _ClientGone() from exc


# --------------------------------------------------------------------------- remote control


class RemoteFakeLLM:
    """Same API as FakeLLMServer (url/script/requests/reset/pending), over HTTP.

    Use it when the fake server runs in another process (``python tests/fake_llm.py``).
    """

    def __init__(self, url: str):
        url = url.rstrip("/")
        self.url = url if url.endswith("/v1") else url + "/v1"
        self.base_url = self.url[: -len("/v1")]

    def _call(self, method: str, path: str, payload: Any = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(self.base_url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read() or b"null")

    def script(self, entries: Iterable[dict], append: bool = False) -> "RemoteFakeLLM":
        self._call("POST", "/_script", {"entries": list(entries), "append": append})
        return self

    def add(self, *entries: dict) -> "RemoteFakeLLM":
        return self.script(entries, append=True)

    @property
    def requests(self) -> list[dict]:
        return self._call("GET", "/_requests")

    @property
    def bodies(self) -> list[dict]:
        return [r["body"] for r in self.requests]

    @property
    def pending(self) -> list[dict]:
        return self._call("GET", "/_script")

    def set_models(self, models: Iterable[str]) -> None:
        self._call("POST", "/_models", list(models))

    def reset(self) -> None:
        self._call("POST", "/_reset", {})


# --------------------------------------------------------------------------- pytest fixtures

try:
    import pytest
except ImportError:  # pragma: no cover - standalone use without pytest
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture(scope="session")
    def fake_llm_server():
        """One FakeLLMServer for the whole session (stable URL)."""
        server = FakeLLMServer().start()
        try:
            yield server
        finally:
            server.stop()

    @pytest.fixture
    def fake_llm(fake_llm_server):
        """The session server, with an empty script and no recorded requests."""
        fake_llm_server.reset()
        yield fake_llm_server
        fake_llm_server.reset()


# --------------------------------------------------------------------------- __main__


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Scripted fake OpenAI-compatible LLM server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    parser.add_argument("--script", help="JSON file with a list of script entries")
    args = parser.parse_args(argv)
    server = FakeLLMServer(args.host, args.port)
    if args.script:
        with open(args.script) as fh:
            server.script(json.load(fh))
    server.start()
    print(f"FAKE_LLM_URL={server.url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
