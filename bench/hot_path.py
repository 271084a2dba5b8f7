#!/usr/bin/env python
"""The API's one-round-trip call (`POST …/call/?wait=`) against the targets of issue 31.4.

    .venv/bin/python bench/hot_path.py [--calls 200] [--in-flight 8] [--postgres URL] [--only sqlite|postgres]
                                       [--profile DIR] [--browser [--clicks 50]]

For each database in turn (SQLite in a fresh temp file; PostgreSQL in a fresh database created
on --postgres and dropped at the end) a child run migrates it and starts ONE daphne and ONE
Celery worker (threads pool, concurrency 8), as `inspector.launch` starts them, on one Redis
(embedded Valkey unless REDIS_URL is set). The tool is the basic test server's `echo` over stdio.
Measured, per database:

  (a) direct   a warm `mcp` connection in this process, sequential calls: the baseline
  (w) ?wait    POST /api/servers/{id}/tools/echo/call/?wait=30 with `Authorization: Token`,
               sequential: p50/p95, and the difference to (a) from the same run
  (l) load     --calls such calls at --in-flight in flight (a sliding window): calls/s, and the
               CPU time (user + system, psutil) each process spent per call: daphne, worker,
               the stdio MCP server, PostgreSQL, Redis, and all of them
  (b) browser  with --browser: the tool page in headless Chromium (/usr/bin/chromium, Playwright),
               signed in through the login form, warm (10 clicks first): --clicks clicks of Run, each
               timed in the page from the click to the result's text in #full-result (p50/p95),
               and when, from the click, the POST was answered and the call's first and result
               events came on the page's socket (p50 of each); then --clicks POSTs ?wait made by the
               page itself (session cookie + CSRF header, as the page sends them), sequential
  (f) floors   what stops a target on this machine: the CPU an authenticated
               `GET /api/tool-calls/{id}/?full=0` costs daphne (the least one request costs), the
               CPU a no-op Celery task (`celery.accumulate`, on the tool calls' queue) costs the
               worker (the least one task costs), and the calls/s that the CPU per call allows on
               os.cpu_count() CPUs

With --profile DIR, py-spy (`PYSPY`, default /tmp/pyspy/bin/py-spy; never installed in .venv)
records daphne and the worker during the load series (raw collapsed stacks, plus SVGs) into DIR,
with `--gil`: only samples of a thread holding the GIL, i.e. Python running, not waiting.

Benches print figures; tests assert behaviour. Every process and the temp dirs and database are
removed at the end, also on Ctrl-C or an error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
sys.path.insert(0, str(BASE_DIR / "bench"))

from pipeline import (  # noqa: E402  (the shared pieces of the pipeline bench)
    DATABASES,
    CpuMeter,
    create_database,
    database_url,
    drop_database,
    free_ports,
    num,
    p50,
    pair,
    run_window,
    start_daphne,
    stop_on_signals,
)
from tool_calls import BASIC_SERVER, marker, ms_since, progress, start_worker, tail  # noqa: E402

WAIT = 30  # seconds a POST may wait for its call's end
CPU_PARTS = ("daphne", "worker", "MCP servers", "PostgreSQL", "Redis")
# Issue 31.4's targets.
TARGET_OVER_DIRECT = {"sqlite": 20.0, "postgres": 25.0}  # ms, p50 of ?wait minus p50 of direct
TARGET_CPU_MS = 18.0  # CPU ms per call, all processes
TARGET_RATE = 80.0  # calls/s at 8 in flight, one daphne and one worker
TARGET_CLICK_MS = 50.0  # click → result in the browser, p50 warm
CHROMIUM = "/usr/bin/chromium"
PASSWORD = "bench-pass-123"
# In the page: type the marker, click Run, resolve with the ms until #full-result shows it.
# Every WebSocket message's arrival time and event type, for the click's breakdown (a string
# match, not a parse: the page parses each message itself).
SOCKET_TIMES_JS = """(() => {
  const Socket = window.WebSocket;
  window.__socketTimes = [];
  window.WebSocket = class extends Socket {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', (e) => {
        const type = /"type": ?"([^"]+)"/.exec(typeof e.data === 'string' ? e.data.slice(0, 200) : '');
        window.__socketTimes.push([performance.now(), type ? type[1] : '']);
      });
    }
  };
})();"""

# One click of Run, timed from the click to the result's text in #full-result; with where the
# time went: the POST's answer (resource timing), the call's first event on the page's socket
# (its state, sent once the socket has joined the call's events) and its result event.
CLICK_JS = """async (marker) => {
  const input = document.querySelector('#schema-form input[name=text], #schema-form textarea[name=text]');
  input.value = marker;
  input.dispatchEvent(new Event('input', {bubbles: true}));
  window.__socketTimes.length = 0;
  performance.clearResourceTimings();
  return await new Promise((resolve, reject) => {
    const shown = () => (document.querySelector('#full-result')?.textContent || '').includes(marker);
    const observer = new MutationObserver(() => {
      if (!shown()) return;
      observer.disconnect();
      const done = performance.now();
      const post = performance.getEntriesByType('resource').find((r) => r.name.includes('/call/'));
      const first = window.__socketTimes.find(([, type]) => type.startsWith('tool_call.'));
      const result = window.__socketTimes.find(([, type]) => type === 'tool_call.result');
      resolve({total: done - t0, sent: post ? post.startTime - t0 : null, post: post ? post.responseEnd - t0 : null,
               first: first ? first[0] - t0 : null, result: result ? result[0] - t0 : null});
    });
    observer.observe(document.body, {childList: true, subtree: true, characterData: true});
    setTimeout(() => { observer.disconnect(); reject(new Error('no result within 30 s')); }, 30000);
    const t0 = performance.now();
    document.querySelector('#run-tool').click();
  });
}"""

# The page's POST alone (session cookie + CSRF header, as apiFetch sends it), sequential: what
# the click's POST costs without the page's work around it, against (w)'s token-authenticated one.
POST_JS = """async ([url, marker, n]) => {
  const csrf = decodeURIComponent((document.cookie.match(/(?:^|; )csrftoken=([^;]+)/) || [])[1] || '');
  const times = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const res = await fetch(url, {method: 'POST', credentials: 'same-origin',
      headers: {'Content-Type': 'application/json', 'X-CSRFToken': csrf},
      body: JSON.stringify({arguments: {text: marker + i}})});
    const body = await res.json();
    if (res.status === 200 && body.status === 'succeeded') times.push(performance.now() - t0);
  }
  return times;
}"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200, help="calls per series (default 200; 50 = smoke run)")
    parser.add_argument("--in-flight", type=int, default=8, help="calls in flight in the load series (default 8)")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432/",
                        help="PostgreSQL server to create the throw-away database on (default %(default)s)")
    parser.add_argument("--only", choices=DATABASES, help="run one database only")
    parser.add_argument("--profile", default="", help="record daphne and the worker with py-spy into this folder")
    parser.add_argument("--browser", action="store_true", help=f"also time click → result on the tool page ({CHROMIUM})")
    parser.add_argument("--clicks", type=int, default=50, help="clicks of Run timed with --browser (default 50)")
    parser.add_argument("--run-one", choices=DATABASES, help=argparse.SUPPRESS)
    parser.add_argument("--database-url", default="", help=argparse.SUPPRESS)
    parser.add_argument("--out", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.calls < 1 or args.in_flight < 1 or args.clicks < 1:
        parser.error("--calls, --in-flight and --clicks must be at least 1")
    if args.browser and not Path(CHROMIUM).exists():
        parser.error(f"--browser needs Chromium at {CHROMIUM}")
    return args


# ========================================================================= child: one database


class Client:
    """The bench's HTTP side: one aiohttp session, the token, the stdio server's echo URL."""

    def __init__(self, base: str, token: str, server_id: int) -> None:
        self.base = base
        self.token = token
        self.call_url = f"{base}/api/servers/{server_id}/tools/echo/call/?wait={WAIT}"
        self.http = None
        self.errors: list[str] = []

    async def __aenter__(self) -> Client:
        import aiohttp

        self.http = aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar(), connector=aiohttp.TCPConnector(limit=0))
        return self

    async def __aexit__(self, *exc) -> None:
        await self.http.close()

    async def call(self, text: str, times: list[float]) -> str:
        """One ?wait call; its time goes in `times` when it came back finished and succeeded."""
        t0 = time.perf_counter()
        async with self.http.post(self.call_url, json={"arguments": {"text": text}},
                                  headers={"Authorization": f"Token {self.token}"}) as resp:
            body = await resp.json(content_type=None)
        elapsed = ms_since(t0)
        if resp.status == 200 and body.get("status") == "succeeded":
            times.append(elapsed)
        else:
            self.errors.append(f"{text.split(':')[1]}, {elapsed / 1000:.1f} s: {resp.status} {str(body)[:200]}")  # series, wait
        return body.get("id", "")

    async def get(self, call_id: str) -> None:
        async with self.http.get(f"{self.base}/api/tool-calls/{call_id}/?full=0",
                                 headers={"Authorization": f"Token {self.token}"}) as resp:
            await resp.read()
            if resp.status != 200:
                raise RuntimeError(f"GET answered {resp.status}")

    async def clicks(self, username: str, server_id: int, n: int) -> list[float]:
        """(b) Click → result on the tool page, in headless Chromium, after 10 clicks to warm up."""
        from playwright.async_api import async_playwright

        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                               args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
            try:
                page = await browser.new_page()
                await page.add_init_script(SOCKET_TIMES_JS)
                await page.goto(f"{self.base}/login/")
                await page.fill("input[name=username]", username)
                await page.fill("input[name=password]", PASSWORD)
                await page.click("button[type=submit]")
                await page.wait_for_url(f"{self.base}/")
                await page.goto(f"{self.base}/servers/{server_id}/tools/echo/")
                await page.wait_for_selector("#schema-form input[name=text], #schema-form textarea[name=text]")
                for i in range(10):
                    await page.evaluate(CLICK_JS, marker("click-warm", i))
                clicks = [await page.evaluate(CLICK_JS, marker("click", i)) for i in range(n)]
                posts = await page.evaluate(POST_JS, [self.call_url.removeprefix(self.base), marker("post", 0), n])
                return clicks, posts
            finally:
                await browser.close()

    async def series(self, n: int, in_flight: int, label: str) -> tuple[list[float], float]:
        times: list[float] = []
        wall = await run_window(list(range(n)), in_flight, lambda i: self.call(marker(label, i), times))
        return times, wall


