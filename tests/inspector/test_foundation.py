"""The skeleton: login everywhere, /healthz, tokens, the run command, and a browser smoke test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import psutil
import pytest

from inspector.models import ApiToken
from tests.helpers import BASE_DIR, login_page


def _get_json(url: str, timeout: float = 5.0) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


@pytest.mark.django_db
def test_pages_require_login(client):
    home = client.get("/")
    assert home.status_code == 302 and home["Location"].startswith("/login/")
    admin = client.get("/admin/")
    assert admin.status_code == 302
    api = client.get("/api/servers/")
    assert api.status_code == 401
    assert api.json() == {"error": "Authentication required."}
    assert client.get("/login/").status_code == 200


@pytest.mark.django_db
def test_api_token_authenticates_and_bad_token_is_refused(client, user):
    token, key = ApiToken.issue(user, "ci")
    assert key not in json.dumps(list(ApiToken.objects.values()), default=str), "only a digest is stored"
    ok = client.get("/api/servers/", HTTP_AUTHORIZATION=f"Token {key}")
    assert ok.status_code == 200
    bad = client.get("/api/servers/", HTTP_AUTHORIZATION="Token nope")
    assert bad.status_code == 401
    token.refresh_from_db()
    assert token.last_used_at is not None

    # The next requests within the minute do not write "last used" again (a write per request was slow).
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        assert client.get("/api/servers/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200
    assert not [q for q in queries.captured_queries if q["sql"].startswith("UPDATE") and "apitoken" in q["sql"]]


@pytest.mark.django_db
def test_create_api_token_command(user, capsys):
    from django.core.management import call_command

    call_command("create_api_token", "alice", "--name", "cli")
    key = capsys.readouterr().out.strip()
    assert ApiToken.authenticate(key) == user


@pytest.mark.django_db
def test_token_page_shows_key_once(client, user):
    client.force_login(user)
    resp = client.post("/account/tokens/new/", {"name": "laptop"}, follow=True)
    body = resp.content.decode()
    token = ApiToken.objects.get(user=user)
    assert token.prefix in body and "mcpi_" in body
    again = client.get("/account/tokens/").content.decode()
    assert 'id="new-key"' not in again


@pytest.mark.django_db
def test_healthz_reports_redis_down_with_503(client, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    resp = client.get("/healthz")
    assert resp.status_code == 503
    body = resp.json()
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["redis"]["ok"] is False
    assert body["checks"]["worker"]["ok"] is False
    assert "error" not in body["checks"]["redis"]  # error texts name hosts and ports: staff only


@pytest.mark.django_db
def test_healthz_details_are_for_staff(client, staff_user, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    client.force_login(staff_user)
    body = client.get("/healthz").json()
    assert body["checks"]["redis"]["ok"] is False and "127.0.0.1:1" in body["checks"]["redis"]["error"]


@pytest.mark.django_db(transaction=True)
def test_healthz_green_with_live_worker(live_app, celery_worker):
    status, body = _get_json(f"{live_app.url}/healthz", timeout=10)
    assert status == 200, body
    assert body["status"] == "ok"
    assert body["checks"]["worker"]["workers"] >= 1  # anonymous: a count, no host names


@pytest.mark.django_db(transaction=True)
def test_sandbox_origin_serves_only_the_sandbox(live_app):
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{live_app.sandbox_origin}/login/", timeout=5)
    assert err.value.code == 404
    with urllib.request.urlopen(f"{live_app.sandbox_origin}/sandbox/proxy/", timeout=5) as resp:
        assert resp.status == 200
        assert f"frame-ancestors {live_app.url}" in resp.headers["Content-Security-Policy"]


@pytest.mark.worker
def test_run_command_starts_everything_and_ctrl_c_leaves_no_process(tmp_path):
    """`python -m inspector.launch run` (what `make run` calls) from an empty data folder."""
    from inspector.launch import free_port

    port, sandbox_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "REDIS_PREFIX", "INSPECTOR_DB_NAME"}}
    env.update(
        INSPECTOR_DATA_DIR=str(tmp_path / "data"),
        PUBLIC_URL=f"http://127.0.0.1:{port}",
        SANDBOX_ORIGIN=f"http://localhost:{sandbox_port}",
        INSPECTOR_ADMIN_USERNAME="admin",
        INSPECTOR_ADMIN_PASSWORD="a-long-test-password",
        WORKER_CONCURRENCY="2",
    )
    log = open(tmp_path / "run.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "inspector.launch", "run"], cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        status, body = 0, {}
        while time.monotonic() < deadline:
            try:
                status, body = _get_json(f"http://127.0.0.1:{port}/healthz", timeout=5)
                if status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        assert status == 200, f"healthz never green: {body}\n{(tmp_path / 'run.log').read_text()[-3000:]}"
        assert body["checks"]["database"]["ok"] is True
        assert (tmp_path / "data" / "inspector.sqlite3").stat().st_size > 0  # the embedded default: SQLite
        started = psutil.Process(proc.pid).children(recursive=True)
        names = " ".join(" ".join(p.cmdline()) for p in started)
        assert "valkey-server" in names and "daphne" in names and "celery" in names
        # The admin account came from the environment.
        out = subprocess.run(
            [sys.executable, "manage.py", "shell", "-v", "0", "-c",
             "from django.contrib.auth.models import User; print(User.objects.filter(is_superuser=True).count())"],
            cwd=BASE_DIR, env=env, capture_output=True, text=True, check=True,
        )
        assert out.stdout.strip() == "1"

        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=40) == 0
        gone, alive = psutil.wait_procs(started, timeout=5)
        assert not alive, f"orphans left behind: {[p.cmdline() for p in alive]}"
        assert "is running at" in (tmp_path / "run.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_browser_login_and_home(browser, live_app, user, screenshots):
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    assert page.locator("h1").inner_text() == "Welcome, alice"
    assert page.locator("nav a", has_text="Servers").count() == 1
    page.screenshot(path=str(screenshots / "home.png"), full_page=True)
    assert (screenshots / "home.png").stat().st_size > 1000
    page.context.close()


def test_cheap_password_hashing_is_for_the_test_launcher_only(user):
    """`make test` hashes test users' passwords cheaply; without its variable (any real
    deployment) Django's PBKDF2 comes first."""
    assert user.password.startswith("md5$")  # this run: the launcher set TEST_FAST_PASSWORD_HASHING
    env = {k: v for k, v in os.environ.items() if k != "TEST_FAST_PASSWORD_HASHING"}
    code = "import django; django.setup(); from django.conf import settings; print(settings.PASSWORD_HASHERS[0])"
    first = subprocess.run([sys.executable, "-c", code], cwd=BASE_DIR, env={**env, "DJANGO_SETTINGS_MODULE": "inspector.settings"},
                           capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    assert first == "django.contrib.auth.hashers.PBKDF2PasswordHasher"


def test_processes_starting_at_once_share_one_generated_secret_key(tmp_path):
    """A fresh data folder, eight processes reading settings at the same moment (daphne and the
    workers on a first start): one key, written whole, the same for all."""
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    env.update(INSPECTOR_DATA_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="inspector.settings")
    code = "from django.conf import settings; print(repr(settings.SECRET_KEY))"
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=BASE_DIR, env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(8)]
    keys = {proc.communicate(timeout=60)[0].strip() for proc in procs}
    assert len(keys) == 1 and len(keys.pop()) > 40
    assert sorted(p.name for p in tmp_path.iterdir() if "secret" in p.name) == ["secret_key"]  # no temporary left
