#!/usr/bin/env python
"""How long does a tool call take, and where does the time go?

    .venv/bin/python bench/tool_calls.py [--calls 200] [--concurrent 20] [--cold 20] [--use-env] [--keep-data]

Self-contained: makes a temporary data dir (INSPECTOR_DATA_DIR) with a fresh SQLite database
(DATABASE_URL is ignored unless --use-env), migrates it, starts an embedded Valkey (unless
REDIS_URL is set), ONE Celery worker subprocess, and the basic test MCP server over Streamable
HTTP; the stdio server is spawned on demand by whoever connects. Everything it starts is
stopped at the end, also on Ctrl-C or an error.

Measured for both transports (stdio and Streamable HTTP), calling the `echo` tool:

1. direct      a warm `Connection` in this process, sequential `call_tool`
2. pool        a fresh in-process `Pool`, sequential `pool.run(...)`: the pool's own cost
3. cold        a new `Connection` each time: connect + first call (+ close)
4. worker      the full pipeline: `start_tool_call` -> Celery -> worker pool -> DB rows ->
               `tool_call.result` on the channel layer group `toolcall.<id>`; the server's own
               time is the `latency_ms` of the response RpcFrame the worker logged for that call
5. worker xK   the same with K calls in flight at once (waves of K: enqueue K, await all K)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inspector.launch import Processes

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

BASIC_SERVER = BASE_DIR / "tests" / "mcp_servers" / "basic.py"
WORKER_CONCURRENCY = 8
WARMUP = 10  # untimed calls before each warm measurement
EVENT_TIMEOUT = 60.0  # seconds to wait for one tool_call.result event
FRAME_TIMEOUT = 30.0  # seconds to wait for the worker's RpcFrame rows


# ------------------------------------------------------------------------------- statistics


@dataclass
class Stats:
    n: int
    p50: float
    p95: float
    mean: float


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (like numpy's default), q in 0..100."""
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def stats(values: list[float]) -> Stats | None:
    if not values:
        return None
    return Stats(len(values), percentile(values, 50), percentile(values, 95), sum(values) / len(values))


# ---------------------------------------------------------------------------------- set-up


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200, help="calls per warm measurement (default 200)")
    parser.add_argument("--concurrent", type=int, default=20, help="calls in flight in measurement 5 (default 20)")
    parser.add_argument("--cold", type=int, default=20, help="cold connections per transport (default 20)")
    parser.add_argument("--use-env", action="store_true", help="use DATABASE_URL from the environment")
    parser.add_argument("--keep-data", action="store_true", help="keep the temp data dir (worker.log, database)")
    args = parser.parse_args()
    if args.calls < 1 or args.concurrent < 1 or args.cold < 1:
        parser.error("--calls, --concurrent and --cold must be at least 1")
    return args


def prepare_env(args: argparse.Namespace) -> Path:
    """Environment for this process and the worker; must run before Django reads settings."""
    data_dir = Path(tempfile.mkdtemp(prefix="inspector-bench-"))
    os.environ["INSPECTOR_DATA_DIR"] = str(data_dir)
    os.environ["DJANGO_SETTINGS_MODULE"] = "inspector.settings"
    if not args.use_env:
        os.environ.pop("DATABASE_URL", None)
    os.environ.pop("INSPECTOR_DB_NAME", None)
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    # Own key prefix: never share queues or channel groups with another app on the same Redis.
    os.environ.setdefault("REDIS_PREFIX", f"bench{os.getpid()}:")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    return data_dir


def start_worker(procs: Processes, data_dir: Path, name: str = "worker") -> str:
    """Start one Celery worker subprocess and wait until it answers a ping; returns its hostname.

    `name` tells several workers of one bench apart (hostname, and the log `<name>.log`)."""
    from inspector.celery import app
    from inspector.launch import worker_command

    hostname = f"bench-{name}-{os.getpid()}@localhost"
    log_path = data_dir / f"{name}.log"
    log = open(log_path, "wb")
    proc = procs.start(
        name,
        worker_command(hostname, WORKER_CONCURRENCY),
        env=dict(os.environ), stdout=log, stderr=log,
    )
    log.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with code {proc.returncode}:\n{tail(log_path)}")
        if app.control.ping(destination=[hostname], timeout=0.5):
            return hostname
    raise RuntimeError(f"{name} did not answer a ping within 60 s:\n{tail(log_path)}")


def tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


def create_servers(http_url: str):
    """The bench user and its two Server rows (HTTP and stdio), tools refreshed by the worker."""
    from django.contrib.auth import get_user_model

    from tools.models import Server
    from tools.runtime.tasks import server_action

    user = get_user_model().objects.create_user(f"bench-{os.getpid()}", is_staff=True)
    servers = {
        "stdio": Server.objects.create(name="bench-stdio", transport="stdio", command=sys.executable,
                                       args=[str(BASIC_SERVER)], owner=user),
        "http": Server.objects.create(name="bench-http", transport="streamable_http", url=http_url, owner=user),
    }
    for server in servers.values():
        answer = server_action.delay(server.pk, "refresh", {"reconnect": True}).get(timeout=60)
        if not answer.get("ok"):
            raise RuntimeError(f"refreshing {server.name} failed: {answer}")
        if not server.tools.filter(name="echo").exists():
            raise RuntimeError(f"{server.name} has no echo tool after refresh")
    return user, servers


# ------------------------------------------------------------------- 1-3: in this process


def marker(label: str, i: int) -> str:
    """A unique echo text, so the worker's logged frame for this exact call can be found."""
    return f"bench:{label}:{i}:{uuid.uuid4().hex[:10]}"


def ms_since(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000


async def bench_direct(config, n: int) -> list[float]:
    """1. One warm Connection in this process; n sequential echo calls."""
    from tools.mcp.connection import Connection

    async with Connection(config) as conn:
        for i in range(WARMUP):
            await conn.call_tool("echo", {"text": f"warmup {i}"})
        times = []
        for i in range(n):
            t0 = time.perf_counter()
            await conn.call_tool("echo", {"text": marker("direct", i)})
            times.append(ms_since(t0))
    return times


def bench_pool(config, n: int) -> list[float]:
    """2. A fresh in-process Pool (not the worker's); n sequential pool.run calls."""
    from tools.mcp.pool import Pool

    pool = Pool()
    try:
        for i in range(WARMUP):
            pool.run(config, lambda c, i=i: c.call_tool("echo", {"text": f"warmup {i}"}))
        times = []
        for i in range(n):
            text = marker("pool", i)
            t0 = time.perf_counter()
            pool.run(config, lambda c: c.call_tool("echo", {"text": text}))
            times.append(ms_since(t0))
        return times
    finally:
        pool.shutdown()


async def bench_cold(config, n: int) -> tuple[list[float], list[float]]:
    """3. n fresh Connections: (connect + first call) and (connect + call + close), in ms."""
    from tools.mcp.connection import Connection

    first, total = [], []
    for i in range(n):
        conn = Connection(config)
        t0 = time.perf_counter()
        try:
            await conn.connect()
            await conn.call_tool("echo", {"text": marker("cold", i)})
            first.append(ms_since(t0))
        finally:
            await conn.close()
        total.append(ms_since(t0))
    return first, total


# --------------------------------------------------------------------- 4-5: through a worker


class ResultListener:
    """One channel-layer channel; per call, a group subscription and a future for its result."""

    def __init__(self) -> None:
        from channels.layers import get_channel_layer

        self.layer = get_channel_layer()
        self.channel = ""
        self.waiting: dict[str, asyncio.Future[tuple[float, dict]]] = {}
        self.task: asyncio.Task | None = None

    async def open(self) -> None:
        self.channel = await self.layer.new_channel()
        self.task = asyncio.create_task(self._pump())

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        await self.layer.close_pools()

    async def subscribe(self, call_id: str) -> None:
        self.waiting[call_id] = asyncio.get_running_loop().create_future()
        from tools.runtime.events import tool_call_group

        await self.layer.group_add(tool_call_group(call_id), self.channel)

    async def result(self, call_id: str) -> tuple[float, dict]:
        """(perf_counter at arrival, the event) of the call's tool_call.result."""
        try:
            return await asyncio.wait_for(self.waiting[call_id], EVENT_TIMEOUT)
        finally:
            self.waiting.pop(call_id, None)
            from tools.runtime.events import tool_call_group

            await self.layer.group_discard(tool_call_group(call_id), self.channel)

    async def _pump(self) -> None:
        while True:
            message = await self.layer.receive(self.channel)
            arrived = time.perf_counter()
            event = message.get("event") or {}
            if event.get("type") != "tool_call.result":
                continue  # tool_call.status ("running") events
            future = self.waiting.get(event.get("tool_call_id", ""))
            if future is not None and not future.done():
                future.set_result((arrived, event))


@dataclass
class PipelineCall:
    text: str
    call_id: str = ""
    t0: float = 0.0  # perf_counter just before the row is created (subscription time excluded)
    e2e_ms: float = 0.0
    status: str = ""
    server_ms: float | None = None  # latency_ms of the response frame the worker logged
    queued_to_claimed_ms: float | None = None
    task_ms: float | None = None  # ToolCall.duration_ms: claimed -> finished, inside the worker
    queued_to_finished_ms: float | None = None


def submit(server, user, call: PipelineCall, listener: ResultListener) -> None:
    """Create the call with the app's own start_tool_call; subscribe to its group before commit.

    The task is enqueued on commit, so the subscription is in place before any event can be
    published; the time spent subscribing is not counted in the call's end-to-end time.
    """
    from asgiref.sync import async_to_sync
    from django.db import transaction

    from tools.runtime.lifecycle import start_tool_call
    from tools.models import ToolCall

    t0 = time.perf_counter()
    with transaction.atomic():
        row = start_tool_call(server=server, tool_name="echo", arguments={"text": call.text},
                              origin=ToolCall.Origin.MANUAL, user=user)
        t_sub = time.perf_counter()
        async_to_sync(listener.subscribe)(str(row.pk))
        subscribing = time.perf_counter() - t_sub
    call.call_id, call.t0 = str(row.pk), t0 + subscribing


async def run_wave(server, user, listener: ResultListener, calls: list[PipelineCall]) -> float:
    """Enqueue every call, then await every result; returns the wave's wall time in ms."""
    from asgiref.sync import sync_to_async

    for call in calls:
        await sync_to_async(submit)(server, user, call, listener)
    outcomes = await asyncio.gather(*(listener.result(c.call_id) for c in calls))
    for call, (arrived, event) in zip(calls, outcomes, strict=False):
        call.e2e_ms = (arrived - call.t0) * 1000
        call.status = (event.get("tool_call") or {}).get("status", "")
    return (max(arrived for arrived, _ in outcomes) - calls[0].t0) * 1000


def fill_from_database(server, calls: list[PipelineCall]) -> None:
    """Server time from the worker's RpcFrame rows (written asynchronously: wait), and the
    ToolCall timestamps. The request is found by its unique echo text, the response by the
    same server and rpc_id, the first one after the request."""
    from tools.models import RpcFrame, ToolCall

    by_text = {c.text: c for c in calls}
    deadline = time.monotonic() + FRAME_TIMEOUT
    while True:
        requests = {}
        for f in RpcFrame.objects.filter(server=server, direction="out", method="tools/call").values("rpc_id", "at", "payload"):
            text = ((f["payload"].get("params") or {}).get("arguments") or {}).get("text")
            if text in by_text:
                requests[text] = f
        responses: dict[str, list[dict]] = {}
        for f in RpcFrame.objects.filter(server=server, direction="in", method="tools/call",
                                         latency_ms__isnull=False).values("rpc_id", "at", "latency_ms").order_by("at"):
            responses.setdefault(f["rpc_id"], []).append(f)
        for text, req in requests.items():
            match = next((r for r in responses.get(req["rpc_id"], []) if r["at"] >= req["at"]), None)
            if match is not None:
                by_text[text].server_ms = match["latency_ms"]
        if all(c.server_ms is not None for c in calls) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    rows = ToolCall.objects.in_bulk([c.call_id for c in calls])
    for call in calls:
        row = rows.get(uuid.UUID(call.call_id))
        if row is None or row.started_at is None or row.finished_at is None:
            continue
        call.queued_to_claimed_ms = (row.started_at - row.queued_at).total_seconds() * 1000
        call.task_ms = row.duration_ms
        call.queued_to_finished_ms = (row.finished_at - row.queued_at).total_seconds() * 1000


@dataclass
class PipelineRun:
    calls: list[PipelineCall]
    wall_ms: float


async def bench_worker(server, user, listener: ResultListener, n: int, in_flight: int, label: str) -> PipelineRun:
    """4 (in_flight=1) and 5: n calls through the worker, `in_flight` at a time."""
    from asgiref.sync import sync_to_async

    warm = [PipelineCall(marker(f"{label}-warmup", i)) for i in range(min(5, n))]
    await run_wave(server, user, listener, warm)
    calls = [PipelineCall(marker(label, i)) for i in range(n)]
    wall = 0.0
    for start in range(0, n, in_flight):
        wall += await run_wave(server, user, listener, calls[start:start + in_flight])
    await sync_to_async(fill_from_database)(server, calls)
    return PipelineRun(calls, wall)


async def worker_phases(servers: dict, user, args: argparse.Namespace) -> dict[str, dict[str, PipelineRun]]:
    from asgiref.sync import sync_to_async
    from django.db import connections

    listener = ResultListener()
    await listener.open()
    results: dict[str, dict[str, PipelineRun]] = {}
    try:
        for transport, server in servers.items():
            progress(f"{transport}: {args.calls} sequential calls through the worker")
            seq = await bench_worker(server, user, listener, args.calls, 1, f"seq-{transport}")
            progress(f"{transport}: {args.calls} calls through the worker, {args.concurrent} in flight")
            par = await bench_worker(server, user, listener, args.calls, args.concurrent, f"par-{transport}")
            results[transport] = {"seq": seq, "par": par}
    finally:
        await listener.close()
        await sync_to_async(connections.close_all)()
    return results


# ---------------------------------------------------------------------------------- report


def progress(message: str) -> None:
    print(f"  .. {message}", file=sys.stderr, flush=True)


def cell(s: Stats | None) -> str:
    if s is None:
        return f"{'-':>5} {'-':>8} {'-':>8} {'-':>8}"
    return f"{s.n:>5} {s.p50:>8.2f} {s.p95:>8.2f} {s.mean:>8.2f}"


def pipeline_rows(run: PipelineRun) -> dict[str, list[float]]:
    """The per-call series of one worker run, keyed by row label."""
    ok = [c for c in run.calls if c.status == "succeeded"]
    with_server = [c for c in ok if c.server_ms is not None]
    timed = [c for c in with_server if c.task_ms is not None and c.queued_to_claimed_ms is not None]
    return {
        "end-to-end": [c.e2e_ms for c in ok],
        "server (wire latency_ms)": [c.server_ms for c in with_server],
        "pipeline overhead (e2e - server)": [c.e2e_ms - c.server_ms for c in with_server],
        "  ~ row created -> claimed by worker": [c.queued_to_claimed_ms for c in timed],
        "  ~ in task, excl. server": [c.task_ms - c.server_ms for c in timed],
        "  ~ finished -> event received": [c.e2e_ms - c.queued_to_finished_ms for c in timed],
    }


def print_report(args: argparse.Namespace, settings_lines: list[str], local: dict, worker: dict, elapsed: float) -> None:
    width = 40
    print()
    print("Machine:  " + f"{os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), load average "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f", Python {platform.python_version()} "
          + f"({platform.python_implementation()}), {platform.platform()}")
    print("Settings: " + "\n          ".join(settings_lines))
    print()
    print("All times in ms; p50/p95 interpolated; n = calls measured (failed calls are left out).")
    header = f"{'':<{width}} {'---------------- stdio ----------------':<39}  {'---------------- http -----------------':<39}"
    print(header)
    print(f"{'measurement':<{width}} {'n':>5} {'p50':>8} {'p95':>8} {'mean':>8}   {'n':>5} {'p50':>8} {'p95':>8} {'mean':>8}")
    print("-" * (width + 82))

    def row(label: str, per_transport: Callable[[str], list[float] | None]) -> None:
        print(f"{label:<{width}} {cell(stats(per_transport('stdio') or []))}   {cell(stats(per_transport('http') or []))}")

    row("1. direct Connection.call_tool", lambda t: local[t]["direct"])
    row("2. in-process Pool.run", lambda t: local[t]["pool"])
    row("3. cold: connect + first call", lambda t: local[t]["cold_first"])
    row("   cold: connect + call + close", lambda t: local[t]["cold_total"])
    for key, title in (("seq", "4. worker, sequential"), ("par", f"5. worker, {args.concurrent} in flight")):
        print(f"{title}")
        series = {t: pipeline_rows(worker[t][key]) for t in worker}
        for label in series["stdio"]:
            row(f"   {label}", lambda t, label=label: series[t][label])
        for t in ("stdio", "http"):
            run = worker[t][key]
            failed = sum(c.status != "succeeded" for c in run.calls)
            missing = sum(c.server_ms is None for c in run.calls)
            note = f"   {t:<5} wall {run.wall_ms / 1000:.2f} s for {len(run.calls)} calls = " \
                   f"{len(run.calls) / (run.wall_ms / 1000):.1f} calls/s"
            if failed or missing:
                note += f"   ({failed} not succeeded, {missing} without a matching response frame)"
            print(note)
    print()
    print(f"Total bench time {elapsed:.0f} s.")
    print()
    print(interpretation(args, local, worker))


def interpretation(args: argparse.Namespace, local: dict, worker: dict) -> str:
    """One paragraph of plain-language conclusions, from the numbers."""
    def p50(values: list[float]) -> float:
        return percentile(values, 50)

    d = {t: p50(local[t]["direct"]) for t in local}
    hop = {t: p50(local[t]["pool"]) - d[t] for t in local}
    cold = {t: p50(local[t]["cold_first"]) for t in local}
    hop_text = f"going through an in-process Pool changes that by {hop['stdio']:+.2f} / {hop['http']:+.2f} ms" + (
        " (within noise)" if max(abs(v) for v in hop.values()) < 0.5 else ""
    )
    text = [
        f"A warm connection answers echo in {d['stdio']:.2f} ms over stdio and {d['http']:.2f} ms over HTTP (p50); "
        f"{hop_text}. A new connection costs {cold['stdio']:.0f} ms to the first answer over stdio (a new Python "
        f"process) and {cold['http']:.0f} ms over HTTP, {cold['stdio'] / d['stdio']:.0f}x and "
        f"{cold['http'] / d['http']:.0f}x a warm call: that is what the worker's warm pool saves on every call."
    ]
    labels = {
        "  ~ row created -> claimed by worker": "getting the call to the worker (insert, enqueue, Celery delivery, claim)",
        "  ~ in task, excl. server": "the task's own work around the server call (events, lookups, result rows)",
        "  ~ finished -> event received": "delivering the result (on_commit publish through the channel layer)",
    }
    shares = []
    for t in ("stdio", "http"):
        rows = pipeline_rows(worker[t]["seq"])
        e2e, server = p50(rows["end-to-end"]), p50(rows["server (wire latency_ms)"])
        parts = {label: p50(rows[key]) for key, label in labels.items()}
        biggest = max(parts, key=parts.get)
        shares.append(server / e2e)
        text.append(
            f"Through the worker ({t}) a call takes {e2e:.1f} ms end to end and the server only {server:.2f} ms of it, "
            f"so the pipeline is {1 - server / e2e:.0%} of the time; the three legs are ~"
            + " / ~".join(f"{v:.1f}" for v in parts.values())
            + f" ms, the largest {biggest}."
        )
    for t in ("stdio", "http"):
        seq, par = worker[t]["seq"], worker[t]["par"]
        seq_rate = len(seq.calls) / (seq.wall_ms / 1000)
        par_rate = len(par.calls) / (par.wall_ms / 1000)
        e2e = pipeline_rows(par)["end-to-end"]
        verdict = ("concurrency barely helps, each call just waits longer" if par_rate < 1.5 * seq_rate
                   else "the worker's threads overlap calls well")
        text.append(
            f"With {args.concurrent} calls in flight ({t}) throughput goes from {seq_rate:.0f} to {par_rate:.0f} calls/s "
            f"({par_rate / seq_rate:.1f}x with {WORKER_CONCURRENCY} worker threads) and one call waits "
            f"{p50(e2e):.0f} ms p50 / {percentile(e2e, 95):.0f} ms p95: {verdict}."
        )
    if max(shares) < 0.5:
        text.append("Since the MCP server's own time is the minor part, making calls faster means trimming the "
                    "pipeline (database round trips, Redis hops), not the transport.")
    text.append(f"Measured on one machine with {os.cpu_count()} CPUs shared by every process here (database, Redis, "
                "worker, servers and this script), so absolute numbers move with its load; compare ratios.")
    return " ".join(text)


# ------------------------------------------------------------------------------------ main


def main() -> int:
    args = parse_args()
    data_dir = prepare_env(args)
    started = time.monotonic()
    # Ctrl-C stops the bench cleanly even when started in the background (where SIGINT is
    # ignored); SIGTERM does the same as Ctrl-C (asyncio.run turns it into a cancellation).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: signal.raise_signal(signal.SIGINT))

    import psutil

    from inspector.launch import Processes, start_embedded_redis

    worker_procs, redis_procs = Processes(), Processes()
    http_server = None
    user = None
    try:
        redis_note = "REDIS_URL from the environment"
        if not os.environ.get("REDIS_URL"):
            os.environ["REDIS_URL"] = start_embedded_redis(redis_procs, data_dir)
            redis_note = f"embedded Valkey {os.environ['REDIS_URL']}"

        import django

        django.setup()
        from django.conf import settings
        from django.core.management import call_command

        from tests.mcp_servers.launch import start_server
        from tools.mcp.config import ServerConfig

        progress(f"data dir {data_dir}; migrating")
        call_command("migrate", verbosity=0, interactive=False)
        progress("starting the Celery worker and the HTTP MCP server")
        start_worker(worker_procs, data_dir)
        http_server = start_server("basic.py", "http")
        user, servers = create_servers(http_server.url)

        db = settings.DATABASES["default"]
        db_where = f"{db.get('HOST') or ''} {db['NAME']}".strip()
        settings_lines = [
            f"--calls {args.calls} --concurrent {args.concurrent} --cold {args.cold} "
            f"(+{WARMUP} untimed warm-up calls per warm series)",
            f"database {db['ENGINE'].rsplit('.', 1)[-1]} {db_where}"
            + (" (DATABASE_URL)" if args.use_env and os.environ.get("DATABASE_URL") else ""),
            f"redis {redis_note}, key prefix {settings.REDIS_PREFIX!r}",
            f"1 Celery worker: --pool threads --concurrency {WORKER_CONCURRENCY} -Q default,tools,llm",
            f"MCP_CONNECT_TIMEOUT {settings.MCP_CONNECT_TIMEOUT:g}s, MCP_CALL_TIMEOUT {settings.MCP_CALL_TIMEOUT:g}s, "
            f"tool: basic test server's echo(text)",
        ]

        configs = {
            "stdio": ServerConfig(name="bench-stdio", transport="stdio", command=sys.executable, args=(str(BASIC_SERVER),)),
            "http": ServerConfig(name="bench-http", transport="streamable_http", url=http_server.url),
        }
        local: dict[str, dict[str, list[float]]] = {}
        for transport, config in configs.items():
            progress(f"{transport}: direct, pool, and {args.cold} cold connections")
            direct = asyncio.run(bench_direct(config, args.calls))
            pool = bench_pool(config, args.calls)
            cold_first, cold_total = asyncio.run(bench_cold(config, args.cold))
            local[transport] = {"direct": direct, "pool": pool, "cold_first": cold_first, "cold_total": cold_total}

        worker = asyncio.run(worker_phases(servers, user, args))
        print_report(args, settings_lines, local, worker, time.monotonic() - started)
        return 0
    except KeyboardInterrupt:
        print("\ninterrupted; stopping everything", file=sys.stderr)
        return 130
    except Exception:
        print(f"bench failed; the worker's log ends with:\n{tail(data_dir / 'worker.log')}", file=sys.stderr)
        raise
    finally:
        worker_procs.stop()  # the worker first: it also ends the stdio servers it spawned
        if http_server is not None:
            http_server.stop()
        if user is not None and args.use_env:
            try:
                user.delete()  # servers, calls and frames go with it
            except Exception as exc:  # noqa: BLE001 - cleanup is best-effort
                print(f"could not delete the bench user: {exc}", file=sys.stderr)
        redis_procs.stop()
        leftovers = psutil.Process().children(recursive=True)
        for proc in leftovers:
            try:
                proc.terminate()
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(leftovers, timeout=5)
        for proc in alive:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        if args.keep_data:
            print(f"data kept in {data_dir}", file=sys.stderr)
        else:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