class Profiler:
    """py-spy on daphne and the worker for the length of a `with` block (raw stacks and SVGs)."""

    def __init__(self, folder: str, pids: dict[str, int], tag: str) -> None:
        self.folder, self.pids, self.tag = Path(folder) if folder else None, pids, tag
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> Profiler:
        if self.folder is None:
            return self
        self.folder.mkdir(parents=True, exist_ok=True)
        pyspy = os.environ.get("PYSPY", "/tmp/pyspy/bin/py-spy")
        for name, pid in self.pids.items():
            for fmt, ext in (("raw", "txt"), ("flamegraph", "svg")):
                self.procs.append(subprocess.Popen(
                    [pyspy, "record", "--pid", str(pid), "--rate", "200", "--gil", "--format", fmt, "--nonblocking",
                     "-o", str(self.folder / f"{self.tag}-{name}.{ext}")],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1.0)  # let py-spy attach
        return self

    def __exit__(self, *exc) -> None:
        for proc in self.procs:
            proc.send_signal(2)  # py-spy writes its output on SIGINT
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


def create_server(user):
    """The bench's stdio echo server, its tools refreshed by the worker."""
    from tools.models import Server
    from tools.runtime.tasks import server_action

    server = Server.objects.create(name="bench-stdio", transport="stdio", command=sys.executable,
                                   args=[str(BASIC_SERVER)], owner=user)
    answer = server_action.delay(server.pk, "refresh", {"reconnect": True}).get(timeout=60)
    if not answer.get("ok") or not server.tools.filter(name="echo").exists():
        raise RuntimeError(f"refreshing the bench server failed: {answer}")
    return server


def run_one(args: argparse.Namespace) -> int:
    """One database: set up, measure, write the figures as JSON to --out."""
    db = args.run_one
    data_dir = Path(tempfile.mkdtemp(prefix=f"inspector-hotpath-{db}-"))
    os.environ["INSPECTOR_DATA_DIR"] = str(data_dir)
    os.environ["DJANGO_SETTINGS_MODULE"] = "inspector.settings"
    if db == "postgres":
        os.environ["DATABASE_URL"] = args.database_url
    else:
        os.environ.pop("DATABASE_URL", None)
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    port = free_ports(1)[0]
    os.environ["PUBLIC_URL"] = f"http://127.0.0.1:{port}"
    stop_on_signals()

    import psutil

    from inspector.launch import Processes

    procs = Processes()
    try:
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        from inspector.models import ApiToken
        from tool_calls import bench_direct
        from tools.mcp.config import ServerConfig

        progress(f"{db}: migrating; starting one worker and one daphne")
        call_command("migrate", verbosity=0, interactive=False)
        start_worker(procs, data_dir, "worker")
        base = start_daphne(procs, data_dir, "daphne", port)
        user = get_user_model().objects.create_user(f"bench-{os.getpid()}", password=PASSWORD)
        server = create_server(user)
        token = ApiToken.issue(user, "bench")[1]
        pids = {child.name: child.proc.pid for child in procs.children}
        labels = {pid: name for name, pid in pids.items()}
        out: dict = {"db": db, "load_start": os.getloadavg()}

        config = ServerConfig(name="bench-stdio", transport="stdio", command=sys.executable, args=(str(BASIC_SERVER),))
        progress(f"{db}: (a) {args.calls} direct warm calls")
        out["direct"] = asyncio.run(bench_direct(config, args.calls))

        async def measure() -> None:
            async with Client(base, token, server.pk) as client:
                progress(f"{db}: warming up")
                await client.series(4 * args.in_flight, args.in_flight, "warm")
                progress(f"{db}: (w) {args.calls} sequential ?wait calls")
                out["wait"], _ = await client.series(args.calls, 1, "wait")
                progress(f"{db}: (l) {args.calls} ?wait calls, {args.in_flight} in flight")
                with Profiler(args.profile, pids, db), CpuMeter(labels) as cpu:
                    out["load"], out["load_wall_ms"] = await client.series(args.calls, args.in_flight, "load")
                out["load_cpu_ms"] = cpu.spent
                progress(f"{db}: (f) {args.calls} authenticated GETs, sequential")
                call_id = await client.call("floor", [])
                with CpuMeter(labels) as cpu:
                    for _ in range(args.calls):
                        await client.get(call_id)
                out["get_cpu_ms"] = cpu.spent.get("daphne", 0.0) / args.calls
                progress(f"{db}: (f) {args.calls} no-op Celery tasks through the worker")
                from inspector.celery import app as celery_app

                with CpuMeter(labels) as cpu:
                    for i in range(args.calls):  # on the tool calls' queue, so they go the same way
                        celery_app.send_task("celery.accumulate", args=[i], queue="tools", ignore_result=True)
                    await client.call("floor-after-tasks", [])  # the queue is FIFO: once it ran, they have
                out["task_cpu_ms"] = max(cpu.spent.get("worker", 0.0) - out["load_cpu_ms"].get("worker", 0.0) / args.calls,
                                         0.0) / args.calls
                if args.browser:
                    progress(f"{db}: (b) {args.clicks} clicks of Run on the tool page, in Chromium")
                    out["clicks"], out["page_posts"] = await client.clicks(user.username, server.pk, args.clicks)
                out["errors"] = client.errors[:5]
                out["error_count"] = len(client.errors)

        asyncio.run(measure())
        out["load_end"] = os.getloadavg()
        Path(args.out).write_text(json.dumps(out))
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception:
        for name in ("worker", "daphne"):
            if (data_dir / f"{name}.log").exists():
                print(f"--- {name}.log ends with:\n{tail(data_dir / f'{name}.log', 1500)}", file=sys.stderr)
        raise
    finally:
        procs.stop()
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
        shutil.rmtree(data_dir, ignore_errors=True)


# ======================================================================= parent: both databases


def print_report(args: argparse.Namespace, results: dict, elapsed: float) -> None:
    title = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
    cpus = os.cpu_count() or 1
    print()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {cpus} CPUs; one daphne, one worker (threads, 8); "
          f"--calls {args.calls}, {args.in_flight} in flight; echo over stdio; ms p50 / p95")
    for db, r in results.items():
        load = lambda t: " ".join(f"{x:.2f}" for x in t)  # noqa: E731
        print(f"\n{title[db]} (load average at start {load(r['load_start'])}, at end {load(r['load_end'])})")
        direct, wait, loaded = r["direct"], r["wait"], r["load"]
        cpu = {part: r["load_cpu_ms"].get(part, 0.0) / args.calls for part in CPU_PARTS}
        total = sum(cpu.values())
        rate = args.calls / (r["load_wall_ms"] / 1000)
        over = p50(wait) - p50(direct)
        print(f"  (a) direct warm mcp call                 {pair(direct)}")
        print(f"  (w) POST ?wait, sequential               {pair(wait)}   = direct + {num(over)} p50, "
              f"x{p50(wait) / p50(direct):.1f}")
        print(f"  (l) {args.in_flight} in flight: calls/s               {rate:.1f}   (end to end {pair(loaded)}; "
              f"errors {r['error_count']})")
        print("      CPU ms per call: " + ", ".join(f"{part} {num(ms)}" for part, ms in cpu.items()) + f"; all {num(total)}")
        if "clicks" in r:
            clicks = [c["total"] for c in r["clicks"]]
            print(f"  (b) browser: click → result on the tool page {pair(clicks)}   target p50 <= {TARGET_CLICK_MS:g}: "
                  f"{'PASS' if p50(clicks) <= TARGET_CLICK_MS else 'MISS'}")
            parts = {part: [c[part] for c in r["clicks"] if c[part] is not None] for part in ("sent", "post", "first", "result")}
            said = {part: num(p50(times)) if times else "-" for part, times in parts.items()}
            print(f"      from the click, p50: POST sent {said['sent']}, answered {said['post']}, the call's first event {said['first']}, "
                  f"its result event {said['result']}, its result shown {num(p50(clicks))}")
            if r["page_posts"]:
                print(f"      the page's POST ?wait alone (session cookie + CSRF), sequential: {pair(r['page_posts'])}")
        print(f"  (f) one no-op Celery task costs the worker {num(r['task_cpu_ms'])} ms CPU (delivery, ack, the threads pool)")
        print(f"  (f) one authenticated GET costs daphne   {num(r['get_cpu_ms'])} ms CPU; "
              f"{cpus} CPUs / {num(total)} ms per call = {1000 * cpus / total:.0f} calls/s at best")
        print(f"  targets: ?wait p50 over direct <= {TARGET_OVER_DIRECT[db]:g}: {num(over)} "
              f"{'PASS' if over <= TARGET_OVER_DIRECT[db] else 'MISS'}; CPU/call <= {TARGET_CPU_MS:g}: {num(total)} "
              f"{'PASS' if total <= TARGET_CPU_MS else 'MISS'}; calls/s >= {TARGET_RATE:g}: {rate:.1f} "
              f"{'PASS' if rate >= TARGET_RATE else 'MISS'}")
        if rate < TARGET_RATE:
            floor = 1000 * cpus / TARGET_RATE
            print(f"      {TARGET_RATE:g} calls/s on {cpus} CPUs needs <= {floor:.0f} ms CPU per call in all; "
                  f"the MCP server alone takes {num(cpu['MCP servers'])}, daphne {num(cpu['daphne'])} "
                  f"(of which {num(r['get_cpu_ms'])} is the least one request costs), worker {num(cpu['worker'])} "
                  f"(of which {num(r['task_cpu_ms'])} is the least one task costs)")
        if total > TARGET_CPU_MS:
            floors = r["get_cpu_ms"] + r["task_cpu_ms"] + sum(cpu[part] for part in ("MCP servers", "PostgreSQL", "Redis"))
            print(f"      CPU/call's floor: one request + one task + the MCP server, PostgreSQL and Redis as measured = "
                  f"{num(floors)} of the {TARGET_CPU_MS:g} allowed; the call's own work beyond them: {num(total - floors)}")
        for sample in r["errors"]:
            print(f"      error: {sample}")
    print(f"\nTotal bench time {elapsed:.0f} s.")


