#!/usr/bin/env python
"""What does a load test cost per call beyond the server? (issue 29.5)

    .venv/bin/python bench/loadtest.py [--calls 1000] [--concurrency 1,8,32] [--ms 0] [--use-env] [--keep-data]

Self-contained like bench/tool_calls.py (whose setup it reuses): a temporary data dir with a fresh
SQLite database (DATABASE_URL only with --use-env), an embedded Valkey unless REDIS_URL is set,
ONE Celery worker subprocess (threads, concurrency 8), and the surface test server
(tests/mcp_servers/surface.py) over stdio, spawned by the worker. For each concurrency it runs a
load test exactly as the page and `manage.py loadtest` do (review/loadtest.py: a LoadRun driven by
the review.tasks.run_load_test task on the worker, each call an ordinary stored tool call) of the
`slow` tool with `ms` milliseconds of server time, and prints:

- calls/s, end-to-end p50/p95 (queued → finished), worker p50 (the pipeline's started → finished),
  wire p50/p95 (the server's tools/call response latency in the JSON-RPC log);
- overhead per call = end-to-end p50 − wire p50: what the inspector's pipeline and the load
  test's driver add to each call beyond the server.

Note the driver itself takes one of the worker's 8 threads for the whole run.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from bench.tool_calls import prepare_env, progress, start_worker, tail  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000, help="calls per run (default 1000)")
    parser.add_argument("--concurrency", default="1,8,32", help="comma-separated concurrencies (default 1,8,32)")
    parser.add_argument("--ms", type=int, default=0, help="server time per call, ms (default 0)")
    parser.add_argument("--use-env", action="store_true", help="use DATABASE_URL from the environment")
    parser.add_argument("--keep-data", action="store_true", help="keep the temp data dir")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    data_dir = prepare_env(args)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: signal.raise_signal(signal.SIGINT))
    from inspector.launch import Processes, start_embedded_redis

    worker_procs, redis_procs = Processes(), Processes()
    try:
        if not os.environ.get("REDIS_URL"):
            os.environ["REDIS_URL"] = start_embedded_redis(redis_procs, data_dir)
        os.environ.setdefault("LOADTEST_MAX_CALLS", str(max(args.calls, 10_000)))
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        from review import loadtest
        from review.models import LoadRun
        from tests.mcp_servers.launch import server_path
        from tools.models import Server
        from tools.runtime.tasks import server_action

        progress(f"data dir {data_dir}; migrating")
        call_command("migrate", verbosity=0, interactive=False)
        start_worker(worker_procs, data_dir)
        user = get_user_model().objects.create_user(f"bench-load-{os.getpid()}", is_staff=True)
        state = data_dir / "surface-variant"
        state.write_text("v1")
        server = Server.objects.create(name=f"bench-load-{os.getpid()}", transport="stdio", command=sys.executable,
                                       args=[server_path("surface.py"), "--state", str(state)], owner=user)
        answer = server_action.delay(server.pk, "refresh", {"reconnect": True}).get(timeout=60)
        assert answer["ok"], answer
        # Warm-up: the connection, the tokenizer, the tables.
        warm = loadtest.create(server, "slow", {"ms": args.ms}, 20, 4, user)
        _wait(warm)
        print(f"\nload test of slow(ms={args.ms}) × {args.calls} per run; 1 worker (threads, 8); "
              f"{'DATABASE_URL' if args.use_env and os.environ.get('DATABASE_URL') else 'SQLite'}")
        print(f"{'C':>4} {'calls/s':>8} {'e2e p50':>8} {'e2e p95':>8} {'worker p50':>10} {'wire p50':>8} {'wire p95':>8} {'overhead p50':>12}")
        for c in [int(x) for x in args.concurrency.split(",") if x.strip()]:
            run = loadtest.create(server, "slow", {"ms": args.ms}, args.calls, c, user)
            run = _wait(run)
            f = run.stats
            e2e, wire, worker = f["end_to_end_ms"], f["wire_ms"], f["worker_ms"]
            overhead = round(e2e["p50"] - wire["p50"], 2) if e2e["p50"] is not None and wire["p50"] is not None else None
            print(f"{c:>4} {f['calls_per_s']:>8} {e2e['p50']:>8} {e2e['p95']:>8} {worker['p50']:>10} {wire['p50']:>8} "
                  f"{wire['p95']:>8} {overhead:>12}" + (f"  errors {f['errors_by_kind']}" if f["errors"] else ""))
            assert run.status == LoadRun.Status.SUCCEEDED, run.error
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception:
        print(f"bench failed; the worker's log ends with:\n{tail(data_dir / 'worker.log')}", file=sys.stderr)
        raise
    finally:
        worker_procs.stop()
        redis_procs.stop()
        if not args.keep_data:
            import shutil

            shutil.rmtree(data_dir, ignore_errors=True)


def _wait(run):
    from review.models import LoadRun

    while True:
        run = LoadRun.objects.get(pk=run.pk)
        if not run.is_active:
            return run
        time.sleep(0.5)


if __name__ == "__main__":
    sys.exit(main())
