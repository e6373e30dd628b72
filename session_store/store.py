"""`SessionStore`: sessions, their complete archive and their summary chains, in one SQL database."""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Self, TypeVar

import pydantic
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelRequestPart
from pydantic_ai.usage import RunUsage
from sqlalchemy import Row, Select, delete, func, insert, or_, select, union_all, update
from sqlalchemy.engine import URL
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from processors import SlidingWindowProcessor, SummarizationProcessor, message_text, summary_request

from . import migration
from ._codec import dump_message, dump_messages, load_message, load_messages
from ._engine import DEFAULT_URL, SQLITE_BEGIN, create_engine, database_url
from ._fulltext import rank_by_words, words
from .errors import SessionConflict, SessionNotFound, StoreError
from .models import SearchHit, SessionInfo, StoredSummary
from .recall import Recall
from .schema import MessageRow, SessionRow, SummaryRow

if TYPE_CHECKING:
    from .conversations import SQLConversationStore
    from .session import Session

__all__ = ('DEFAULT_URL', 'SessionStore', 'WindowProcessor')

WindowProcessor = SlidingWindowProcessor | SummarizationProcessor
"""How a session compresses what the model sees; the store keeps every message either way."""

_USAGE = pydantic.TypeAdapter(RunUsage)
_EXPORT_FORMAT = 'session-store/1'
_LOCKED_TRIES = 8
_MAX_SEARCH = 1_000
HitRow = Row[str, str | None, int, str, str]
"""A search hit as read: session id, scope, position, payload, text."""
LEASE_TTL = timedelta(seconds=30)
"""How long a waiting writer's lease lasts without renewal: what a crashed holder can delay others by."""
T = TypeVar('T')


def now() -> datetime:
    return datetime.now(UTC)


def new_token() -> str:
    return uuid.uuid4().hex


def dump_usage(usage: RunUsage) -> dict[str, Any]:
    return _USAGE.dump_python(usage, mode='json')  # type: ignore[no-any-return]


def load_usage(data: dict[str, Any] | None) -> RunUsage:
    return _USAGE.validate_python(data or {})


def utc(moment: datetime) -> datetime:
    """SQLite hands datetimes back naive; they were stored as UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def check_id(value: object, name: str = 'session_id') -> str:
    """A session id (or scope): 1 to 255 printable characters."""
    if not isinstance(value, str) or not 1 <= len(value) <= 255 or not value.isprintable():
        shown = repr(value) if not isinstance(value, str) or len(value) <= 60 else f'{value[:60]!r}...'
        raise ValueError(f'{name} must be 1 to 255 printable characters; got {shown}.')
    return value


def new_session_row(
    session_id: str,
    scope: str | None,
    *,
    message_count: int = 0,
    head_end: int = 0,
    window_start: int = 0,
    usage: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> SessionRow:
    moment = now()
    return SessionRow(
        session_id=session_id,
        scope=scope,
        revision=new_token(),
        message_count=message_count,
        head_end=head_end,
        window_start=window_start,
        usage=usage or {},
        branches=[],
        metadata_=metadata or {},
        created_at=moment,
        updated_at=moment,
    )


@dataclass
class LoadedWindow:
    """What a run starts from: the stored window and the revision it was read at."""

    session_pk: int
    revision: str
    message_count: int
    head_end: int
    window_start: int
    summary_pk: int | None
    messages: list[ModelMessage]
    """The head, then the tail, whose first request carries the bridge (summary or system prompt)."""
    positions: list[int]
    """Each message's archive position."""
    tokens: list[int | None]
    """Each message's stored token count; `None` for the one that carries the bridge, which changed it."""
    usage: RunUsage


class NewSummary(NamedTuple):
    """A summary to store: the archive range it newly covers, and what made it."""

    covers_from: int
    covers_to: int
    text: str
    tokens: int
    model_name: str | None
    usage: RunUsage


