#!/usr/bin/env python
"""The tool-call pipeline on SQLite and on PostgreSQL, side by side, in one run (issue 9.5).

    .venv/bin/python bench/pipeline.py [--calls 200] [--concurrent 20] [--postgres URL] [--only sqlite|postgres]

`--calls 50` is a quick smoke run. For each database in turn (SQLite in a fresh temp file;
PostgreSQL in a fresh database `bench_pipeline_<pid>` created on --postgres, default
postgres://postgres@127.0.0.1:5432/, and dropped at the end) a child run of this script
migrates it, then starts 2 Celery worker processes (threads pool, concurrency 8) and 2 daphne
processes (each on its own port, like `inspector.launch run`), all on one Redis (an embedded
Valkey started once for the whole run unless REDIS_URL is set; each database gets its own
REDIS_PREFIX). The MCP server is the basic test server's `echo` tool over stdio (the main case)
and over Streamable HTTP, as in bench/tool_calls.py. Measured, per database and transport:

  (a) direct     a warm `mcp` connection in this process, sequential calls: the baseline
  (b) pipeline   `tools.runtime.lifecycle.start_tool_call` -> worker -> both rows -> `tool_call.result` on the
                 channel layer; overhead = end to end - the server's wire time (latency_ms of the
                 response RpcFrame); sequential, then --concurrent in flight
  (c) API        POST /api/servers/{id}/tools/echo/call/ with `Authorization: Token`, to the two
                 daphnes in turn, then `tool_call.result` on that daphne's /ws/tool-calls/{id}/
                 (session cookie + Origin, as a browser does); timed from the POST to the event
  (d) load       --calls API calls at --concurrent in flight with 1 worker, then with 2 workers:
                 calls/s, errors, lost (no event, or the row is not `succeeded`), the CPU time
                 each part spent per call (daphnes, workers, MCP servers, PostgreSQL, Redis, this
                 bench: psutil) and how many CPUs that kept busy, and on PostgreSQL the peak
                 connections each process held (pg_stat_activity)
  (e) floors     the cheapest run of the parts a call goes through (an authenticated GET through
                 daphne, a socket's handshake up to its catch-up event, a channel-layer send up to
                 its receipt, a database round trip): what the targets leave for the work itself

"N in flight" is a sliding window: a new call starts as soon as one ends. Every process, the
temp dirs and the PostgreSQL database are removed at the end, also on Ctrl-C or an error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
sys.path.insert(0, str(BASE_DIR / "bench"))

from tool_calls import (  # noqa: E402  (the shared pieces of the single-worker bench)
    BASIC_SERVER,
    EVENT_TIMEOUT,
    PipelineCall,
    ResultListener,
    create_servers,
    fill_from_database,
    marker,
    ms_since,
    percentile,
    progress,
    start_worker,
    submit,
    tail,
)

DATABASES = ("sqlite", "postgres")
TRANSPORTS = ("stdio", "http")
WORKERS = 2
DAPHNES = 2
SCALING_FACTOR = 1.2  # "throughput scales with workers": 2 workers give at least this many times 1 worker's calls/s
CPU_PARTS = ("daphnes", "workers", "MCP servers", "PostgreSQL", "Redis", "bench")  # CpuMeter's labels, in report order
SAMPLE_EVERY = 0.05  # seconds between pg_stat_activity samples


# ------------------------------------------------------------------------------ arguments


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200, help="calls per measured series (default 200; 50 = smoke run)")
    parser.add_argument("--concurrent", type=int, default=20, help="calls in flight in the concurrent series (default 20)")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432/",
                        help="PostgreSQL server to create the throw-away database on (default %(default)s)")
    parser.add_argument("--only", choices=DATABASES, help="run one database only")
    parser.add_argument("--keep-data", action="store_true", help="keep the temp data dirs (worker and daphne logs)")
    # Internal: one database's measurements, run by the parent in a child process (Django is
    # configured once per process, for one database).
    parser.add_argument("--run-one", choices=DATABASES, help=argparse.SUPPRESS)
    parser.add_argument("--database-url", default="", help=argparse.SUPPRESS)
    parser.add_argument("--out", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.calls < 1 or args.concurrent < 1:
        parser.error("--calls and --concurrent must be at least 1")
    return args


def stop_on_signals() -> None:
    """Ctrl-C stops cleanly even when started in the background; SIGTERM does the same."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: signal.raise_signal(signal.SIGINT))


# ========================================================================= child: one database


@dataclass
class Call(PipelineCall):
    """One measured call; for the API path also the POST's own time and what went wrong."""

    index: int = 0
    post_ms: float | None = None
    error: str = ""
    got_event: bool = False


