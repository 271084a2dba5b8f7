#!/usr/bin/env python
"""What does a huge tool result cost? Peak memory of the web and worker processes, and the
size and time of every page and API answer that shows it.

    .venv/bin/python bench/big_results.py [--megabytes 40] [--use-env] [--transport http|stdio]

Self-contained like bench/tool_calls.py: a temporary data dir with a fresh SQLite database
(or DATABASE_URL with --use-env), an embedded Valkey unless REDIS_URL is set, one Celery
worker and one daphne subprocess, and the basic test MCP server over Streamable HTTP (or as
a stdio child of the worker with --transport stdio). Before measuring, one small call of each
tool and one request to each page warm both processes up. Two
results: `big_text` (one text block of N MB) and `big_structured` (a short text and a
structuredContent of N MB). For each: the call through the API, then the answers a person's
browser would ask for (API, admin change page and list, downloads); then the chat path: a
turn whose model (the scripted stand-in, tests/fake_llm.py) calls the tool, so the worker runs
the LLM step, the tool call and the next step, and the conversation's pages after it. RSS is
sampled every 10 ms; "peak over idle" is the peak during that step minus the process's RSS
just before it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))


class PeakRss:
    """Samples the RSS of some processes in a thread; `measure()` brackets one step."""

    def __init__(self, pids: dict[str, int]) -> None:
        import psutil

        self.procs = {name: psutil.Process(pid) for name, pid in pids.items()}
        self.peak = {name: 0 for name in pids}
        self.lock = threading.Lock()
        threading.Thread(target=self._run, daemon=True).start()

    def _rss(self) -> dict[str, int]:
        import psutil

        sizes = {}
        for name, proc in self.procs.items():
            try:
                sizes[name] = proc.memory_info().rss
            except psutil.NoSuchProcess:  # stopped at the end of the run
                sizes[name] = 0
        return sizes

    def _run(self) -> None:
        while True:
            now = self._rss()
            with self.lock:
                for name, rss in now.items():
                    self.peak[name] = max(self.peak[name], rss)
            time.sleep(0.01)

    def measure(self, fn):
        """(fn's result, seconds, {process: (idle MB, peak over idle MB)})."""
        time.sleep(0.3)  # let the previous step's garbage go
        idle = self._rss()
        with self.lock:
            self.peak = dict(idle)
        t0 = time.perf_counter()
        value = fn()
        elapsed = time.perf_counter() - t0
        time.sleep(0.1)
        with self.lock:
            peaks = dict(self.peak)
        return value, elapsed, {n: (idle[n] / 2**20, (peaks[n] - idle[n]) / 2**20) for n in idle}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=float, default=40)
    parser.add_argument("--use-env", action="store_true", help="use DATABASE_URL from the environment")
    parser.add_argument("--transport", choices=("http", "stdio"), default="http",
                        help="the basic test server over Streamable HTTP (default) or as a stdio child of the worker")
    args = parser.parse_args()

    data_dir = Path(tempfile.mkdtemp(prefix="inspector-big-"))
    os.environ.update(INSPECTOR_DATA_DIR=str(data_dir), DJANGO_SETTINGS_MODULE="inspector.settings", LOG_LEVEL="WARNING")
    os.environ.setdefault("REDIS_PREFIX", f"bigbench{os.getpid()}:")
    if not args.use_env:
        os.environ.pop("DATABASE_URL", None)

    from inspector.launch import (Processes, daphne_command, endpoint, free_port, start_embedded_redis, wait_for_port,
                                  worker_command)

    procs = Processes()
    http_server = None
    try:
        if not os.environ.get("REDIS_URL"):
            os.environ["REDIS_URL"] = start_embedded_redis(procs, data_dir)
        port = free_port()
        os.environ["PUBLIC_URL"] = f"http://127.0.0.1:{port}"
        os.environ["SANDBOX_ORIGIN"] = f"http://localhost:{free_port()}"
        import django

        django.setup()
        import httpx
        from django.conf import settings
        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        from inspector.models import ApiToken
        from tests.mcp_servers.launch import start_server
        from tools.models import Server
        from tools.runtime.tasks import server_action

        call_command("migrate", verbosity=0, interactive=False)
        env = dict(os.environ)
        logs = open(data_dir / "processes.log", "wb")
        worker = procs.start("worker", worker_command(f"big-{os.getpid()}@localhost", concurrency=8),
                             env=env, stdout=logs, stderr=logs)
        daphne = procs.start("daphne", daphne_command([endpoint(port)]), env=env, stdout=logs, stderr=logs)
        wait_for_port("127.0.0.1", port, 30, daphne)
        http_server = start_server("basic.py", "http")
        user = get_user_model().objects.create_user("big-bench", password="big-bench-pass", is_staff=True,
                                                    is_superuser=True)
        _, key = ApiToken.issue(user, "bench")
        if args.transport == "stdio":
            server = Server.objects.create(name="basic", transport="stdio", command=sys.executable,
                                           args=[str(BASE_DIR / "tests" / "mcp_servers" / "basic.py")], owner=user)
        else:
            server = Server.objects.create(name="basic", transport="streamable_http", url=http_server.url, owner=user)
        answer = server_action.delay(server.pk, "refresh", {"reconnect": True}).get(timeout=120)
        assert answer.get("ok"), answer
        rss = PeakRss({"web (daphne)": daphne.pid, "worker": worker.pid})
        api = httpx.Client(base_url=os.environ["PUBLIC_URL"], headers={"Authorization": f"Token {key}"}, timeout=300)

        rows: list[tuple[str, str, float, int | None, dict]] = []
        # A signed-in browser (session cookie) for the admin's pages and the chat page.
        browser = httpx.Client(base_url=os.environ["PUBLIC_URL"], timeout=300)
        browser.get("/login/")
        browser.post("/login/", data={"username": "big-bench", "password": "big-bench-pass",
                                      "csrfmiddlewaretoken": browser.cookies["csrftoken"]},
                     headers={"Referer": os.environ["PUBLIC_URL"] + "/login/"})
        assert "sessionid" in browser.cookies, "the bench could not sign in"

        from chat.history import offered_tools
        from chat.models import Conversation, Turn
        from tests.fake_llm import FakeLLMServer

        llm = FakeLLMServer().start()
        conversation = Conversation.objects.create(owner=user, model="openai/test-model", api_base=llm.url,
                                                   api_key="sk-bench")
        conversation.servers.set([server])
        llm_names = {tool: name for name, (_, tool) in offered_tools(conversation)[1].items()}

        def run_turn(tool: str, megabytes: float) -> str:
            """One chat turn: the model calls `tool`, then answers; returns the call's id."""
            llm.script([{"tool_calls": [{"name": llm_names[tool], "arguments": {"megabytes": megabytes}}]},
                        {"text": "Done."}])
            turn_id = api.post(f"/api/conversations/{conversation.pk}/messages/",
                               json={"text": f"call {tool}"}).json()["turn_id"]
            from chat.tool_calls import calls_of_turn

            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                status = Turn.objects.filter(pk=turn_id).values_list("status", flat=True).first()
                if status != Turn.Status.RUNNING:
                    assert status == Turn.Status.COMPLETED, status
                    return str(calls_of_turn(Turn.objects.get(pk=turn_id)).latest("queued_at").pk)
                time.sleep(0.05)
            raise RuntimeError(f"the turn calling {tool} did not finish")

        def pages_of(call_id: str) -> list[tuple[str, httpx.Client, str]]:
            return [
                ("GET /api/tool-calls/{id}/", api, f"/api/tool-calls/{call_id}/"),
                ("GET /api/tool-calls/{id}/result/", api, f"/api/tool-calls/{call_id}/result/"),
                ("GET /api/tool-calls/{id}/result/preview/", api, f"/api/tool-calls/{call_id}/result/preview/"),
                ("GET admin tool call change page", browser, f"/admin/tools/toolcall/{call_id}/change/"),
                ("GET admin tool call list", browser, "/admin/tools/toolcall/"),
                ("GET admin full result download", browser, f"/admin/tools/toolcall/{call_id}/result/"),
                ("GET /tool-calls/{id}/workbench/ (page)", browser, f"/tool-calls/{call_id}/workbench/"),
            ]

        def run_call(tool: str, megabytes: float) -> str:
            call_id = api.post(f"/api/servers/{server.pk}/tools/{tool}/call/",
                               json={"arguments": {"megabytes": megabytes}}).json()["id"]
            deadline = time.monotonic() + 300
            from tools.models import ToolCall

            while time.monotonic() < deadline:
                status = ToolCall.objects.filter(pk=call_id).values_list("status", flat=True).first()
                if status in ToolCall.FINAL:
                    return call_id
                time.sleep(0.05)
            raise RuntimeError(f"{tool} did not finish")

        # Warm-up: the first call and the first page load what a process imports once (the
        # token counter's encodings, templates, views); that is not what a big result costs.
        for tool in ("big_text", "big_structured"):
            small = run_call(tool, 0.05)
            for path in (f"/api/tool-calls/{small}/", f"/api/tool-calls/{small}/result/", "/rpc-log/", "/rpc-log/export/"):
                api.get(path)
            for _, client, path in pages_of(small):
                client.get(path)
            run_turn(tool, 0.05)  # the chat path imports litellm and its tokenizers once
        browser.get(f"/chat/{conversation.pk}/")
        api.get(f"/api/conversations/{conversation.pk}/")

        for tool in ("big_text", "big_structured"):
            call_id, seconds, mem = rss.measure(lambda tool=tool: run_call(tool, args.megabytes))
            rows.append((tool, "tool call, end to end (POST, worker, both rows)", seconds, None, mem))
            for label, client, path in (
                *pages_of(call_id),
                ("GET /rpc-log/ (page)", browser, "/rpc-log/"),
                ("GET /rpc-log/export/", api, "/rpc-log/export/"),
            ):
                response, seconds, mem = rss.measure(lambda client=client, path=path: client.get(path))
                size = len(response.content) if response.status_code == 200 else None
                rows.append((tool, f"{label} → {response.status_code}", seconds, size, mem))

        for tool in ("big_text", "big_structured"):
            call_id, seconds, mem = rss.measure(lambda tool=tool: run_turn(tool, args.megabytes))
            rows.append((tool, "chat turn, end to end (LLM step, tool call, next step)", seconds, None, mem))
            for label, client, path in (
                ("GET /chat/{id}/ (page)", browser, f"/chat/{conversation.pk}/"),
                ("GET /api/conversations/{id}/", api, f"/api/conversations/{conversation.pk}/"),
                ("GET /api/conversations/{id}/export/ (all its results)", api,
                 f"/api/conversations/{conversation.pk}/export/"),
                ("GET admin tool call change page (chat call)", browser, f"/admin/tools/toolcall/{call_id}/change/"),
            ):
                response, seconds, mem = rss.measure(lambda client=client, path=path: client.get(path))
                size = len(response.content) if response.status_code == 200 else None
                rows.append((tool, f"{label} → {response.status_code}", seconds, size, mem))
        llm.stop()

        db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
        print(f"\n{args.megabytes:g} MB results, {args.transport} server, database {db}, {os.cpu_count()} CPUs, load "
              + " ".join(f"{x:.2f}" for x in os.getloadavg()))
        print(f"{'result':<15} {'step':<58} {'seconds':>8} {'body MB':>8}   "
              f"{'web idle/peak+ MB':>18}   {'worker idle/peak+ MB':>20}")
        for tool, label, seconds, size, mem in rows:
            web, wrk = mem["web (daphne)"], mem["worker"]
            body = f"{size / 2**20:8.2f}" if size is not None else f"{'-':>8}"
            print(f"{tool:<15} {label:<58} {seconds:8.2f} {body}   {web[0]:8.0f} / {web[1]:+7.0f}   "
                  f"{wrk[0]:10.0f} / {wrk[1]:+7.0f}")
        return 0
    finally:
        if http_server is not None:
            http_server.stop()
        procs.stop()
        shutil.rmtree(data_dir, ignore_errors=True) if not os.environ.get("KEEP_BENCH_DIR") else print(data_dir)


if __name__ == "__main__":
    sys.exit(main())
