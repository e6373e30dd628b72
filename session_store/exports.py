"""`SessionExport`: one session as a document (messages, token counts, summary chain, window), and its file format.

The file format is JSON Lines, one record a line, so a large session streams and a person can read it:

    {"kind": "session", "format": "session-store/2", "session_id": ..., "message_count": N, "summary_count": S, ...}
    {"kind": "message", "position": 0, "tokens": 12, "message": {...pydantic-ai's JSON...}}   x N
    {"kind": "summary", "covers_from": 0, "covers_to": 40, "text": ..., ...}                  x S
    {"kind": "end", "messages": N, "summaries": S, "sha256": "<digest of every line above>"}

A document says what it holds: the header's counts, and the closing line's counts and digest. Reading
refuses, naming what is missing, a file cut short (at a line boundary or not), one with lines changed,
and one whose window or summaries point outside its archive. Files written by session-store 0.1 (format
`session-store/1`, without counts or closing line) are still read, with the consistency checks only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pydantic
from pydantic_ai.messages import ModelMessage
from pydantic_ai.usage import RunUsage
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from ._archive import add_root_segment, insert_messages, insert_summary, new_session_row
from ._codec import decode, dump_message, dump_usage, load_message, load_usage, utc
from ._database import Database, active_segment, find_session
from ._ids import check_id
from ._review import summary_chain
from ._run_state import NewSummary
from .errors import SessionConflict, StoreError
from .results import StoredSummary
from .rows import MessageRow, SegmentRow

__all__ = ('FORMAT', 'ExportError', 'SessionExport')

FORMAT = 'session-store/2'
"""The format this version writes."""
_READS = (FORMAT, 'session-store/1')


class ExportError(ValueError):
    """A file or document that is not a whole, consistent session export; says where and what is wrong."""


@dataclass(frozen=True)
class SessionExport:
    """A whole session, as `SessionStore.export()` reads it and `SessionStore.import_()` stores it."""

    session_id: str
    scope: str | None
    messages: list[ModelMessage]
    tokens: list[int]
    """Each message's stored token count."""
    summaries: list[StoredSummary]
    head_end: int = 0
    """Messages before this position open every window verbatim."""
    window_start: int = 0
    """Where the window's tail starts: what lies before it (past the head) is summarized or dropped."""
    usage: RunUsage = field(default_factory=RunUsage)
    metadata: dict[str, Any] = field(default_factory=dict[str, Any])

    def check(self, source: str = 'the export') -> None:
        """Refuse a document whose parts disagree: its window or a summary pointing outside its archive.

        Raises:
            ExportError: Naming what is inconsistent.
        """
        count = len(self.messages)
        if len(self.tokens) != count:
            raise ExportError(f'{source}: {count} messages but {len(self.tokens)} token counts.')
        if not 0 <= self.head_end <= count or not 0 <= self.window_start <= count:
            raise ExportError(
                f'{source}: the window (head end {self.head_end}, tail start {self.window_start}) points past its '
                f'{count} messages; the file is incomplete.'
            )
        covered = 0
        for index, summary in enumerate(self.summaries):
            if not covered <= summary.covers_from < summary.covers_to <= self.window_start:
                raise ExportError(
                    f'{source}: summary {index} covers positions {summary.covers_from}-{summary.covers_to}, outside '
                    f'the archive before the window (0-{self.window_start}) or overlapping summary {index - 1}.'
                )
            covered = summary.covers_to

    def to_json_lines(self) -> Iterator[str]:
        """The document as JSON Lines (without newlines), closing with its counts and digest."""
        digest = hashlib.sha256()

        def emit(line: str) -> str:
            digest.update(line.encode())
            digest.update(b'\n')
            return line

        header = {
            'kind': 'session',
            'format': FORMAT,
            'session_id': self.session_id,
            'scope': self.scope,
            'message_count': len(self.messages),
            'summary_count': len(self.summaries),
            'head_end': self.head_end,
            'window_start': self.window_start,
            'usage': dump_usage(self.usage),
            'metadata': self.metadata,
        }
        yield emit(json.dumps(header, ensure_ascii=False))
        for position, (message, tokens) in enumerate(zip(self.messages, self.tokens, strict=True)):
            # The payload is pydantic-ai's own JSON, spliced in as it is, not re-encoded.
            yield emit(
                f'{{"kind": "message", "position": {position}, "tokens": {tokens}, "message": {dump_message(message)}}}'
            )
        for summary in self.summaries:
            record = {
                'kind': 'summary',
                'covers_from': summary.covers_from,
                'covers_to': summary.covers_to,
                'text': summary.text,
                'tokens': summary.tokens,
                'model_name': summary.model_name,
                'usage': dump_usage(summary.usage),
                'created_at': summary.created_at.isoformat(),
            }
            yield emit(json.dumps(record, ensure_ascii=False))
        closing = {'kind': 'end', 'messages': len(self.messages), 'summaries': len(self.summaries)}
        yield json.dumps({**closing, 'sha256': digest.hexdigest()})

    @classmethod
    def from_json_lines(cls, lines: Iterable[str], *, source: str = 'the export') -> SessionExport:
        """Read `to_json_lines` output back; a file cut short, changed or inconsistent is refused.

        Raises:
            ExportError: Naming `source`, the line, and what is wrong or missing.
        """
        reader = _Reader(source)
        for number, line in enumerate(lines, start=1):
            reader.add(number, line.rstrip('\r\n'))
        return reader.finish()


