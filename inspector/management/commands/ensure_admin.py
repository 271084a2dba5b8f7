"""Make sure an admin account exists, without ever hard-coding a password.

Order: an existing superuser is left alone; else INSPECTOR_ADMIN_USERNAME and
INSPECTOR_ADMIN_PASSWORD (and optional INSPECTOR_ADMIN_EMAIL) create one; else, at a
terminal, Django's interactive createsuperuser prompt; else a warning says what to set.
"""

import os
import sys

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the first admin account from the environment or a prompt."

    def handle(self, *args, **options):
        User = get_user_model()
        if User.objects.filter(is_superuser=True).exists():
            return
        username = os.environ.get("INSPECTOR_ADMIN_USERNAME")
        password = os.environ.get("INSPECTOR_ADMIN_PASSWORD")
        if username and password:
            User.objects.create_superuser(username, os.environ.get("INSPECTOR_ADMIN_EMAIL", ""), password)
            self.stdout.write(self.style.SUCCESS(f"Created admin account “{username}”."))
            return
        if sys.stdin.isatty():
            self.stdout.write("No admin account yet: create one now.")
            call_command("createsuperuser", interactive=True)
            return
        self.stderr.write(
            self.style.WARNING(
                "No admin account exists. Set INSPECTOR_ADMIN_USERNAME and INSPECTOR_ADMIN_PASSWORD, "
                "or run `make run` at a terminal to be prompted, or `.venv/bin/python manage.py createsuperuser`."
            )
        )
