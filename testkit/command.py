"""The `session-store` command as a user's shell starts it: pyproject.toml's console-script entry point, run by a
new interpreter, for the tests and the benchmark that look at its start-up."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path

__all__ = ('REPO', 'command_program')

REPO = Path(__file__).resolve().parent.parent


def command_program(args: Sequence[str], *, before: str = '') -> str:
    """A `python -c` program that runs `session-store ARGS` as the console script does, after the lines `before`."""
    target = tomllib.loads((REPO / 'pyproject.toml').read_text())['project']['scripts']['session-store']
    module, _, function = target.partition(':')
    return (
        f'{before}import sys\nsys.argv = ["session-store", *{list(args)!r}]\n'
        f'from {module} import {function}\nsys.exit({function}())\n'
    )
