"""Log lines an operator can follow: a worker started with LOG_FORMAT=json writes JSON lines, and
every line logged while it runs a call carries that call's id."""

from __future__ import annotations

import json

import pytest

from tests.helpers import ARTIFACTS, free_port, run_call, worker_to_kill
from tools.models import Server


@pytest.mark.django_db(transaction=True)
def test_a_worker_logs_json_lines_with_the_call_id(celery_worker, user):
    nobody = Server.objects.create(name="nobody", transport="streamable_http", url=f"http://127.0.0.1:{free_port()}/mcp",
                                   owner=user)
    with worker_to_kill(celery_worker, "tools", "json-logs", {"LOG_FORMAT": "json"}):
        call = run_call(nobody, "echo", {"text": "hi"})  # fails (refused): the pipeline logs why, at INFO
    assert call.status == "failed"
    lines = (ARTIFACTS / "json-logs-worker.log").read_text().splitlines()
    records = [json.loads(line) for line in lines if line.startswith("{")]
    assert records and all({"time", "level", "logger", "message"} <= r.keys() for r in records)
    mine = [r for r in records if r.get("call_id") == str(call.pk)]
    assert any(r["logger"] == "tools.runtime.pipeline" and "failed after" in r["message"] for r in mine), mine
    # Lines of no call carry none.
    assert any("call_id" not in r for r in records)