class _Reader:
    """Reads an export line by line, checking order, counts and digest as it goes."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.header: dict[str, Any] | None = None
        self.messages: list[ModelMessage] = []
        self.tokens: list[int] = []
        self.summaries: list[StoredSummary] = []
        self.closing: dict[str, Any] | None = None
        self.digest = hashlib.sha256()

    def add(self, number: int, line: str) -> None:
        if not line.strip():
            return
        where = f'{self.source}, line {number}'
        if self.closing is not None:
            raise ExportError(f'{where}: more lines after the closing line.')
        try:
            record = json.loads(line)
        except ValueError as error:
            raise ExportError(f'{where}: not JSON ({error}).') from None
        kind = record.get('kind') if isinstance(record, dict) else None
        try:
            self._take(where, kind, record)
        except (KeyError, TypeError, ValueError, pydantic.ValidationError) as error:
            if isinstance(error, ExportError):
                raise
            detail = str(error).splitlines()[0]
            raise ExportError(f'{where}: a malformed {kind} record ({type(error).__name__}: {detail}).') from None
        if kind != 'end':
            self.digest.update(line.encode())
            self.digest.update(b'\n')

    def _take(self, where: str, kind: object, record: dict[str, Any]) -> None:
        if kind == 'session':
            if self.header is not None:
                raise ExportError(f'{where}: a second session header; export one session per file.')
            if record.get('format') not in _READS:
                raise ExportError(f'{where}: format {record.get("format")!r}; this version reads {", ".join(_READS)}.')
            self.header = record
        elif self.header is None:
            raise ExportError(f'{where}: expected the session header first; is this a `session-store export` file?')
        elif kind == 'message':
            if record['position'] != len(self.messages):
                raise ExportError(
                    f'{where}: message at position {record["position"]!r}, expected {len(self.messages)}.'
                )
            self.messages.append(load_message(json.dumps(record['message'])))
            self.tokens.append(int(record['tokens']))
        elif kind == 'summary':
            self.summaries.append(
                StoredSummary(
                    index=len(self.summaries),
                    covers_from=int(record['covers_from']),
                    covers_to=int(record['covers_to']),
                    text=str(record['text']),
                    tokens=int(record['tokens']),
                    model_name=record.get('model_name'),
                    usage=load_usage(record.get('usage')),
                    created_at=utc(datetime.fromisoformat(record['created_at'])),
                )
            )
        elif kind == 'end':
            self.closing = record
        else:
            raise ExportError(f'{where}: unknown kind {kind!r}; expected session, message, summary or end.')

    def finish(self) -> SessionExport:
        header = self.header
        if header is None:
            raise ExportError(f'{self.source}: empty; expected a `session-store export` file.')
        if header['format'] == FORMAT:
            self._check_complete(header)
        document = SessionExport(
            session_id=check_id(header.get('session_id')),
            scope=header.get('scope'),
            messages=self.messages,
            tokens=self.tokens,
            summaries=self.summaries,
            head_end=int(header.get('head_end', 0)),
            window_start=int(header.get('window_start', 0)),
            usage=load_usage(header.get('usage')),
            metadata=dict(header.get('metadata') or {}),
        )
        document.check(self.source)
        return document

    def _check_complete(self, header: dict[str, Any]) -> None:
        held = f'{len(self.messages)} messages and {len(self.summaries)} summaries'
        expected = f'{header.get("message_count")} messages and {header.get("summary_count")} summaries'
        if held != expected:
            raise ExportError(f'{self.source}: incomplete: the header announces {expected}, the file holds {held}.')
        if self.closing is None:
            raise ExportError(f'{self.source}: incomplete: it holds {held} but ends without its closing line.')
        if self.closing.get('sha256') != self.digest.hexdigest():
            raise ExportError(f'{self.source}: its lines were changed since export (the digest does not match).')


async def read_export(database: Database, session_id: str, scope: str | None) -> SessionExport:
    """The session as a document, read in one transaction.

    Raises:
        StoreError: The session has branches, which this format can't hold: an export is whole or refused.
    """
    async with database.read() as db:
        row = await find_session(db, session_id, scope)
        branches = await db.scalar(select(func.count()).where(SegmentRow.session_pk == row.pk)) or 0
        if branches > 1:
            raise StoreError(
                f'Session {session_id!r} has {branches} branches, and export format {FORMAT} holds one path; '
                'nothing was exported. Fork the branch you want into a session of its own (store.fork) and export that.'
            )
        rows = (
            await db.execute(
                select(MessageRow.position, MessageRow.payload, MessageRow.tokens)
                .where(MessageRow.segment_pk == active_segment(row))
                .order_by(MessageRow.position)
            )
        ).all()
        chain = await summary_chain(db, row.pk)
    return SessionExport(
        session_id=row.session_id,
        scope=row.scope,
        messages=[decode(session_id, position, payload) for position, payload, _ in rows],
        tokens=[tokens for _, _, tokens in rows],
        summaries=chain,
        head_end=row.head_end,
        window_start=row.window_start,
        usage=load_usage(row.usage),
        metadata=row.metadata_,
    )


async def write_import(database: Database, document: SessionExport, session_id: str, scope: str | None) -> None:
    """Store `document` as a new session `session_id` under `scope`, whole, in one transaction.

    Raises:
        ExportError: The document is inconsistent; nothing was stored.
        SessionConflict: A session with this id exists.
    """
    document.check()

    async def store(db: AsyncSession) -> None:
        row = new_session_row(
            session_id,
            scope,
            message_count=len(document.messages),
            head_end=document.head_end,
            window_start=document.window_start,
            usage=dump_usage(document.usage),
            metadata=document.metadata,
        )
        db.add(row)
        try:
            await db.flush()
        except IntegrityError:
            raise SessionConflict(
                session_id,
                'already exists',
                advice='Import it under another id, or delete the existing session first.',
            ) from None
        segment_pk = await add_root_segment(db, row.pk)
        await insert_messages(db, row.pk, segment_pk, 0, document.messages, document.tokens)
        previous: int | None = None
        for s in document.summaries:
            summary = NewSummary(s.covers_from, s.covers_to, s.text, s.tokens, s.model_name, s.usage)
            previous = await insert_summary(db, row.pk, segment_pk, previous, summary, s.created_at)

    await database.write(session_id, store)