@dataclass
class RunRecord:
    """What one run adds to a session, written in one transaction."""

    messages: Sequence[ModelMessage]
    tokens: Sequence[int]
    head_end: int
    window_start: int
    summaries: Sequence[NewSummary]
    """Each summary the run made, oldest first."""
    usage: RunUsage
    deferred_tool_requests: dict[str, Any] | None


class SessionStore:
    """Sessions with a complete archive and stored summaries, in SQLite or PostgreSQL.

    Args:
        url: An async SQLAlchemy URL: `sqlite+aiosqlite:///path.db` (the default is
            `./sessions.db`) or `postgresql+asyncpg://user:pass@host/db`. Plain `sqlite://` and
            `postgresql://` URLs get the async driver.
        processor: How sessions compress what the model sees, unless a session says otherwise:
            a `SlidingWindowProcessor` (the default) or a `SummarizationProcessor`.
        migrate: Make the schema in a new, empty database on first use. A database at another
            schema revision is never changed implicitly: `migrate()` upgrades it.
    """

    def __init__(
        self,
        url: str | URL = DEFAULT_URL,
        *,
        processor: WindowProcessor | None = None,
        migrate: bool = True,
    ) -> None:
        self.url = database_url(url)
        self.processor: WindowProcessor = processor if processor is not None else SlidingWindowProcessor()
        self._migrate_empty = migrate
        self.engine: AsyncEngine = create_engine(self.url)
        self._sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        self._writers = async_sessionmaker(
            self.engine.execution_options(**{SQLITE_BEGIN: 'IMMEDIATE'}), expire_on_commit=False
        )
        self._checked = False
        self._check_lock = asyncio.Lock()

    @property
    def display_url(self) -> str:
        """The URL without its password, for messages."""
        return self.url.render_as_string(hide_password=True)

    async def __aenter__(self) -> Self:
        await self.ready()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Release the database connections."""
        await self.engine.dispose()

    async def migrate(self) -> None:
        """Upgrade the database's schema to this version of session-store's."""
        await migration.upgrade(self.engine)
        self._checked = False
        await self.ready()

    async def ready(self) -> None:
        """Check the schema once (migrating an empty database), before the first query."""
        if self._checked:
            return
        async with self._check_lock:
            if not self._checked:
                await migration.check_schema(self.engine, self.display_url, migrate_empty=self._migrate_empty)
                self._checked = True

    def db(self) -> AsyncSession:
        """A new ORM session on the store's engine."""
        return self._sessions()

    @property
    def conversations(self) -> SQLConversationStore:
        """The same archive as a pydantic-ai `ConversationStore`.

        For `agent.run(conversation=await store.conversations.load(id))` users: forks are copies, and
        branching (rewriting a stored history) is refused, since each conversation is one linear archive.
        """
        from .conversations import SQLConversationStore

        return SQLConversationStore(self)

    # Sessions

    async def session(
        self,
        session_id: str,
        *,
        scope: str | None = None,
        processor: WindowProcessor | None = None,
        wait: bool = False,
        timeout: float | None = 60.0,
        recall: bool | Recall = False,
    ) -> Session:
        """Open a session, creating it if new.

        Args:
            session_id: 1 to 255 printable characters.
            scope: Whose session it is. A session saved with another scope can't be opened under this one.
            processor: How this session compresses what the model sees, instead of the store's.
            wait: When another run on the session is in progress, wait for it instead of failing with
                `SessionConflict`. Waiting runs queue behind each other through a lease on the session.
            timeout: How long a waiting run waits, in seconds (`None`: as long as it takes).
            recall: Hand the agent tools that search this session's own archive (`search_history`,
                `read_history`) for details summaries left out; a `Recall` sets their budget.
        """
        check_id(session_id)
        if scope is not None:
            check_id(scope, 'scope')
        await self.ready()

        async def stored_scope(db: AsyncSession) -> tuple[bool, str | None]:
            found = (await db.execute(select(SessionRow.scope).where(SessionRow.session_id == session_id))).first()
            return (False, None) if found is None else (True, found[0])

        async def create(db: AsyncSession) -> tuple[bool, str | None]:
            try:
                async with db.begin_nested():
                    db.add(new_session_row(session_id, scope))
                return True, scope
            except IntegrityError:  # created by a concurrent writer just now
                return await stored_scope(db)

        # Most opens find the session: a read, and a write transaction only to create one.
        async with self.db() as db:
            exists, stored = await stored_scope(db)
        if not exists:
            exists, stored = await self._write(session_id, create)
        if scope is not None and stored != scope:
            # Say no more than that the id is taken: another scope's sessions stay invisible.
            raise SessionConflict(
                session_id, 'the id is already in use', advice='Choose another session id for this scope.'
            )
        from .session import Session

        return Session(
            self,
            session_id,
            scope=scope,
            processor=processor or self.processor,
            wait=wait,
            timeout=timeout,
            recall=Recall() if recall is True else recall or None,
        )

    async def _row(self, db: AsyncSession, session_id: str, scope: str | None) -> SessionRow:
        check_id(session_id)
        await self.ready()
        row = await db.scalar(select(SessionRow).where(SessionRow.session_id == session_id))
        if row is None or (scope is not None and row.scope != scope):
            raise SessionNotFound(session_id, scope)
        return row

    async def sessions(self, *, scope: str | None = None, limit: int | None = None) -> list[SessionInfo]:
        """The stored sessions, most recently updated first; under `scope`, only those saved with it."""
        await self.ready()
        summaries = select(func.count(SummaryRow.pk)).where(SummaryRow.session_pk == SessionRow.pk).scalar_subquery()
        query = select(SessionRow, summaries).order_by(SessionRow.updated_at.desc(), SessionRow.pk.desc())
        if scope is not None:
            query = query.where(SessionRow.scope == scope)
        if limit is not None:
            query = query.limit(limit)
        async with self.db() as db:
            rows = (await db.execute(query)).all()
        return [
            SessionInfo(
                session_id=row.session_id,
                scope=row.scope,
                message_count=row.message_count,
                summary_count=count,
                usage=load_usage(row.usage),
                created_at=utc(row.created_at),
                updated_at=utc(row.updated_at),
                metadata=row.metadata_,
            )
            for row, count in rows
        ]

    async def history(
        self, session_id: str, *, scope: str | None = None, offset: int = 0, limit: int | None = 100
    ) -> list[ModelMessage]:
        """The raw archive, in order: `limit` messages from position `offset` (`limit=None` for all)."""
        if offset < 0 or (limit is not None and limit < 0):
            raise ValueError(f'offset and limit must be >= 0; got offset={offset}, limit={limit}.')
        async with self.db() as db:
            row = await self._row(db, session_id, scope)
            query = (
                select(MessageRow.position, MessageRow.payload)
                .where(MessageRow.session_pk == row.pk, MessageRow.position >= offset)
                .order_by(MessageRow.position)
            )
            if limit is not None:
                query = query.limit(limit)
            rows = (await db.execute(query)).all()
        return [decode(session_id, position, payload) for position, payload in rows]

    async def summaries(self, session_id: str, *, scope: str | None = None) -> list[StoredSummary]:
        """The session's summary chain, oldest first."""
        async with self.db() as db:
            row = await self._row(db, session_id, scope)
            rows = (
                await db.scalars(select(SummaryRow).where(SummaryRow.session_pk == row.pk).order_by(SummaryRow.pk))
            ).all()
        return [
            StoredSummary(
                index=index,
                covers_from=summary.covers_from,
                covers_to=summary.covers_to,
                text=summary.text,
                tokens=summary.tokens,
                model_name=summary.model_name,
                usage=load_usage(summary.usage),
                created_at=utc(summary.created_at),
            )
            for index, summary in enumerate(rows)
        ]

    async def search(
        self,
        text: str,
        *,
        scope: str | None = None,
        session_id: str | None = None,
        limit: int = 50,
        match: Literal['phrase', 'words'] = 'phrase',
    ) -> list[SearchHit]:
        """Search the archive.

        Args:
            text: What to look for.
            scope: Only sessions saved with this scope.
            session_id: Only this session.
            limit: At most this many hits.
            match: `'phrase'`: messages containing `text` as typed (case-insensitive), newest first.
                `'words'`: full-text, through the database's index: messages with all of `text`'s
                words (stemmed), or if none has them all, with any; best match first.
        """
        if not isinstance(text, str) or not text.strip() or len(text) > _MAX_SEARCH or '\x00' in text:
            raise ValueError(f'search text must be a string of 1 to {_MAX_SEARCH} characters, without NUL.')
        if limit < 1:
            raise ValueError(f'limit must be >= 1; got {limit}.')
        if match not in ('phrase', 'words'):
            raise ValueError(f"match must be 'phrase' or 'words'; got {match!r}.")
        await self.ready()
        query = (
            select(SessionRow.session_id, SessionRow.scope, MessageRow.position, MessageRow.payload, MessageRow.text)
            .join(SessionRow, SessionRow.pk == MessageRow.session_pk)
            .limit(limit)
        )
        if scope is not None:
            query = query.where(SessionRow.scope == scope)
        if session_id is not None:
            query = query.where(SessionRow.session_id == check_id(session_id))
        rows: Sequence[HitRow]
        async with self.db() as db:
            if match == 'phrase':
                escaped = text.replace('\\', '\\\\').replace('%', '\\%').replace('_', '\\_')
                phrase = MessageRow.text.ilike(f'%{escaped}%', escape='\\')
                rows = (await db.execute(query.where(phrase).order_by(MessageRow.pk.desc()))).all()
            else:
                rows = await self._by_words(db, query, text, session_id, limit)
        return [
            SearchHit(session_id=sid, scope=sc, position=pos, message=decode(sid, pos, payload), text=found)
            for sid, sc, pos, payload, found in rows
        ]

    async def _by_words(
        self,
        db: AsyncSession,
        query: Select[str, str | None, int, str, str],
        text: str,
        session_id: str | None,
        limit: int,
    ) -> list[HitRow]:
        """Messages with every word of `text` (a selective query the index answers), else with any of them."""
        terms = words(text)
        session_pk = None
        if session_id is not None:
            session_pk = await db.scalar(select(SessionRow.pk).where(SessionRow.session_id == session_id))
            if session_pk is None:
                return []
        if not terms:
            return []
        dialect = self.engine.dialect.name
        rows = list((await db.execute(rank_by_words(query, dialect, terms, every=True, session_pk=session_pk))).all())
        if not rows and len(terms) > 1:
            # Nothing has every word: rank what has any (slower, since common words match widely).
            rows = list(
                (await db.execute(rank_by_words(query, dialect, terms, every=False, session_pk=session_pk))).all()
            )
        return rows

    async def delete(self, session_id: str, *, scope: str | None = None) -> None:
        """Delete a session with its archive and summaries. Under `scope`, only one saved with it."""

        async def remove(db: AsyncSession) -> None:
            row = await self._row(db, session_id, scope)
            await db.execute(delete(SummaryRow).where(SummaryRow.session_pk == row.pk))
            await db.execute(delete(MessageRow).where(MessageRow.session_pk == row.pk))
            await db.execute(delete(SessionRow).where(SessionRow.pk == row.pk))

        await self._write(session_id, remove)

    # Export and import

    async def export(self, session_id: str, *, scope: str | None = None) -> str:
        """The session as one JSON document: its messages (pydantic-ai's JSON), token counts and summaries."""
        async with self.db() as db:
            row = await self._row(db, session_id, scope)
            rows = (
                await db.execute(
                    select(MessageRow.position, MessageRow.payload, MessageRow.tokens)
                    .where(MessageRow.session_pk == row.pk)
                    .order_by(MessageRow.position)
                )
            ).all()
            summaries = (
                await db.scalars(select(SummaryRow).where(SummaryRow.session_pk == row.pk).order_by(SummaryRow.pk))
            ).all()
        messages = [decode(session_id, position, payload) for position, payload, _ in rows]
        document = {
            'format': _EXPORT_FORMAT,
            'session_id': row.session_id,
            'scope': row.scope,
            'head_end': row.head_end,
            'window_start': row.window_start,
            'usage': row.usage,
            'metadata': row.metadata_,
            'messages': json.loads(dump_messages(messages)),
            'tokens': [tokens for _, _, tokens in rows],
            'summaries': [
                {
                    'covers_from': s.covers_from,
                    'covers_to': s.covers_to,
                    'text': s.text,
                    'tokens': s.tokens,
                    'model_name': s.model_name,
                    'usage': s.usage,
                    'created_at': utc(s.created_at).isoformat(),
                }
                for s in summaries
            ],
        }
        return json.dumps(document)

    async def import_(self, data: str | bytes, *, session_id: str | None = None, scope: str | None = None) -> str:
        """Store an exported session, under its own id or `session_id`; returns the id. The id must be free."""
        try:
            document = json.loads(data)
            if document.get('format') != _EXPORT_FORMAT:
                raise ValueError(f'not a {_EXPORT_FORMAT} export (format={document.get("format")!r})')
            messages = load_messages(json.dumps(document['messages']))
            tokens = [int(t) for t in document['tokens']]
            if len(tokens) != len(messages):
                raise ValueError('tokens and messages differ in length')
        except (ValueError, KeyError, TypeError, pydantic.ValidationError) as error:
            raise ValueError(f'Cannot import: {error}') from None
        target = check_id(session_id if session_id is not None else document['session_id'])
        target_scope = scope if scope is not None else document.get('scope')
        await self.ready()

        async def store(db: AsyncSession) -> None:
            session_row = new_session_row(
                target,
                target_scope,
                message_count=len(messages),
                head_end=int(document.get('head_end', 0)),
                window_start=int(document.get('window_start', 0)),
                usage=document.get('usage') or {},
                metadata=document.get('metadata') or {},
            )
            db.add(session_row)
            try:
                await db.flush()
            except IntegrityError:
                raise SessionConflict(target, 'a session with this id already exists') from None
            await self.insert_messages(db, session_row.pk, 0, messages, tokens)
            previous: int | None = None
            for s in document['summaries']:
                summary = NewSummary(
                    s['covers_from'], s['covers_to'], s['text'], s['tokens'], s['model_name'], load_usage(s['usage'])
                )
                previous = await self._insert_summary(
                    db, session_row.pk, previous, summary, datetime.fromisoformat(s['created_at'])
                )

        await self._write(target, store)
        return target

    # The run cycle: load the window, then store the run

    async def load_window(self, session_id: str, scope: str | None, processor: WindowProcessor) -> LoadedWindow:
        """The stored window, rebuilt from the latest summary and the kept tail; the archive is not read."""
        async with self.db() as db:
            row = await self._row(db, session_id, scope)
            summary = await db.scalar(
                select(SummaryRow).where(SummaryRow.session_pk == row.pk).order_by(SummaryRow.pk.desc()).limit(1)
            )
            # Two range scans on (session, position): the head (at least the first message, for its
            # system prompt) and the tail. One OR'd condition would make the index serve only the
            # session and read all of its archive.
            head_end = min(max(row.head_end, 1), row.window_start)
            in_session = select(MessageRow.position, MessageRow.payload, MessageRow.tokens).where(
                MessageRow.session_pk == row.pk
            )
            rows = (
                await db.execute(
                    union_all(
                        in_session.where(MessageRow.position < head_end),
                        in_session.where(MessageRow.position >= row.window_start),
                    ).order_by('position')
                )
            ).all()
        loaded = [(position, decode(session_id, position, payload), tokens) for position, payload, tokens in rows]
        head = [entry for entry in loaded if entry[0] < row.head_end]
        tail = [entry for entry in loaded if entry[0] >= row.window_start and entry[0] >= row.head_end]
        first = [loaded[0][1]] if loaded and loaded[0][0] == 0 else []
        parts: list[ModelRequestPart] = []
        if summary is not None:
            parts = list(summary_request(processor.kept_system_parts(first), summary.text).parts)
        elif row.window_start > row.head_end:  # the system prompt's own message was cut
            parts = list(processor.kept_system_parts(first))
        window: list[tuple[int, ModelMessage, int | None]] = [*head, *tail]
        if parts and tail:
            # pydantic-ai merges consecutive requests, so the bridge rides in the tail's first request
            # (a cut always starts the tail with one); the run's history then lines up with the archive.
            position, opening, _ = tail[0]
            assert isinstance(opening, ModelRequest)
            window[len(head)] = (position, replace(opening, parts=[*parts, *opening.parts]), None)
        return LoadedWindow(
            session_pk=row.pk,
            revision=row.revision,
            message_count=row.message_count,
            head_end=row.head_end,
            window_start=row.window_start,
            summary_pk=None if summary is None else summary.pk,
            messages=[m for _, m, _ in window],
            positions=[p for p, _, _ in window],
            tokens=[t for _, _, t in window],
            usage=load_usage(row.usage),
        )

    async def store_run(self, session_id: str, loaded: LoadedWindow, record: RunRecord) -> None:
        """Append a run's messages and summaries, and move the window, in one transaction.

        Raises:
            SessionConflict: Another run was stored since `loaded` was read; nothing was written.
        """

        async def append(db: AsyncSession) -> None:
            moved = await db.execute(
                update(SessionRow)
                .where(SessionRow.pk == loaded.session_pk, SessionRow.revision == loaded.revision)
                .values(
                    revision=new_token(),
                    message_count=loaded.message_count + len(record.messages),
                    head_end=record.head_end,
                    window_start=record.window_start,
                    usage=dump_usage(record.usage),
                    deferred_tool_requests=record.deferred_tool_requests,
                    updated_at=now(),
                )
            )
            if moved.rowcount != 1:  # type: ignore[attr-defined]
                raise SessionConflict(session_id)
            await self.insert_messages(db, loaded.session_pk, loaded.message_count, record.messages, record.tokens)
            previous = loaded.summary_pk
            for summary in record.summaries:
                previous = await self._insert_summary(db, loaded.session_pk, previous, summary, now())

        await self._write(session_id, append)

    # Leases: how writers that asked to wait queue behind the run in progress

    async def acquire_lease(self, session_id: str, owner: str, *, timeout: float | None) -> None:
        """Take the session's lease for `owner`, waiting while another holder's lease is live.

        Raises:
            SessionConflict: The lease was not free within `timeout` seconds.
        """
        deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        pause = 0.02
        while True:
            moment = now()

            async def take(db: AsyncSession, moment: datetime = moment) -> bool:
                taken = await db.execute(
                    update(SessionRow)
                    .where(
                        SessionRow.session_id == session_id,
                        or_(SessionRow.lease_owner.is_(None), SessionRow.lease_expires < moment),
                    )
                    .values(lease_owner=owner, lease_expires=moment + LEASE_TTL)
                )
                return bool(taken.rowcount == 1)  # type: ignore[attr-defined]

            if await self._write(session_id, take):
                return
            if deadline is not None and asyncio.get_running_loop().time() + pause > deadline:
                raise SessionConflict(session_id, f'another run still held it after waiting {timeout}s')
            await asyncio.sleep(pause * (0.5 + random.random()))
            pause = min(pause * 2, 0.5)

    async def renew_lease(self, session_id: str, owner: str) -> None:
        """Push the lease's expiry forward while its run goes on."""

        async def renew(db: AsyncSession) -> None:
            await db.execute(
                update(SessionRow)
                .where(SessionRow.session_id == session_id, SessionRow.lease_owner == owner)
                .values(lease_expires=now() + LEASE_TTL)
            )

        await self._write(session_id, renew)

    async def release_lease(self, session_id: str, owner: str) -> None:
        async def release(db: AsyncSession) -> None:
            await db.execute(
                update(SessionRow)
                .where(SessionRow.session_id == session_id, SessionRow.lease_owner == owner)
                .values(lease_owner=None, lease_expires=None)
            )

        await self._write(session_id, release)

    async def _write(self, session_id: str, work: Callable[[AsyncSession], Awaitable[T]]) -> T:
        """Run `work` in a write transaction, retrying while SQLite reports its lock taken.

        WAL and the busy timeout make most writers wait their turn; a transaction that read before
        writing can still be refused at once, and is safe to run again from the start.
        """
        for attempt in range(1, _LOCKED_TRIES + 1):
            try:
                async with self._writers() as db, db.begin():
                    return await work(db)
            except OperationalError as error:
                if 'locked' not in str(error.orig) or attempt == _LOCKED_TRIES:
                    if 'locked' in str(error.orig):
                        raise StoreError(
                            f'Session {session_id!r}: the SQLite database stayed locked by other writers through '
                            f'{_LOCKED_TRIES} tries; nothing was written. Try again, or move to PostgreSQL for '
                            'many concurrent writers.'
                        ) from None
                    raise
                await asyncio.sleep(0.01 * attempt * (0.5 + random.random()))
        raise AssertionError('unreachable')

    async def insert_messages(
        self,
        db: AsyncSession,
        session_pk: int,
        start: int,
        messages: Sequence[ModelMessage],
        tokens: Sequence[int],
        entry_ids: Sequence[str] | None = None,
    ) -> None:
        """Append `messages` at positions `start..`, with new entry ids unless the caller's entries have them."""
        if not messages:
            return
        moment = now()
        await db.execute(
            insert(MessageRow),
            [
                {
                    'session_pk': session_pk,
                    'position': start + offset,
                    'entry_id': entry_ids[offset] if entry_ids is not None else new_token(),
                    'run_id': getattr(message, 'run_id', None),
                    'kind': message.kind,
                    'payload': dump_message(message),
                    # PostgreSQL text can't hold NUL; the JSON payload keeps it, escaped.
                    'text': message_text(message).replace('\x00', ''),
                    'tokens': count,
                    'created_at': moment,
                }
                for offset, (message, count) in enumerate(zip(messages, tokens, strict=True))
            ],
        )

    async def _insert_summary(
        self,
        db: AsyncSession,
        session_pk: int,
        previous: int | None,
        summary: NewSummary,
        created_at: datetime,
    ) -> int:
        row = SummaryRow(
            session_pk=session_pk,
            previous_pk=previous,
            covers_from=summary.covers_from,
            covers_to=summary.covers_to,
            text=summary.text,
            tokens=summary.tokens,
            model_name=summary.model_name,
            usage=dump_usage(summary.usage),
            created_at=created_at,
        )
        db.add(row)
        await db.flush()
        return row.pk


def decode(session_id: str, position: int, payload: str) -> ModelMessage:
    """A stored message, or an error naming the session and position if its row is corrupt."""
    try:
        return load_message(payload)
    except (pydantic.ValidationError, ValueError) as error:
        raise StoreError(
            f'Session {session_id!r}: the message at position {position} is corrupt and cannot be read '
            f'({str(error).splitlines()[0]}). Other messages and sessions are unaffected.'
        ) from None
