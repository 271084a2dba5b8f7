"""Helpers the tests share: processes (a worker, daphne's settings), waits on conditions, a JSON
API client, a logged-in browser page, and running coroutines beside Playwright's loop.

Fixtures live in tests/conftest.py and build on these; tests import from here.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from datetime import datetime
from pathlib import Path

from inspector.launch import daphne_command, endpoint, free_port, stop_tree, worker_command  # noqa: F401

BASE_DIR = Path(__file__).resolve().parent.parent
# Logs and screenshots of a run; CI gives its two parallel runs (SQLite, PostgreSQL) one each.
ARTIFACTS = Path(os.environ.get("TEST_ARTIFACTS") or BASE_DIR / "test-artifacts").resolve()
ARTIFACTS.mkdir(parents=True, exist_ok=True)
CHROMIUM = "/usr/bin/chromium"


# Short timeouts so fault tests end quickly; the suite's servers answer in milliseconds.
WORKER_SETTINGS = {"MCP_CALL_TIMEOUT": "6", "MCP_CONNECT_TIMEOUT": "6", "CHAT_MAX_STEPS": "4", "MCP_IDLE_TIMEOUT": "120",
                   "LLM_TIMEOUT": "4",
                   # A deployment key that must never reach a user-chosen api_base.
                   "OPENAI_API_KEY": "sk-environment-secret"}


def process_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a subprocess that must share this test run's database and Redis."""
    from django.db import connection

    env = dict(os.environ)
    env.update(WORKER_SETTINGS)
    env["INSPECTOR_DB_NAME"] = str(connection.settings_dict["NAME"])
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    if extra:
        env.update(extra)
    return env


def manage_process(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    """`manage.py ARGS` in a process of its own on this run's database, as a CI job runs it."""
    return subprocess.run([sys.executable, "manage.py", *args], cwd=BASE_DIR, env=process_env(),
                          capture_output=True, text=True, timeout=timeout)


def manage_here(*args: str) -> subprocess.CompletedProcess:
    """`manage.py ARGS` through the same entry point (`execute_from_command_line`: the command line's
    parser, its exit status, its output), in this process: a new process costs 2-4 s of interpreter
    and Django start-up, and the commands' tests run dozens. Each command's test file still runs it
    once with `manage_process`, so the real process's exit status is proven too."""
    from unittest import mock

    import django
    from django.core.management import execute_from_command_line

    out, err = io.StringIO(), io.StringIO()
    code = 0
    # As in a process of its own: Django is set up once (here already: set up again, it would
    # reconfigure logging onto the captured stderr for the rest of the run), and an ORM call from
    # async code fails as it would there (the suite allows it for Playwright's loop).
    unsafe = os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    try:
        with redirect_stdout(out), redirect_stderr(err), mock.patch.object(django, "setup", lambda *a, **k: None):
            try:
                execute_from_command_line(["manage.py", *args])
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        if unsafe is not None:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = unsafe
    return subprocess.CompletedProcess(["manage.py", *args], code, out.getvalue(), err.getvalue())


def stop_process(proc: subprocess.Popen) -> None:
    stop_tree([proc], timeout=10)


def start_worker(hostname: str, extra: dict[str, str] | None = None, log_name: str = "worker.log") -> subprocess.Popen:
    """A real Celery worker subprocess (threads pool) on this run's database and queues, once it answers a ping."""
    from inspector.celery import app

    log = ARTIFACTS / log_name
    log.parent.mkdir(exist_ok=True)
    env = process_env(extra)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            worker_command(hostname, concurrency=8),
            cwd=BASE_DIR, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    pinger = app
    if extra and extra.get("REDIS_URL"):
        # A worker on a Redis of its own answers pings there, not on the suite's Redis.
        from celery import Celery

        pinger = Celery(broker=extra["REDIS_URL"], set_as_current=False)
        if extra.get("REDIS_PREFIX"):
            pinger.conf.broker_transport_options = {"global_keyprefix": extra["REDIS_PREFIX"]}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"Celery worker exited early; see {log}:\n{log.read_text()[-3000:]}")
        if pinger.control.ping(destination=[hostname], timeout=0.5):
            break
    else:
        stop_process(proc)
        raise RuntimeError(f"Celery worker did not answer a ping; see {log}")
    proc.hostname = hostname
    return proc


