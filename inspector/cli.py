"""What the management commands meant for CI share (`replay`, `evals`, `surface`, `review`,
`loadtest`, `call`): exit status 3 is bad input, always. argparse exits 2 on an option error, and 2
means "could not run" in these commands, so their parsers exit 3 instead."""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

EXIT_BAD_INPUT = 3


def bad_input(message: str) -> CommandError:
    """A CommandError that exits 3: the command was given something it cannot use."""
    return CommandError(message, returncode=EXIT_BAD_INPUT)


def option_errors_exit_3(parser: argparse.ArgumentParser) -> None:
    """Make `parser` (or a subcommand's parser) exit 3 on an option error when run from the command line."""
    refuse = parser.error

    def error(message):
        if getattr(parser, "called_from_command_line", True):  # (a subcommand's parser does not say)
            parser.print_usage(sys.stderr)
            parser.exit(EXIT_BAD_INPUT, f"{parser.prog}: error: {message}\n")
        refuse(message)

    parser.error = error


def read_import(path: Path, user):
    """(owner, bytes, SHA-256) of a file a CI command imports (`replay`, `evals run`): owned by
    `user`, else by the first active superuser; the digest lets a file run twice be imported once."""
    from django.contrib.auth import get_user_model

    if user is None:
        user = get_user_model().objects.filter(is_superuser=True, is_active=True).order_by("pk").first()
        if user is None:
            raise bad_input("Importing a file needs --user (there is no superuser to default to).")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise bad_input(f"{path}: {exc.strerror or exc}") from None
    return user, data, hashlib.sha256(data).hexdigest()


class CiCommand(BaseCommand):
    """A command whose option errors exit 3, like its other bad input."""

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        option_errors_exit_3(parser)
        return parser