def free_ports(n: int) -> list[int]:
    from inspector.launch import free_port

    ports: list[int] = []
    while len(ports) < n:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def start_daphne(procs, data_dir: Path, name: str, port: int) -> str:
    """One daphne process as `inspector.launch` starts it (its command line, one endpoint)."""
    from inspector.launch import daphne_command, endpoint, wait_for_port

    log = open(data_dir / f"{name}.log", "wb")
    proc = procs.start(
        name,
        daphne_command([endpoint(port)]),
        env=dict(os.environ, PYTHONUNBUFFERED="1"), stdout=log, stderr=log,
    )
    log.close()
    try:
        wait_for_port("127.0.0.1", port, 30, proc)
    except RuntimeError as exc:
        raise RuntimeError(f"{name}: {exc}\n{tail(data_dir / f'{name}.log')}") from None
    return f"http://127.0.0.1:{port}"


def session_cookie(user) -> str:
    """A logged-in session for the bench user: sockets authenticate by session, not by token."""
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


async def run_window(calls: list[Call], in_flight: int, one: Callable[[Call], Awaitable[None]]) -> float:
    """Run `one(call)` for every call, `in_flight` at a time (a sliding window); wall time in ms."""
    pending = iter(calls)

    async def lane() -> None:
        for call in pending:  # lanes share the iterator: each takes the next call
            await one(call)

    t0 = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(min(in_flight, len(calls)))))
    return ms_since(t0)


