"""Sealing a store's values again: under the newest key (`rekey`), or for the first time (`encrypt`), in place.

A pass walks each table in primary-key order, a batch of rows per transaction, and rewrites only the
values not yet as wanted. A pass killed at any point leaves every batch it committed done and every
other row as it was (clear or sealed, both readable), so running it again finishes the job: it skips
what is done without opening it. Rows written meanwhile by runs are sealed under the newest key already.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from sqlalchemy import ColumnElement, Select, Table, bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from .._codec import decode
from .._db.database import Database
from .._db.sealing import Kind, Sealer, key_id_of
from ..errors import StoreError
from ..results import Resealed
from ..rows import MessageRow, SessionRow, SummaryRow

__all__ = ('reseal',)

_messages, _summaries, _sessions = (cast(Table, row.__table__) for row in (MessageRow, SummaryRow, SessionRow))


@dataclass
class _Batch:
    """One batch's decisions: kept apart from the pass's tally until its transaction commits (it may be retried)."""

    sealer: Sealer
    clear_only: bool
    keys: Counter[str | None] = field(default_factory=Counter[str | None])
    """The values it read, by the key each is under once the batch commits (`None`: clear)."""
    was_clear: int = 0
    """The values it seals that were stored clear."""

    def wants(self, stored: Any) -> bool:
        """Whether a stored value is to be sealed again: clear, or (rekeying) under an older key."""
        if not stored:  # no metadata, no deferred tool requests: nothing to hide
            return False
        key_id = key_id_of(stored)
        resealing = key_id is None if self.clear_only else key_id != self.sealer.current
        self.keys[self.sealer.current if resealing else key_id] += 1
        self.was_clear += resealing and key_id is None
        return resealing


@dataclass
class _Pass:
    """One pass's running tally of committed batches, handed to `on_batch` after each."""

    counts: Counter[str] = field(default_factory=Counter[str])
    keys: Counter[str | None] = field(default_factory=Counter[str | None])
    was_clear: int = 0

    def result(self) -> Resealed:
        return Resealed(
            messages=self.counts['messages'],
            summaries=self.counts['summaries'],
            sessions=self.counts['sessions'],
            by_key={key: count for key, count in sorted(self.keys.items(), key=str) if key is not None},
            clear=self.keys[None],
            sealed_clear=self.was_clear,
        )


async def reseal(
    database: Database,
    *,
    clear_only: bool,
    batch_size: int,
    on_batch: Callable[[Resealed], None] | None = None,
) -> Resealed:
    """Seal every value not yet under the current key (`clear_only`: every clear value), in batches.

    Raises:
        StoreError: The store was opened without `Encryption`.
        KeyUnavailable: A value is sealed with a key this store wasn't given; batches before it are kept.
    """
    sealer = database.sealer
    if not sealer.encrypting:
        raise StoreError(
            'Sealing values needs keys: open the store with encryption=Encryption(keys=...) '
            '(on the command line, $SESSION_STORE_KEYS or --key-file).'
        )
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f'batch_size must be a positive integer; got {batch_size!r}.')
    tally = _Pass()
    tables: tuple[_Values, ...] = (_MessageValues(), _SummaryValues(), _SessionValues())
    for table in tables:
        after = 0
        while True:

            async def batch(
                db: AsyncSession, table: _Values = table, after: int = after
            ) -> tuple[int, int, int, _Batch]:
                done = _Batch(sealer, clear_only)
                rows = (await db.execute(table.read(after, batch_size))).all()
                changed = [values for row in rows if (values := table.resealed(done, row)) is not None]
                if changed:
                    await db.execute(table.write(), changed)
                return (int(rows[-1][0]) if rows else after), len(rows), len(changed), done

            after, read, changed, done = await database.write(f'(every {table.name})', batch)
            tally.counts[table.name] += changed
            tally.keys.update(done.keys)
            tally.was_clear += done.was_clear
            if on_batch is not None and read:
                on_batch(tally.result())
            if read < batch_size:
                break
    return tally.result()


class _Values(Protocol):
    """One table's sealed values: how a batch of them is read, sealed again and written back."""

    name: str

    def read(self, after: int, limit: int) -> Select[Any]: ...

    def resealed(self, batch: _Batch, row: Sequence[Any]) -> dict[str, Any] | None: ...

    def write(self) -> Any: ...


