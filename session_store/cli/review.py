"""Reviewing what a store holds: `sessions`, `history`, `summaries`, `context` and `search`.

Each opens the store read-only (so a database on read-only media can be reviewed) and never creates
a database or a schema. `sessions`, `summaries`, `history` and `search` print the store's own reads as their rows
hold them, importing no pydantic-ai (it takes most of their start-up): messages are shown from their stored JSON.
Only their `--json` forms, which give usage and messages as pydantic-ai dumps them (normalised by loading them),
and `context`, which rebuilds the window with the store's processor and counts tokens with its tokenizer, import it.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from .._codec import stored_form
from .._display import summary_json, window_tokens
from .._history.review import StoredMessage, history_records, session_records, summary_records
from .._history.search import SearchRecord, search_records
from ._app import MAX_COUNT, NAME, Bounded, db_option, json_option, main, scope_option
from ._messages import Said, render_messages, role, said_in
from ._render import CLIP, clip, echo_json, plural, print_suggestion, record_json
from ._runtime import Settings, out, pass_settings, read, review, run
from .branching import chosen_branch, tip_option

__all__ = ('context', 'history', 'search', 'sessions', 'summaries')


@main.command()
@scope_option
@click.option('--limit', type=Bounded(1, MAX_COUNT), help='At most this many, most recently updated first.')
@json_option
@db_option
@pass_settings
def sessions(settings: Settings, scope: str | None, limit: int | None, as_json: bool) -> None:
    """List sessions with their message and summary counts.

    Most recently updated first; --scope keeps only those saved under one scope. Both counts are of
    each session's active path (what `history`, `summaries` and `context` read), not of its other
    branches. Tokens in/out are what the model providers reported (billed) for the session's runs.
    A title column shows when a listed session has a title (given through pydantic-ai's
    `ConversationStore.update`); --json gives each one's, or null.
    """
    records = run(settings, review(settings, lambda database: session_records(database, scope=scope, limit=limit)))
    if as_json:
        echo_json([record_json(record.info()) for record in records])
        return
    if not records:
        under = f' under scope {scope!r}' if scope else ''
        out.print(f'No sessions{under} in {settings.shown_url}.')
        return
    table = Table(title=f'Sessions in {settings.shown_url}', title_justify='left')
    titled = any(record.title is not None for record in records)  # a title column only where there is one to show
    columns = [('session', 'left'), *([('title', 'left')] if titled else []), ('scope', 'left')]
    for name, justify in [*columns, ('messages', 'right'), ('summaries', 'right')]:
        table.add_column(name, justify=justify, overflow='fold')  # type: ignore[arg-type]
    table.add_column('provider tokens in/out', justify='right')
    table.add_column('updated', justify='left')
    for record in records:
        # The stored usage is pydantic-ai's dump of a `RunUsage`, whose counts default to 0.
        tokens = record.usage.get('input_tokens', 0), record.usage.get('output_tokens', 0)
        table.add_row(
            record.session_id,
            *([record.title or ''] if titled else []),
            record.scope or '',
            f'{record.message_count:,}',
            f'{record.summary_count:,}',
            f'{tokens[0]:,} / {tokens[1]:,}',
            record.updated_at.astimezone().strftime('%Y-%m-%d %H:%M'),
        )
    out.print(table, soft_wrap=False)


@main.command()
@click.argument('session_id', metavar='ID', type=NAME)
@scope_option
@click.option('--offset', type=Bounded(0, MAX_COUNT), default=0, show_default=True, help='First archive position.')
@click.option('--limit', type=Bounded(1, MAX_COUNT), default=50, show_default=True, help='Messages per page.')
@click.option('--all', 'everything', is_flag=True, help='Every message from --offset on, not one page.')
@click.option('--full', is_flag=True, help=f'Show whole parts instead of their first {CLIP} characters.')
@click.option(
    '--branch',
    'number',
    metavar='N',
    type=Bounded(1, MAX_COUNT),
    help="Branch N's path (numbered as `branches` shows them) instead of the active one.",
)
@tip_option
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
    number: int | None,
    tip: str | None,
    as_json: bool,
) -> None:
    """Show a session's archive, one line per message part.

    Every request, response, tool call and return, in order.

    One line per message part: `[12] user: ...`, `[13] assistant → lookup_order(order_id='ORDER-1042')`,
    `[14] tool lookup_order ⇒ {...}`. Pages of --limit messages; the footer gives the next page's command.
    The active path, unless --branch (or, for scripts, --tip) names another.
    """
    branch = chosen_branch(number, tip)
    # One message past the page tells whether there is a next page, without counting the archive.
    page = None if everything else limit + 1
    found: list[Any]
    if as_json:  # pydantic-ai's own JSON, as loading normalises it (a deprecated part as the part it loads as)
        found = run(
            settings,
            read(
                settings, lambda store: store.history(session_id, scope=scope, offset=offset, limit=page, branch=branch)
            ),
        )
    else:
        found = run(
            settings,
            review(
                settings,
                lambda database: _stored(
                    history_records(database, session_id, scope=scope, offset=offset, limit=page, branch=branch)
                ),
            ),
        )
    messages = found[:limit] if page is not None else found
    next_offset = offset + len(messages) if len(found) > len(messages) else None
    if as_json:
        echo_json(
            {
                'session_id': session_id,
                'branch': number,
                'tip': tip,
                'offset': offset,
                'next_offset': next_offset,
                'messages': stored_form(messages),
            }
        )
        return
    if not messages:
        of = f'Session {session_id!r}'
        of = f'Branch {number} of {of}' if number is not None else f'The branch {tip!r} of {of}' if tip else of
        out.print(f'{of} has no messages at position {offset} or later.')
        return
    for line in render_messages(messages, range(offset, offset + len(messages)), full=full):
        out.print(line)
    if next_offset is not None:
        words = ['history', session_id, '--offset', str(next_offset), '--limit', str(limit)]
        words += ['--scope', scope] if scope else []
        words += ['--branch', str(number)] if number is not None else ['--tip', tip] if tip is not None else []
        print_suggestion(settings, f'… more: {settings.command(*words)}')


async def _stored(records: Awaitable[list[StoredMessage]]) -> list[dict[str, Any]]:
    """The messages read, in their stored JSON form: parsed within `run`, so a corrupt row ends in its line."""
    return [record.stored for record in await records]


@main.command()
@click.argument('session_id', metavar='ID', type=NAME)
@scope_option
@json_option
@db_option
@pass_settings
def summaries(settings: Settings, session_id: str, scope: str | None, as_json: bool) -> None:
    """Show a session's summary chain and the range each covers.

    Each summary extends the one before it with only the messages evicted since, so the ranges are
    contiguous and together cover everything before the current window.
    """
    chain, elsewhere = run(
        settings, review(settings, lambda database: summary_records(database, session_id, scope=scope))
    )
    if as_json:
        echo_json([summary_json(summary.summary()) for summary in chain])
        return
    others = ''
    if elsewhere:
        see = settings.command('branches', session_id, *(['--scope', scope] if scope else []))
        others = f'{plural(elsewhere, "more summary")} stored on its other branches (see `{see}`)'
    if not chain:
        fits = others or 'its whole archive still fits the window'
        out.print(f'Session {session_id!r} has no summaries on its active path: {fits}.')
        return
    out.print(
        f'Session {session_id!r}: {plural(len(chain), "summary")} on its active path, covering messages '
        f'{chain[0].covers_from}-{chain[-1].covers_to - 1}{f"; {others}" if others else ""}.\n'
    )
    for summary in chain:
        extends = 'the first' if summary.number == 1 else f'extends #{summary.number - 1}'
        covered = summary.covers_to - summary.covers_from
        out.print(
            Text.assemble(
                (f'#{summary.number}', 'bold yellow'),
                f'  messages {summary.covers_from}-{summary.covers_to - 1} ({covered} new), {extends}',
                (
                    f'  · {summary.tokens:,} tokens (counted) · {summary.model_name or "unknown model"} · '
                    f'{summary.created_at.astimezone():%Y-%m-%d %H:%M:%S}',
                    'dim',
                ),
            )
        )
        out.print(Text(summary.text), soft_wrap=False)
        out.print()


@main.command()
@click.argument('session_id', metavar='ID', type=NAME)
@scope_option
@click.option('--full', is_flag=True, help=f'Show whole parts instead of their first {CLIP} characters.')
@json_option
@db_option
@pass_settings
def context(settings: Settings, session_id: str, scope: str | None, full: bool, as_json: bool) -> None:
    """Show the window the session's next request sends.

    The pinned head, the latest summary and the kept tail, with their archive positions.

    The next run sends exactly these messages plus its new prompt (its processor may compact them
    further first, if the new prompt crosses a trigger). Token counts are as stored when each message was
    archived, and the request carrying the summary counted now with tiktoken: what the web page shows too.
    """
    from pydantic_ai.messages import CompactionPart, ModelRequest

    window = run(settings, read(settings, lambda store: store.window(session_id, scope=scope)))
    tokens = window_tokens(window)
    if as_json:
        echo_json(
            {
                'session_id': session_id,
                'archived_messages': window.message_count,
                'positions': window.positions,
                'tokens': tokens,
                'messages': stored_form(window.messages),
            }
        )
        return
    summarized = any(
        isinstance(part, CompactionPart)
        for message in window.messages
        if isinstance(message, ModelRequest)
        for part in message.parts
    )
    how = 'a summary of the rest' if summarized else 'no summary'
    out.print(
        f'Session {session_id!r}: the next request sends {len(window.messages)} of {window.message_count} archived '
        f'messages ({sum(tokens):,} tokens) with {how}, then the new prompt.\n'
    )
    for line in render_messages(stored_form(window.messages), window.positions, full=full):
        out.print(line)
    out.print(Text.assemble(('[next] ', 'dim'), ('user', 'bold cyan'), ': ', ('<the new prompt>', 'dim')))


@main.command()
@click.argument('text')
@scope_option
@click.option('--session', 'session_id', metavar='ID', type=NAME, help='Search only this session.')
@click.option('--limit', type=Bounded(1, MAX_COUNT), default=20, show_default=True, help='At most this many hits.')
@json_option
@db_option
@pass_settings
def search(settings: Settings, text: str, scope: str | None, session_id: str | None, limit: int, as_json: bool) -> None:
    """Find archived messages containing TEXT.

    Case-insensitive, newest first, across every session unless --session or --scope narrows it.
    """
    if as_json:  # pydantic-ai's own JSON, as loading normalises it
        hits = run(
            settings, read(settings, lambda store: store.search(text, scope=scope, session_id=session_id, limit=limit))
        )
        echo_json(
            [
                {
                    'session_id': hit.session_id,
                    'scope': hit.scope,
                    'position': hit.position,
                    'text': hit.text,
                    'message': stored_form([hit.message])[0],
                }
                for hit in hits
            ]
        )
        return
    found = run(
        settings,
        review(
            settings,
            lambda database: search_records(
                database, text, scope=scope, session_id=session_id, limit=limit, match='phrase'
            ),
        ),
    )
    if not found:
        out.print(f'No archived message contains {text!r}.')
        return
    out.print(f'{len(found)} message{"s" if len(found) != 1 else ""} containing {text!r}, newest first:\n')
    for record in found:
        said = _saying(record, text)
        out.print(
            Text.assemble(
                (record.session_id, 'bold'),
                (f' [{record.position}] ', 'dim'),
                (said.speaker, said.style),
                said.separator,
                _snippet(said.text, text),
            )
        )
    if len(found) == limit:
        out.print(Text(f'… showing the newest {limit}; pass --limit for more.', style='dim'))
    first = found[0]
    around = settings.command('history', first.session_id, '--offset', str(max(first.position - 3, 0)), '--limit', '8')
    print_suggestion(settings, f'\nSee the newest in context: {around}')


def _saying(record: SearchRecord, text: str) -> Said:
    """What of the hit's message holds `text`, as `history` shows it: the first part holding it, else its request's
    instructions (which every request of a run repeats: they are not the user's words), else the whole message
    under its role (matched across two of them)."""
    wanted = text.lower()
    instructions, parts = said_in(record.stored)
    for said in (*parts, *([instructions] if instructions is not None else [])):
        if wanted in said.indexed.lower():
            return said
    return Said(role(record.stored), 'cyan', record.text, record.text)


def _snippet(shown: str, text: str, around: int = 70) -> Text:
    """`shown` around the first match of `text`, the match highlighted; its start where `text` isn't in it."""
    flat = ' '.join(shown.split())
    at = flat.lower().find(text.lower())
    if at < 0:  # shown otherwise than indexed (a tool call as code), or matched across whitespace
        return Text(clip(flat, False))
    start, end = max(at - around, 0), min(at + len(text) + around, len(flat))
    return Text.assemble(
        '…' if start else '',
        flat[start:at],
        (flat[at : at + len(text)], 'bold yellow'),
        flat[at + len(text) : end],
        '…' if end < len(flat) else '',
    )
