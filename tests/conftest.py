"""Fixtures the whole suite builds on: a real Celery worker and a real daphne server, both
subprocesses bound to the test database and this run's Redis; users; API clients; Chromium.

Tests that use the worker or the live app need committed data: mark them
`@pytest.mark.django_db(transaction=True)`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

# Playwright's sync API runs an event loop in the test thread; the ORM calls the tests make
# around it are still synchronous.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

# Property tests explore new examples on every local run; in CI they replay a fixed sequence,
# so a landing never depends on luck (a counterexample found locally becomes a fixed test).
from hypothesis import settings as hypothesis_settings  # noqa: E402

hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    hypothesis_settings.load_profile("ci")

from tests.fake_llm import fake_llm, fake_llm_server  # noqa: E402,F401  (fixtures)

BASE_DIR = Path(__file__).resolve().parent.parent
ARTIFACTS = BASE_DIR / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"


def pytest_configure(config):
    if not os.environ.get("REDIS_URL"):
        raise pytest.UsageError(
            "REDIS_URL is not set. Run the suite with `make test` (it starts an embedded Redis), "
            "or set REDIS_URL to a Redis you can use."
        )


def _free_port() -> int:
    from inspector.launch import free_port

    return free_port()


# Short timeouts so fault tests end quickly; the suite's servers answer in milliseconds.
WORKER_SETTINGS = {"MCP_CALL_TIMEOUT": "6", "MCP_CONNECT_TIMEOUT": "6", "CHAT_MAX_STEPS": "4", "MCP_IDLE_TIMEOUT": "120",
                   "LLM_TIMEOUT": "4",
                   # A deployment key that must never reach a user-chosen api_base.
                   "OPENAI_API_KEY": "sk-environment-secret"}


def _process_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a subprocess that must share this test run's database and Redis."""
    from django.db import connection

    env = dict(os.environ)
    env.update(WORKER_SETTINGS)
    env["INSPECTOR_DB_NAME"] = str(connection.settings_dict["NAME"])
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    if extra:
        env.update(extra)
    return env


def _stop(proc: subprocess.Popen) -> None:
    from inspector.launch import Processes

    procs = Processes()
    procs.procs.append(("proc", proc))
    procs.stop(timeout=10)


@pytest.fixture(scope="session")
def celery_worker(django_db_setup, django_db_blocker):
    """A real Celery worker subprocess (threads pool) consuming this run's queues."""
    from inspector.celery import app

    log = ARTIFACTS / "worker.log"
    log.parent.mkdir(exist_ok=True)
    hostname = f"testworker-{os.getpid()}@localhost"
    with django_db_blocker.unblock():
        env = _process_env()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "celery", "-A", "inspector", "worker",
                "--pool", "threads", "--concurrency", "8", "--loglevel", "INFO",
                "--queues", "default,tools,llm", "--hostname", hostname, "--without-gossip", "--without-mingle",
            ],
            cwd=BASE_DIR, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"Celery worker exited early; see {log}:\n{log.read_text()[-3000:]}")
        replies = app.control.ping(destination=[hostname], timeout=0.5)
        if replies:
            break
    else:
        _stop(proc)
        raise RuntimeError(f"Celery worker did not answer a ping; see {log}")
    proc.hostname = hostname
    yield proc
    _stop(proc)


def _wait_until_worker_is_quiet(hostname: str) -> None:
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


@pytest.fixture(autouse=True)
def _quiet_worker_before_flush(request):
    """For tests that use the worker: wait for it to go idle before the test's teardown flush."""
    marker = request.node.get_closest_marker("django_db")
    uses_worker = "celery_worker" in request.fixturenames
    if not (uses_worker and marker and marker.kwargs.get("transaction")):
        yield
        return
    # Set the database up first, so that it is torn down (flushed) after this fixture's wait.
    request.getfixturevalue("_django_db_helper")
    worker = request.getfixturevalue("celery_worker")
    _retry_flush_on_deadlock()
    yield
    _wait_until_worker_is_quiet(worker.hostname)


def _retry_flush_on_deadlock() -> None:
    """A background write (a JSON-RPC frame, a late notification) can still meet the flush's
    TRUNCATE on PostgreSQL; PostgreSQL then aborts one of them. Try the flush again."""
    from django.db import OperationalError
    from django.test import TransactionTestCase

    original = TransactionTestCase._fixture_teardown
    if getattr(original, "retries_deadlocks", False):
        return

    def _fixture_teardown(self):
        for attempt in range(5):
            try:
                return original(self)
            except OperationalError as exc:
                if "deadlock" not in str(exc) or attempt == 4:
                    raise
                time.sleep(0.2 * (attempt + 1))

    _fixture_teardown.retries_deadlocks = True
    TransactionTestCase._fixture_teardown = _fixture_teardown


class LiveApp:
    def __init__(self, url: str, sandbox_origin: str, proc: subprocess.Popen):
        self.url = url
        self.sandbox_origin = sandbox_origin
        self.proc = proc


