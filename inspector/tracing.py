"""W3C trace context from a user's action to every MCP request, and OTLP export when asked for.

A trace starts where the user acts: each web request is a span (inspector/middleware.py
`TraceMiddleware`, continuing a `traceparent` the client sent). Its context travels in the
headers of every Celery task sent while it is current (`before_task_publish`), and a worker
runs the task inside a child span (`task_prerun`/`task_postrun`). A tool call also keeps the
context it was started in on its row (`ToolCall.trace_context`), so a call re-sent by the sweep
or re-queued after an input round stays in its trace. In the worker the MCP SDK's dispatcher
puts `traceparent` (and `tracestate`) into `_meta` of every request it sends, child of the
current span, and tools/mcp/tap.py copies them to the HTTP headers on Streamable HTTP.

Export is the OpenTelemetry SDK's (`opentelemetry-sdk`, OTLP over HTTP/protobuf), installed by
`configure()` in daphne (inspector/asgi.py) and in each worker (`worker_init`) only when
`OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set; the SDK reads the
other `OTEL_*` variables itself (headers, sampler, batch delays, service name).

Without an endpoint the SDK is not even imported. The OpenTelemetry API's default (no-op) tracer
then makes no ids: a span started with no valid parent is `INVALID_SPAN`, and the SDK's `_meta`
injection writes nothing. So `span()` mints the ids itself, as the SDK's random id generator does
(`random.getrandbits`), and makes the span current as a `NonRecordingSpan`: the trace id survives
web → task → worker, every MCP request carries it (the no-op tracer hands back that current span,
so a request's parent id is the span of the task or call that sent it), and the flags say "not
sampled" (nothing records). The cost is two random numbers and a context switch per span.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagate import extract, inject
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

log = logging.getLogger(__name__)

TRACER_NAME = "mcp-inspector"
SERVICE_NAME = "mcp-inspector"

_exporting = False


def exporting() -> bool:
    """True once the SDK exports spans in this process."""
    return _exporting


def endpoint() -> str:
    return os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or ""


def configure(role: str) -> bool:
    """Install the OpenTelemetry SDK with an OTLP/HTTP exporter when an endpoint is set; `role`
    (`web`, `worker`) names the process in the spans' resource. Returns whether it exports."""
    global _exporting
    if _exporting:
        return True
    if not endpoint() or os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    attributes: dict[str, Any] = {"inspector.role": role}
    if not os.environ.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = SERVICE_NAME  # OTEL_SERVICE_NAME, when set, wins (read by Resource.create)
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # endpoint, headers, timeout: OTEL_* variables
    trace.set_tracer_provider(provider)
    _exporting = True
    log.info("OpenTelemetry: %s exports spans to %s", role, _without_credentials(endpoint()))
    return True


def _without_credentials(url: str) -> str:
    """`url` without the user and password it may carry (a collector's basic auth), for the log."""
    parts = urlsplit(url)
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def _parent_context(parent: str | Mapping[str, str] | None) -> otel_context.Context | None:
    """The context a span starts in: the carrier's (a `traceparent` string or a dict of
    propagation headers) when it holds a valid one, else the current context (None)."""
    if not parent:
        return None
    carrier = {"traceparent": parent} if isinstance(parent, str) else parent
    ctx = extract(carrier)
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


def _minted(ctx: otel_context.Context | None) -> NonRecordingSpan:
    """A non-recording span with fresh ids, child of the span current in `ctx` (the no-SDK case)."""
    parent = trace.get_current_span(ctx).get_span_context()
    if parent.is_valid:
        trace_id, flags, state = parent.trace_id, parent.trace_flags, parent.trace_state
    else:
        trace_id, flags, state = random.getrandbits(128) or 1, TraceFlags(TraceFlags.DEFAULT), None
    return NonRecordingSpan(SpanContext(trace_id, random.getrandbits(64) or 1, is_remote=False,
                                        trace_flags=flags, trace_state=state))


