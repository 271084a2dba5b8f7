"""The launcher's roles as a deployment runs them: `web` and `worker` under supervision.

Each test starts `python -m inspector.launch ROLE` (what a systemd unit runs), SIGKILLs the child
it supervises, and checks that the launcher logs the exit, starts the child again and that the
role's own health check answers again; then SIGINT stops everything, leaving no process behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import psutil
import pytest

from inspector.launch import free_port
from tests.helpers import ARTIFACTS, BASE_DIR, process_env, wait_for

pytestmark = pytest.mark.worker


def _launch(role_args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "inspector.launch", *role_args], cwd=BASE_DIR, env=env,
                                stdout=out, stderr=subprocess.STDOUT)


def _child(launcher: subprocess.Popen, needle: str) -> psutil.Process | None:
    for p in psutil.Process(launcher.pid).children():
        try:
            if needle in " ".join(p.cmdline()):
                return p
        except psutil.NoSuchProcess:
            pass
    return None


def _health(role: str, env: dict[str, str], *args: str) -> int:
    return subprocess.run([sys.executable, "-m", "inspector.launch", "health", role, *args], cwd=BASE_DIR, env=env,
                          capture_output=True, timeout=60).returncode


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code
    except OSError:
        return 0


def _stop(launcher: subprocess.Popen, children: list[psutil.Process]) -> None:
    launcher.send_signal(signal.SIGINT)
    assert launcher.wait(timeout=40) == 0
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, f"left behind: {[p.pid for p in alive]}"


@pytest.mark.django_db(transaction=True)
def test_worker_role_restarts_a_killed_worker_and_answers_its_health_check():
    hostname = f"supervised-{uuid.uuid4().hex[:6]}@localhost"
    env = process_env()
    log = ARTIFACTS / "launch-worker.log"
    launcher = _launch(["worker", "--concurrency", "2", "--hostname", hostname], env, log)
    try:
        wait_for(lambda: _health("worker", env, "--hostname", hostname) == 0, timeout=60,
                 message="the supervised worker to answer its health check")
        first = _child(launcher, "celery")
        assert first is not None and "--concurrency 2" in " ".join(first.cmdline())
        os.killpg(first.pid, signal.SIGKILL)
        assert _health("worker", env, "--hostname", hostname) == 1  # dead: no answer
        wait_for(lambda: (c := _child(launcher, "celery")) is not None and c.pid != first.pid, timeout=20,
                 message="the worker to be started again")
        wait_for(lambda: _health("worker", env, "--hostname", hostname) == 0, timeout=60,
                 message="the restarted worker to answer its health check")
        text = log.read_text()
        assert f"worker (pid {first.pid}) exited with code -9" in text and "restarting in 1 s" in text, text[-2000:]
        assert "worker restarted" in text
        assert launcher.poll() is None  # a dead child is no reason to stop
        _stop(launcher, [_child(launcher, "celery")])
    finally:
        if launcher.poll() is None:
            launcher.kill()


@pytest.mark.django_db(transaction=True)
def test_web_role_restarts_daphne_and_does_not_migrate_unless_asked():
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # Behind a proxy: the public URLs name the proxy, WEB_PORT is daphne's own.
    env = process_env({"PUBLIC_URL": "https://inspector.example.com", "SANDBOX_ORIGIN": "https://sandbox.example.com",
                       "WEB_PORT": str(port), "ALLOWED_HOSTS": "127.0.0.1,inspector.example.com"})
    log = ARTIFACTS / "launch-web.log"
    launcher = _launch(["web"], env, log)
    try:
        wait_for(lambda: _status(f"{url}/healthz?role=web") == 200, timeout=60, message="the web role to be healthy")
        first = _child(launcher, "daphne")
        assert first is not None
        os.killpg(first.pid, signal.SIGKILL)
        wait_for(lambda: (c := _child(launcher, "daphne")) is not None and c.pid != first.pid, timeout=20,
                 message="daphne to be started again")
        wait_for(lambda: _status(f"{url}/healthz?role=web") == 200, timeout=60, message="the restarted web role")
        text = log.read_text()
        assert f"daphne (pid {first.pid}) exited with code -9" in text, text[-2000:]
        assert "Operations to perform" not in text  # no migrate without --migrate
        _stop(launcher, [_child(launcher, "daphne")])
    finally:
        if launcher.poll() is None:
            launcher.kill()
