"""The `session-store` command: run the offline demo, review archived sessions, move them, and chat.

Every subcommand opens the store named by `--db` (or `$SESSION_STORE_URL`, or `./sessions.db`),
does one thing, and closes it. Output is for people by default (rich text, one line per message
part) and for scripts with `--json`. Anything a user can cause or fix (an unknown session, a bad
URL, a database that needs migrating, a server that doesn't answer, a missing provider key) ends
the command with exit code 1 and one line on stderr, never a traceback: see `run`.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

import click
from alembic.runtime.migration import MigrationContext
from alembic.util.exc import CommandError
from pydantic_ai import Agent
from pydantic_ai.conversation_store import ConversationConflict
from pydantic_ai.exceptions import AgentRunError, UserError
from pydantic_ai.messages import (
    BaseToolCallPart,
    BaseToolReturnPart,
    CompactionPart,
    FilePart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryFeedbackPart,
    RetryPromptPart,
    SpeechPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, infer_model
from pydantic_ai.models.test import TestModel
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text
from sqlalchemy import Connection
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from processors import SummarizationProcessor, TiktokenCounter, part_text

from . import _demo, migration
from ._codec import dump_messages, dump_usage
from .errors import SessionConflict, StoreError
from .exports import ExportError, SessionExport
from .results import SearchHit, SessionInfo, StoredSummary
from .store import DEFAULT_URL, SessionStore, WindowProcessor

__all__ = ('main',)

T = TypeVar('T')

ENV_URL = 'SESSION_STORE_URL'
"""The environment variable `--db` falls back to."""

CLIP = 300
"""How many characters of a message part a listing shows, unless `--full`."""

out = Console(highlight=False, emoji=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, emoji=False, soft_wrap=True)


# Settings, and the one place failures become a line on stderr


@dataclass
class Settings:
    """What every subcommand shares: the database URL, and whether the user had to name it."""

    url: str = DEFAULT_URL
    named: bool = False
    """Given as `--db` rather than taken from the environment or the default: suggested commands repeat it."""

    @property
    def shown_url(self) -> str:
        """The URL without its password, for messages."""
        try:
            return make_url(self.url).render_as_string(hide_password=True)
        except ArgumentError:
            return self.url

    @property
    def secret(self) -> bool:
        """The URL holds a password, which suggested commands must not print."""
        try:
            return make_url(self.url).password is not None
        except ArgumentError:
            return False

    def command(self, *words: str) -> str:
        """A `session-store` command line that reaches this same database.

        A URL given as --db is repeated, unless it holds a password: then the command relies on
        $SESSION_STORE_URL, and the caller says so (see `env_note`).
        """
        line = ['session-store', *words]
        if self.named and not self.secret:
            line += ['--db', self.url]
        return shlex.join(line)

    @property
    def env_note(self) -> str | None:
        """What to set before running suggested commands that could not name the database."""
        if self.named and self.secret:
            return f'(set ${ENV_URL} to your database URL first: these commands leave out its password)'
        return None


class Failure(click.ClickException):
    """A one-line error for the user: click prints `Error: <message>` on stderr and exits with 1."""

    def __init__(self, message: str) -> None:
        # One line, whatever the message was made from: SQL errors and validation errors run to many.
        super().__init__(' '.join(message.split()))


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def run(settings: Settings, work: Coroutine[Any, Any, T]) -> T:
    """Run a subcommand's async body, turning every failure the user can cause or fix into one line and exit 1.

    This is the only place errors are mapped, so every subcommand fails the same way. Anything not
    listed here is a bug in session-store and keeps its traceback.
    """
    try:
        return asyncio.run(work)
    except click.ClickException:
        raise
    except (StoreError, ConversationConflict) as error:
        # SessionNotFound, SchemaMismatch, a corrupt row, a conflict: their messages already say what to do.
        raise Failure(str(error)) from None
    except CommandError as error:  # alembic: e.g. a revision this version doesn't know
        raise Failure(f'Cannot migrate {settings.shown_url}: {_first_line(error)}') from None
    except SQLAlchemyError as error:
        cause = getattr(error, 'orig', None) or error
        raise Failure(f'Database error at {settings.shown_url}: {_first_line(cause)}') from None
    except OSError as error:
        reason = error.strerror or _first_line(error)
        raise Failure(f'Cannot reach the database at {settings.shown_url}: {reason}') from None
    except (UserError, ImportError, AgentRunError) as error:  # a model name, provider package or key problem
        raise Failure(f'Model error: {_first_line(error)}') from None
    except ValueError as error:  # bad URLs, ids, offsets and import files, as the store reports them
        raise Failure(_first_line(error)) from None


def _missing_sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names, when it doesn't exist (connecting would silently create it)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None  # SessionStore reports the bad URL itself
    name = parsed.database
    if parsed.get_backend_name() != 'sqlite' or not name or name == ':memory:' or name.startswith('file:'):
        return None
    path = Path(name)
    return None if path.exists() else path


@asynccontextmanager
async def open_store(
    settings: Settings, *, create: bool = False, processor: WindowProcessor | None = None
) -> AsyncIterator[SessionStore]:
    """The store at `--db`, schema checked.

    Reviewing commands (`create=False`) never create a database file or a schema: pointing one at a
    mistyped path says so instead of leaving an empty database there.
    """
    if not create and (missing := _missing_sqlite_file(settings.url)) is not None:
        raise Failure(
            f'No database file at {missing} ({settings.shown_url}). Run `session-store demo` to make one, '
            f'or point --db / ${ENV_URL} at your database.'
        )
    store = SessionStore(settings.url, processor=processor, migrate=create)
    try:
        async with store:
            yield store
    finally:
        await store.close()  # also when opening failed, which skips __aexit__


async def read(settings: Settings, query: Callable[[SessionStore], Awaitable[T]]) -> T:
    """One read against the store at `--db`: open it (never creating it), ask, close."""
    async with open_store(settings) as store:
        return await query(store)


# Rendering messages, one line per part


def _clip(text: str, full: bool) -> str:
    if full:
        return text
    flat = ' '.join(text.split())
    return flat if len(flat) <= CLIP else f'{flat[:CLIP]}… (+{len(flat) - CLIP} chars)'


def _value(value: Any) -> str:
    """Tool arguments and results as compact text: strings as they are, the rest as JSON."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _call(part: BaseToolCallPart) -> str:
    """A tool call as it reads in code: `lookup_order(order_id='ORDER-1042')`."""
    args: Any = part.args
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return f'{part.tool_name}({args})'
    if isinstance(args, dict):
        shown = ', '.join(
            f'{k}={v!r}' if isinstance(v, str | int | float | bool) else f'{k}={_value(v)}' for k, v in args.items()
        )
        return f'{part.tool_name}({shown})'
    return f'{part.tool_name}({"" if args is None else _value(args)})'


