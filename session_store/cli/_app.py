"""The `session-store` command group and the options its subcommands share; the subcommands register on `main`.

Light on purpose: it imports click and nothing of the store, so `session-store --help` starts at once. A command's
module (and with it pydantic-ai, SQLAlchemy, ...) is imported only when that command is run or asked for: see
`COMMANDS`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import click

from .._db._urls import DEFAULT_URL
from ..encryption import ENV_KEYS

__all__ = (
    'COMMANDS',
    'ENV_URL',
    'MAX_COUNT',
    'NAME',
    'Bounded',
    'Failure',
    'Listed',
    'Options',
    'db_option',
    'json_option',
    'main',
    'scope_option',
)

ENV_URL = 'SESSION_STORE_URL'
"""The environment variable `--db` falls back to."""


class Failure(click.ClickException):
    """A one-line error for the user: click prints `Error: <message>` on stderr and exits with 1."""

    def __init__(self, message: str) -> None:
        # One line, whatever the message was made from: SQL errors and validation errors run to many.
        super().__init__(' '.join(message.split()))


@dataclass
class Options:
    """The group's options as parsed: the database URL, whether the user had to name it, and the key file.

    Commands get them as `_runtime.Settings`, which adds what is done with them."""

    url: str = DEFAULT_URL
    named: bool = False
    """Given as `--db` rather than taken from the environment or the default: suggested commands repeat it."""
    key_file: str | None = None
    """`--key-file`: the keys of an encrypted store, else `$SESSION_STORE_KEYS` holds them (or there are none)."""


MAX_COUNT = 1_000_000_000
"""The most a count or position option takes: more than any session or store holds, inside every backend's integers."""


def _label(param: click.Parameter | None) -> str:
    """How an error names a parameter: an option by its long name (`--limit`), an argument by its metavar (`ID`)."""
    if isinstance(param, click.Option):
        return max(param.opts, key=len)
    return 'the value' if param is None else param.human_readable_name


class Bounded(click.IntRange):
    """A whole number from `low` to `high`: a number outside them is refused in one line naming the option and both
    bounds, exit 1, as every error a user can fix is, so a number past what the database holds never reaches it.
    What is not a number at all is click's usage error, as any argument click can't parse."""

    def __init__(self, low: int, high: int) -> None:
        super().__init__(low, high)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.INT.convert(value, param, ctx)
        try:
            return super().convert(number, param, ctx)
        except click.BadParameter:
            raise Failure(f'{_label(param)} must be from {self.min:,} to {self.max:,}; got {number}.') from None


class _Name(click.types.StringParamType):
    """A session id or scope as typed: refused in one line, exit 1, when it is blank (only spaces)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        text = super().convert(value, param, ctx)
        if not text.strip():
            raise Failure(f'{_label(param)} is blank: give at least one character other than spaces.')
        return text


NAME = _Name()
"""The type of every session id and scope a command takes."""


def _set_db(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    # A subcommand's --db overrides the group's, so `session-store history demo --db URL` works too.
    if value is not None:
        options = ctx.ensure_object(Options)
        options.url, options.named = value, True


def _set_key_file(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.ensure_object(Options).key_file = value


_KEY_FILE_HELP = f'File of ID=SECRET keys, newest first, for an encrypted store (default: ${ENV_KEYS}).'


def db_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """`--db URL` and `--key-file FILE` on a subcommand, the same options the group takes."""
    with_db = click.option(
        '--db',
        metavar='URL',
        expose_value=False,
        callback=_set_db,
        help=f'Database URL or SQLite file path (default: ${ENV_URL}, else {DEFAULT_URL}).',
    )(function)
    return click.option('--key-file', metavar='FILE', expose_value=False, callback=_set_key_file, help=_KEY_FILE_HELP)(
        with_db
    )


def scope_option(function: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        '--scope', metavar='SCOPE', type=NAME, help='Only sessions saved under this scope (e.g. a user id).'
    )(function)


def json_option(function: Callable[..., Any]) -> Callable[..., Any]:
    return click.option('--json', 'as_json', is_flag=True, help='Print JSON for scripts instead of text.')(function)


@dataclass(frozen=True)
class Listed:
    """Where a command is defined, and what the group's help lists it as (the first paragraph of its own help)."""

    module: str
    summary: str = ''
    """Empty for a hidden command, which the help does not list."""


