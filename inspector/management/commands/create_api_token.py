"""Issue an API token for a user (admins use this for CI and scripts)."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from inspector.models import ApiToken


class Command(BaseCommand):
    help = "Create an API token for USERNAME and print the key once."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="cli")

    def handle(self, username, name, **options):
        try:
            user = get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"No user named {username!r}.")
        _, key = ApiToken.issue(user, name)
        self.stdout.write(key)
