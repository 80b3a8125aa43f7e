"""The commands' argument parser: a mistake on the command line is two lines, not the
usage of every flag (``statewise run APP`` has some fifty) followed by the error."""

from __future__ import annotations

import argparse
from typing import NoReturn


class CommandParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose error is the error and where to read the flags;
    ``--help`` still prints them all. Exit 2, as argparse's."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\ntry '{self.prog} --help'\n")
