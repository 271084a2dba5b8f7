"""The review commands as CI runs them (issue 29.6): the first run of each test in a real process on
this test run's database, the others through the same entry point in this one (tests/helpers.manage_here), connecting to the real surface test server over stdio itself (no worker needed), exit
codes read from the command line: 0 nothing to report, 1 breaking change / unapproved drift /
findings at or above --fail-on, 2 could not connect, 3 bad input; text, JSON and JUnit outputs."""

from __future__ import annotations

import json
import subprocess
from xml.etree import ElementTree as ET

import pytest

from review.models import ServerReview, SurfaceVersion
from tests.helpers import manage_here, manage_process
from tools.models import Server, Tool


def manage(*args: str) -> subprocess.CompletedProcess:
    return manage_here(*args)


@pytest.mark.django_db(transaction=True)
def test_surface_snapshot_diff_approve_exit_codes_and_formats(surface_server, surface_state, staff_user):
    name = surface_server.name
    done = manage_process("surface", "snapshot", name)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "v1" in done.stdout and "approved: none" in done.stdout

    done = manage("surface", "approve", name, "--user", staff_user.username, "--format", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["approved"] == 1
    assert ServerReview.objects.get(server=surface_server).approved_by == staff_user

    # Unchanged: nothing to report, even with --fail-on compatible.
    done = manage("surface", "diff", name, "--fail-on", "compatible")
    assert done.returncode == 0, done.stdout + done.stderr

    # v2 breaks callers: diff exits 1 and names each breaking change with its rule.
    surface_state.set("v2")
    done = manage("surface", "diff", name, "--format", "json")
    assert done.returncode == 1, done.stdout + done.stderr
    data = json.loads(done.stdout)
    assert (data["from"], data["to"], data["worst"]) == (1, 2, "breaking")
    assert data["counts"] == {"breaking": 8, "risky": 3, "compatible": 4}
    assert data["tokens_before"] < data["tokens_after"]
    assert {"rule": "tool-removed", "subject": "tool legacy"}.items() <= next(
        c for c in data["changes"] if c["rule"] == "tool-removed").items()

    done = manage("surface", "snapshot", name, "--format", "junit")  # unapproved drift
    assert done.returncode == 1, done.stdout + done.stderr
    suite = ET.fromstring(done.stdout).find("testsuite")
    assert suite.get("failures") == "1" and "differs from approved v1" in suite.find("testcase/failure").get("message")

    done = manage("surface", "diff", name, "--from", "1", "--to", "2", "--format", "junit")
    assert done.returncode == 1
    cases = ET.fromstring(done.stdout).findall("testsuite/testcase")
    assert sum(1 for c in cases if c.find("failure") is not None) == 8 and len(cases) == 16

    # Only compatible changes (v2 -> v2 + nothing) with the default --fail-on breaking: 0; risky ones count with --fail-on risky.
    done = manage("surface", "diff", name, "--from", "2", "--to", "2")
    assert done.returncode == 0
    done = manage("surface", "approve", name, "--number", "2")
    assert done.returncode == 0 and "approved v2" in done.stdout
    done = manage("surface", "snapshot", name)
    assert done.returncode == 0, done.stdout

    # 3: bad input.
    for args in (["surface", "diff", "no-such-server"], ["surface", "diff", name, "--from", "seven"],
                 ["surface", "approve", name, "--number", "99"], ["surface", "frobnicate", name]):
        done = manage(*args)
        assert done.returncode == 3, (args, done.stdout, done.stderr)
    # 2: could not connect.
    broken = Server.objects.create(name="gone", transport="stdio", command="/nonexistent/mcp-server", owner=staff_user)
    done = manage("surface", "snapshot", str(broken.pk))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Could not connect" in done.stderr
    assert SurfaceVersion.objects.filter(server=surface_server).count() == 2


@pytest.mark.django_db(transaction=True)
def test_review_command_finds_each_poisoning_and_nothing_in_a_clean_server(surface_server, surface_state, staff_user):
    # Another registered server whose tools the poisoned one names and shadows.
    mailer = Server.objects.create(name="mailer", transport="stdio", command="unused", owner=staff_user, shared=True)
    for tool in ("send_email", "read_file"):
        Tool.objects.create(server=mailer, name=tool)

    surface_state.set("clean")
    done = manage("review", surface_server.name, "--fail-on", "info")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 findings" in done.stdout

    surface_state.set("poisoned")
    done = manage_process("review", surface_server.name, "--format", "json")
    assert done.returncode == 1, done.stdout + done.stderr
    found = json.loads(done.stdout)["findings"]
    kinds = {(f["rule"], f["subject"], f["field"]) for f in found}
    assert {
        ("hidden-unicode", "tool hidden", "description"),
        ("model-directives", "tool steer", "description"),
        ("model-directives", "tool exfil", "description"),
        ("model-directives", "server", "instructions"),
        ("model-directives", "prompt greet", "description"),
        ("cross-server-reference", "tool crossref", "description"),
        ("tool-shadowing", "tool read_file", "name"),
        ("urls-and-blobs", "tool exfil", "description"),
        ("urls-and-blobs", "tool blob", "description"),
        ("long-description", "tool verbose", "description"),
    } <= kinds
    # Exact locations: the zero-width run in "hidden", the send_email reference.
    hidden = next(f for f in found if f["rule"] == "hidden-unicode" and "zero-width" in f["message"])
    version = SurfaceVersion.objects.filter(server=surface_server).latest("number")
    description = next(t["description"] for t in version.surface["tools"] if t["name"] == "hidden")
    assert description[hidden["start"]:hidden["end"]] == "\u200b\u200b"
    ref = next(f for f in found if f["rule"] == "cross-server-reference")
    crossref = next(t["description"] for t in version.surface["tools"] if t["name"] == "crossref")
    assert crossref[ref["start"]:ref["end"]] == "send_email" and "mailer" in ref["message"]
    # Nothing the clean tools say is flagged, nor the unchanged load tools.
    assert not any(f["subject"] in ("tool slow", "tool flaky") for f in found)

    # Only high: the same server fails; a high threshold over the clean one passes.
    done = manage("review", surface_server.name, "--fail-on", "high", "--format", "junit")
    assert done.returncode == 1
    assert int(ET.fromstring(done.stdout).find("testsuite").get("failures")) >= 10
    done = manage("review", "nobody", "--fail-on", "high")
    assert done.returncode == 3
    done = manage("review", surface_server.name, "--fail-on", "severe")
    assert done.returncode == 3