class Measure:
    """Everything one database's run measures, with its servers, user, token and sockets."""

    def __init__(self, args: argparse.Namespace, servers: dict, user, token: str, cookie: str, daphnes: list[str]) -> None:
        self.args = args
        self.servers = servers
        self.user = user
        self.token = token
        self.cookie = cookie
        self.daphnes = daphnes
        self.public_url = os.environ["PUBLIC_URL"]
        self.listener = ResultListener()
        self.http = None

    async def open(self) -> None:
        import aiohttp

        await self.listener.open()
        self.http = aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar(),
                                          connector=aiohttp.TCPConnector(limit=0))

    async def close(self) -> None:
        if self.http is not None:
            await self.http.close()
        await self.listener.close()

    # -- (b) the pipeline, in process ------------------------------------------------------

    async def pipeline_call(self, transport: str, call: Call) -> None:
        from asgiref.sync import sync_to_async

        await sync_to_async(submit)(self.servers[transport], self.user, call, self.listener)
        try:
            arrived, event = await self.listener.result(call.call_id)
        except TimeoutError:
            call.error = f"no tool_call.result within {EVENT_TIMEOUT:.0f} s"
            return
        call.got_event = True
        call.e2e_ms = (arrived - call.t0) * 1000
        call.status = (event.get("tool_call") or {}).get("status", "")

    # -- (c) the API path, through daphne ---------------------------------------------------

    async def api_call(self, transport: str, call: Call) -> None:
        import aiohttp

        base = self.daphnes[call.index % len(self.daphnes)]
        server_id = self.servers[transport].pk
        t0 = time.perf_counter()
        call.t0 = t0
        stage = "POST"
        try:
            # One deadline for the whole call: a POST or a socket handshake that never answers
            # is an error of this call, not a stalled bench.
            async with asyncio.timeout(EVENT_TIMEOUT):
                async with self.http.post(f"{base}/api/servers/{server_id}/tools/echo/call/",
                                          json={"arguments": {"text": call.text}},
                                          headers={"Authorization": f"Token {self.token}"}) as resp:
                    body = await resp.json(content_type=None)
                    if resp.status != 202:
                        call.error = f"POST answered {resp.status}: {body}"
                        return
                call.post_ms = ms_since(t0)
                call.call_id = body["id"]
                stage = "WebSocket handshake"
                ws_url = base.replace("http://", "ws://", 1) + f"/ws/tool-calls/{call.call_id}/"
                async with self.http.ws_connect(ws_url, origin=self.public_url, headers={"Cookie": self.cookie}) as ws:
                    stage = "tool_call.result on the socket"
                    while True:
                        msg = await ws.receive()
                        if msg.type == aiohttp.WSMsgType.TEXT:
                            event = json.loads(msg.data)
                            if event.get("type") == "tool_call.result":
                                call.e2e_ms = ms_since(t0)
                                call.got_event = True
                                call.status = (event.get("tool_call") or {}).get("status", "")
                                return
                        elif msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                            call.error = f"socket closed ({ws.close_code}) before the result"
                            return
        except TimeoutError:
            call.error = f"no answer within {EVENT_TIMEOUT:.0f} s, waiting for the {stage} ({base})"
        except aiohttp.ClientError as exc:
            call.error = f"{type(exc).__name__} during the {stage}: {exc}"

    # -- one series --------------------------------------------------------------------------

    async def series(self, kind: str, transport: str, n: int, in_flight: int, label: str) -> dict:
        """n calls of `kind` ("pipeline" or "api"), in_flight at a time; the numbers that go in the table."""
        from asgiref.sync import sync_to_async

        one = self.pipeline_call if kind == "pipeline" else self.api_call
        calls = [Call(marker(label, i), index=i) for i in range(n)]
        wall = await run_window(calls, in_flight, lambda c: one(transport, c))
        return await sync_to_async(summarise)(self.servers[transport], calls, wall)

    # -- (e) floors: the cheapest thing each leg's part can do on this machine -----------------

    async def floors(self, transport: str, n: int) -> dict:
        """n sequential samples each of what every call's path is built from, at its cheapest:
        an authenticated GET through daphne, a socket's handshake up to its first event (the
        catch-up of a finished call), a channel-layer send to a group up to its receipt, and a
        database round trip. What the targets leave for the work itself is the limit minus these."""
        import aiohttp
        from asgiref.sync import sync_to_async
        from django.db import connection

        from tools.runtime.events import tool_call_group

        done = Call(marker("floor", 0))
        await self.api_call(transport, done)
        if not done.got_event:
            raise RuntimeError(f"(e) needs a finished call: {done.error or 'no result'}")
        out: dict[str, list[float]] = {"get": [], "ws": [], "layer": [], "db": []}
        for i in range(n):
            base = self.daphnes[i % len(self.daphnes)]
            t0 = time.perf_counter()
            async with self.http.get(f"{base}/api/tool-calls/{done.call_id}/?full=0",
                                     headers={"Authorization": f"Token {self.token}"}) as resp:
                await resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"(e) GET answered {resp.status}")
            out["get"].append(ms_since(t0))
            t0 = time.perf_counter()
            ws_url = base.replace("http://", "ws://", 1) + f"/ws/tool-calls/{done.call_id}/"
            async with self.http.ws_connect(ws_url, origin=self.public_url, headers={"Cookie": self.cookie}) as ws:
                msg = await ws.receive(timeout=EVENT_TIMEOUT)
                if msg.type != aiohttp.WSMsgType.TEXT:
                    raise RuntimeError(f"(e) socket sent {msg.type} first")
                out["ws"].append(ms_since(t0))
        layer, group = self.listener.layer, tool_call_group(done.call_id)
        for _ in range(n):
            await self.listener.subscribe(done.call_id)
            t0 = time.perf_counter()
            await layer.group_send(group, {"type": "relay", "event": {"type": "tool_call.result", "tool_call_id": done.call_id}})
            arrived, _ = await self.listener.result(done.call_id)
            out["layer"].append((arrived - t0) * 1000)

        def round_trips() -> list[float]:
            times = []
            with connection.cursor() as cursor:
                for _ in range(n):
                    t0 = time.perf_counter()
                    cursor.execute("SELECT 1")
                    cursor.fetchone()
                    times.append(ms_since(t0))
            return times

        out["db"] = await sync_to_async(round_trips)()
        return out

    async def warm(self, transport: str) -> None:
        """Untimed calls so both workers hold warm connections and both daphnes have served."""
        n = 2 * self.args.concurrent
        await run_window([Call(marker("warm", i), index=i) for i in range(n)], self.args.concurrent,
                         lambda c: self.pipeline_call(transport, c))
        await run_window([Call(marker("warm-api", i), index=i) for i in range(n)], self.args.concurrent,
                         lambda c: self.api_call(transport, c))


def dump_tasks() -> None:
    for task in asyncio.all_tasks():
        task.print_stack(limit=8, file=sys.stderr)


