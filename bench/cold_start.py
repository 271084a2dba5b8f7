#!/usr/bin/env python
"""How long from `make run` to a green `/healthz`? Starts the whole app N times and times it.

    .venv/bin/python bench/cold_start.py [--repeat 5] [--command all] [--restarts] [--log DIR]

Each run starts `python -m inspector.launch all` as `make run` does (embedded Valkey, SQLite,
daphne, one Celery worker) with a fresh INSPECTOR_DATA_DIR (migrations run on an empty database
and the admin account is created), PUBLIC_URL and SANDBOX_ORIGIN on free ports, and REDIS_URL /
DATABASE_URL removed from the environment. With `--restarts` all runs share one data folder: the
first starts on an empty one and is left out of the medians, the others are restarts of an app
that has its database and admin already (a day-to-day `make run`).

`/healthz` is asked again 0.1 s after each answer (or refused connection) until one is 200, as a
load balancer would: one request at a time, because the view is synchronous and a request that
reaches daphne before a worker answers waits out the worker ping's timeout (1.5 s); requests sent
faster only queue up behind it. Then the launcher gets SIGINT, like Ctrl-C, and must stop
everything ("stop" is how long that took).

The breakdown comes from the lines the launcher and its children print, each timed as it
arrives: the embedded Valkey up, the database prepared (the admin account created; on a restart,
migrate's "No migrations to apply", ensure_admin being silent then), daphne listening, the Celery
worker ready, and `/healthz` 200. "cpu" is the CPU time (user + system) the launcher and every
process it started had spent when `/healthz` turned green: on a machine shared with other work
the wall times stretch, the CPU time much less. Medians over the runs are printed at the end;
`--log DIR` keeps each run's timed output.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
PYTHON = str(BASE_DIR / ".venv" / "bin" / "python") if (BASE_DIR / ".venv" / "bin" / "python").exists() else sys.executable

# Milestones, in the order they usually happen: the first output line matching each.
MILESTONES = {
    "redis": re.compile(r"Embedded Valkey on"),
    # migrate and ensure_admin done (on a restart: migrate's last line; ensure_admin is silent then)
    "prepared": re.compile(r"Created admin account|No admin account exists|No migrations to apply"),
    "daphne": re.compile(r"Listening on TCP address|is running at"),  # daphne's own line, else the launcher's
    "worker": re.compile(r"\S+@\S+ ready\."),
}
POLL_EVERY = 0.1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Run:
    """One cold start: the launcher's output lines timed as they arrive, and the first 200."""

    def __init__(self, command: str, data_dir: Path, log: Path | None) -> None:
        self.data_dir = data_dir
        self.port, self.sandbox_port = free_port(), free_port()
        env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DATABASE_URL", "REDIS_PREFIX"}}
        env.update(
            INSPECTOR_DATA_DIR=str(self.data_dir),
            PUBLIC_URL=f"http://127.0.0.1:{self.port}",
            SANDBOX_ORIGIN=f"http://localhost:{self.sandbox_port}",
            INSPECTOR_ADMIN_USERNAME="admin",
            INSPECTOR_ADMIN_PASSWORD="cold-start-bench-password",
            PYTHONUNBUFFERED="1",
        )
        self.log = open(log, "w") if log else None
        self.times: dict[str, float] = {}
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "inspector.launch", command], cwd=BASE_DIR, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,  # SIGINT goes to the launcher only, as Ctrl-C's would with its own handling
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            elapsed = time.monotonic() - self.started
            line = raw.decode(errors="replace").rstrip()
            if self.log:
                self.log.write(f"{elapsed:8.3f} {line}\n")
            for name, pattern in MILESTONES.items():
                if name not in self.times and pattern.search(line):
                    self.times[name] = elapsed

    def _green(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=10) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):  # refused before daphne listens; 503 until healthy
            return False

    def wait_green(self, timeout: float) -> None:
        deadline = self.started + timeout
        while not self._green():
            if self.proc.poll() is not None:
                raise RuntimeError(f"the launcher exited with code {self.proc.returncode} before /healthz was green")
            if time.monotonic() > deadline:
                raise RuntimeError(f"/healthz not green after {timeout:.0f} s")
            time.sleep(POLL_EVERY)
        self.times["green"] = time.monotonic() - self.started
        self.times["cpu"] = self._cpu()

    def _cpu(self) -> float:
        """CPU seconds of the launcher, the children it already waited for, and the live ones."""
        import psutil

        launcher = psutil.Process(self.proc.pid)
        total = sum(launcher.cpu_times()[:4])  # its own, and its waited-for children's (migrate, …)
        for child in launcher.children(recursive=True):
            try:
                total += sum(child.cpu_times()[:2])
            except psutil.NoSuchProcess:
                pass
        return total

    def stop(self) -> float:
        """SIGINT, as Ctrl-C; returns how long the launcher took to stop everything."""
        began = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                print("  the launcher did not stop within 30 s of SIGINT; killing its group", flush=True)
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        stopped = time.monotonic() - began
        if self.log:
            self.log.close()
        return stopped


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--command", default="all", help="the launcher's role (`all`, or its old name `run`)")
    parser.add_argument("--timeout", type=float, default=90)
    parser.add_argument("--restarts", action="store_true",
                        help="one data folder for all runs: measure restarts (the first run is left out)")
    parser.add_argument("--log", type=Path, help="a folder to keep each run's timed output in")
    args = parser.parse_args()
    if args.log:
        args.log.mkdir(parents=True, exist_ok=True)

    columns = ["redis", "prepared", "daphne", "worker", "green", "cpu"]
    print(f"python -m inspector.launch {args.command}: seconds from start ({os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f})", flush=True)
    print("  run  " + "".join(f"{c:>10}" for c in columns) + f"{'stop':>10}", flush=True)
    results: list[dict[str, float]] = []
    shared = Path(tempfile.mkdtemp(prefix="cold-start-")) if args.restarts else None
    for i in range(args.repeat + (1 if args.restarts else 0)):
        data_dir = shared or Path(tempfile.mkdtemp(prefix="cold-start-"))
        run = Run(args.command, data_dir, args.log / f"cold-start-{i + 1}.log" if args.log else None)
        try:
            run.wait_green(args.timeout)
        finally:
            stopped = run.stop()
            if not shared:
                shutil.rmtree(data_dir, ignore_errors=True)
        first_of_restarts = args.restarts and i == 0
        if not first_of_restarts:
            results.append(dict(run.times))
        cells = "".join(f"{run.times[c]:>10.2f}" if c in run.times else f"{'-':>10}" for c in columns)
        label = "new" if first_of_restarts else str(i if args.restarts else i + 1)
        print(f"  {label:>3}  {cells}{stopped:>10.2f}", flush=True)
    if shared:
        shutil.rmtree(shared, ignore_errors=True)
    medians = "".join(
        f"{statistics.median(vals):>10.2f}" if (vals := [r[c] for r in results if c in r]) else f"{'-':>10}"
        for c in columns
    )
    print(f"  med  {medians}", flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
