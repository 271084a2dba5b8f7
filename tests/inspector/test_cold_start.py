"""What a process pays before it serves: no litellm at start, and one `prepare` for the database.

Importing litellm costs ~3 s of CPU. It used to be imported by the URL configuration and by the
Celery app's task modules, so daphne, the worker and every management command paid it at start
(bench/cold_start.py: the time from `make run` to a green /healthz). Each check runs in a fresh
interpreter, as the real process would start, and reads its `sys.modules`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.helpers import BASE_DIR, start_worker, stop_process, wait_for

# What each process imports before it serves, as a script that prints the litellm modules loaded.
STARTS = {
    # daphne: the ASGI app, then the URL configuration its first request resolves (with every view).
    "daphne": "import inspector.asgi; from django.urls import get_resolver; get_resolver().url_patterns",
    # The Celery worker: the app, then the task modules autodiscovery imports at worker start.
    "worker": "from inspector.celery import app; app.loader.import_default_modules(); app.tasks['tools.tasks.execute_tool_call']",
    # A management command: the system checks import the URL configuration and the admin.
    "checks": "from django.core.management import call_command; call_command('check')",
}
REPORT = "import json, sys; print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'litellm')))"


def _env(data_dir: Path) -> dict[str, str]:
    """A fresh data folder and its own SQLite file: nothing shared with the suite's database."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "INSPECTOR_DB_NAME", "DJANGO_ALLOW_ASYNC_UNSAFE"}}
    env.update(INSPECTOR_DATA_DIR=str(data_dir), DJANGO_SETTINGS_MODULE="inspector.settings")
    return env


@pytest.mark.parametrize("process", sorted(STARTS))
def test_no_process_imports_litellm_before_a_model_is_called(process, tmp_path):
    code = f"import django; django.setup(); {STARTS[process]}; {REPORT}"
    out = subprocess.run([sys.executable, "-c", code], cwd=BASE_DIR, env=_env(tmp_path), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded == [], f"{process} imported litellm at start: {loaded[:5]} (import it where a model is called)"


def test_the_chat_code_still_imports_litellm_when_it_calls_a_model(tmp_path):
    """The other side: the lazy import is really there (and sets litellm's quiet flag)."""
    code = ("import django; django.setup(); from chat import llm; litellm = llm.load_litellm(); "
            "print(litellm.suppress_debug_info, callable(litellm.completion))")
    out = subprocess.run([sys.executable, "-c", code], cwd=BASE_DIR, env=_env(tmp_path), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["True", "True"]


def test_a_ready_worker_loads_token_counting_in_the_background(django_db_setup):
    """The first tool call after a start does not pay litellm's import and tokenizer (~3.8 s):
    the worker loads them once it answers pings (inspector/celery.py). Seen from outside, in the
    real worker's memory map: litellm's tiktoken extension, which nothing imports at start."""
    worker = start_worker(f"warm-up-{uuid.uuid4().hex[:8]}@localhost", log_name="warm-up-worker.log")
    try:
        maps = Path(f"/proc/{worker.pid}/maps")
        wait_for(lambda: "_tiktoken" in maps.read_text(), timeout=60, message="the worker loading litellm's tokenizer")
    finally:
        stop_process(worker)


def test_prepare_migrates_and_creates_the_admin_in_one_process(tmp_path):
    """`manage.py prepare` (the launcher's one step before daphne and the worker) on an empty
    data folder, then again: the second run changes nothing."""
    env = _env(tmp_path)
    env.update(INSPECTOR_ADMIN_USERNAME="admin", INSPECTOR_ADMIN_PASSWORD="a-long-test-password")
    first = subprocess.run([sys.executable, "-X", "importtime", "manage.py", "prepare"], cwd=BASE_DIR, env=env,
                           capture_output=True, text=True, timeout=180)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "Applying tools.0001_initial... OK" in first.stdout  # migrate's lines, each whole
    assert "Created admin account “admin”." in first.stdout
    imported = [line.rsplit("|", 1)[-1].strip() for line in first.stderr.splitlines() if line.startswith("import time:")]
    # The system checks ran: their URL check imports the URL configuration, seen by its views
    # (inspector.urls itself is loaded by importlib.import_module, which -X importtime does not list)...
    assert "chat.views" in imported and "tools.view_calls" in imported
    assert "litellm" not in imported  # ...and the URL configuration they import did not pull litellm in

    with sqlite3.connect(tmp_path / "inspector.sqlite3") as db:
        admins = db.execute("SELECT username FROM auth_user WHERE is_superuser").fetchall()
        applied = db.execute("SELECT COUNT(*) FROM django_migrations").fetchone()[0]
    assert admins == [("admin",)] and applied > 20

    again = subprocess.run([sys.executable, "manage.py", "prepare"], cwd=BASE_DIR, env=env, capture_output=True,
                           text=True, timeout=180)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "No migrations to apply." in again.stdout and "Created admin account" not in again.stdout