@pytest.fixture(scope="session")
def live_app(django_db_setup, django_db_blocker):
    """The real ASGI app under daphne (HTTP and WebSockets) on free ports, main and sandbox origins."""
    from inspector.launch import wait_for_port

    port, sandbox_port = _free_port(), _free_port()
    url, sandbox = f"http://127.0.0.1:{port}", f"http://localhost:{sandbox_port}"
    log = ARTIFACTS / "daphne.log"
    log.parent.mkdir(exist_ok=True)
    with django_db_blocker.unblock():
        env = _process_env({"PUBLIC_URL": url, "SANDBOX_ORIGIN": sandbox})
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-e", f"tcp:port={port}:interface=127.0.0.1",
             "-e", f"tcp:port={sandbox_port}:interface=127.0.0.1", "inspector.asgi:application"],
            cwd=BASE_DIR, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        wait_for_port("127.0.0.1", port, 30, proc)
    except RuntimeError:
        raise RuntimeError(f"daphne did not start; see {log}:\n{log.read_text()[-3000:]}")
    yield LiveApp(url, sandbox, proc)
    _stop(proc)


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-pass-123")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user("bob", password="bob-pass-123")


@pytest.fixture
def staff_user(django_user_model):
    return django_user_model.objects.create_user("stella", password="stella-pass-123", is_staff=True)


@pytest.fixture
def admin_user(django_user_model):
    return django_user_model.objects.create_superuser("root", "root@example.com", "root-pass-123")


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


@pytest.fixture
def api(client, user):
    client.force_login(user)
    return Api(client)


@pytest.fixture
def staff_api(client, staff_user):
    client.force_login(staff_user)
    return Api(client)


@pytest.fixture
def browser():
    """Headless Debian Chromium driven by Playwright (a Playwright browser download does not work here).

    Function-scoped: Playwright's sync API keeps an event loop running in the test thread for
    as long as it is open, which would break every later test that runs its own loop.
    """
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing in CI: `make test` should have installed it.")
        print(f"\nSKIP browser tests: {CHROMIUM} is not installed and could not be installed.")
        pytest.skip(f"{CHROMIUM} is not installed (make test installs it where apt-get is available)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"],
        )
        yield browser
        browser.close()


@pytest.fixture
def screenshots() -> Path:
    path = ARTIFACTS / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


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


# --- MCP test servers -------------------------------------------------------------------------

@pytest.fixture(scope="session")
def app_server_http():
    """The MCP App test server over Streamable HTTP, for the whole session."""
    from tests.mcp_servers.launch import start_server

    server = start_server("app.py", "http")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def basic_server_http():
    from tests.mcp_servers.launch import start_server

    server = start_server("basic.py", "http")
    yield server
    server.stop()


@pytest.fixture
def app_server(app_server_http, user):
    """A Server row for the App test server, owned by `user`."""
    from tools.models import Server

    return Server.objects.create(name="apps", transport="streamable_http", url=app_server_http.url, owner=user)


@pytest.fixture
def basic_server(basic_server_http, user):
    from tools.models import Server

    return Server.objects.create(name="basic", transport="streamable_http", url=basic_server_http.url, owner=user)


@pytest.fixture
def stdio_server(staff_user):
    """The basic test server over stdio (a staff user's, since stdio runs a command on the host)."""
    from tests.mcp_servers.launch import server_path
    from tools.models import Server

    return Server.objects.create(
        name="stdio-basic", transport="stdio", command=sys.executable, args=[server_path("basic.py")],
        owner=staff_user, shared=True,
    )


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.1, message: str = "condition"):
    """Poll until `predicate()` is truthy; return its value or fail with `message`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {message}")


def refresh_tools(server) -> None:
    """Ask the worker to connect and list the server's tools (what "Test connection" does)."""
    from tools.tasks import server_action

    answer = server_action.delay(server.pk, "refresh", {"reconnect": True}).get(timeout=30)
    assert answer["ok"], answer


def run_call(server, tool: str, arguments: dict | None = None, user=None, origin: str = "manual"):
    """Create a tool call through the pipeline and wait until it has ended."""
    from tools.api import start_tool_call
    from tools.models import ToolCall

    call = start_tool_call(server=server, tool_name=tool, arguments=arguments or {}, origin=origin, user=user or server.owner)
    wait_for(lambda: ToolCall.objects.get(pk=call.pk).is_final, message=f"tool call {tool} to finish")
    return ToolCall.objects.select_related("server").get(pk=call.pk)


NPM_SERVERS = BASE_DIR / "tests" / "npm_servers"


@pytest.fixture(scope="session")
def vanilla_app_http():
    """The official example App server `@modelcontextprotocol/server-basic-vanillajs`, run with Node."""
    from inspector.launch import free_port, wait_for_port

    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI"):
            pytest.fail("Node.js is missing in CI.")
        pytest.skip("Node.js is not installed")
    entry = NPM_SERVERS / "node_modules/@modelcontextprotocol/server-basic-vanillajs/dist/index.js"
    if not entry.exists():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=NPM_SERVERS, check=True, capture_output=True)
    port = free_port()
    log = open(ARTIFACTS / "vanilla-server.log", "wb")
    proc = subprocess.Popen([node, str(entry)], cwd=NPM_SERVERS, env={**os.environ, "PORT": str(port)},
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    wait_for_port("127.0.0.1", port, 30, proc)
    proc.url = f"http://127.0.0.1:{port}/mcp"
    yield proc
    _stop(proc)
    log.close()


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


@pytest.fixture(scope="session")
def compat_server_http():
    from tests.mcp_servers.launch import start_server

    server = start_server("compat.py", "http")
    yield server
    server.stop()


@pytest.fixture
def compat_server(compat_server_http, user):
    from tools.models import Server

    return Server.objects.create(name="compat", transport="streamable_http", url=compat_server_http.url, owner=user)


def closing(fn):
    """`fn` for another thread (asyncio.to_thread): closes that thread's DB connections after."""

    def wrapper(*args, **kwargs):
        from django.db import connections

        try:
            return fn(*args, **kwargs)
        finally:
            connections.close_all()

    return wrapper
