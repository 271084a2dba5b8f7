"""Fixtures the whole suite builds on: a real Celery worker and a real daphne server, both
subprocesses bound to the test database and this run's Redis; users; API clients; Chromium.

Tests that use the worker or the live app need committed data: mark them
`@pytest.mark.django_db(transaction=True)`.
"""

from __future__ import annotations

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
from tests.helpers import (  # noqa: E402
    ARTIFACTS, BASE_DIR, CHROMIUM, Api, start_daphne, start_worker, stop_process, wait_until_worker_is_quiet,
)


def pytest_configure(config):
    if not os.environ.get("REDIS_URL"):
        raise pytest.UsageError(
            "REDIS_URL is not set. Run the suite with `make test` (it starts an embedded Redis), "
            "or set REDIS_URL to a Redis you can use."
        )


# Fixtures that start processes: a test using any of them (directly or through another
# fixture) is marked `worker`, so `-m "not browser and not worker"` runs the fast tests alone.
PROCESS_FIXTURES = {"celery_worker", "live_app", "browser"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.worker)
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def celery_worker(django_db_setup, django_db_blocker):
    """The suite's worker. Its periodic sweep runs once at start only (SWEEP_INTERVAL is an
    hour): tests that build stuck calls or turns on purpose must not race it; tests/tools/test_sweep.py
    starts workers of its own that sweep every second."""
    with django_db_blocker.unblock():
        proc = start_worker(f"testworker-{os.getpid()}@localhost", {"SWEEP_INTERVAL": "3600"})
    yield proc
    stop_process(proc)


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
    wait_until_worker_is_quiet(worker.hostname)


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


@pytest.fixture(scope="session")
def live_app(django_db_setup, django_db_blocker):
    """The real ASGI app under daphne (HTTP and WebSockets) on free ports, main and sandbox origins."""
    with django_db_blocker.unblock():
        app = start_daphne("daphne.log")
    yield app
    stop_process(app.proc)


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
    stop_process(proc)
    log.close()


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





@pytest.fixture(scope="session", autouse=True)
def _test_database_dropped_cleanly(django_db_setup, django_db_blocker):
    """On PostgreSQL, end this process's pooled connections before the test database is dropped.

    Connections that threads of this process checked out (Channels consumers run database code
    in executor threads) stay open in the pool, and DROP DATABASE then waited ~10 s and failed
    ("being accessed by other users"), leaving the test database behind."""
    yield
    from django.db import connections

    with django_db_blocker.unblock():
        for conn in connections.all(initialized_only=True):
            if conn.vendor != "postgresql":
                continue
            conn.close_pool()
            with conn._nodb_cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid() "
                               "AND backend_type = 'client backend' AND usename = current_user",
                               [conn.settings_dict["NAME"]])


@pytest.fixture(scope="session", autouse=True)
def _flush_retries_a_deadlock():
    """A transactional test ends with Django's `flush` (TRUNCATE of every table). On PostgreSQL
    it can deadlock with the live worker still writing a row of the test that just ended (a
    frame, a log line): CI saw it twice, each time failing that test's teardown and the next
    test's setup. The deadlock's victim is rolled back, so the flush is tried again (up to 5
    times); any other failure is raised as before."""
    from django.core.management.base import CommandError
    from django.core.management.commands import flush

    handle = flush.Command.handle

    def retrying(self, *args, **options):
        for attempt in range(5):
            try:
                return handle(self, *args, **options)
            except CommandError as exc:
                if attempt == 4 or "deadlock detected" not in str(exc.__cause__ or ""):
                    raise
                time.sleep(0.5)

    flush.Command.handle = retrying
    yield
    flush.Command.handle = handle
