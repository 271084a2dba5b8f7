"""`manage.py review SERVER [--fail-on info|low|medium|high] [--format text|json|junit]`: connect,
snapshot, and print the description review's findings (review/rules/). Exit 1 when a finding is at
or above --fail-on (default medium), 2 could not connect, 3 bad input, else 0."""

from __future__ import annotations

from review import surface
from review.ci import EXIT_OK, EXIT_REPORT, ReviewCommand, as_json, connect_error, find_server, junit
from review.rules import SEVERITIES, at_or_above


class Command(ReviewCommand):
    help = "Review a server's tool, prompt and instruction texts. Exit: 0 clean, 1 findings at/above --fail-on, 2 no connection, 3 bad input."

    def add_arguments(self, parser):
        parser.add_argument("server", help="Server id or exact name.")
        parser.add_argument("--fail-on", choices=SEVERITIES, default="medium")
        self.add_format(parser)

    def handle(self, *args, **options):
        server = find_server(options["server"])
        try:
            version, _ = surface.capture(server, source="command")
        except Exception as exc:  # noqa: BLE001 - every failure to reach the server is exit 2
            raise connect_error(exc) from None
        findings = version.findings
        failing = [f for f in findings if at_or_above(f["severity"], options["fail_on"])]
        fmt = options["format"]
        if fmt == "json":
            self.stdout.write(as_json({"server": server.name, "version": version.number, "hash": version.hash,
                                       "fail_on": options["fail_on"], "failing": len(failing), "findings": findings}))
        elif fmt == "junit":
            self.stdout.write(junit(f"review {server.name}", [
                (f"{server.name}.{f['subject']}", f"{f['rule']} {f['field']}",
                 f"{f['severity']}: {f['message']} at {f['start']}-{f['end']}" if f in failing else None) for f in findings]))
        else:
            self.stdout.write(f"{server.name} v{version.number}: {len(findings)} findings, {len(failing)} at or above {options['fail_on']}")
            for f in findings:
                self.stdout.write(f"  {f['severity'].upper():7} {f['subject']} {f['field']}[{f['start']}:{f['end']}] "
                                  f"{f['message']} [{f['rule']}]  {f['excerpt']}")
        return self.finish(EXIT_REPORT if failing else EXIT_OK)
