"""The commands' argument parsers: a mistake on the command line is two lines, not the
usage of every flag (``statewise run APP`` has some fifty) followed by the error."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import NoReturn


class CommandParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose error is the error and where to read the flags;
    ``--help`` still prints them all. Exit 2, as argparse's."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\ntry '{self.prog} --help'\n")


def command_parser(prog: str, description: str, commands: Mapping[str, str],
                    metavar: str = "COMMAND", epilog: str | None = None
                    ) -> argparse.ArgumentParser:
    """A parser that picks a command and leaves the rest of the line to the command's own
    parser: so ``prog COMMAND --help`` shows that command's flags only, and the settings'
    environment variables and the apps are read only by a command that uses them."""
    parser = CommandParser(prog=prog, description=description, epilog=epilog,
                           formatter_class=_CommandsHelp)
    choices = parser.add_subparsers(dest="command", metavar=metavar, title="commands")
    for name, summary in commands.items():
        # No flags, not even -h: parse_known_args hands everything after the name over.
        choices.add_parser(name, help=summary, add_help=False)
    return parser


class _CommandsHelp(argparse.HelpFormatter):
    """argparse measures a command's name without the indent it prints it with, so the
    longest name got a line of its own: measured here with it."""

    def _iter_indented_subactions(self, action):
        for subaction in super()._iter_indented_subactions(action):
            width = len(self._format_action_invocation(subaction)) + self._current_indent
            self._action_max_length = max(self._action_max_length, width)
            yield subaction