def _user_content(part: UserPromptPart) -> str:
    text, media = part_text(part)
    return f'{text} [{media} media item{"s" if media != 1 else ""}]'.strip() if media else text


def _part_line(part: Any, message: ModelMessage, full: bool) -> tuple[str, str, str]:
    """A part as (speaker, style, text)."""
    if isinstance(message, ModelRequest):
        if isinstance(part, SystemPromptPart):
            return 'system', 'magenta', _clip(part.content, full)
        if isinstance(part, UserPromptPart):
            return 'user', 'bold cyan', _clip(_user_content(part), full)
        if isinstance(part, CompactionPart):
            return 'summary', 'bold yellow', _clip(part.content or '(opaque)', full)
        if isinstance(part, BaseToolReturnPart):
            outcome = '' if part.outcome == 'success' else f'({part.outcome}) '
            return f'tool {part.tool_name} ⇒', 'green', _clip(outcome + _value(part.content), full)
        if isinstance(part, RetryPromptPart):
            target = f' {part.tool_name}' if part.tool_name else ''
            return f'retry{target}', 'red', _clip(_value(part.content), full)
        if isinstance(part, RetryFeedbackPart):
            return 'retry', 'red', _clip(_value(part.content), full)
    else:
        if isinstance(part, TextPart):
            return 'assistant', 'bold blue', _clip(part.content, full)
        if isinstance(part, ThinkingPart):
            return 'assistant (thinking)', 'dim blue', _clip(part.content, full)
        if isinstance(part, NativeToolCallPart):
            return 'assistant → native', 'blue', _clip(_call(part), full)
        if isinstance(part, BaseToolCallPart):
            return 'assistant →', 'blue', _clip(_call(part), full)
        if isinstance(part, NativeToolReturnPart):
            return f'native {part.tool_name} ⇒', 'green', _clip(_value(part.content), full)
        if isinstance(part, FilePart):
            return 'assistant file', 'blue', getattr(part.content, 'media_type', 'file')
        if isinstance(part, CompactionPart):
            who = f' by {part.provider_name}' if part.provider_name else ''
            return f'compaction{who}', 'yellow', _clip(part.content or '(opaque to this store)', full)
    if isinstance(part, SpeechPart):
        return 'speech', 'cyan', _clip(part.transcript or '(audio)', full)
    text, _ = part_text(part)  # parts this renderer has no reading for still show what they carry
    return getattr(part, 'part_kind', type(part).__name__), 'dim', _clip(text, full)


