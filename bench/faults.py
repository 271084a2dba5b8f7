#!/usr/bin/env python
"""The fault suite as a report: run the fault scenarios on the real stack and print their figures.

    .venv/bin/python bench/faults.py [--kills 3] [--only crawl,secrets,hostile,kill,stream,chord,task,redis,load] [--postgres URL]

Each scenario is a test of the suite (bounded, asserting); this runner only repeats them and
collects what they count (tests/figures.py: a test's `record(...)` lands in the file named by
FAULTS_FIGURES). Scenarios:

  kill     a worker SIGKILLed during a slow tool call (tests/tools/test_sweep.py), `--kills` times:
           how often the tool ran, rows per call, time from the kill to the call's end
  stream   a worker SIGKILLed while the model streams (tests/faults/test_worker_killed_mid_stream.py),
           `--kills` times: LLM requests for the step, time from the kill to the turn's end
  chord    a worker SIGKILLed after storing a step that asked for tools, before their chord
           (tests/faults/test_worker_killed_before_chord.py), `--kills` times: tool runs per call,
           time from the kill to the turn's end
  task     a worker SIGKILLed while it follows an MCP task (tests/tools/test_tasks.py), `--kills`
           times: tasks started per call, rows per call, time from the kill to the call's end
  redis    Redis stopped and started under a running daphne and worker (tests/faults/test_faults.py)
  crawl    every route and WebSocket route as anonymous / another user / non-staff
           (tests/faults/test_route_crawl.py): routes, requests, problems, leaks
  secrets  every answer, page, log and LLM request grepped for secrets; every DB column raw
           (tests/faults/test_secrets_everywhere.py)
  hostile  hostile bodies to every JSON endpoint, script payloads in the browser, servers that
           print garbage / flood / hang / crash (tests/faults/test_hostile_input.py)
  load     two daphne + two workers, `--calls` API tool calls at `--concurrent` in flight and
           `--turns` chat turns at once (tests/faults/test_load.py): lost, repeated, errors,
           peak database connections per process, calls per second

Runs through `python -m inspector.launch test` (embedded Valkey unless REDIS_URL is set; SQLite
unless DATABASE_URL or --postgres is given). Exits non-zero when a scenario's test failed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
PYTHON = str(BASE_DIR / ".venv" / "bin" / "python") if (BASE_DIR / ".venv" / "bin" / "python").exists() else sys.executable

SCENARIOS = {
    "kill": ["tests/tools/test_sweep.py", "-k", "worker_killed_mid_call"],
    "stream": ["tests/faults/test_worker_killed_mid_stream.py"],
    "chord": ["tests/faults/test_worker_killed_before_chord.py"],
    "task": ["tests/tools/test_tasks.py", "-k", "worker_killed"],
    "redis": ["tests/faults/test_faults.py"],
    "crawl": ["tests/faults/test_route_crawl.py"],
    "secrets": ["tests/faults/test_secrets_everywhere.py"],
    "hostile": ["tests/faults/test_hostile_input.py"],
    "load": ["tests/faults/test_load.py"],
}


def run(name: str, args: list[str], figures: Path, env: dict[str, str]) -> tuple[bool, float]:
    started = time.monotonic()
    log = BASE_DIR / "test-artifacts" / f"bench-faults-{name}.log"
    log.parent.mkdir(exist_ok=True)
    with open(log, "wb") as out:
        code = subprocess.run([PYTHON, "-m", "inspector.launch", "test", "--", *args, "-q", "-p", "no:cacheprovider"],
                              cwd=BASE_DIR, env={**env, "FAULTS_FIGURES": str(figures)}, stdout=out,
                              stderr=subprocess.STDOUT).returncode
    elapsed = time.monotonic() - started
    print(f"  {name:8} {'passed' if code == 0 else f'FAILED (exit {code}), see {log}'} in {elapsed:.0f} s", flush=True)
    return code == 0, elapsed


def summarise(values: list) -> str:
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(values) == 1 or len(numbers) != len(values):
        return ", ".join(str(v) for v in dict.fromkeys(values))
    if len(set(numbers)) == 1:
        return f"{numbers[0]:g} (x{len(numbers)})"
    return f"min {min(numbers):g} / median {statistics.median(numbers):g} / max {max(numbers):g} (n={len(numbers)})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=3, help="how many times to run the worker-kill scenario")
    parser.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenarios")
    parser.add_argument("--postgres", default="", help="a PostgreSQL URL for the test database (default: SQLite)")
    parser.add_argument("--calls", type=int, default=500, help="load: API tool calls")
    parser.add_argument("--turns", type=int, default=20, help="load: concurrent chat turns")
    parser.add_argument("--concurrent", type=int, default=20, help="load: requests in flight")
    args = parser.parse_args()

    env = {**os.environ, "LOAD_CALLS": str(args.calls), "LOAD_TURNS": str(args.turns), "LOAD_CONCURRENT": str(args.concurrent)}
    if args.postgres:
        env["DATABASE_URL"] = args.postgres
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(chosen) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")

    figures = Path(tempfile.mkstemp(prefix="faults-", suffix=".jsonl")[1])
    load = os.getloadavg()
    print(f"Fault suite: {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"database {'PostgreSQL' if env.get('DATABASE_URL', '').startswith('postg') else 'SQLite'}", flush=True)
    results: dict[str, list[tuple[bool, float]]] = defaultdict(list)
    try:
        for name in chosen:
            for _ in range(args.kills if name in ("kill", "stream", "chord", "task") else 1):
                results[name].append(run(name, SCENARIOS[name], figures, env))
        collected: dict[tuple[str, str], list] = defaultdict(list)
        for line in figures.read_text().splitlines():
            entry = json.loads(line)
            collected[(entry["scenario"], entry["name"])].append(entry["value"])
    finally:
        figures.unlink(missing_ok=True)

    width = max([len(f"{s}: {n}") for s, n in collected] + [40])
    print()
    print(f"{'scenario: figure':{width}}  value")
    print("-" * (width + 40))
    for (scenario, name), values in collected.items():
        print(f"{scenario + ': ' + name:{width}}  {summarise(values)}")
    print("-" * (width + 40))
    for name, runs in results.items():
        passed = sum(ok for ok, _ in runs)
        print(f"{name + ': runs passed':{width}}  {passed} / {len(runs)}  ({summarise([round(t) for _, t in runs])} s each)")
    return 0 if all(ok for runs in results.values() for ok, _ in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