def summarise(server, calls: list[Call], wall_ms: float) -> dict:
    """Per-call series (ms) for the table, and the calls that failed or were lost."""
    from tools.models import ToolCall

    accepted = [c for c in calls if c.call_id]
    fill_from_database(server, accepted)
    rows = dict(ToolCall.objects.filter(pk__in=[c.call_id for c in accepted]).values_list("pk", "status"))
    lost = [c for c in accepted if not c.got_event or rows.get(uuid.UUID(c.call_id)) != ToolCall.Status.SUCCEEDED]
    errors = [c for c in calls if c.error or (c.got_event and c.status != "succeeded")]
    ok = [c for c in calls if c.got_event and c.status == "succeeded"]
    timed = [c for c in ok if c.server_ms is not None]
    legs = [c for c in timed if None not in (c.queued_to_claimed_ms, c.task_ms, c.queued_to_finished_ms)]
    samples = sorted({c.error or f"status {c.status}" for c in errors})[:3]
    return {
        "n": len(calls),
        "wall_ms": wall_ms,
        "e2e": [c.e2e_ms for c in ok],
        "server": [c.server_ms for c in timed],
        "overhead": [c.e2e_ms - c.server_ms for c in timed],
        "post": [c.post_ms for c in ok if c.post_ms is not None],
        # Where the pipeline's time goes (meaningful for (b), whose clock starts at the row).
        "claim": [c.queued_to_claimed_ms for c in legs],
        "in_task": [c.task_ms - c.server_ms for c in legs],
        "deliver": [c.e2e_ms - c.queued_to_finished_ms for c in legs],
        "errors": len(errors),
        "lost": len(lost),
        "error_samples": samples,
    }


class ConnectionSampler:
    """Peak PostgreSQL connections per process while a load runs, from pg_stat_activity.

    The settings name every connection `mcp-inspector:<program>:<pid>`; `labels` maps pids to
    the names in the report (worker1, daphne2, bench...)."""

    def __init__(self, url: str, labels: dict[int, str]) -> None:
        self.url = url
        self.labels = labels
        self.peak: dict[str, int] = {}
        self.peak_total = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.error = ""

    def __enter__(self) -> ConnectionSampler:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self.thread.join(5)

    def _label(self, application_name: str) -> str:
        pid = application_name.rsplit(":", 1)[-1]
        return self.labels.get(int(pid), application_name) if pid.isdigit() else (application_name or "(unnamed)")

    def _run(self) -> None:
        import psycopg

        try:
            with psycopg.connect(self.url, autocommit=True, application_name="bench-sampler") as conn:
                while not self.stopping.is_set():
                    rows = conn.execute(
                        "SELECT application_name, count(*) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid() GROUP BY 1"
                    ).fetchall()
                    counts: dict[str, int] = {}
                    for name, count in rows:
                        label = self._label(name or "")
                        counts[label] = counts.get(label, 0) + count
                    for label, count in counts.items():
                        self.peak[label] = max(self.peak.get(label, 0), count)
                    self.peak_total = max(self.peak_total, sum(counts.values()))
                    self.stopping.wait(SAMPLE_EVERY)
        except Exception as exc:  # noqa: BLE001 - reported in the table, the load still counts
            self.error = f"{type(exc).__name__}: {exc}"


class CpuMeter:
    """CPU time (user + system) the parts of the system spent while a load ran, by process:
    this bench, each daphne and worker, the MCP servers (`basic.py`: the HTTP one and the stdio
    ones the workers spawned), PostgreSQL's processes and Redis. Per call, it says where the
    machine's time goes; summed over the wall time, how many of its CPUs were busy."""

    def __init__(self, labels: dict[int, str]) -> None:
        self.labels = labels
        self.start: dict[int, tuple[str, float]] = {}
        self.spent: dict[str, float] = {}

    def _label(self, proc) -> str:
        if proc.pid in self.labels:
            label = self.labels[proc.pid]
            base = label.rstrip("0123456789")
            return f"{base}s" if base != label else label  # daphne1 and daphne2 -> daphnes
        name = (proc.info.get("name") or "").lower()
        cmdline = " ".join(proc.info.get("cmdline") or [])
        if "basic.py" in cmdline:
            return "MCP servers"
        if name.startswith("postgres") or name.startswith("postmaster"):
            return "PostgreSQL"
        if "valkey" in name or "redis" in name:
            return "Redis"
        return ""

    def _sample(self) -> dict[int, tuple[str, float]]:
        import psutil

        seen = {}
        for proc in psutil.process_iter(["name", "cmdline"]):
            try:
                label = self._label(proc)
                if label:
                    times = proc.cpu_times()
                    seen[proc.pid] = (label, times.user + times.system)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        return seen

    def __enter__(self) -> CpuMeter:
        self.start = self._sample()
        return self

    def __exit__(self, *exc) -> None:
        for pid, (label, cpu) in self._sample().items():
            before = self.start.get(pid, (label, 0.0))[1]
            self.spent[label] = self.spent.get(label, 0.0) + max(cpu - before, 0.0) * 1000


