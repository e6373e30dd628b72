"""Encryption at rest from the command line: `keygen` makes a key, `encrypt` seals a clear store, `rekey` rotates.

The keys come from `--key-file FILE` or `$SESSION_STORE_KEYS` (`ID=SECRET` pairs, newest first), and
every other command reads an encrypted store through the same two.
"""

from __future__ import annotations

from typing import Literal

import click

from ..encryption import ENV_KEYS, Encryption
from ..results import Resealed
from ._app import Bounded, db_option, main
from ._runtime import Failure, Settings, err, open_store, out, pass_settings, run

__all__ = ('encrypt', 'keygen', 'rekey')

_BATCH = click.option(
    '--batch', 'batch_size', type=Bounded(1, 100_000), default=500, show_default=True, help='Rows per transaction.'
)
_YES = click.option('-y', '--yes', is_flag=True, help='Do not ask for confirmation.')


@main.command()
@click.argument('key_id', metavar='ID', default='k1')
def keygen(key_id: str) -> None:
    """Print a new random key as an ID=SECRET line (ID defaults to k1).

    Put it first in your key file (or $SESSION_STORE_KEYS, comma-separated), keep the older keys after
    it until `rekey` has moved everything over, and keep the file out of the database's backups.
    """
    secret = Encryption.generate_key()
    try:
        Encryption(keys={key_id: secret})
    except (ValueError, ImportError) as error:  # a bad key id; the encryption extra missing
        raise Failure(str(error)) from None
    out.print(f'{key_id}={secret}')


@main.command()
@_BATCH
@_YES
@db_option
@pass_settings
def encrypt(settings: Settings, batch_size: int, yes: bool) -> None:
    """Encrypt a store's clear rows in place under the newest key; resumable, and safe while it is in use.

    Asks first, unless --yes: from then on only these keys read the store. Killed part way, run it again: it
    carries on. The database is vacuumed after, so no clear text stays in its bytes.
    """
    out.print(_report(run(settings, _reseal(settings, 'encrypt', batch_size, yes)), settings))


@main.command()
@_BATCH
@_YES
@db_option
@pass_settings
def rekey(settings: Settings, batch_size: int, yes: bool) -> None:
    """Re-encrypt every row under the newest key (the first in the key file), clear rows included; resumable.

    Asks first, unless --yes. Once it reports every row under the newest key, the older keys can be removed from
    the key file.
    """
    out.print(_report(run(settings, _reseal(settings, 'rekey', batch_size, yes)), settings))


async def _reseal(settings: Settings, pass_: Literal['encrypt', 'rekey'], batch_size: int, yes: bool) -> Resealed:
    encryption = settings.encryption()
    if encryption is None:
        raise Failure(f'{pass_} needs the keys: give --key-file FILE or set ${ENV_KEYS} (ID=SECRET, newest first).')
    async with open_store(settings, 'write') as store:
        if not yes:
            # Sealing clear values is for good: without these keys, nothing sealed can be read again.
            which = 'every clear value' if pass_ == 'encrypt' else 'every value, clear ones included,'
            click.confirm(
                f'Seal {which} in {settings.shown_url} under key {encryption.current!r}? From then on only the keys '
                'you gave read them: keep them, and a backup. Go ahead?',
                abort=True,
            )

        def progress(done: Resealed) -> None:
            sealed = f'{done.messages} messages, {done.summaries} summaries, {done.sessions} sessions'
            # On a terminal one line counts up in place; in a log or a pipe, a line a step.
            err.print(f'{sealed} sealed...', end='\r' if err.is_terminal else '\n')

        method = store.encrypt if pass_ == 'encrypt' else store.rekey
        done = await method(batch_size=batch_size, on_batch=progress)
        await store.vacuum()
        return done


def _report(done: Resealed, settings: Settings) -> str:
    """What was sealed, and which keys the store now needs."""
    counts = f'{done.messages} messages, {done.summaries} summaries and {done.sessions} sessions'
    sealed = f'Sealed {counts} in {settings.shown_url}.'
    keys = ', '.join(f'{count} under {key_id!r}' for key_id, count in done.by_key.items()) or 'none'
    now = f' Stored values: {keys}' + (f', {done.clear} still clear.' if done.clear else '.')
    current = settings.encryption()
    dropped = [key_id for key_id in (current.keys if current else ()) if key_id not in done.by_key]
    return sealed + now + (f' No row needs {", ".join(map(repr, dropped))} any more.' if dropped else '')
