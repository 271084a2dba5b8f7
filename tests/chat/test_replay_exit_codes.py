"""`manage.py replay` as CI runs it (issue 28.10): its exit status read from the command line (the
first run in a real process, the others through the same entry point in this one:
tests/helpers.manage_here). 0 same, 1 different, 2 a call could not run, 3 bad input; a file run
twice is imported once.

Real parts: the drift MCP server (tests/chat/test_replay.py), the Celery worker, the fake LLM
that records the conversation, and `manage.py` on this run's database (tests/helpers.manage_process, manage_here).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from chat.models import Conversation, ReplayRun
from tests.chat.test_replay import QUOTE_SCRIPT, VOLATILE, drift, drift_http, drift_server, record  # noqa: F401 (fixtures)
from tests.helpers import manage_here, manage_process, streamed_body

IGNORE = ["--ignore", VOLATILE[0], "--ignore", VOLATILE[1]]


def replay(*args: str, process: bool = False) -> subprocess.CompletedProcess:
    """`manage.py replay ARGS`, in its own process as a CI job runs it, or through the same entry point here."""
    return manage_process("replay", *args) if process else manage_here("replay", *args)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_replay_command_exit_codes_and_one_import_per_file(api, fake_llm, drift, drift_server, user, other_user, tmp_path):
    cid = record(api, fake_llm, [drift_server], QUOTE_SCRIPT, ["price?"])
    path = tmp_path / "recorded.json"
    path.write_bytes(streamed_body(api.get(f"/api/conversations/{cid}/export/")))

    # 0: the same, from the file, three times: one read-only import, re-run three times.
    for n in range(3):
        done = replay(str(path), "--user", user.username, "--server", f"drift={drift_server.pk}", *IGNORE, process=n == 0)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Verdict: same" in done.stdout
        assert ("Imported" if n == 0 else "imported before as conversation") in done.stdout, done.stdout
    imported = Conversation.objects.filter(owner=user, read_only=True)
    assert imported.count() == 1
    assert ReplayRun.objects.filter(conversation=imported.get(), verdict="same").count() == 3

    # 1: the server's answer changed.
    drift.set_price(99)
    done = replay(str(cid), *IGNORE)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "$.structuredContent.price: 12 -> 99" in done.stdout and "Verdict: different" in done.stdout

    # 2: a call could not run (bob has no server named drift to run it on).
    done = replay(str(path), "--user", other_user.username, *IGNORE)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Verdict: error" in done.stdout

    # 3: bad input, each with its reason and nothing imported.
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"format": "someone-else/conversation", "version": 1}))
    invalid = tmp_path / "invalid.json"
    invalid.write_text("{not json")
    before = Conversation.objects.count()
    for args, reason in [
        (["999999"], "No conversation #999999"),
        ([str(tmp_path / "missing.json")], "neither a conversation id nor a file"),
        ([str(foreign), "--user", user.username], "not a conversation export of the MCP Inspector"),
        ([str(invalid), "--user", user.username], "not valid JSON"),
        ([str(cid), "--user", "nobody"], "No user named 'nobody'"),
        ([str(cid), "--server", "drift=not-a-number"], "--server takes NAME=ID"),
        ([str(cid), "--server", "drift=123456"], "No server with id 123456"),
        ([str(cid), "--ignore", "$.a["], ""),
        ([str(cid), "--no-such-option"], "unrecognized arguments"),
    ]:
        done = replay(*args)
        assert done.returncode == 3, (args, done.returncode, done.stdout + done.stderr)
        assert reason in done.stderr, (args, done.stderr)
    assert Conversation.objects.count() == before