def _batch(table: Table, after: int, limit: int, *values: ColumnElement[Any]) -> Select[Any]:
    """A batch of a session-owned table's rows past primary key `after`: key, session id and pk, then `values`.

    Locked for the pass on PostgreSQL (SQLite's write transaction holds the whole database already).
    """
    return (
        select(table.c.pk, _sessions.c.session_id, table.c.session_pk, *values)
        .join(_sessions, _sessions.c.pk == table.c.session_pk)
        .where(table.c.pk > after)
        .order_by(table.c.pk)
        .limit(limit)
        .with_for_update(of=table)
    )


class _MessageValues:
    """Message payloads, whose search text and UI message id are made again with them (blind, under the new key)."""

    name = 'messages'

    def read(self, after: int, limit: int) -> Select[Any]:
        return _batch(_messages, after, limit, _messages.c.position, _messages.c.payload)

    def resealed(self, batch: _Batch, row: Sequence[Any]) -> dict[str, Any] | None:
        pk, session_id, session_pk, position, payload = row
        if not batch.wants(payload):
            return None
        sealer = batch.sealer
        opened = sealer.open(session_id, session_pk, 'message', payload, f'the message at position {position}')
        message = decode(session_id, position, opened)
        return {
            'b_pk': pk,
            'payload': sealer.seal(session_pk, 'message', opened),
            'text': sealer.search_text(message),
            'ui_message_id': sealer.ui_id_form(message),
        }

    def write(self) -> Any:
        return (
            _messages.update()
            .where(_messages.c.pk == bindparam('b_pk'))
            .values(payload=bindparam('payload'), text=bindparam('text'), ui_message_id=bindparam('ui_message_id'))
        )


class _SummaryValues:
    name = 'summaries'

    def read(self, after: int, limit: int) -> Select[Any]:
        return _batch(_summaries, after, limit, _summaries.c.text)

    def resealed(self, batch: _Batch, row: Sequence[Any]) -> dict[str, Any] | None:
        pk, session_id, session_pk, text = row
        if not batch.wants(text):
            return None
        opened = batch.sealer.open(session_id, session_pk, 'summary', text)
        return {'b_pk': pk, 'text': batch.sealer.seal(session_pk, 'summary', opened)}

    def write(self) -> Any:
        return update(_summaries).where(_summaries.c.pk == bindparam('b_pk')).values(text=bindparam('text'))


class _SessionValues:
    """A session's metadata, title and deferred tool requests: locked with the row, as runs rewrite the last."""

    name = 'sessions'
    _kinds: Sequence[tuple[str, Kind, bool]] = (
        ('metadata', 'metadata', True),
        ('title', 'title', False),
        ('deferred_tool_requests', 'deferred tool requests', True),
    )
    """Each value's column, its kind, and whether it is a JSON column's (sealed as a JSON string) or text."""

    def read(self, after: int, limit: int) -> Select[Any]:
        return (
            select(_sessions.c.pk, _sessions.c.session_id, *(_sessions.c[column] for column, _, _ in self._kinds))
            .where(_sessions.c.pk > after)
            .order_by(_sessions.c.pk)
            .limit(limit)
            .with_for_update()
        )

    def resealed(self, batch: _Batch, row: Sequence[Any]) -> dict[str, Any] | None:
        pk, session_id, *stored = row
        wanted = [batch.wants(value) for value in stored]
        if not any(wanted):
            return None
        sealer = batch.sealer
        values: dict[str, Any] = {'b_pk': pk}
        for (column, kind, is_json), value in zip(self._kinds, stored, strict=True):
            if is_json:
                values[column] = sealer.seal_json(pk, kind, sealer.open_json(session_id, pk, kind, value))
            else:
                values[column] = (
                    None if value is None else sealer.seal(pk, kind, sealer.open(session_id, pk, kind, value))
                )
        return values

    def write(self) -> Any:
        return (
            _sessions.update()
            .where(_sessions.c.pk == bindparam('b_pk'))
            .values({column: bindparam(column) for column, _, _ in self._kinds})
        )
