"""Get the database ready before the app's processes start: migrate, then make sure an admin exists.

One process instead of `manage.py migrate` then `manage.py ensure_admin`: each of those started
Python, set Django up and ran every system check (which imports the whole URL configuration),
so a start paid all of it twice. Here the checks run once, by migrate (with its database
checks), and ensure_admin runs in the same process without them. The launcher calls this once
per start (`python -m inspector.launch all`, and `web` when asked to migrate).
"""

from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Apply migrations and make sure an admin account exists (migrate + ensure_admin, one process)."

    # migrate runs the checks itself (skip_checks=False below), with the database's own checks.
    requires_system_checks: list[str] = []

    def handle(self, *args: Any, **options: Any) -> None:
        # The caller's streams, not self.stdout: wrapping Django's OutputWrapper again would end
        # migrate's "Applying …" and its " OK" on separate lines.
        streams = {"verbosity": options["verbosity"], "stdout": options.get("stdout"), "stderr": options.get("stderr")}
        call_command("migrate", interactive=False, skip_checks=False, **streams)
        call_command("ensure_admin", **streams)