def main() -> int:
    args = parse_args()
    if args.run_one:
        return run_one(args)
    stop_on_signals()
    started = time.monotonic()

    from inspector.launch import Processes, start_embedded_redis

    procs = Processes()
    work = Path(tempfile.mkdtemp(prefix="inspector-hotpath-"))
    pg_name = f"bench_hotpath_{os.getpid()}"
    pg_created = False
    results: dict[str, dict] = {}
    try:
        redis_url = os.environ.get("REDIS_URL", "") or start_embedded_redis(procs, work)
        for db in ([args.only] if args.only else DATABASES):
            url = ""
            if db == "postgres":
                create_database(args.postgres, pg_name)
                pg_created = True
                url = database_url(args.postgres, pg_name)
            env = dict(os.environ, REDIS_URL=redis_url,
                       REDIS_PREFIX=f"{os.environ.get('REDIS_PREFIX', '')}hot{os.getpid()}{db}:")
            command = [sys.executable, str(Path(__file__).resolve()), "--run-one", db, "--database-url", url,
                       "--out", str(work / f"{db}.json"), "--calls", str(args.calls),
                       "--in-flight", str(args.in_flight), "--profile", args.profile, "--clicks", str(args.clicks)]
            command += ["--browser"] if args.browser else []
            if procs.start(f"bench-{db}", command, env=env).wait() != 0:
                raise RuntimeError(f"the {db} run failed; its output is above")
            results[db] = json.loads((work / f"{db}.json").read_text())
        print_report(args, results, time.monotonic() - started)
        return 0
    except KeyboardInterrupt:
        return 130
    except RuntimeError as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        return 1
    finally:
        procs.stop(timeout=60)
        if pg_created:
            drop_database(args.postgres, pg_name)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
