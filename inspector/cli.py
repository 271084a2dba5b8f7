"""What the management commands meant for CI share (`replay`, `evals`, `surface`, `review`,
`loadtest`, `call`): exit status 3 is bad input, always. argparse exits 2 on an option error, and 2
means "could not run" in these commands, so their parsers exit 3 instead."""

from __future__ import annotations

import argparse
import sys

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


class CiCommand(BaseCommand):
    """A command whose option errors exit 3, like its other bad input."""

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        option_errors_exit_3(parser)
        return parser
