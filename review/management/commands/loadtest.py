"""`manage.py loadtest SERVER TOOL --args JSON --calls N --concurrency C [--max-error-rate R]`:
a load test through the workers (review/loadtest.py), its figures printed when it ends.

Exit codes: 0 ended at or under --max-error-rate (default 0: any error fails), 1 the error rate
was above it, 2 no worker ran it within --timeout (the run is cancelled), 3 bad input.
"""

from __future__ import annotations

import json
import time

from django.contrib.auth import get_user_model

from review import loadtest
from review.ci import EXIT_CONNECT, EXIT_OK, EXIT_REPORT, ReviewCommand, as_json, bad_input, find_server, junit
from review.models import LoadRun


class Command(ReviewCommand):
    help = "Run a load test through the workers and print its figures. Exit: 0 ok, 1 error rate above --max-error-rate, 2 no worker, 3 bad input."

    def add_arguments(self, parser):
        parser.add_argument("server", help="Server id or exact name.")
        parser.add_argument("tool")
        parser.add_argument("--args", dest="arguments_json", default="{}", help="The tool's arguments, a JSON object.")
        parser.add_argument("--calls", type=int, default=100)
        parser.add_argument("--concurrency", type=int, default=4)
        parser.add_argument("--max-error-rate", type=float, default=0.0, help="0..1; above it the command exits 1.")
        parser.add_argument("--user", help="Who runs the calls (default: the first superuser).")
        parser.add_argument("--timeout", type=float, default=3600.0, help="Give up (cancel, exit 2) after this many seconds.")
        self.add_format(parser)

    def handle(self, *args, **options):
        server = find_server(options["server"])
        try:
            arguments = json.loads(options["arguments_json"])
        except ValueError as exc:
            raise bad_input(f"--args is not JSON: {exc}") from None
        if not 0 <= options["max_error_rate"] <= 1:
            raise bad_input("--max-error-rate is a fraction from 0 to 1.")
        users = get_user_model().objects
        user = (users.filter(username=options["user"]).first() if options["user"]
                else users.filter(is_superuser=True).order_by("pk").first())
        if user is None:
            raise bad_input("No such user." if options["user"] else "No superuser to run the calls as: pass --user.")
        try:
            run = loadtest.create(server, options["tool"], arguments, options["calls"], options["concurrency"], user)
        except loadtest.BadLoadTest as exc:
            raise bad_input(str(exc)) from None
        deadline = time.monotonic() + options["timeout"]
        while True:
            run.refresh_from_db()
            if not run.is_active:
                break
            if time.monotonic() > deadline:
                loadtest.cancel(run)
                self.stderr.write(f"Load test {run.pk} did not end within {options['timeout']:.0f} s (is a worker running?); cancelled.")
                return self.finish(EXIT_CONNECT)
            time.sleep(0.5)
        figures = run.stats or loadtest.figures(run)
        failing = run.status != LoadRun.Status.SUCCEEDED or figures["error_rate"] > options["max_error_rate"]
        fmt = options["format"]
        if fmt == "json":
            self.stdout.write(as_json({"id": str(run.pk), "status": run.status, "error": run.error, **figures}))
        elif fmt == "junit":
            why = (f"status {run.status}: {run.error}" if run.status != LoadRun.Status.SUCCEEDED else
                   f"error rate {figures['error_rate']} > {options['max_error_rate']}: {figures['errors_by_kind']}")
            self.stdout.write(junit(f"loadtest {server.name} {options['tool']}",
                                    [(f"loadtest.{server.name}", f"{options['tool']} x{options['calls']} @{options['concurrency']}",
                                      why if failing else None)]))
        else:
            self.stdout.write(self.text(run, figures))
        return self.finish(EXIT_REPORT if failing else EXIT_OK)

    @staticmethod
    def text(run: LoadRun, f: dict) -> str:
        def row(name: str, s: dict) -> str:
            return f"  {name:12} p50 {s['p50']} ms  p95 {s['p95']} ms  p99 {s['p99']} ms  (n={s['n']})"

        lines = [f"load test {run.pk}: {run.status}, {f['ended']}/{run.calls} calls at concurrency {run.concurrency} "
                 f"in {f['elapsed_s']} s = {f['calls_per_s']} calls/s, error rate {f['error_rate']}",
                 row("end-to-end", f["end_to_end_ms"]), row("worker", f["worker_ms"]), row("wire", f["wire_ms"])]
        for kind, n in f["errors_by_kind"].items():
            lines.append(f"  error {n}× {kind}")
        return "\n".join(lines)