async def load_run(measure: Measure, transport: str, label: str, db: str, database_url: str, labels: dict[int, str]) -> dict:
    """(d) --calls API calls at --concurrent in flight: the CPU every part spent, and on
    PostgreSQL the connections each process held."""
    args = measure.args
    with CpuMeter(labels) as cpu:
        if db != "postgres":
            result = await measure.series("api", transport, args.calls, args.concurrent, label)
            result["connections"] = None
        else:
            with ConnectionSampler(database_url, labels) as sampler:
                result = await measure.series("api", transport, args.calls, args.concurrent, label)
            result["connections"] = {"peak": sampler.peak, "peak_total": sampler.peak_total, "error": sampler.error}
    result["cpu_ms"] = cpu.spent
    return result


def run_one(args: argparse.Namespace) -> int:
    """One database: set up, measure, write the numbers as JSON to --out. Runs in a child process."""
    db = args.run_one
    data_dir = Path(tempfile.mkdtemp(prefix=f"inspector-pipeline-{db}-"))
    os.environ["INSPECTOR_DATA_DIR"] = str(data_dir)
    os.environ["DJANGO_SETTINGS_MODULE"] = "inspector.settings"
    if db == "postgres":
        os.environ["DATABASE_URL"] = args.database_url
    else:
        os.environ.pop("DATABASE_URL", None)  # a fresh SQLite file in the temp data dir
    for name in ("INSPECTOR_DB_NAME", "DJANGO_ALLOW_ASYNC_UNSAFE"):
        os.environ.pop(name, None)
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    ports = free_ports(DAPHNES)
    # Sockets accept only the app's own origin; both daphnes serve the same app.
    os.environ["PUBLIC_URL"] = f"http://127.0.0.1:{ports[0]}"
    stop_on_signals()

    import psutil

    from inspector.launch import Processes

    procs = Processes()
    http_server = None
    try:
        import django

        django.setup()
        from django.conf import settings
        from django.core.management import call_command

        from inspector.models import ApiToken
        from tests.mcp_servers.launch import start_server
        from tools.mcp.config import ServerConfig
        from tool_calls import bench_direct

        progress(f"{db}: data dir {data_dir}; migrating")
        call_command("migrate", verbosity=0, interactive=False)
        progress(f"{db}: starting worker1, {DAPHNES} daphnes and the HTTP MCP server")
        start_worker(procs, data_dir, "worker1")
        daphnes = [start_daphne(procs, data_dir, f"daphne{i + 1}", port) for i, port in enumerate(ports)]
        http_server = start_server("basic.py", "http")
        user, servers = create_servers(http_server.url)
        token = ApiToken.issue(user, "bench")[1]
        cookie = session_cookie(user)
        labels = {os.getpid(): "bench"}

        def relabel() -> None:
            for child in procs.children:
                labels[child.proc.pid] = child.name

        relabel()
        db_settings = settings.DATABASES["default"]
        out: dict = {
            "db": db,
            "engine": f"{db_settings['ENGINE'].rsplit('.', 1)[-1]} {db_settings.get('HOST') or ''} {db_settings['NAME']}",
            "load_start": os.getloadavg(),
            "redis": f"{settings.REDIS_URL} prefix {settings.REDIS_PREFIX!r}",
            "pool": settings.DATABASES["default"].get("OPTIONS", {}).get("pool"),
        }

        configs = {
            "stdio": ServerConfig(name="bench-stdio", transport="stdio", command=sys.executable, args=(str(BASIC_SERVER),)),
            "http": ServerConfig(name="bench-http", transport="streamable_http", url=http_server.url),
        }
        out["direct"] = {}
        for transport, config in configs.items():
            progress(f"{db} {transport}: (a) {args.calls} direct warm calls")
            out["direct"][transport] = asyncio.run(bench_direct(config, args.calls))

        async def measure_everything() -> None:
            # `kill -USR1 <pid>` prints where every task of this run is waiting (a stalled run).
            asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, dump_tasks)
            measure = Measure(args, servers, user, token, cookie, daphnes)
            await measure.open()
            try:
                n, k = args.calls, args.concurrent
                out["load1"], out["load2"], out["pipe_seq"], out["pipe_par"], out["api_seq"], out["api_par"] = \
                    {}, {}, {}, {}, {}, {}
                for transport in TRANSPORTS:
                    await measure.warm(transport)
                    progress(f"{db} {transport}: (d) {n} API calls, {k} in flight, 1 worker")
                    out["load1"][transport] = await load_run(measure, transport, f"load1-{transport}", db,
                                                             args.database_url, labels)
                progress(f"{db}: starting worker2")
                await asyncio.to_thread(start_worker, procs, data_dir, "worker2")
                relabel()
                for transport in TRANSPORTS:
                    await measure.warm(transport)
                    progress(f"{db} {transport}: (b) pipeline, {n} sequential, then {k} in flight")
                    out["pipe_seq"][transport] = await measure.series("pipeline", transport, n, 1, f"pseq-{transport}")
                    out["pipe_par"][transport] = await measure.series("pipeline", transport, n, k, f"ppar-{transport}")
                    progress(f"{db} {transport}: (c) API path, {n} sequential, then {k} in flight")
                    out["api_seq"][transport] = await measure.series("api", transport, n, 1, f"aseq-{transport}")
                    out["api_par"][transport] = await measure.series("api", transport, n, k, f"apar-{transport}")
                progress(f"{db}: (e) floors, {n} samples each")
                out["floors"] = await measure.floors("stdio", n)
                for transport in TRANSPORTS:
                    progress(f"{db} {transport}: (d) {n} API calls, {k} in flight, 2 workers")
                    out["load2"][transport] = await load_run(measure, transport, f"load2-{transport}", db,
                                                             args.database_url, labels)
            finally:
                await measure.close()

        asyncio.run(measure_everything())
        out["load_end"] = os.getloadavg()
        Path(args.out).write_text(json.dumps(out))
        return 0
    except KeyboardInterrupt:
        print(f"\n{db}: interrupted; stopping everything", file=sys.stderr)
        return 130
    except Exception:
        for name in ("worker1", "worker2", "daphne1", "daphne2"):
            if (data_dir / f"{name}.log").exists():
                print(f"--- {name}.log ends with:\n{tail(data_dir / f'{name}.log', 1500)}", file=sys.stderr)
        raise
    finally:
        procs.stop()  # workers also end the stdio servers they spawned
        if http_server is not None:
            http_server.stop()
        try:
            from django.db import connections

            connections.close_all()
        except Exception:  # noqa: BLE001 - best effort before the database is dropped
            pass
        leftovers = psutil.Process().children(recursive=True)
        for proc in leftovers:
            try:
                proc.terminate()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(leftovers, timeout=5)
        if args.keep_data:
            print(f"{db}: data kept in {data_dir}", file=sys.stderr)
        else:
            shutil.rmtree(data_dir, ignore_errors=True)