def render_messages(
    messages: Sequence[ModelMessage], positions: Sequence[int], *, full: bool = False
) -> Iterator[Text]:
    """Each message part as one line, `[position] speaker: text`; instructions only where they change."""
    instructions: str | None = None
    for position, message in zip(positions, messages, strict=True):
        label = f'[{position}] '
        if isinstance(message, ModelRequest) and message.instructions and message.instructions != instructions:
            instructions = message.instructions
            yield Text.assemble((label, 'dim'), ('instructions', 'magenta'), ': ', _clip(instructions, full))
        for part in message.parts:
            speaker, style, text = _part_line(part, message, full)
            separator = ' ' if speaker.endswith(('→', '⇒')) else ': '
            yield Text.assemble((label, 'dim'), (speaker, style), separator, text)


def _messages_json(messages: Sequence[ModelMessage]) -> list[Any]:
    """Messages as pydantic-ai's own JSON (what `ModelMessagesTypeAdapter` loads back)."""
    loaded: list[Any] = json.loads(dump_messages(list(messages)))
    return loaded


def _echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def _role(message: ModelMessage) -> str:
    if isinstance(message, ModelResponse):
        return 'assistant'
    kinds = {type(part) for part in message.parts}
    if UserPromptPart in kinds:
        return 'user'
    if any(issubclass(kind, BaseToolReturnPart) for kind in kinds):
        return 'tool'
    return 'request'


# The command group and its shared options


