"""Moving sessions and databases: `export`, `import` and `migrate`.

The file format is `SessionExport`'s JSON Lines (`session_store.exports`); these commands only read
and write it.
"""

from __future__ import annotations

import sys
from typing import IO

import click

from .._db import schema
from ..errors import ExportError, SessionConflict
from ..exports import SessionExport
from ..store import SessionStore
from ._app import NAME, db_option, main, scope_option
from ._runtime import Failure, Settings, err, explained, open_store, out, pass_settings, read, run

__all__ = ('export', 'import_', 'migrate')


@main.command()
@click.argument('session_id', metavar='ID', type=NAME)
@scope_option
@click.option(
    '-o', '--output', type=click.File('w', encoding='utf-8'), default='-', help='Write to this file (default: stdout).'
)
@db_option
@pass_settings
def export(settings: Settings, session_id: str, scope: str | None, output: IO[str]) -> None:
    """Write a session to JSON Lines, for `import`.

    A header line, then each branch with its messages (one line each), one line per summary, and a
    closing line with the counts and a digest, so `import` can tell a whole file from one cut short.

    `session-store import` reads it back exactly: every branch, its messages (pydantic-ai's JSON) and
    their token counts, every summary chain, the active branch and its window.
    """
    document = run(settings, read(settings, lambda store: store.export(session_id, scope=scope)))
    output.writelines(line + '\n' for line in document.to_json_lines())
    output.flush()
    if output is not sys.stdout:
        err.print(f'Exported {session_id!r}: {_contents(document)} to {output.name}.')


@main.command('import')
@click.argument('file', type=click.File('r', encoding='utf-8'))
@click.option('--session-id', 'session_id', metavar='ID', type=NAME, help='Store it under this id instead of its own.')
@click.option('--scope', metavar='SCOPE', type=NAME, help='Store it under this scope instead of its own.')
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
    out.print(f'Imported {target!r} into {settings.shown_url}: {_contents(document)}.')


def _contents(document: SessionExport) -> str:
    """What a document holds: '48 messages and 2 summaries', after its branches when it has more than one."""
    branches = f'{len(document.segments)} branches, ' if len(document.segments) > 1 else ''
    return f'{branches}{document.archived} messages and {len(document.summaries)} summaries'


async def _import(settings: Settings, document: SessionExport, session_id: str | None, scope: str | None) -> str:
    async with open_store(settings, 'create') as store:
        try:
            return await store.import_(document, session_id=session_id, scope=scope)
        except SessionConflict:
            taken = session_id or document.session_id
            raise Failure(
                f'A session {taken!r} already exists in {settings.shown_url}; import under another id with '
                '--session-id NEW, or delete it first.'
            ) from None


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
    elif schema.is_newer(before):  # opened above: a newer release's, stamped safe for this one
        out.print(
            f'{settings.shown_url} is at schema revision {before}, which a newer session-store made and marked safe '
            f'for this version (at {after}) to use; nothing to do.'
        )
    elif before is None:
        out.print(f'Created the session-store schema (revision {after}) in {settings.shown_url}.')
    else:
        out.print(f'Upgraded {settings.shown_url} from schema revision {before} to {after}.')


async def _migrate(settings: Settings) -> tuple[str | None, str]:
    store = SessionStore(settings.url)
    try:
        # Not `open_store`: opening checks the schema, and refuses exactly the databases this upgrades.
        with explained(settings, store.url, 'create'):
            before = await store.migrate()
    finally:
        await store.close()
    return before, schema.head_revision()