COMMANDS: Mapping[str, Listed] = {
    'branches': Listed('.branching', "Show a session's branches as a tree, the active one marked."),
    'chat': Listed('.chat', 'Chat with a model through a stored session.'),
    'compact': Listed(
        '.compaction', 'Summarize a session now: the next link of its summary chain, the window moved past it.'
    ),
    'context': Listed('.review', "Show the window the session's next request sends."),
    'delete': Listed(
        '.retention',
        'Delete a session with its archive, branches and summaries; with only --scope, every session of it.',
    ),
    'demo': Listed('.demo', 'Run the offline demo: start here.'),
    'demo-resume': Listed('.demo'),
    'encrypt': Listed(
        '.encryption',
        "Encrypt a store's clear rows in place under the newest key; resumable, and safe while it is in use.",
    ),
    'eval': Listed(
        '.evaluation',
        "Measure how much a summarizer keeps: a seeded conversation with planted facts (a support chat's order "
        "numbers, addresses, preferences and decisions, or a coding session's files, decisions, libraries and "
        'errors, some corrected, one kind only a tool returned) and questions, run through a session, checked '
        'after every compaction. A value counts only in a sentence that names its item.',
    ),
    'export': Listed('.transfer', 'Write a session to JSON Lines, for `import`.'),
    'fork': Listed('.branching', "Copy the first N messages of a session's active path into a new session."),
    'history': Listed('.review', "Show a session's archive, one line per message part."),
    'import': Listed('.transfer', 'Store a session from an `export` file (- reads stdin).'),
    'keygen': Listed('.encryption', 'Print a new random key as an ID=SECRET line (ID defaults to k1).'),
    'migrate': Listed('.transfer', 'Create or upgrade the database schema.'),
    'prune': Listed(
        '.retention', "Delete the sessions not updated for --older-than, whole; with --scope, only that scope's."
    ),
    'rekey': Listed(
        '.encryption',
        'Re-encrypt every row under the newest key (the first in the key file), clear rows included; resumable.',
    ),
    'rewind': Listed('.branching', "Make a session's active path its first POSITION messages."),
    'search': Listed('.review', 'Find archived messages containing TEXT.'),
    'serve': Listed('.serve', 'Review sessions in a browser: conversations, summaries, windows, branches, search.'),
    'sessions': Listed('.review', 'List sessions with their message and summary counts.'),
    'summaries': Listed('.review', "Show a session's summary chain and the range each covers."),
    'switch': Listed('.branching', "Make branch N a session's active path."),
    'vacuum': Listed(
        '.retention',
        "Rewrite the database so nothing deleted survives in its files; on PostgreSQL, as the tables' owner.",
    ),
}
"""Every command, by the module that defines it (relative to this package). Importing the module registers its
commands on `main`; the summaries let `--help` list them all without importing any (a test keeps each equal to the
command's own help)."""


class _LazyGroup(click.Group):
    """The command group: each command is imported from its module of `COMMANDS` the first time it is looked up."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            importlib.import_module(COMMANDS[cmd_name].module, __package__)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Listed as click lists them (the same short help, cut to the same width), from stand-ins with each summary.
        listed = {name: click.Command(name, help=entry.summary) for name, entry in COMMANDS.items() if entry.summary}
        click.Group(commands=listed).format_commands(ctx, formatter)


@click.group(
    cls=_LazyGroup,
    context_settings={'help_option_names': ['-h', '--help']},
    epilog=('Start with `session-store demo`, then follow the commands it prints. Every command takes --help.'),
)
@click.option(
    '--db',
    metavar='URL',
    envvar=ENV_URL,
    show_envvar=True,
    default=DEFAULT_URL,
    show_default=True,
    help='Database URL (sqlite+aiosqlite:///FILE, postgresql+asyncpg://USER:PASS@HOST/DB) or a SQLite file path.',
)
@click.option('--key-file', metavar='FILE', expose_value=False, callback=_set_key_file, help=_KEY_FILE_HELP)
@click.version_option(package_name='pydantic-ai-session-store', prog_name='session-store')
@click.pass_context
def main(ctx: click.Context, db: str) -> None:
    """Persistent pydantic-ai sessions: review archived conversations, their summaries and windows.

    Sessions keep every message an agent run produced (the archive) and a chain of summaries; what a
    model is sent is a window of the latest summary plus the recent tail.
    """
    options = ctx.ensure_object(Options)
    if not options.named:
        options.url = db
        options.named = ctx.get_parameter_source('db') is click.core.ParameterSource.COMMANDLINE
