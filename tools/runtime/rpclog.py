"""The JSON-RPC log: every frame a worker's MCP connections send or receive, as rows.

Frames arrive on the pool's event-loop thread; writing them there would stall every MCP
connection of the process, so they are queued and written in batches by one thread.
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import threading
import time
from typing import Any

from django.conf import settings
from django.db import IntegrityError, close_old_connections

from inspector import sql_columns
from inspector.events import publish
from tools.mcp.frames import for_storage
from tools.models import RpcFrame, Server, parse_pool_key
from tools.runtime.events import RPC_LOG_GROUP as LOG_GROUP

log = logging.getLogger(__name__)


def describe(message: dict[str, Any]) -> tuple[str, str, str]:
    """(kind, method, id) of a JSON-RPC message."""
    rpc_id = message.get("id")
    method = message.get("method") or ""
    if method:
        kind = "request" if rpc_id is not None else "notification"
    elif "error" in message:
        kind = "error"
    else:
        kind = "response"
    return kind, method, "" if rpc_id is None else str(rpc_id)


VERSION_PROBE_METHOD = "server/discover"
VERSION_PROBE_LABEL = "version probe — server uses the initialize handshake"


def is_version_probe(method: str, kind: str) -> bool:
    """An error answer to `server/discover` is not a fault of the server.

    The client first probes for the 2026-07-28 protocol; older servers answer -32601 (method not
    found) and the client falls back to the initialize handshake. The log shows that row muted
    and labelled, not as a red error. (static/js/rpc-log.js applies the same rule to live rows.)
    """
    return method == VERSION_PROBE_METHOD and kind == "error"


ANSWER_WINDOW = 0.05  # seconds an answer or a notification may wait to be written with the next frames
BATCH_MAX = 200


def _write_now(item) -> bool:
    """A flush, or a request (what either side asked: the frames a killed worker must not lose)."""
    if isinstance(item, threading.Event):
        return True
    message = item[2]
    return bool(message.get("method")) and message.get("id") is not None


class FrameRecorder:
    def __init__(self) -> None:
        self.queue: queue.Queue = queue.Queue()
        self.pending: dict[tuple[str, str, str], tuple[str, float]] = {}
        self.thread = threading.Thread(target=self._run, name="rpc-frame-writer", daemon=True)
        self.thread.start()

    def __call__(self, config, direction: str, message: dict[str, Any], at: float) -> None:
        self.queue.put((config.key, direction, message, at))

    def flush(self, timeout: float = 5.0) -> None:
        """Wait until every queued frame is written (tests and shutdown)."""
        done = threading.Event()
        self.queue.put(done)
        done.wait(timeout)

    def _run(self) -> None:
        while True:
            batch = [self.queue.get()]
            # A request is written at once, with whatever came before it: what a worker sent
            # stays in the log even if the worker is killed a moment later. Answers and
            # notifications wait up to ANSWER_WINDOW for the next request, so a call's answer
            # is not written while the pipeline stores that call's result (measured: ~1-1.4 ms a
            # call in process on PostgreSQL), and two frames make one write.
            urgent, until = _write_now(batch[0]), time.monotonic() + ANSWER_WINDOW
            while len(batch) < BATCH_MAX:
                try:  # once urgent, only what is already queued joins the batch
                    item = self.queue.get(timeout=0 if urgent else max(until - time.monotonic(), 0))
                except queue.Empty:
                    break
                batch.append(item)
                urgent = urgent or _write_now(item)
            try:
                self._write([b for b in batch if isinstance(b, tuple)])
            except Exception:  # noqa: BLE001 - the log must never take the worker down
                log.exception("could not write %d JSON-RPC frames", len(batch))
            for item in batch:
                if isinstance(item, threading.Event):
                    item.set()
            # Not kept while waiting for the next frame: a frame may hold a 40 MB result.
            batch = item = None

    def _write(self, batch: list[tuple]) -> None:
        if not batch:
            return
        close_old_connections()
        rows = []
        for key, direction, message, at in batch:
            kind, method, rpc_id = describe(message)
            latency = None
            if kind == "request":
                self.pending[(key, direction, rpc_id)] = (method, at)
            elif kind in ("response", "error"):
                # A response travels the other way from its request.
                request_dir = "out" if direction == "in" else "in"
                method, started = self.pending.pop((key, request_dir, rpc_id), (method, None))
                latency = round((at - started) * 1000, 2) if started else None
            payload, size, truncated = for_storage(message, settings.RPC_FRAME_MAX_BYTES)
            rows.append(
                RpcFrame(
                    server_id=parse_pool_key(key)[0], direction=direction, method=method, rpc_id=rpc_id, kind=kind,
                    payload=payload, size_bytes=size, truncated=truncated, latency_ms=latency,
                    at=dt.datetime.fromtimestamp(at, tz=dt.timezone.utc),
                )
            )
        try:
            sql_columns.insert_numbered(rows)  # one statement, committed on its own
        except IntegrityError:
            # A server deleted while its connection still talked (its closing frames): drop its frames.
            alive = set(Server.objects.filter(pk__in={r.server_id for r in rows}).values_list("pk", flat=True))
            rows = [r for r in rows if r.server_id in alive]
            # Numbered afresh: another writer may have taken the numbers the failed insert had.
            sql_columns.insert_numbered(rows)
        publish(LOG_GROUP, {"type": "rpc.frames", "frames": [row.as_event() for row in rows]})
        close_old_connections()


_recorder: FrameRecorder | None = None
_lock = threading.Lock()


def recorder() -> FrameRecorder:
    global _recorder
    with _lock:
        if _recorder is None or not _recorder.thread.is_alive():
            _recorder = FrameRecorder()
        return _recorder