# ======================================================================= parent: both databases


def database_url(admin_url: str, name: str) -> str:
    """The --postgres URL with its database replaced by `name`."""
    return urlunsplit(urlsplit(admin_url)._replace(path=f"/{name}"))


def create_database(admin_url: str, name: str) -> None:
    import psycopg

    try:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.Error as exc:
        raise RuntimeError(f"cannot create the bench database on {admin_url}: {exc}\n"
                           "Pass --postgres URL, or --only sqlite to skip PostgreSQL.") from None


def drop_database(admin_url: str, name: str) -> None:
    import psycopg

    try:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except psycopg.Error as exc:
        print(f"could not drop the bench database {name}: {exc}", file=sys.stderr)


def run_child(args: argparse.Namespace, procs, db: str, url: str, redis_url: str, out: Path) -> dict:
    """Measure one database in a child process (it prints progress to stderr) and read its numbers."""
    env = dict(os.environ, REDIS_URL=redis_url, REDIS_PREFIX=f"{os.environ.get('REDIS_PREFIX', '')}bench{os.getpid()}{db}:")
    command = [sys.executable, str(Path(__file__).resolve()), "--run-one", db, "--database-url", url,
               "--out", str(out), "--calls", str(args.calls), "--concurrent", str(args.concurrent)]
    if args.keep_data:
        command.append("--keep-data")
    code = procs.start(f"bench-{db}", command, env=env).wait()
    if code != 0:
        raise RuntimeError(f"the {db} run failed (exit code {code}); its output is above")
    return json.loads(out.read_text())


# ---------------------------------------------------------------------------------- report


def num(v: float) -> str:
    return f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 1000 else f"{v:.0f}"


def p50(values: list[float]) -> float:
    return percentile(values, 50)


def p95(values: list[float]) -> float:
    return percentile(values, 95)


def pair(values: list[float] | None) -> str:
    return f"{num(p50(values))} / {num(p95(values))}" if values else "-"