@contextmanager
def worker_to_kill(suite_worker: subprocess.Popen, queue: str, name: str,
                   extra: dict[str, str] | None = None) -> Iterator[subprocess.Popen]:
    """A worker of the test's own that takes `queue` (the suite's worker stops consuming it
    meanwhile), for a test to SIGKILL; stopped, if still alive, and the queue given back after."""
    from inspector.celery import app

    app.control.cancel_consumer(queue, destination=[suite_worker.hostname], reply=True)
    victim = start_worker(f"{name}-{uuid.uuid4().hex[:8]}@localhost", extra, f"{name}-worker.log")
    try:
        yield victim
    finally:
        app.control.add_consumer(queue, destination=[suite_worker.hostname], reply=True)
        if victim.poll() is None:
            stop_process(victim)


def kill_and_replace(victim: subprocess.Popen, name: str,
                     extra: dict[str, str] | None = None) -> tuple[datetime, subprocess.Popen]:
    """SIGKILL `victim` (its whole process group) and start its successor: (when it died, the successor)."""
    from django.utils import timezone

    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(10)
    killed_at = timezone.now()
    return killed_at, start_worker(f"{name}-{uuid.uuid4().hex[:8]}@localhost", extra, f"{name}-worker.log")


def wait_until_worker_is_quiet(hostname: str) -> None:
    """Let the worker finish what a test started before the database is flushed.

    A task still writing rows while the flush TRUNCATEs every table deadlocks on PostgreSQL.
    Bounded: a test may leave a call that never ends (a hung server) on purpose.
    """
    from inspector.celery import app
    from tools.models import ToolCall

    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and ToolCall.objects.exclude(status__in=ToolCall.FINAL).exists():
        time.sleep(0.05)
    inspect = app.control.inspect(destination=[hostname], timeout=1.0)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        busy = [inspect.active(), inspect.reserved(), inspect.scheduled()]
        if all(not tasks for reply in busy if reply for tasks in reply.values()):
            return
        time.sleep(0.1)


class LiveApp:
    def __init__(self, url: str, sandbox_origin: str, proc: subprocess.Popen):
        self.url = url
        self.sandbox_origin = sandbox_origin
        self.proc = proc


class Api:
    """A tiny JSON client over Django's test client."""

    def __init__(self, client):
        self.client = client

    def _send(self, method: str, path: str, data=None):
        kwargs = {"content_type": "application/json"}
        if data is not None:
            kwargs["data"] = json.dumps(data)
        return getattr(self.client, method)(path, **kwargs)

    def get(self, path):
        return self.client.get(path)

    def post(self, path, data=None):
        return self._send("post", path, data if data is not None else {})

    def patch(self, path, data):
        return self._send("patch", path, data)

    def delete(self, path):
        return self._send("delete", path)


def start_daphne(log_name: str, extra: dict[str, str] | None = None) -> LiveApp:
    """The real ASGI app under daphne (HTTP and WebSockets) on free ports, main and sandbox
    origins, on this run's database and Redis (or those `extra` names), started by the
    launcher's own command line."""
    from inspector.launch import wait_for_port

    port, sandbox_port = free_port(), free_port()
    url, sandbox = f"http://127.0.0.1:{port}", f"http://localhost:{sandbox_port}"
    log = ARTIFACTS / log_name
    log.parent.mkdir(exist_ok=True)
    env = process_env({"PUBLIC_URL": url, "SANDBOX_ORIGIN": sandbox, **(extra or {})})
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            daphne_command([endpoint(port), endpoint(sandbox_port)]),
            cwd=BASE_DIR, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        wait_for_port("127.0.0.1", port, 30, proc)
    except RuntimeError:
        stop_process(proc)
        raise RuntimeError(f"daphne did not start; see {log}:\n{log.read_text()[-3000:]}")
    return LiveApp(url, sandbox, proc)


def login_page(browser, live_app: LiveApp, username: str, password: str):
    """A new browser page, logged in through the real login form."""
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    page.goto(f"{live_app.url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_app.url}/")
    return page


def which(cmd: str) -> str | None:
    return shutil.which(cmd)


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.1, message: str = "condition"):
    """Poll until `predicate()` is truthy; return its value or fail with `message`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {message}")


def wait_for_js(page, expression: str, timeout: float = 30.0) -> object:
    """Poll a JavaScript expression from here until it is truthy.

    Not page.wait_for_function: its polling evals the expression inside the page, which the
    app's CSP (script-src 'self') forbids, so it fails whenever the first check is false."""
    from playwright.sync_api import Error as PageError

    def check():
        try:
            return page.evaluate(expression)
        except PageError:  # e.g. the page is navigating: look again
            return None

    return wait_for(check, timeout=timeout, message=expression)


