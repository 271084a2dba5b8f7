"""`manage.py evals run` as CI runs it: its exit status read from the command line (the first run
in a real process, the others through the same entry point in this one: tests/helpers.manage_here), a JUnit report written. 0 every case at or above its threshold, 1 some below,
2 could not run, 3 bad input; a suite file run twice is imported once.

Real parts: the basic MCP server over Streamable HTTP, the suite's Celery worker, the scripted LLM
(its script set here, read by the worker over HTTP) and `manage.py` on this run's database."""

from __future__ import annotations

import json
import subprocess
from xml.etree import ElementTree as ET

import pytest

from evals import suite_file
from evals.models import Case, Run, Suite
from tests.helpers import manage_here, manage_process, refresh_tools

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

MODEL = "openai/test-model"


def evals(*args: str) -> subprocess.CompletedProcess:
    return manage_here("evals", *args)


def test_evals_run_exit_codes_junit_and_one_import_per_file(user, other_user, fake_llm, basic_server, tmp_path):
    refresh_tools(basic_server)
    suite = Suite.objects.create(owner=user, name="ci-suite")
    suite.servers.set([basic_server])
    Case.objects.create(suite=suite, position=1, name="sum", prompts=["2+3?"], threshold=0.5, expectations={
        "must_call": [{"server": "basic", "tool": "add", "arguments": [{"path": "a", "op": "equal", "value": 2}]}]})
    path = tmp_path / "suite.json"
    path.write_text(json.dumps(suite_file.export_suite(suite)))
    junit = tmp_path / "out.xml"
    base = ["--api-base", fake_llm.url, "--concurrency", "1"]
    add_ok = {"tool_calls": [{"name": "basic__add", "arguments": {"a": 2, "b": 3}}]}
    add_bad = {"tool_calls": [{"name": "basic__add", "arguments": {"a": 7, "b": 3}}]}

    # 0: two attempts, one passes: 1/2 meets the case's threshold of 0.5. From the file, for alice.
    fake_llm.script([add_ok, {"text": "5"}, add_bad, {"text": "10"}])
    done = manage_process("evals", "run", str(path), "--user", "alice", "--models", MODEL, "--repeat", "2", "--junit", str(junit),
                          *base)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"ok   sum · {MODEL}: 1/2 (needs 0.5)" in done.stdout and "Imported" in done.stderr
    report = ET.parse(junit).getroot()
    assert report.get("tests") == "1" and report.get("failures") == "0"
    assert report.find("testcase").get("classname") == MODEL and report.find("testcase/failure") is None

    # 1: both attempts below: the same file, imported before (same SHA-256), so no second suite.
    fake_llm.script([add_bad, {"text": "10"}, add_bad, {"text": "10"}])
    done = evals("run", str(path), "--user", "alice", "--models", MODEL, "--repeat", "2", "--junit", str(junit), *base)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "imported before as suite" in done.stderr and Suite.objects.filter(name="ci-suite").count() == 2
    assert "FAIL sum" in done.stdout and "a is 7, not 2" in done.stdout
    failure = ET.parse(junit).getroot().find("testcase/failure")
    assert failure.get("message") == "passed 0/2, needs 0.5" and "a is 7, not 2" in failure.text

    # 2: could not run: the model refuses the key (the turn fails), or bob has no server named basic.
    fake_llm.script([{"error": {"status": 401}, "times": None}])
    done = evals("run", str(suite.pk), "--models", MODEL, "--junit", str(junit), *base)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "error: sum" in done.stdout and "rejected the API key" in done.stdout
    assert ET.parse(junit).getroot().find("testcase/error") is not None
    done = evals("run", str(path), "--user", "bob", "--models", MODEL, *base)
    assert done.returncode == 2 and "no server named 'basic'" in done.stderr, done.stdout + done.stderr

    # 3: bad input, each with its reason, and no run started.
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"format": "someone-else", "version": 1}))
    runs_before = Run.objects.count()
    for args, reason in [
        (["run", "999999", "--models", MODEL], "No suite '999999'"),
        (["run", "no-such-suite", "--models", MODEL], "No suite 'no-such-suite'"),
        (["run", str(foreign), "--user", "alice", "--models", MODEL], "not an eval suite"),
        (["run", str(suite.pk), "--models", MODEL, "--user", "nobody"], "No user named 'nobody'"),
        (["run", str(suite.pk), "--models", MODEL, "--repeat", "0"], "--repeat must be between 1"),
        (["run", str(suite.pk), "--models", ","], "at least one model"),
        (["run", str(suite.pk)], "--models"),
        (["run", str(suite.pk), "--models", MODEL, "--no-such-option"], "unrecognized arguments"),
    ]:
        done = evals(*args)
        assert done.returncode == 3, (args, done.returncode, done.stdout + done.stderr)
        assert reason in done.stderr, (args, done.stderr)
    assert Run.objects.count() == runs_before