def rate(run: dict) -> float:
    return run["n"] / (run["wall_ms"] / 1000)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def print_report(args: argparse.Namespace, results: dict, redis_note: str, elapsed: float) -> None:
    dbs = [db for db in DATABASES if db in results]
    title = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
    width, cw = 50, 19
    k, n = args.concurrent, args.calls

    def line(label: str, cells: list[str]) -> None:
        print(f"{label:<{width}}" + "".join(f"{c:>{cw}}" for c in cells))

    def row(label: str, fn: Callable[[dict, str], str]) -> None:
        line(label, [fn(results[db], t) for db in dbs for t in TRANSPORTS])

    print()
    print(f"Machine: {os.cpu_count()} CPUs, load average now " + " ".join(f"{x:.2f}" for x in os.getloadavg())
          + f"; Python {platform.python_version()}, {platform.platform()}")
    for db in dbs:
        r = results[db]
        print(f"  {title[db]}: {r['engine'].strip()}; load average at start "
              + " ".join(f"{x:.2f}" for x in r["load_start"]) + ", at end " + " ".join(f"{x:.2f}" for x in r["load_end"]))
    print(f"Setup per database: {WORKERS} Celery workers (--pool threads --concurrency 8), {DAPHNES} daphnes, "
          f"one Redis ({redis_note}); basic test server's echo tool")
    print(f"--calls {n} --concurrent {k}; times in ms, p50 / p95 over succeeded calls; (b), (c) with 2 workers")
    print()
    line("", [f"{title[db]} {t}" for db in dbs for t in TRANSPORTS])
    print("-" * (width + cw * len(dbs) * len(TRANSPORTS)))
    row("(a) direct warm mcp call", lambda r, t: pair(r["direct"][t]))
    for key, name in (("seq", "sequential"), ("par", f"{k} in flight")):
        row(f"(b) pipeline end to end, {name}", lambda r, t, key=key: pair(r[f"pipe_{key}"][t]["e2e"]))
        row("    server wire time (response latency_ms)", lambda r, t, key=key: pair(r[f"pipe_{key}"][t]["server"]))
        row("    overhead (end to end - server)", lambda r, t, key=key: pair(r[f"pipe_{key}"][t]["overhead"]))
        if key == "seq":
            row("    ~ row created -> claimed by a worker", lambda r, t: pair(r["pipe_seq"][t]["claim"]))
            row("    ~ in the task, server time excluded", lambda r, t: pair(r["pipe_seq"][t]["in_task"]))
            row("    ~ row finished -> event received", lambda r, t: pair(r["pipe_seq"][t]["deliver"]))
    for key, name in (("seq", "sequential"), ("par", f"{k} in flight")):
        row(f"(c) API: POST -> result on WS, {name}", lambda r, t, key=key: pair(r[f"api_{key}"][t]["e2e"]))
        row("    of which POST -> 202", lambda r, t, key=key: pair(r[f"api_{key}"][t]["post"]))
        row("    overhead (end to end - server)", lambda r, t, key=key: pair(r[f"api_{key}"][t]["overhead"]))
    for w in (1, 2):
        row(f"(d) {n} API calls, {k} in flight, {w} worker{'s' if w > 1 else ''}: calls/s",
            lambda r, t, w=w: f"{rate(r[f'load{w}'][t]):.1f}")
        row("    errors / lost", lambda r, t, w=w: f"{r[f'load{w}'][t]['errors']} / {r[f'load{w}'][t]['lost']}")
        row("    end to end", lambda r, t, w=w: pair(r[f"load{w}"][t]["e2e"]))
        row("    peak DB connections, all processes",
            lambda r, t, w=w: str(r[f"load{w}"][t]["connections"]["peak_total"]) if r[f"load{w}"][t]["connections"] else "n/a")
        row("    CPUs busy (all parts' CPU time / wall time)",
            lambda r, t, w=w: f"{sum(r[f'load{w}'][t]['cpu_ms'].values()) / r[f'load{w}'][t]['wall_ms']:.2f} of {os.cpu_count()}")
        for part in CPU_PARTS:
            row(f"    CPU ms per call: {part}",
                lambda r, t, w=w, part=part: f"{r[f'load{w}'][t]['cpu_ms'].get(part, 0.0) / r[f'load{w}'][t]['n']:.1f}")

    print()
    print("(e) floors: the cheapest run of each part a call goes through, sequential, in ms (p50 / p95)")
    print("-" * (width + cw * len(dbs) * len(TRANSPORTS)))
    floors = (
        ("get", "GET /api/tool-calls/{id}/ through daphne (token)"),
        ("ws", "socket handshake -> first event (catch-up)"),
        ("layer", "channel layer: group_send -> received"),
        ("db", "database round trip (SELECT 1)"),
    )
    for key, label in floors:
        line(label, [pair(results[db]["floors"][key]) if t == "stdio" else "" for db in dbs for t in TRANSPORTS])
    line("API floor: GET + socket, against the (c) limit",
         [f"{num(p50(results[db]['floors']['get']) + p50(results[db]['floors']['ws']))}/"
          f"{num(2 * p50(results[db]['direct']['stdio']) + 10)}" if t == "stdio" else "" for db in dbs for t in TRANSPORTS])

    print()
    print("Targets (the issue sets them for PostgreSQL; SQLite shown for comparison)")
    print("-" * (width + cw * len(dbs) * len(TRANSPORTS)))
    for key, name in (("seq", "seq"), ("par", f"{k} in flight")):
        row(f"(b) overhead p50 <= 10 ms, {name}",
            lambda r, t, key=key: f"{num(p50(r[f'pipe_{key}'][t]['overhead']))} {verdict(p50(r[f'pipe_{key}'][t]['overhead']) <= 10)}")
        row(f"(b) overhead p95 <= 25 ms, {name}",
            lambda r, t, key=key: f"{num(p95(r[f'pipe_{key}'][t]['overhead']))} {verdict(p95(r[f'pipe_{key}'][t]['overhead']) <= 25)}")
    for key, name in (("seq", "seq"), ("par", f"{k} in flight")):
        for q, qf in (("p50", p50), ("p95", p95)):
            def api_target(r: dict, t: str, key=key, qf=qf) -> str:
                limit = 2 * qf(r["direct"][t]) + 10
                value = qf(r[f"api_{key}"][t]["e2e"])
                return f"{num(value)}/{num(limit)} {verdict(value <= limit)}"

            row(f"(c) API {q} <= 2 x direct {q} + 10, {name}", api_target)
    row(f"(d) {n} calls at {k}: 0 errors, 0 lost",
        lambda r, t: verdict(all(r[f"load{w}"][t]["errors"] == 0 and r[f"load{w}"][t]["lost"] == 0 for w in (1, 2))))
    row(f"(d) calls/s 2 workers >= {SCALING_FACTOR} x 1 worker",
        lambda r, t: f"{rate(r['load2'][t]) / rate(r['load1'][t]):.2f}x {verdict(rate(r['load2'][t]) >= SCALING_FACTOR * rate(r['load1'][t]))}")
    print("(c) cells: measured / limit. Errors = POST not 202, socket closed, or a result that is not `succeeded`;")
    print("lost = no tool_call.result within the timeout, or the row is not `succeeded` afterwards.")

    for db in dbs:
        for w in (1, 2):
            for t in TRANSPORTS:
                conns = results[db][f"load{w}"][t]["connections"]
                if conns:
                    peak = ", ".join(f"{name} {count}" for name, count in sorted(conns["peak"].items()))
                    print(f"Peak connections per process, {title[db]} {t}, {w} worker{'s' if w > 1 else ''}: {peak}"
                          + (f" (sampler error: {conns['error']})" if conns["error"] else ""))
    for db in dbs:
        for key, run_by_t in results[db].items():
            if isinstance(run_by_t, dict):
                for t, run in run_by_t.items():
                    if isinstance(run, dict) and run.get("error_samples"):
                        print(f"{title[db]} {key} {t}: {run['errors']} errors, {run['lost']} lost, e.g. "
                              + "; ".join(run["error_samples"]))
    print(f"\nTotal bench time {elapsed:.0f} s.")


