"""The `session-store` command: run the offline demo, review archived sessions, branch and move them, and chat.

Every subcommand opens the store named by `--db` (or `$SESSION_STORE_URL`, or `./sessions.db`),
does one thing, and closes it. Output is for people by default (rich text, one line per message
part) and for scripts with `--json`. Anything a user can cause or fix ends the command with exit
code 1 and one line on stderr, never a traceback (see `_runtime.run`); click's own usage errors
exit 2 with a usage block.

Modules: `_app` (the group and its shared options), `_runtime` (settings, opening the store, errors),
`_render` (messages as lines and JSON), `review`, `branching`, `compaction`, `transfer`, `retention`,
`encryption`, `chat`, `demo`, `serve` and `evaluation` (`eval`): the commands, which register on the group
when imported (the group imports a command's module the first time the command is looked up, so `--help` and a
command import only what they need); `_demo_script` and `_demo_run` (the demo itself).

The console script is `start`, which imports even the group inside its guard for Ctrl-C; `main` (the group) is
imported from `_app` on first use, for the same reason.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._app import main

__all__ = ('main', 'start')

_ABORTED = '\nAborted!\n'
"""What click writes on stderr when Ctrl-C stops a command (a blank line closing the terminal's `^C`, then
`Aborted!`), exiting with 1: `start` ends the same way when Ctrl-C comes before click is even imported."""


def start() -> None:
    """The `session-store` command: the group, run with Ctrl-C at any moment, its imports included, ending it in
    click's one line `Aborted!` and exit code 1, never a `KeyboardInterrupt` traceback."""
    try:
        importlib.import_module('._app', __name__).main(prog_name='session-store')
    except KeyboardInterrupt:
        sys.stderr.write(_ABORTED)
        sys.exit(1)


def __getattr__(name: str) -> Any:
    # `main` is the group in `_app`, imported on first use so that importing this package imports nothing heavy.
    if name != 'main':
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    group = importlib.import_module('._app', __name__).main
    globals()['main'] = group
    return group
