"""What the review commands share: finding the server, exit codes, and the three output formats
(text for people, JSON for scripts, JUnit XML for CI dashboards).

Exit codes (documented in README "Server review"): 0 nothing to report, 1 something to report
(a breaking change, unapproved drift, findings at or above --fail-on, a load test past
--max-error-rate), 2 could not connect (or no worker ran the load test), 3 bad input.
"""

from __future__ import annotations

import json
import sys
from typing import Any
from xml.etree import ElementTree as ET

from django.core.management.base import CommandError

from inspector.cli import EXIT_BAD_INPUT, CiCommand, bad_input  # noqa: F401 (re-used by review's commands)
from tools.models import Server

EXIT_OK, EXIT_REPORT, EXIT_CONNECT = 0, 1, 2


class ReviewCommand(CiCommand):
    """A command whose option errors exit 3 (argparse's 2 means "could not connect" here)."""

    def add_format(self, parser) -> None:
        parser.add_argument("--format", choices=["text", "json", "junit"], default="text")

    def finish(self, code: int) -> None:
        """Leave with `code` (0 returns normally so call_command in tests sees no exception)."""
        sys.stdout.flush()
        if code:
            raise SystemExit(code)


def find_server(ref: str) -> Server:
    """A server by id or by exact name; an unknown or ambiguous name is bad input."""
    if ref.isdigit():
        server = Server.objects.filter(pk=int(ref)).first()
        if server is None:
            raise bad_input(f"No server with id {ref}.")
        return server
    matches = list(Server.objects.filter(name=ref)[:2])
    if not matches:
        raise bad_input(f"No server named {ref!r}.")
    if len(matches) > 1:
        raise bad_input(f"More than one server is named {ref!r}; give its id.")
    return matches[0]


def connect_error(exc: Exception) -> CommandError:
    from tools.mcp.url_secrets import redact

    return CommandError(f"Could not connect: {redact(str(exc)) or exc.__class__.__name__}", returncode=EXIT_CONNECT)


def as_json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, default=str)


def junit(suite: str, cases: list[tuple[str, str, str | None]]) -> str:
    """JUnit XML: one testsuite of (classname, name, failure message or None) cases."""
    failures = sum(1 for _, _, f in cases if f)
    root = ET.Element("testsuites")
    el = ET.SubElement(root, "testsuite", name=suite, tests=str(len(cases) or 1), failures=str(failures), errors="0")
    if not cases:
        ET.SubElement(el, "testcase", classname=suite, name="nothing to report")
    for classname, name, failure in cases:
        case = ET.SubElement(el, "testcase", classname=classname, name=name)
        if failure:
            ET.SubElement(case, "failure", message=failure[:500]).text = failure
    return ET.tostring(root, encoding="unicode", xml_declaration=True)
