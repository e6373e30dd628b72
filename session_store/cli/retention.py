"""Deleting for good: `delete` (a session, or every session of a scope), `prune` (sessions gone quiet), `vacuum`.

`delete` and `prune` remove whole sessions (every branch, every summary), then vacuum the database so nothing
of them survives in its files, and say what they removed. A role PostgreSQL does not let vacuum the tables
(only their owner may) gets one more line saying so, and who runs `vacuum`: the rows are gone all the same.
"""

from __future__ import annotations

import re
from datetime import timedelta

import click

from ..results import Removed, Vacuumed
from ..store import SessionStore
from ._app import NAME, db_option, main, scope_option
from ._render import plural
from ._runtime import Failure, Settings, open_store, out, pass_settings, run

__all__ = ('delete', 'prune', 'vacuum')

_AGE = re.compile(r'(\d+)([dhm])')
_UNITS = {'d': 'days', 'h': 'hours', 'm': 'minutes'}
_OLDEST = timedelta(days=36_500)
"""The longest --older-than: 100 years, past which no date in the store reaches (and dates run out)."""


def _age(value: str) -> timedelta:
    """`90d`, `12h` or `30m` as a timedelta; anything else, or longer than `_OLDEST`, refused in one line."""
    match = _AGE.fullmatch(value.strip())
    if match is None:
        raise click.BadParameter(f'{value!r}: give a number of days, hours or minutes, such as 90d, 12h or 30m.')
    # Compared as a count of minutes first: a timedelta of that many days may not even exist.
    minutes = int(match[1]) * {'d': 1440, 'h': 60, 'm': 1}[match[2]]
    if not 0 < minutes <= _OLDEST / timedelta(minutes=1):
        raise Failure(f'--older-than must be from 1m to {_OLDEST.days}d (100 years); got {value!r}.')
    return timedelta(**{_UNITS[match[2]]: int(match[1])})


def _report(removed: Removed, verb: str, where: str) -> str:
    """`Deleted session 'a' from URL: 48 messages and 1 summary.`, or for several, their count and first ids."""
    ids = removed.sessions
    if len(ids) == 1:
        what = f'session {ids[0]!r}'
    else:
        shown = f' ({", ".join(map(repr, ids[:10]))}{", ..." if len(ids) > 10 else ""})' if ids else ''
        what = f'{len(ids)} sessions{shown}'
    return f'{verb} {what} {where}: {plural(removed.messages, "message")} and {plural(removed.summaries, "summary")}.'


@main.command()
@click.argument('session_id', metavar='[ID]', type=NAME, required=False)
@scope_option
@click.option('-y', '--yes', is_flag=True, help='Do not ask for confirmation.')
@db_option
@pass_settings
def delete(settings: Settings, session_id: str | None, scope: str | None, yes: bool) -> None:
    """Delete a session with its archive, branches and summaries; with only --scope, every session of it.

    Asks first, unless --yes. The database is vacuumed after, so nothing deleted survives in its files: on
    PostgreSQL only the tables' owner may vacuum, and for another role a line says what stays until it does.
    """
    if session_id is None and scope is None:
        raise click.UsageError('Name a session ID, or give --scope to delete every session saved under it.')
    removed, vacuumed = run(settings, _delete(settings, session_id, scope, yes))
    out.print(_report(removed, 'Deleted', f'from {settings.shown_url}'))
    _say_unreclaimed(vacuumed)


async def _delete(
    settings: Settings, session_id: str | None, scope: str | None, yes: bool
) -> tuple[Removed, Vacuumed | None]:
    async with open_store(settings, 'write') as store:
        if session_id is not None:
            # Check it exists before asking, so a typo fails at once instead of after a confirmation.
            await store.history(session_id, scope=scope, limit=0)
            question = f'Delete session {session_id!r} and its whole archive from {settings.shown_url}?'
        else:
            planned = len(await store.sessions(scope=scope))
            if not planned:
                raise Failure(
                    f'No session is saved under scope {scope!r} in {settings.shown_url}; nothing was deleted.'
                )
            question = f'Delete all {planned} sessions saved under scope {scope!r} from {settings.shown_url}?'
        if not yes:
            click.confirm(question, abort=True)
        return await _vacuumed(store, await store.delete(session_id, scope=scope))


@main.command()
@click.option('--older-than', 'older_than', required=True, help='Age since the last update: 90d, 12h or 30m.')
@scope_option
@click.option('--dry-run', is_flag=True, help='Say what would be deleted, and delete nothing.')
@click.option('-y', '--yes', is_flag=True, help='Do not ask for confirmation.')
@db_option
@pass_settings
def prune(settings: Settings, older_than: str, scope: str | None, dry_run: bool, yes: bool) -> None:
    """Delete the sessions not updated for --older-than, whole; with --scope, only that scope's.

    Asks first, unless --yes or --dry-run. The database is vacuumed after, as `delete` vacuums it.
    """
    age = _age(older_than)
    removed, vacuumed = run(settings, _prune(settings, age, scope, dry_run, yes))
    out.print(_report(removed, 'Would delete' if dry_run else 'Deleted', f'from {settings.shown_url}'))
    _say_unreclaimed(vacuumed)


async def _prune(
    settings: Settings, age: timedelta, scope: str | None, dry_run: bool, yes: bool
) -> tuple[Removed, Vacuumed | None]:
    async with open_store(settings, 'write') as store:
        planned = await store.prune(older_than=age, scope=scope, dry_run=True)
        if dry_run or not planned.sessions:
            return planned, None
        if not yes:
            click.confirm(_report(planned, 'Delete', f'from {settings.shown_url}') + ' Go ahead?', abort=True)
        return await _vacuumed(store, await store.prune(older_than=age, scope=scope))


async def _vacuumed(store: SessionStore, removed: Removed) -> tuple[Removed, Vacuumed | None]:
    return removed, (await store.vacuum()) if removed.sessions else None


def _unreclaimed(vacuumed: Vacuumed) -> str:
    """The plain line for a vacuum the server skipped: what stays in the files, and who runs what."""
    tables = ', '.join(vacuumed.skipped[:-1]) + (' and ' if len(vacuumed.skipped) > 1 else '') + vacuumed.skipped[-1]
    return (
        f'Not reclaimed: PostgreSQL lets only the owner of {tables} vacuum them, and role {vacuumed.role!r} is not '
        f"it, so what was deleted stays in the database's files until their owner {vacuumed.owner!r} runs "
        '`session-store vacuum` on this database.'
    )


def _say_unreclaimed(vacuumed: Vacuumed | None) -> None:
    if vacuumed is not None and not vacuumed.reclaimed:
        out.print(_unreclaimed(vacuumed))


@main.command()
@db_option
@pass_settings
def vacuum(settings: Settings) -> None:
    """Rewrite the database so nothing deleted survives in its files; on PostgreSQL, as the tables' owner.

    `delete` and `prune` run it themselves. On PostgreSQL it runs `VACUUM FULL` on the store's tables, which
    holds each one's lock (runs wait) while it writes it anew. The server lets only the tables' owner (or the
    database's owner) vacuum them: for another role it fails, saying who owns them.
    """
    vacuumed = run(settings, _vacuum(settings))
    if not vacuumed.reclaimed:
        raise Failure(_unreclaimed(vacuumed))
    out.print(f"Vacuumed {settings.shown_url}: nothing deleted survives in its tables' files.")


async def _vacuum(settings: Settings) -> Vacuumed:
    async with open_store(settings, 'write') as store:
        return await store.vacuum()
