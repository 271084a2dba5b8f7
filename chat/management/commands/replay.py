"""`manage.py replay CONVERSATION_ID_OR_FILE [--server NAME=ID] [--ignore PATH]...`: a recorded
conversation as a regression test for MCP servers, in CI.

Re-runs every recorded tool call against today's servers (chat/replay.py, through the workers
like any call) and prints a summary. Exit status, distinct so CI can tell a regression from a
broken job: 0 nothing changed, 1 differences, 2 a call could not run (no such server today, no
worker within --timeout), 3 bad input (unknown conversation id or user, missing, foreign or
invalid file, a bad option). A file is an export (chat/archive.py): it is imported once,
read-only, for `--user`; running the same file again (same SHA-256) reuses that import.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from inspector.cli import CiCommand, bad_input, read_import

EXIT_SAME = 0
EXIT_DIFFERENT = 1
EXIT_ERROR = 2  # a call could not run


class Command(CiCommand):
    help = ("Re-run a recorded conversation's tool calls against today's servers and report the differences. "
            "Exit status: 0 same, 1 different, 2 a call could not run, 3 bad input.")

    def add_arguments(self, parser):
        parser.add_argument("conversation", help="A conversation id, or the path of an exported conversation file.")
        parser.add_argument("--server", action="append", default=[], metavar="NAME=ID",
                            help="Run the calls of the recorded server NAME on the server with this id (repeatable).")
        parser.add_argument("--ignore", action="append", default=[], metavar="PATH",
                            help="A volatile JSON path left out of the diffs, e.g. $.structuredContent.timestamp (repeatable).")
        parser.add_argument("--user", help="Whose servers to use and who owns an imported file "
                                           "(default: the conversation's owner; for a file, the first superuser).")
        parser.add_argument("--timeout", type=float, default=600.0, help="Give up after this many seconds (default 600).")
        parser.add_argument("--json", action="store_true", help="Print the run as JSON instead of a summary.")

    def handle(self, *args, **options):
        from chat import replay
        from chat.models import ReplayRun

        conversation, user = self._conversation(options)
        servers = {}
        for entry in options["server"]:
            name, sep, value = entry.rpartition("=")
            if not sep or not name or not value.strip().isdigit():
                raise bad_input(f"--server takes NAME=ID (a server id), not {entry!r}.")
            servers[name] = int(value)
        try:
            run = replay.start_run(conversation, user, ignore_paths=options["ignore"], servers=servers)
        except replay.ReplayError as exc:  # an unknown server name or id, a bad --ignore path
            raise bad_input(str(exc)) from None
        deadline = time.monotonic() + options["timeout"]
        while True:
            run.refresh_from_db()
            if run.status != ReplayRun.Status.RUNNING:
                break
            if time.monotonic() > deadline:
                raise CommandError(f"The run #{run.pk} did not finish within {options['timeout']:g} s "
                                   "(is a Celery worker running?).", returncode=EXIT_ERROR)
            replay.resume_if_stalled(run)
            time.sleep(0.2)
        data = replay.run_json(run)
        if options["json"]:
            self.stdout.write(json.dumps(data, indent=2, ensure_ascii=False))
        else:
            self._summary(conversation, data)
        if data["verdict"] == "same":
            return
        sys.exit(EXIT_DIFFERENT if data["verdict"] == "different" else EXIT_ERROR)

    def _conversation(self, options):
        from chat import archive
        from chat.models import Conversation

        users = get_user_model().objects
        user = None
        if options["user"]:
            user = users.filter(username=options["user"]).first()
            if user is None:
                raise bad_input(f"No user named {options['user']!r}.")
        target = options["conversation"]
        path = Path(target)
        if not target.isdigit() or path.is_file():
            if not path.is_file():
                raise bad_input(f"{target!r} is neither a conversation id nor a file.")
            user, data, digest = read_import(path, user)
            earlier = (Conversation.objects.filter(owner=user, read_only=True, imported__sha256=digest)
                       .order_by("pk").first())
            if earlier is not None:
                self.stdout.write(f"{path} was imported before as conversation #{earlier.pk} (same SHA-256); re-running that.")
                return earlier, user
            try:
                conversation = archive.import_conversation(data, user)
            except archive.ArchiveError as exc:
                raise bad_input(f"{path}: {exc}") from None
            self.stdout.write(f"Imported {path} as conversation #{conversation.pk} (read-only, owned by {user}).")
            return conversation, user
        conversation = Conversation.objects.filter(pk=int(target)).select_related("owner").first()
        if conversation is None:
            raise bad_input(f"No conversation #{target}.")
        if user is None:
            user = conversation.owner
        elif conversation.owner_id != user.pk:
            raise bad_input(f"Conversation #{target} is not {user}'s.")
        return conversation, user

    def _summary(self, conversation, data):
        out = self.stdout
        out.write(f"Replay #{data['id']} of conversation #{conversation.pk} “{conversation}”")
        if data["ignore_paths"]:
            out.write(f"Ignoring: {', '.join(data['ignore_paths'])}")
        for item in data["items"]:
            before, after = item["before"], item["after"] or {}
            line = f"  {item['position']:>3}. {item['server_name']}/{item['tool']}: {item['verdict'].upper()}"
            if item["verdict"] == "error":
                line += f" - {item['error']}"
            elif after:
                if before.get("status") != after.get("status"):
                    line += f" (status {before.get('status')} -> {after.get('status')})"
                for label, diff in (("full result", item["full_diff"]), ("projection", item["projection_diff"])):
                    if diff and diff["total"]:
                        line += f"\n       {label}: {diff['total']} change(s)"
                        for change in diff["changes"][:10]:
                            line += f"\n         {change['kind']:>7} {change['path']}"
                            if change["kind"] == "changed":
                                line += f": {json.dumps(change.get('old'))[:80]} -> {json.dumps(change.get('new'))[:80]}"
                if before.get("duration_ms") is not None and after.get("duration_ms") is not None:
                    line += f"\n       {before['duration_ms']:.0f} ms -> {after['duration_ms']:.0f} ms"
            out.write(line)
        s = data["summary"]
        style = self.style.SUCCESS if data["verdict"] == "same" else self.style.ERROR
        out.write(style(f"Verdict: {data['verdict']} ({s.get('total', 0)} calls: {s.get('same', 0)} same, "
                        f"{s.get('different', 0)} different, {s.get('error', 0)} errors)"))
        out.write(f"Stored as run #{data['id']}: /chat/replays/{data['id']}/")