def start(name: str, *, parent: str | Mapping[str, str] | None = None, kind: SpanKind = SpanKind.INTERNAL,
          attributes: dict[str, Any] | None = None) -> tuple[trace.Span, object]:
    """Start a span and make it current; end it with `finish(span, token)` in the same context."""
    ctx = _parent_context(parent)
    if _exporting:
        new = trace.get_tracer(TRACER_NAME).start_span(name, context=ctx, kind=kind, attributes=attributes)
    else:
        new = _minted(ctx)
    return new, otel_context.attach(trace.set_span_in_context(new, ctx))


def finish(new: trace.Span, token: object, error: BaseException | None = None) -> None:
    otel_context.detach(token)
    if error is not None and new.is_recording():
        # The error's type only, no message or stack: spans leave the inspector, and an error's text
        # can carry a server URL's secret query values or a token endpoint's answer.
        new.set_attribute("error.type", type(error).__name__)
        new.set_status(Status(StatusCode.ERROR, type(error).__name__))
    new.end()


@contextmanager
def span(name: str, *, parent: str | Mapping[str, str] | None = None, kind: SpanKind = SpanKind.INTERNAL,
         attributes: dict[str, Any] | None = None) -> Iterator[trace.Span]:
    """A span around a block, current inside it. `parent`: a `traceparent` or a carrier dict to
    continue (a stored call's context, an incoming request's headers); else the current span's child."""
    new, token = start(name, parent=parent, kind=kind, attributes=attributes)
    error: BaseException | None = None
    try:
        yield new
    except BaseException as exc:
        error = exc
        raise
    finally:
        finish(new, token, error)


def carrier() -> dict[str, str]:
    """The current trace context as propagation headers (`traceparent`, `tracestate` if any), or {}."""
    headers: dict[str, str] = {}
    inject(headers)
    return headers


def trace_id(context: Mapping[str, str] | None) -> str:
    """The 32-hex trace id of a stored carrier, or ""."""
    parts = (context or {}).get("traceparent", "").split("-")
    return parts[1] if len(parts) >= 4 and len(parts[1]) == 32 else ""


# ------------------------------------------------------------------ Celery: the context in task headers


class _RequestGetter(Getter):
    """Celery puts a message's custom headers on `task.request` as attributes."""

    def get(self, carrier: Any, key: str) -> list[str] | None:
        value = getattr(carrier, key, None)
        return [value] if isinstance(value, str) else None

    def keys(self, carrier: Any) -> list[str]:
        return []


_REQUEST_GETTER = _RequestGetter()
_task_spans: dict[str, tuple[trace.Span, object]] = {}


def inject_task_headers(headers: dict[str, Any] | None = None, **_: Any) -> None:
    """`before_task_publish`: a task sent while a span is current carries its context."""
    if headers is not None:
        inject(headers)


def start_task_span(task_id: str | None = None, task: Any = None, **_: Any) -> None:
    """`task_prerun`: a task that came with a trace context runs in a child span of it (a task
    without one, the sweep's, starts no trace)."""
    if task is None or task_id is None or not isinstance(getattr(task.request, "traceparent", None), str):
        return
    ctx = extract(task.request, getter=_REQUEST_GETTER)
    if not trace.get_current_span(ctx).get_span_context().is_valid:
        return
    if _exporting:
        new: trace.Span = trace.get_tracer(TRACER_NAME).start_span(f"run {task.name}", context=ctx, kind=SpanKind.CONSUMER,
                                                                   attributes={"celery.task_id": task_id})
    else:
        new = _minted(ctx)
    _task_spans[task_id] = (new, otel_context.attach(trace.set_span_in_context(new, ctx)))


def end_task_span(task_id: str | None = None, state: str | None = None, **_: Any) -> None:
    """`task_postrun`: end the task's span (in the thread that ran it)."""
    started = _task_spans.pop(task_id, None) if task_id else None
    if started is None:
        return
    new, token = started
    otel_context.detach(token)
    if state == "FAILURE" and new.is_recording():
        new.set_status(Status(StatusCode.ERROR))
    new.end()


def connect_celery() -> None:
    from celery.signals import before_task_publish, task_postrun, task_prerun, worker_init

    before_task_publish.connect(inject_task_headers, weak=False)
    task_prerun.connect(start_task_span, weak=False)
    task_postrun.connect(end_task_span, weak=False)
    worker_init.connect(lambda **_: configure("worker"), weak=False)
