"""`manage.py evals run SUITE --models a,b --repeat K --junit out.xml`: an eval suite in CI.

SUITE is a suite id, a suite name (yours first), or the path of a suite file (evals/suite_file.py),
imported once for --user (the same file again, same SHA-256, reuses that import). The run goes
through the workers like any (a Celery worker must be running); the command waits, prints the
pass rate per case and model, and writes a JUnit XML report (one test case per case and model).

Exit status: 0 every case at or above its threshold for every model; 1 some below; 2 could not
run (an attempt's model or turn failed, a judge could not grade, no server of a name the suite
needs, no worker within --timeout); 3 bad input (unknown suite or user, a missing, foreign or
invalid file, a bad option).

Also: `evals export SUITE` prints a suite's file; `evals import FILE --user NAME` imports one.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from xml.etree import ElementTree as ET

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from inspector.cli import CiCommand, bad_input, option_errors_exit_3, read_import

EXIT_PASS = 0
EXIT_BELOW = 1
EXIT_COULD_NOT_RUN = 2


class Command(CiCommand):
    help = ("Run an eval suite across models (run), or export/import a suite file. Exit status of run: "
            "0 every case at or above its threshold, 1 some below, 2 could not run, 3 bad input.")

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        run = sub.add_parser("run", help="Run a suite across models and wait for the result.")
        option_errors_exit_3(run)
        run.add_argument("suite", help="A suite id, a suite name, or the path of a suite file.")
        run.add_argument("--models", required=True, help="Comma-separated litellm model names.")
        run.add_argument("--repeat", type=int, default=1, help="Attempts per case and model (default 1).")
        run.add_argument("--api-base", default="", help="An API base for every model (an OpenAI-compatible endpoint).")
        run.add_argument("--concurrency", type=int, help="Attempts at once per provider (default EVALS_CONCURRENCY_PER_PROVIDER).")
        run.add_argument("--user", help="Who runs it: whose servers, keys and conversations (default: the suite's owner; "
                                        "for a file, the first superuser).")
        run.add_argument("--junit", help="Write a JUnit XML report here.")
        run.add_argument("--timeout", type=float, default=1800.0, help="Give up after this many seconds (default 1800).")
        run.add_argument("--json", action="store_true", help="Print the run as JSON instead of a table.")
        export = sub.add_parser("export", help="Print a suite's file.")
        option_errors_exit_3(export)
        export.add_argument("suite")
        imp = sub.add_parser("import", help="Import a suite file.")
        option_errors_exit_3(imp)
        imp.add_argument("file")
        imp.add_argument("--user", required=True)

    def handle(self, *args, **options):
        from evals import suite_file

        action = options["action"]
        user = self._user(options.get("user"))
        if action == "export":
            suite = self._suite(options["suite"], user)
            self.stdout.write(json.dumps(suite_file.export_suite(suite), indent=2, ensure_ascii=False))
            return
        if action == "import":
            suite = self._suite(options["file"], user, must_be_file=True)
            self.stdout.write(f"Suite #{suite.pk} “{suite.name}” ({suite.cases.count()} cases).")
            return
        self._run(options, user)

    def _user(self, name):
        if not name:
            return None
        user = get_user_model().objects.filter(username=name).first()
        if user is None:
            raise bad_input(f"No user named {name!r}.")
        return user

    def _suite(self, target: str, user, must_be_file: bool = False):
        from evals import suite_file
        from evals.models import Suite

        path = Path(target)
        if path.is_file() or must_be_file:
            if not path.is_file():
                raise bad_input(f"{target!r} is not a file.")
            user, data, digest = read_import(path, user)
            earlier = Suite.objects.filter(owner=user, imported_sha256=digest).order_by("pk").first()
            if earlier is not None:
                self.stderr.write(f"{path} was imported before as suite #{earlier.pk} (same SHA-256); using that.")
                return earlier
            try:
                suite = suite_file.import_suite(data, user, sha256=digest)
            except suite_file.MissingServerError as exc:
                raise CommandError(f"{path}: {exc}", returncode=EXIT_COULD_NOT_RUN) from None
            except suite_file.SuiteFileError as exc:
                raise bad_input(f"{path}: {exc}") from None
            self.stderr.write(f"Imported {path} as suite #{suite.pk} (owned by {user}).")
            return suite
        visible = Suite.objects.visible_to(user) if user is not None else Suite.objects.all()
        if target.isdigit():
            suite = visible.filter(pk=int(target)).first()
        else:
            found = list(visible.filter(name=target).order_by("pk"))
            found.sort(key=lambda s: user is None or s.owner_id != user.pk)
            suite = found[0] if found else None
        if suite is None:
            raise bad_input(f"No suite {target!r}" + (f" that {user} can see." if user else "."))
        return suite

    def _run(self, options, user):
        from evals import runs
        from evals.models import Run

        suite = self._suite(options["suite"], user)
        user = user or suite.owner
        models = [m.strip() for m in options["models"].split(",") if m.strip()]
        try:
            run = runs.start_run(suite, user, models, repeat=options["repeat"], api_base=options["api_base"],
                                 concurrency=options["concurrency"])
        except runs.MissingServer as exc:
            raise CommandError(str(exc), returncode=EXIT_COULD_NOT_RUN) from None
        except runs.RunError as exc:
            raise bad_input(str(exc)) from None
        deadline = time.monotonic() + options["timeout"]
        while True:
            run.refresh_from_db()
            if run.status != Run.Status.RUNNING:
                break
            if time.monotonic() > deadline:
                runs.cancel(run)
                raise CommandError(f"The run #{run.pk} did not finish within {options['timeout']:g} s "
                                   "(is a Celery worker running?); it was cancelled.", returncode=EXIT_COULD_NOT_RUN)
            runs.resume_if_stalled(run)
            time.sleep(0.3)
        data = runs.run_json(run)
        if options["junit"]:
            Path(options["junit"]).write_bytes(junit_xml(data))
        if options["json"]:
            self.stdout.write(json.dumps(data, indent=2, ensure_ascii=False))
        else:
            self._table(data)
        verdict = data["summary"]["verdict"]
        if verdict == "pass":
            return
        sys.exit(EXIT_BELOW if verdict == "fail" else EXIT_COULD_NOT_RUN)

    def _table(self, data):
        out = self.stdout
        s = data["summary"]
        out.write(f"Eval run #{data['id']} of “{data['suite']}”: {s['done']} attempts, verdict {s['verdict'] or 'none'}")
        for c in s["cells"]:
            mark = "ok  " if c["ok"] else "FAIL"
            cost = f" ${c['cost_usd']:.6f}" if c["cost_usd"] is not None else ""
            latency = f" {c['latency_ms']:.0f} ms" if c["latency_ms"] is not None else ""
            out.write(f"  {mark} {c['case']} · {c['model']}: {c['passed']}/{c['attempts']} (needs {c['threshold']:g})"
                      f" · {c['tokens_in']}→{c['tokens_out']} tokens{cost}{latency}")
        for a in data["attempts"]:
            if a["status"] in ("failed", "error"):
                why = a["error"] or "; ".join(f"{c['check']}: {c['detail']}" for c in a["checks"] if not c["passed"])
                if a["judge"] and not a["judge"].get("passed"):
                    why = (why + "; " if why else "") + f"judge: {a['judge'].get('reason') or a['judge'].get('error')}"
                out.write(f"    {a['status']}: {a['case']} · {a['model']} #{a['repeat']} (conversation #{a['conversation_id']}): {why}")


def junit_xml(data: dict) -> bytes:
    """One <testcase> per case and model (classname the model); a failure below threshold, an
    error when an attempt could not run."""
    s = data["summary"]
    suite = ET.Element("testsuite", name=data["suite"], tests=str(len(s["cells"])),
                       failures=str(sum(not c["ok"] and not c["errors"] for c in s["cells"])),
                       errors=str(sum(bool(c["errors"]) for c in s["cells"])))
    for c in s["cells"]:
        case = ET.SubElement(suite, "testcase", classname=c["model"], name=c["case"],
                             time=f"{(c['latency_ms'] or 0) / 1000:.3f}")
        details = [f"{a['status']} #{a['repeat']}: " + (a["error"] or "; ".join(
            f"{k['check']}: {k['detail']}" for k in a["checks"] if not k["passed"]))
                   for a in data["attempts"] if a["case"] == c["case"] and a["model"] == c["model"] and a["status"] != "passed"]
        message = f"passed {c['passed']}/{c['attempts']}, needs {c['threshold']:g}"
        if c["errors"]:
            ET.SubElement(case, "error", message=f"{c['errors']} attempt(s) could not run; {message}").text = "\n".join(details)
        elif not c["ok"]:
            ET.SubElement(case, "failure", message=message).text = "\n".join(details)
    return ET.tostring(ET.ElementTree(suite).getroot(), encoding="utf-8", xml_declaration=True)
