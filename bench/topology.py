#!/usr/bin/env python
"""The team topology, tested: N web processes and M workers on one PostgreSQL and one Redis,
a worker host lost and a web process restarted mid-run, and not one accepted call lost.

    .venv/bin/python bench/topology.py [--calls 600] [--in-flight 16] [--webs 2] [--workers 3]
                                       [--postgres URL] [--redis URL]

Every process is started as deploy/ starts it: `python -m inspector.launch web` and
`python -m inspector.launch worker --hostname ...` (each supervised by its own launcher), each
with a data folder of its own, as on separate hosts: they share only PostgreSQL, Redis and the
secrets (SECRET_KEY, FIELD_ENCRYPTION_KEY) from the environment. Migrations run once, before any
process starts (the upgrade step). PostgreSQL gets a database of its own (created on --postgres,
default postgres://postgres@127.0.0.1:5432/postgres, dropped at the end); Redis (--redis, default
REDIS_URL or redis://127.0.0.1:6379/0) a key prefix of its own.

The run: --calls API calls of the basic test server's `slow` tool (0.2 s, over Streamable HTTP),
--in-flight at a time, spread over the web processes in turn as a proxy without sticky sessions
would (a web process that refuses the connection is skipped, as a proxy's health check would).
After a third of the calls, worker 1's whole host is lost (its launcher and Celery worker
SIGKILLed, nothing restarts them); after two thirds, web 2 is restarted (SIGTERM, started again
on its port). Then every accepted call must end `succeeded`: the calls the lost worker held are
run again by the other workers' sweep once their lease passes (the short timeouts below keep
that under a minute). Prints the figures; exits 1 if any accepted call was lost or did not succeed.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psutil

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from inspector.launch import Processes, free_port, stop_tree  # noqa: E402

# Short leases, so the calls of a lost worker are run again within the run (the defaults give a
# running call 15 + 60 + 30 s before the sweep takes it). Settings a team may set the same way.
TIMEOUTS = {"MCP_CONNECT_TIMEOUT": "5", "MCP_CALL_TIMEOUT": "5", "CALL_LEASE_MARGIN": "5",
            "SWEEP_INTERVAL": "2", "CALL_RESEND_AFTER": "5", "LOG_LEVEL": "WARNING"}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=600)
    p.add_argument("--in-flight", type=int, default=16)
    p.add_argument("--webs", type=int, default=2)
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=4, help="threads per worker (default 4)")
    p.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432/postgres")
    p.add_argument("--redis", default=os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0")
    p.add_argument("--keep-data", action="store_true", help="keep the data folders (each process's log)")
    args = p.parse_args()
    if args.webs < 2 or args.workers < 2 or args.calls < 10:
        p.error("--webs and --workers must be at least 2 (one of each is disturbed), --calls at least 10")
    return args


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def status_of(url: str, headers: dict[str, str] | None = None) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as err:
        return err.code
    except OSError:
        return 0


def wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")


class Host:
    """One supervised role on a 'host' of its own (its own data folder and log)."""

    def __init__(self, procs: Processes, name: str, role_args: list[str], env: dict[str, str], root: Path) -> None:
        self.name, self.role_args, self.procs = name, role_args, procs
        self.data = root / name
        self.data.mkdir(parents=True, exist_ok=True)
        self.env = dict(env, INSPECTOR_DATA_DIR=str(self.data))
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self.data / "launch.log", "ab") as log:
            self.proc = self.procs.start(self.name, [sys.executable, "-m", "inspector.launch", *self.role_args],
                                         env=self.env, stdout=log, stderr=subprocess.STDOUT)

    def lose(self) -> None:
        """The host is gone: SIGKILL the launcher and everything it started, nothing restarts them."""
        assert self.proc is not None
        tree = psutil.Process(self.proc.pid).children(recursive=True) + [psutil.Process(self.proc.pid)]
        for p in tree:
            p.kill()
        psutil.wait_procs(tree, timeout=10)

    def restart(self) -> None:
        assert self.proc is not None
        stop_tree([self.proc], timeout=20)
        self.start()


def main() -> int:
    args = parse_args()
    root = Path(tempfile.mkdtemp(prefix="inspector-topology-"))
    db_name = f"inspector_topology_{os.getpid()}"
    admin_url = args.postgres
    database_url = urlunsplit(urlsplit(admin_url)._replace(path=f"/{db_name}"))
    env = {k: v for k, v in os.environ.items() if k not in {"INSPECTOR_DB_NAME", "DJANGO_ALLOW_ASYNC_UNSAFE"}}
    env.update(TIMEOUTS, DATABASE_URL=database_url, REDIS_URL=args.redis, REDIS_PREFIX=f"topology{os.getpid()}:",
               SECRET_KEY=secrets.token_urlsafe(48),
               FIELD_ENCRYPTION_KEY=base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
               ALLOWED_HOSTS="127.0.0.1,localhost")
    web_ports = [free_port() for _ in range(args.webs)]
    env["PUBLIC_URL"] = f"http://127.0.0.1:{web_ports[0]}"  # the proxy's address in a real deployment
    env["SANDBOX_ORIGIN"] = f"http://localhost:{free_port()}"
    signal.signal(signal.SIGTERM, lambda *_: signal.raise_signal(signal.SIGINT))

    import psycopg

    with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'CREATE DATABASE "{db_name}"')
    procs = Processes()
    mcp = None
    ok = False
    try:
        started = time.monotonic()
        progress(f"migrate once ({database_url})")
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=BASE_DIR,
                       env=dict(env, INSPECTOR_DATA_DIR=str(root / "migrate")), check=True)
        os.environ.update(env, INSPECTOR_DATA_DIR=str(root / "bench"), DJANGO_SETTINGS_MODULE="inspector.settings")
        import django

        django.setup()
        from django.contrib.auth import get_user_model

        from inspector.models import ApiToken
        from tests.mcp_servers.launch import start_server
        from tools.models import Server, ToolCall

        mcp = start_server("basic.py", "http")
        user = get_user_model().objects.create_user(f"topology-{os.getpid()}")
        _, key = ApiToken.issue(user, "topology")
        server = Server.objects.create(name="topology-http", transport="streamable_http", url=mcp.url, owner=user)
        headers = {"Authorization": f"Token {key}", "Content-Type": "application/json"}

        webs = [Host(procs, f"web{i + 1}", ["web"], dict(env, WEB_PORT=str(port), SANDBOX_PORT=str(port)), root)
                for i, port in enumerate(web_ports)]
        workers = [Host(procs, f"worker{i + 1}", ["worker", "--hostname", f"topology-w{i + 1}-{os.getpid()}@localhost",
                                                   "--concurrency", str(args.concurrency)], env, root)
                   for i in range(args.workers)]
        for host in webs + workers:
            host.start()
        urls = [f"http://127.0.0.1:{port}" for port in web_ports]
        for url in urls:
            wait(lambda url=url: status_of(f"{url}/healthz?role=web") == 200, 90, f"{url} to be healthy")
        wait(lambda: status_of(f"{urls[0]}/healthz") == 200, 90, "the workers to answer")
        progress(f"{args.webs} web + {args.workers} workers up in {time.monotonic() - started:.1f} s")

        def post(path: str, body: dict, prefer: int) -> tuple[int, dict, int]:
            """POST to the web processes in turn from `prefer`, skipping one that refuses: (status, body, which)."""
            for k in range(len(urls) * 20):
                which = (prefer + k) % len(urls)
                request = urllib.request.Request(urls[which] + path, data=json.dumps(body).encode(), headers=headers)
                try:
                    with urllib.request.urlopen(request, timeout=30) as r:
                        return r.status, json.loads(r.read()), which
                except urllib.error.HTTPError as err:
                    return err.code, json.loads(err.read() or b"{}"), which
                except OSError:
                    time.sleep(0.05 if k % len(urls) else 0.25)
            raise RuntimeError(f"no web process accepted {path}")

        status, body, _ = post(f"/api/servers/{server.pk}/refresh/", {}, 0)
        wait(lambda: server.tools.filter(name="slow").exists(), 60, f"the server's tools (refresh answered {status} {body})")

        accepted: list[tuple[str, int]] = []
        refused: list[tuple[int, dict]] = []
        lock = threading.Lock()
        posted = 0
        events: list[str] = []

        def disturb(at: int) -> None:
            """Called by the poster that posted call number `at`: the two disturbances, while posting goes on."""
            if at == args.calls // 3:
                workers[0].lose()
                events.append(f"after {at} calls: {workers[0].name}'s host lost (SIGKILL, not restarted)")
            elif at == 2 * args.calls // 3:
                down = time.monotonic()
                webs[-1].restart()
                wait(lambda: status_of(f"{urls[-1]}/healthz?role=web") == 200, 90, f"{webs[-1].name} back")
                events.append(f"after {at} calls: {webs[-1].name} restarted (SIGTERM, started again), "
                              f"healthy again in {time.monotonic() - down:.1f} s")
            else:
                return
            progress(events[-1])

        def one(i: int) -> None:
            nonlocal posted
            status, body, which = post(f"/api/servers/{server.pk}/tools/slow/call/",
                                       {"arguments": {"seconds": 0.2, "tag": f"t{i}"}}, i % len(urls))
            with lock:
                posted += 1
                at = posted
                (accepted.append((body["id"], which)) if status == 202 else refused.append((status, body)))
            disturb(at)

        run_started = time.monotonic()
        with ThreadPoolExecutor(args.in_flight) as pool:
            list(pool.map(one, range(args.calls)))
        posting = time.monotonic() - run_started
        progress(f"{len(accepted)} calls accepted in {posting:.1f} s; waiting for every one to end")
        ids = [i for i, _ in accepted]

        def ended() -> int:
            return ToolCall.objects.filter(pk__in=ids, status__in=ToolCall.FINAL).count()

        try:
            wait(lambda: ended() == len(ids), 180, "every accepted call to end")
        except RuntimeError as exc:
            progress(str(exc))
        drained = time.monotonic() - run_started
        by_status: dict[str, int] = {}
        for row in ToolCall.objects.filter(pk__in=ids).values("status"):
            by_status[row["status"]] = by_status.get(row["status"], 0) + 1
        rerun = ToolCall.objects.filter(pk__in=ids, attempts__gt=1).count()
        lost = len(ids) - ended()
        per_web = [sum(1 for _, w in accepted if w == k) for k in range(len(urls))]
        ok = lost == 0 and not refused and by_status.get("succeeded", 0) == len(ids) == args.calls

        print(f"\nTopology: {args.webs} web processes, {args.workers} workers (threads x{args.concurrency}), "
              f"PostgreSQL {database_url.rsplit('@', 1)[-1]}, Redis {args.redis.rsplit('@', 1)[-1]}; "
              f"each process a data folder of its own")
        for line in events:
            print(f"  {line}")
        print(f"  calls posted        {args.calls} at {args.in_flight} in flight, in {posting:.1f} s "
              f"({args.calls / posting:.1f} calls/s)")
        print(f"  accepted per web    {per_web} (refused: {len(refused)}{' ' + str(refused[:3]) if refused else ''})")
        print(f"  ended by status     {dict(sorted(by_status.items()))}")
        print(f"  run again (attempts > 1, the lost worker's calls): {rerun}")
        print(f"  all ended after     {drained:.1f} s from the first call")
        print(f"  lost                {lost}")
        print(f"\n{'OK' if ok else 'FAILED'}: {'0 lost, every accepted call succeeded' if ok else 'see above'}")
        return 0 if ok else 1
    except KeyboardInterrupt:
        return 130
    finally:
        procs.stop(timeout=20)
        if mcp is not None:
            mcp.stop()
        from django.db import connections

        connections.close_all()
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        if args.keep_data or not ok:
            print(f"logs kept in {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