def _set_db(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    # A subcommand's --db overrides the group's, so `session-store history demo --db URL` works too.
    if value is not None:
        settings = ctx.ensure_object(Settings)
        settings.url, settings.named = value, True


def db_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """`--db URL` on a subcommand, the same option the group takes."""
    return click.option(
        '--db',
        metavar='URL',
        expose_value=False,
        callback=_set_db,
        help=f'Database URL (default: ${ENV_URL}, else {DEFAULT_URL}).',
    )(function)


def scope_option(function: Callable[..., Any]) -> Callable[..., Any]:
    return click.option('--scope', metavar='SCOPE', help='Only sessions saved under this scope (e.g. a user id).')(
        function
    )


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


# Review


@main.command()
@scope_option
@click.option('--limit', type=click.IntRange(min=1), help='At most this many, most recently updated first.')
@json_option
@db_option
@pass_settings
def sessions(settings: Settings, scope: str | None, limit: int | None, as_json: bool) -> None:
    """List sessions with their message and summary counts.

    Most recently updated first; --scope keeps only those saved under one scope.
    """
    infos = run(settings, read(settings, lambda store: store.sessions(scope=scope, limit=limit)))
    if as_json:
        _echo_json([_session_json(info) for info in infos])
        return
    if not infos:
        under = f' under scope {scope!r}' if scope else ''
        out.print(f'No sessions{under} in {settings.shown_url}.')
        return
    table = Table(title=f'Sessions in {settings.shown_url}', title_justify='left')
    for name, justify in [('session', 'left'), ('scope', 'left'), ('messages', 'right'), ('summaries', 'right')]:
        table.add_column(name, justify=justify, overflow='fold')  # type: ignore[arg-type]
    table.add_column('tokens in/out', justify='right')
    table.add_column('updated', justify='left')
    for info in infos:
        table.add_row(
            info.session_id,
            info.scope or '',
            f'{info.message_count:,}',
            f'{info.summary_count:,}',
            f'{info.usage.input_tokens:,} / {info.usage.output_tokens:,}',
            info.updated_at.astimezone().strftime('%Y-%m-%d %H:%M'),
        )
    out.print(table, soft_wrap=False)


def _session_json(info: SessionInfo) -> dict[str, Any]:
    data = asdict(info)
    data.update(
        usage=dump_usage(info.usage), created_at=info.created_at.isoformat(), updated_at=info.updated_at.isoformat()
    )
    return data


@main.command()
@click.argument('session_id', metavar='ID')
@scope_option
@click.option('--offset', type=click.IntRange(min=0), default=0, show_default=True, help='First archive position.')
@click.option('--limit', type=click.IntRange(min=1), default=50, show_default=True, help='Messages per page.')
@click.option('--all', 'everything', is_flag=True, help='Every message from --offset on, not one page.')
@click.option('--full', is_flag=True, help=f'Show whole parts instead of their first {CLIP} characters.')
@json_option
@db_option
@pass_settings
def history(
    settings: Settings,
    session_id: str,
    scope: str | None,
    offset: int,
    limit: int,
    everything: bool,
    full: bool,
    as_json: bool,
) -> None:
    """Show a session's archive, one line per message part.

    Every request, response, tool call and return, in order.

    One line per message part: `[12] user: ...`, `[13] assistant → lookup_order(order_id='ORDER-1042')`,
    `[14] tool lookup_order ⇒ {...}`. Pages of --limit messages; the footer gives the next page's command.
    """
    # One message past the page tells whether there is a next page, without counting the archive.
    page = None if everything else limit + 1
    messages = run(
        settings, read(settings, lambda store: store.history(session_id, scope=scope, offset=offset, limit=page))
    )
    more = page is not None and len(messages) > limit
    messages = messages[:limit] if more else messages
    next_offset = offset + len(messages) if more else None
    if as_json:
        _echo_json(
            {
                'session_id': session_id,
                'offset': offset,
                'next_offset': next_offset,
                'messages': _messages_json(messages),
            }
        )
        return
    if not messages:
        out.print(f'Session {session_id!r} has no messages at position {offset} or later.')
        return
    for line in render_messages(messages, range(offset, offset + len(messages)), full=full):
        out.print(line)
    if next_offset is not None:
        words = ['history', session_id, '--offset', str(next_offset), '--limit', str(limit)]
        words += ['--scope', scope] if scope else []
        out.print(Text(f'… more: {settings.command(*words)}', style='dim'))
        if settings.env_note:
            out.print(Text(settings.env_note, style='dim'))


@main.command()
@click.argument('session_id', metavar='ID')
@scope_option
@json_option
@db_option
@pass_settings
def summaries(settings: Settings, session_id: str, scope: str | None, as_json: bool) -> None:
    """Show a session's summary chain and the range each covers.

    Each summary extends the one before it with only the messages evicted since, so the ranges are
    contiguous and together cover everything before the current window.
    """
    chain = run(settings, read(settings, lambda store: store.summaries(session_id, scope=scope)))
    if as_json:
        _echo_json([_summary_json(summary) for summary in chain])
        return
    if not chain:
        out.print(f'Session {session_id!r} has no summaries yet: its whole archive still fits the window.')
        return
    out.print(
        f'Session {session_id!r}: {len(chain)} summaries covering messages '
        f'{chain[0].covers_from}-{chain[-1].covers_to - 1}.\n'
    )
    for summary in chain:
        extends = 'the first' if summary.index == 0 else f'extends #{summary.index - 1}'
        covered = summary.covers_to - summary.covers_from
        out.print(
            Text.assemble(
                (f'#{summary.index}', 'bold yellow'),
                f'  messages {summary.covers_from}-{summary.covers_to - 1} ({covered} new), {extends}',
                (
                    f'  · {summary.tokens:,} tokens · {summary.model_name or "unknown model"} · '
                    f'{summary.created_at.astimezone():%Y-%m-%d %H:%M:%S}',
                    'dim',
                ),
            )
        )
        out.print(Text(summary.text), soft_wrap=False)
        out.print()


def _summary_json(summary: StoredSummary) -> dict[str, Any]:
    data = asdict(summary)
    data.update(usage=dump_usage(summary.usage), created_at=summary.created_at.isoformat())
    return data


@main.command()
@click.argument('session_id', metavar='ID')
@scope_option
@click.option('--full', is_flag=True, help=f'Show whole parts instead of their first {CLIP} characters.')
@json_option
@db_option
@pass_settings
def context(settings: Settings, session_id: str, scope: str | None, full: bool, as_json: bool) -> None:
    """Show the window the session's next request sends.

    The pinned head, the latest summary and the kept tail, with their archive positions.

    The next run sends exactly these messages plus its new prompt (its processor may compact them
    further first, if the new prompt crosses a trigger). Token counts are tiktoken's (cl100k_base).
    """
    window, positions, archived = run(settings, _context(settings, session_id, scope))
    counter = TiktokenCounter()
    tokens = [counter([message]) for message in window]
    if as_json:
        _echo_json(
            {
                'session_id': session_id,
                'archived_messages': archived,
                'positions': positions,
                'tokens': tokens,
                'messages': _messages_json(window),
            }
        )
        return
    summarized = any(
        isinstance(part, CompactionPart)
        for message in window
        if isinstance(message, ModelRequest)
        for part in message.parts
    )
    how = 'a summary of the rest' if summarized else 'no summary'
    out.print(
        f'Session {session_id!r}: the next request sends {len(window)} of {archived} archived messages '
        f'({sum(tokens):,} tokens) with {how}, then the new prompt.\n'
    )
    for line in render_messages(window, positions, full=full):
        out.print(line)
    out.print(Text.assemble(('[next] ', 'dim'), ('user', 'bold cyan'), ': ', ('<the new prompt>', 'dim')))


async def _context(settings: Settings, session_id: str, scope: str | None) -> tuple[list[ModelMessage], list[int], int]:
    async with open_store(settings) as store:
        window = await store.window(session_id, scope=scope)
    return window.messages, window.positions, window.message_count


@main.command()
@click.argument('text')
@scope_option
@click.option('--session', 'session_id', metavar='ID', help='Search only this session.')
@click.option('--limit', type=click.IntRange(min=1), default=20, show_default=True, help='At most this many hits.')
@json_option
@db_option
@pass_settings
def search(settings: Settings, text: str, scope: str | None, session_id: str | None, limit: int, as_json: bool) -> None:
    """Find archived messages containing TEXT.

    Case-insensitive, newest first, across every session unless --session or --scope narrows it.
    """
    hits = run(
        settings, read(settings, lambda store: store.search(text, scope=scope, session_id=session_id, limit=limit))
    )
    if as_json:
        _echo_json(
            [
                {
                    'session_id': hit.session_id,
                    'scope': hit.scope,
                    'position': hit.position,
                    'text': hit.text,
                    'message': _messages_json([hit.message])[0],
                }
                for hit in hits
            ]
        )
        return
    if not hits:
        out.print(f'No archived message contains {text!r}.')
        return
    out.print(f'{len(hits)} message{"s" if len(hits) != 1 else ""} containing {text!r}, newest first:\n')
    for hit in hits:
        out.print(
            Text.assemble(
                (hit.session_id, 'bold'),
                (f' [{hit.position}] ', 'dim'),
                (_role(hit.message), 'cyan'),
                ': ',
                _snippet(hit, text),
            )
        )
    if len(hits) == limit:
        out.print(Text(f'… showing the newest {limit}; pass --limit for more.', style='dim'))
    first = hits[0]
    around = settings.command('history', first.session_id, '--offset', str(max(first.position - 3, 0)), '--limit', '8')
    out.print(Text(f'\nSee the newest in context: {around}', style='dim'))
    if settings.env_note:
        out.print(Text(settings.env_note, style='dim'))


def _snippet(hit: SearchHit, text: str, around: int = 70) -> Text:
    """The hit's text around the first match, the match highlighted."""
    flat = ' '.join(hit.text.split())
    at = flat.lower().find(text.lower())
    if at < 0:  # matched across whitespace the flattening changed
        return Text(_clip(flat, False))
    start, end = max(at - around, 0), min(at + len(text) + around, len(flat))
    return Text.assemble(
        '…' if start else '',
        flat[start:at],
        (flat[at : at + len(text)], 'bold yellow'),
        flat[at + len(text) : end],
        '…' if end < len(flat) else '',
    )


# Moving sessions: export, import, delete, migrate


@main.command()
@click.argument('session_id', metavar='ID')
@scope_option
@click.option(
    '-o', '--output', type=click.File('w', encoding='utf-8'), default='-', help='Write to this file (default: stdout).'
)
@db_option
@pass_settings
def export(settings: Settings, session_id: str, scope: str | None, output: IO[str]) -> None:
    """Write a session to JSON Lines, for `import`.

    A header line, then one line per message, one per summary, and a closing line with the counts and
    a digest, so `import` can tell a whole file from one cut short.

    `session-store import` reads it back exactly: messages (pydantic-ai's JSON), their token counts,
    the summary chain and the window position.
    """
    document = run(settings, read(settings, lambda store: store.export(session_id, scope=scope)))
    output.writelines(line + '\n' for line in document.to_json_lines())
    output.flush()
    if output is not sys.stdout:
        err.print(
            f'Exported {session_id!r}: {len(document.messages)} messages and {len(document.summaries)} '
            f'summaries to {output.name}.'
        )


@main.command('import')
@click.argument('file', type=click.File('r', encoding='utf-8'))
@click.option('--session-id', 'session_id', metavar='ID', help='Store it under this id instead of its own.')
@click.option('--scope', metavar='SCOPE', help='Store it under this scope instead of its own.')
@db_option
@pass_settings
def import_(settings: Settings, file: IO[str], session_id: str | None, scope: str | None) -> None:
    """Store a session from an `export` file (- reads stdin).

    The id (its own, or --session-id) must be free in the target database, which is created if new.
    A file that is cut short, changed, or inconsistent is refused whole.
    """
    source = 'stdin' if file is sys.stdin else file.name
    try:
        document = SessionExport.from_json_lines(file, source=source)
    except ExportError as error:
        raise Failure(str(error)) from None
    except UnicodeDecodeError as error:
        raise Failure(
            f'{source}: not UTF-8 text ({error.reason} at byte {error.start}); is it an export file?'
        ) from None
    target = run(settings, _import(settings, document, session_id, scope))
    out.print(
        f'Imported {target!r} into {settings.shown_url}: {len(document.messages)} messages, '
        f'{len(document.summaries)} summaries.'
    )


async def _import(settings: Settings, document: SessionExport, session_id: str | None, scope: str | None) -> str:
    async with open_store(settings, create=True) as store:
        try:
            return await store.import_(document, session_id=session_id, scope=scope)
        except SessionConflict:
            taken = session_id or document.session_id
            raise Failure(
                f'A session {taken!r} already exists in {settings.shown_url}; import under another id with '
                '--session-id NEW, or delete it first.'
            ) from None


@main.command()
@click.argument('session_id', metavar='ID')
@scope_option
@click.option('-y', '--yes', is_flag=True, help='Do not ask for confirmation.')
@db_option
@pass_settings
def delete(settings: Settings, session_id: str, scope: str | None, yes: bool) -> None:
    """Delete a session with its archive and summaries.

    Asks first, unless --yes.
    """
    run(settings, _delete(settings, session_id, scope, yes))
    out.print(f'Deleted session {session_id!r} from {settings.shown_url}.')


async def _delete(settings: Settings, session_id: str, scope: str | None, yes: bool) -> None:
    async with open_store(settings) as store:
        # Check it exists before asking, so a typo fails at once instead of after a confirmation.
        await store.history(session_id, scope=scope, limit=0)
        if not yes:
            click.confirm(f'Delete session {session_id!r} and its whole archive from {settings.shown_url}?', abort=True)
        await store.delete(session_id, scope=scope)


@main.command()
@db_option
@pass_settings
def migrate(settings: Settings) -> None:
    """Create or upgrade the database schema.

    Brings the schema to this version of session-store's revision. Reviewing commands never change
    a schema themselves; they say when this is needed.
    """
    before, after = run(settings, _migrate(settings))
    if before == after:
        out.print(f'{settings.shown_url} is already at schema revision {after}; nothing to do.')
    elif before is None:
        out.print(f'Created the session-store schema (revision {after}) in {settings.shown_url}.')
    else:
        out.print(f'Upgraded {settings.shown_url} from schema revision {before} to {after}.')


async def _migrate(settings: Settings) -> tuple[str | None, str]:
    def revision(connection: Connection) -> str | None:
        return MigrationContext.configure(connection).get_current_revision()

    store = SessionStore(settings.url)
    try:
        # Not `async with store`: opening checks the schema, and refuses exactly the databases this upgrades.
        async with store.engine.connect() as connection:
            before = await connection.run_sync(revision)
        await store.migrate()
    finally:
        await store.close()
    return before, migration.head_revision()


# Chat


def resolve_model(name: str) -> Model:
    """A pydantic-ai model by name; `test` is pydantic-ai's offline `TestModel`.

    Resolving builds the provider, so a missing provider package or API key fails here, before any input.
    """
    if name == 'test':
        return TestModel()
    return infer_model(name)


@main.command()
@click.argument('session_id', metavar='ID')
@click.option('--model', 'model_name', metavar='MODEL', required=True, help="e.g. openai:gpt-4.1; 'test' runs offline.")
@scope_option
@click.option('--system', 'system_prompt', metavar='TEXT', help='System prompt for a new session.')
@click.option(
    '--summarizer',
    metavar='MODEL',
    help='Summarize the conversation with this model past 60 messages (keeping the last 20); '
    'without it the window just slides.',
)
@db_option
@pass_settings
def chat(
    settings: Settings,
    session_id: str,
    model_name: str,
    scope: str | None,
    system_prompt: str | None,
    summarizer: str | None,
) -> None:
    """Chat with a model through a stored session.

    Each line you type is one agent run, stored when it completes.

    Reads lines from stdin until end of input or /quit. The session is created if new, and resumed
    (from its stored window) if not. Provider models need their API key in the environment.
    """
    run(settings, _chat(settings, session_id, model_name, scope, system_prompt, summarizer))


async def _chat(
    settings: Settings,
    session_id: str,
    model_name: str,
    scope: str | None,
    system_prompt: str | None,
    summarizer: str | None,
) -> None:
    model = resolve_model(model_name)
    processor = None
    if summarizer is not None:
        processor = SummarizationProcessor(
            resolve_model(summarizer), trigger=('messages', 60), keep=('messages', 20), token_counter=TiktokenCounter()
        )
    agent: Agent[None, str] = Agent(model, system_prompt=system_prompt or ())
    interactive = sys.stdin.isatty()
    async with open_store(settings, create=True, processor=processor) as store:
        session = await store.session(session_id, scope=scope)
        # Only to number the replies as `history` does; reading the window never reads the archive.
        archived = (await store.window(session_id, scope=scope)).message_count
        if interactive:
            err.print(f'Session {session_id!r} ({archived} messages archived) with {model_name}. /quit or Ctrl-D ends.')
        while True:
            try:
                line = err.input('[bold cyan]you>[/] ') if interactive else sys.stdin.readline()
            except EOFError:
                break
            if not line:  # end of input
                break
            line = line.strip()
            if line in ('/quit', '/exit'):
                break
            if not line:
                continue
            result = await session.run(agent, line)
            replies = [m for m in result.new_messages() if not (isinstance(m, ModelRequest) and _role(m) == 'user')]
            position = archived + len(result.new_messages()) - len(replies)
            for text in render_messages(replies, range(position, position + len(replies))):
                out.print(text)
            archived += len(result.new_messages())


# The demo


@main.command()
@click.option('--turns', type=click.IntRange(min=2), default=120, show_default=True, help='Customer turns to run.')
@click.option(
    '--session',
    'session_id',
    metavar='ID',
    help="The session to create (default: 'demo', or 'demo-2', 'demo-3', ... when taken).",
)
@click.option('--fresh', is_flag=True, help='Delete the demo session first (only it) and start it over.')
@db_option
@pass_settings
def demo(settings: Settings, turns: int, session_id: str | None, fresh: bool) -> None:
    """Run the offline demo: start here.

    A scripted support agent (pydantic-ai FunctionModel, no provider key) answers --turns customer
    messages with parallel tool calls; a scripted summarizer compacts the conversation once the window
    reaches 40 messages, keeping the last 12. Half way, this process stops and a new process reopens the
    store and carries on from the stored window and summary. Finally it prints messages archived,
    summaries made, tokens sent to the model against tokens archived, and the commands to look further.

    It writes to --db (./sessions.db by default) under scope 'demo'. Run it again for another session
    (demo-2, ...), or pass --fresh to replace 'demo'.
    """
    run(settings, _run_demo(settings, turns, session_id, fresh))


@main.command('demo-resume', hidden=True)
@click.argument('session_id')
@click.option('--from', 'first', type=int, required=True)
@click.option('--to', 'end', type=int, required=True)
@pass_settings
def demo_resume(settings: Settings, session_id: str, first: int, end: int) -> None:
    """The demo's second process: runs turns FROM..TO-1, printing a JSON line per turn, then its report."""

    def on_turn(turn: int) -> None:
        click.echo(json.dumps({'turn': turn}))
        sys.stdout.flush()

    report = run(settings, _demo.run_turns(settings.url, session_id, first, end, on_turn))
    click.echo(json.dumps({'report': asdict(report)}))


async def _demo_session_id(settings: Settings, wanted: str | None, fresh: bool) -> str:
    """The session the demo writes: `wanted` or the first free of demo, demo-2, ...; with --fresh, emptied first."""
    async with open_store(settings, create=True) as store:
        taken = {info.session_id for info in await store.sessions()}
        if fresh:
            session_id = wanted or 'demo'
            if session_id in taken:
                await store.delete(session_id)
            return session_id
        if wanted is not None:
            if wanted in taken:
                raise Failure(f'Session {wanted!r} already exists; pass --fresh to replace it, or pick another id.')
            return wanted
        number = 1
        while (session_id := 'demo' if number == 1 else f'demo-{number}') in taken:
            number += 1
        return session_id


async def _resume_in_new_process(
    settings: Settings, session_id: str, first: int, end: int, advance: Callable[[int], None]
) -> _demo.PartReport:
    """Run the second half in a new OS process, following its progress through the JSON lines it prints."""
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, '-m', 'session_store.cli', 'demo-resume', session_id, '--from', str(first), '--to', str(end)),
        stdout=asyncio.subprocess.PIPE,
        # The URL goes by environment, not argv, where any user could read its password in the process list.
        env={**os.environ, ENV_URL: settings.url},
    )
    assert process.stdout is not None
    report: _demo.PartReport | None = None
    async for raw in process.stdout:
        event = json.loads(raw)
        if 'turn' in event:
            advance(process.pid)
        elif 'report' in event:
            report = _demo.PartReport(**event['report'])
    code = await process.wait()
    if code != 0 or report is None:
        raise Failure(f'The demo process that resumed the session (pid {process.pid}) failed with exit code {code}.')
    return report