def refresh_tools(server) -> None:
    """Ask the worker to connect and list the server's tools (what "Test connection" does)."""
    from tools.runtime.tasks import server_action

    answer = server_action.delay(server.pk, "refresh", {"reconnect": True}).get(timeout=30)
    assert answer["ok"], answer


def run_call(server, tool: str, arguments: dict | None = None, user=None, origin: str = "manual"):
    """Create a tool call through the pipeline and wait until it has ended."""
    from tools.runtime.lifecycle import start_tool_call
    from tools.models import ToolCall

    call = start_tool_call(server=server, tool_name=tool, arguments=arguments or {}, origin=origin, user=user or server.owner)
    wait_for(lambda: ToolCall.objects.get(pk=call.pk).is_final, message=f"tool call {tool} to finish")
    return ToolCall.objects.select_related("server").get(pk=call.pk)


def start_api_call(api, server, tool: str, arguments: dict) -> str:
    """Start a call as the tool page does (POST …/call/); its id."""
    resp = api.post(f"/api/servers/{server.pk}/tools/{tool}/call/", {"arguments": arguments})
    assert resp.status_code == 202, resp.json()
    return resp.json()["id"]


def finished_call(call_id: str, timeout: float = 30):
    """The call once it has ended, its full result loaded."""
    from tools.models import ToolCall

    wait_for(lambda: ToolCall.objects.get(pk=call_id).is_final, timeout=timeout, message="the call to end")
    return ToolCall.objects.select_related("full_result").get(pk=call_id)


def run_async(fn, *args):
    """Run `fn(*args)` (a coroutine function) to completion on a fresh loop in its own thread.

    The test thread may already hold Playwright's event loop (the session browser), where
    asgiref's async_to_sync refuses to run.
    """
    import asyncio
    import threading

    from channels.layers import channel_layers

    outcome: dict = {}

    async def run_and_close():
        from channels.db import database_sync_to_async
        from django.db import connections

        try:
            return await fn(*args)
        finally:
            # Consumers used DB connections in asgiref's executor thread: close them, or the
            # test database cannot be dropped at the end of the run.
            await database_sync_to_async(connections.close_all)()

    def target():
        # channels_redis binds locks to the loop that first used the layer: give each loop its own.
        channel_layers.backends.pop("default", None)
        try:
            outcome["value"] = asyncio.run(run_and_close())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread
            outcome["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def closing(fn):
    """`fn` for another thread (asyncio.to_thread): closes that thread's DB connections after."""

    def wrapper(*args, **kwargs):
        from django.db import connections

        try:
            return fn(*args, **kwargs)
        finally:
            connections.close_all()

    return wrapper


def streamed_body(response) -> bytes:
    """The body of a streamed response from Django's test client.

    The app streams full results with an async iterator (right for daphne, where it is served);
    the sync test client can still read it and warns that it had to: that warning is expected.
    """
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="StreamingHttpResponse must consume asynchronous iterators")
        return b"".join(response)


def open_db_connections(pids: dict[str, int]) -> dict[str, int]:
    """Database connections each process (by role) holds right now: PostgreSQL's
    pg_stat_activity (our connections name their pid), or SQLite's open database files."""
    import psutil
    from django.conf import settings
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT application_name, count(*) FROM pg_stat_activity WHERE datname = current_database() GROUP BY 1"
            )
            by_name = dict(cursor.fetchall())
        return {role: sum(n for name, n in by_name.items() if name.endswith(f":{pid}")) for role, pid in pids.items()}
    path = str(settings.DATABASES["default"]["NAME"])
    return {role: sum(1 for f in psutil.Process(pid).open_files() if f.path == path) for role, pid in pids.items()}


@contextmanager
def peak_db_connections(pids: dict[str, int]) -> Iterator[dict[str, int]]:
    """The most database connections each process held while the block ran (sampled every 50 ms)."""
    import threading

    peak = {role: 0 for role in pids}
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            for role, n in open_db_connections(pids).items():
                peak[role] = max(peak[role], n)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peak
    finally:
        stop.set()
        sampler.join(5)
