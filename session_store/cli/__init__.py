"""The `session-store` command: run the offline demo, review archived sessions, branch and move them, and chat.

Every subcommand opens the store named by `--db` (or `$SESSION_STORE_URL`, or `./sessions.db`),
does one thing, and closes it. Output is for people by default (rich text, one line per message
part) and for scripts with `--json`. Anything a user can cause or fix ends the command with exit
code 1 and one line on stderr, never a traceback (see `_runtime.run`); click's own usage errors
exit 2 with a usage block.

Modules: `_app` (the group and its shared options), `_runtime` (settings, opening the store, errors),
`_render` (messages as lines and JSON), `review`, `branching`, `compaction`, `transfer`, `retention`,
`encryption`, `chat`, `demo`, `serve` and `evaluation` (`eval`): the commands, which register on the group
when imported here; `_demo_script` and `_demo_run` (the demo itself).
"""

from __future__ import annotations

from . import branching, chat, compaction, demo, encryption, evaluation, retention, review, serve, transfer
from ._app import main

__all__ = (
    'branching',
    'chat',
    'compaction',
    'demo',
    'encryption',
    'evaluation',
    'main',
    'retention',
    'review',
    'serve',
    'transfer',
)
