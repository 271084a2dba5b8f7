"""`manage.py call SERVER TOOL [--args JSON] [--wait SECONDS] [--user NAME]`: one tool call from a
shell or CI, through the workers like any call, answered in one go when it ends within the wait.

Prints the finished call as `GET /api/tool-calls/{id}/` shows it (with the full result), or its id
and status when it is still running. Exit status: 0 the call succeeded, 1 it ended otherwise
(failed, timed out, cancelled), 2 it had not ended within --wait (it goes on), 3 bad input (no such
server, tool or user, arguments that are not a JSON object).
"""

from __future__ import annotations

import asyncio
import json
import sys

from django.contrib.auth import get_user_model

from inspector.cli import CiCommand, bad_input
from tools.models import Server, ToolCall
from tools.runtime import events, waits
from tools.runtime.deadlines import TimeoutOutOfRange
from tools.runtime.lifecycle import start_tool_call

EXIT_SUCCEEDED, EXIT_ENDED_OTHERWISE, EXIT_STILL_RUNNING = 0, 1, 2


class Command(CiCommand):
    help = "Call one tool through the workers and print the result. Exit: 0 succeeded, 1 ended otherwise, 2 still running, 3 bad input."

    def add_arguments(self, parser):
        parser.add_argument("server", help="The server's id or name.")
        parser.add_argument("tool")
        parser.add_argument("--args", dest="arguments", default="{}", help="The arguments, a JSON object (default {}).")
        parser.add_argument("--wait", type=float, default=60.0, help="Seconds to wait for the end (default 60).")
        parser.add_argument("--timeout", type=float, help="The call's own timeout in seconds (default: the server's).")
        parser.add_argument("--user", help="Who calls (default: the server's owner); their sign-in is used on an OAuth server.")

    def handle(self, *args, **options):
        try:
            arguments = json.loads(options["arguments"])
        except json.JSONDecodeError as exc:
            raise bad_input(f"--args is not JSON: {exc}") from None
        if not isinstance(arguments, dict):
            raise bad_input("--args must be a JSON object.")
        name = options["server"]
        server = Server.objects.filter(pk=int(name)).first() if name.isdigit() else Server.objects.filter(name=name).first()
        if server is None:
            raise bad_input(f"No server {name!r}.")
        if not server.tools.filter(name=options["tool"]).exists():
            raise bad_input(f"{server.name} has no tool {options['tool']!r} (refresh it if it is new).")
        user = server.owner
        if options["user"]:
            user = get_user_model().objects.filter(username=options["user"]).first()
            if user is None:
                raise bad_input(f"No user {options['user']!r}.")
        try:
            call = start_tool_call(server=server, tool_name=options["tool"], arguments=arguments,
                                   origin=ToolCall.Origin.MANUAL, user=user, timeout=options["timeout"])
        except TimeoutOutOfRange as exc:
            raise bad_input(str(exc)) from None
        asyncio.run(waits.wait(waits.ended_key(call.pk), max(options["wait"], 0.0)))
        call = ToolCall.objects.select_related("full_result", "projection").get(pk=call.pk)
        if not call.is_final:
            self.stdout.write(json.dumps({"id": str(call.pk), "status": call.status}))
            sys.exit(EXIT_STILL_RUNNING)
        self.stdout.write(json.dumps(events.tool_call_json(call, detail=True, full=True), default=str))
        if call.status != ToolCall.Status.SUCCEEDED:
            sys.exit(EXIT_ENDED_OTHERWISE)