# ------------------------------------------------------------------------------------ main


def main() -> int:
    args = parse_args()
    if args.run_one:
        return run_one(args)
    stop_on_signals()
    started = time.monotonic()

    from inspector.launch import Processes, start_embedded_redis

    procs = Processes()
    work = Path(tempfile.mkdtemp(prefix="inspector-pipeline-"))
    pg_name = f"bench_pipeline_{os.getpid()}"
    pg_created = False
    results: dict[str, dict] = {}
    try:
        redis_url = os.environ.get("REDIS_URL", "")
        redis_note = "REDIS_URL"
        if not redis_url:
            redis_url = start_embedded_redis(procs, work)
            redis_note = f"embedded Valkey {redis_url}"
        for db in ([args.only] if args.only else DATABASES):
            url = ""
            if db == "postgres":
                create_database(args.postgres, pg_name)
                pg_created = True
                url = database_url(args.postgres, pg_name)
            results[db] = run_child(args, procs, db, url, redis_url, work / f"{db}.json")
        print_report(args, results, redis_note, time.monotonic() - started)
        return 0
    except KeyboardInterrupt:
        print("\ninterrupted; stopping everything", file=sys.stderr)
        return 130
    except RuntimeError as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        return 1
    finally:
        procs.stop(timeout=60)  # a child run first (it stops its own workers and daphnes), then Redis
        if pg_created:
            drop_database(args.postgres, pg_name)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
