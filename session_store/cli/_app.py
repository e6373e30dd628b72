"""The `session-store` command group and the options its subcommands share; the subcommands register on `main`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from ..encryption import ENV_KEYS
from ..store import DEFAULT_URL
from ._runtime import ENV_URL, Failure, Settings

__all__ = ('MAX_COUNT', 'NAME', 'Bounded', 'db_option', 'json_option', 'main', 'pass_settings', 'scope_option')

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
        settings = ctx.ensure_object(Settings)
        settings.url, settings.named = value, True


def _set_key_file(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.ensure_object(Settings).key_file = value


_KEY_FILE_HELP = f'File of ID=SECRET keys, newest first, for an encrypted store (default: ${ENV_KEYS}).'


def db_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """`--db URL` and `--key-file FILE` on a subcommand, the same options the group takes."""
    with_db = click.option(
        '--db',
        metavar='URL',
        expose_value=False,
        callback=_set_db,
        help=f'Database URL (default: ${ENV_URL}, else {DEFAULT_URL}).',
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


pass_settings = click.make_pass_decorator(Settings, ensure=True)


@click.group(
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
    help='Database URL: sqlite+aiosqlite:///FILE or postgresql+asyncpg://USER:PASS@HOST/DB.',
)
@click.option('--key-file', metavar='FILE', expose_value=False, callback=_set_key_file, help=_KEY_FILE_HELP)
@click.version_option(package_name='pydantic-ai-session-store', prog_name='session-store')
@click.pass_context
def main(ctx: click.Context, db: str) -> None:
    """Persistent pydantic-ai sessions: review archived conversations, their summaries and windows.

    Sessions keep every message an agent run produced (the archive) and a chain of summaries; what a
    model is sent is a window of the latest summary plus the recent tail.
    """
    settings = ctx.ensure_object(Settings)
    if not settings.named:
        settings.url = db
        settings.named = ctx.get_parameter_source('db') is click.core.ParameterSource.COMMANDLINE