async def _read_outcome(settings: Settings, session_id: str) -> _demo.DemoOutcome:
    async with open_store(settings) as store:
        document = await store.export(session_id, scope=_demo.DEMO_SCOPE)
        chain = await store.summaries(session_id, scope=_demo.DEMO_SCOPE)
    return _demo.DemoOutcome.from_export(document, chain)


async def _run_demo(settings: Settings, turns: int, wanted: str | None, fresh: bool) -> None:
    started = time.perf_counter()
    session_id = await _demo_session_id(settings, wanted, fresh)
    half = turns // 2
    err.print(
        f'Demo session {session_id!r} in {settings.shown_url}: {turns} customer turns, '
        f'restarting in a new process after turn {half}.'
    )
    with Progress(
        TextColumn('{task.description}'),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn('turns'),
        TimeElapsedColumn(),
        console=err,
    ) as progress:
        task = progress.add_task(f'process 1 (pid {os.getpid()})', total=turns)
        first = await _demo.run_turns(settings.url, session_id, 0, half, on_turn=lambda _turn: progress.advance(task))
        progress.console.print(
            f'Process 1 stopped after turn {half} and closed the store; a new process reopens it and resumes.'
        )

        def advance(pid: int) -> None:
            progress.update(task, description=f'process 2 (pid {pid})', advance=1)

        second = await _resume_in_new_process(settings, session_id, half, turns, advance)
    outcome = await _read_outcome(settings, session_id)
    _print_demo_report(settings, session_id, first, second, outcome, time.perf_counter() - started)


def _print_demo_report(
    settings: Settings,
    session_id: str,
    first: _demo.PartReport,
    second: _demo.PartReport,
    outcome: _demo.DemoOutcome,
    seconds: float,
) -> None:
    chain = outcome.chain
    continued = _demo.chain_continued(first, second, chain)
    out.print(f'\nDemo finished in {seconds:.1f} s: session {session_id!r} (scope {_demo.DEMO_SCOPE!r}).\n')
    processes = Table.grid(padding=(0, 2))
    for number, report in enumerate((first, second), start=1):
        processes.add_row(
            f'  process {number}',
            f'pid {report.pid}',
            f'turns {report.first_turn + 1}-{report.end_turn}',
            f'{report.summarizer_calls} summar{"y" if report.summarizer_calls == 1 else "ies"}',
            f'{report.seconds:.1f} s',
        )
    out.print(processes)
    out.print()
    sent = first.tokens_sent + second.tokens_sent
    requests = first.requests + second.requests
    peak = max(first.peak_request_tokens, second.peak_request_tokens)
    covered = f'covering messages {chain[0].covers_from}-{chain[-1].covers_to - 1}' if chain else 'none yet'
    facts = Table.grid(padding=(0, 2))
    facts.add_column()
    facts.add_column(justify='right')
    facts.add_column()
    facts.add_row(
        '  messages archived', f'{outcome.messages:,}', f'all of them, with {outcome.tool_calls:,} tool calls'
    )
    facts.add_row('  summaries made', f'{len(chain):,}', f'one chain, {covered}')
    facts.add_row('  tokens archived', f'{outcome.tokens_archived:,}', 'each stored message counted once')
    facts.add_row('  tokens sent to the model', f'{sent:,}', f'{requests:,} requests of at most {peak:,} tokens')
    ratio = outcome.tokens_without_compaction / max(sent, 1)
    facts.add_row('  without compaction', f'{outcome.tokens_without_compaction:,}', f'{ratio:.1f}x the tokens sent')
    out.print(facts)
    out.print(
        Text(
            '  (tiktoken counts; "without compaction" is every request re-sending the whole history before it)',
            style='dim',
        ),
        soft_wrap=False,
    )
    out.print()
    if continued:
        resumed = chain[first.summarizer_calls]
        out.print(
            Text(
                f'✓ The summary chain continued across the restart: summary #{resumed.index}, the first one '
                f'process 2 made, extended #{resumed.index - 1}, which process 1 stored. No summary was lost '
                'or made again.',
                style='green',
            ),
            soft_wrap=False,
        )
    elif continued is None:
        out.print('(No summary was made after the restart: run more --turns to see the chain continue.)')
    else:
        raise Failure(f'The summary chain of {session_id!r} did not continue across the restart; this is a bug.')
    out.print('\nLook further:')
    commands = [
        (settings.command('history', session_id, '--limit', '20'), 'the archive, a line per message part'),
        (settings.command('summaries', session_id), 'the summary chain, with the range each covers'),
        (settings.command('context', session_id), 'the window the next request would send'),
        (settings.command('search', _demo.order_for(6)), 'every message mentioning that order'),
        (settings.command('sessions', '--scope', _demo.DEMO_SCOPE), 'all demo sessions'),
    ]
    width = max(len(command) for command, _ in commands)
    for command, what in commands:
        # Never wrapped (soft wrap), so each command can be copied whole whatever the terminal's width.
        out.print(Text.assemble('  ', (command.ljust(width), 'bold'), (f'  # {what}', 'dim')))
    if settings.env_note:
        out.print(Text(f'  {settings.env_note}', style='dim'))


if __name__ == '__main__':
    main()
