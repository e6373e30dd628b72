"""What each page shows, read through the store's public API, and the same data as JSON for `/api/...`.

Every read is confined to the app's scope: a session saved under another scope is not found, exactly as
an id nobody uses. Nothing here creates a session: a session's existence is checked with read-only calls
(`conversations.read_record`, `window`) before `store.session()` is asked for its branches.

One read goes below that API: the entry ids of a page's messages (`page_entry_ids`), which Edit and Regenerate
resubmit a message stored without a UI message id under. The store hands entry ids out only along a path's
tail (`conversations.read_history`); a page may be any stretch of a path, so they are read by position, one
range scan per segment, as `history` reads the messages themselves.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pydantic_ai.conversation_store import ConversationRecord
from pydantic_ai.messages import ModelMessage
from sqlalchemy import select

from .._codec import dump_messages, dump_usage
from .._db.database import active_segment, find_session
from .._display import summary_json, window_tokens
from .._history.tree import on_path, path_spans
from ..errors import KeyUnavailable, SessionNotFound
from ..results import Branch, SearchHit, SessionInfo, StoredSummary, SummaryChain
from ..rows import MessageRow
from ..store import SessionStore
from ._present import MessageView, message_views, snippet

__all__ = (
    'ContextPage',
    'Rows',
    'SearchPage',
    'SessionPage',
    'SessionsPage',
    'UnknownBranch',
    'WindowMark',
    'context_page',
    'page_entry_ids',
    'search_page',
    'session_page',
    'sessions_page',
    'visible_record',
)


@dataclass(frozen=True)
class SessionsPage:
    """One page of the sessions list, most recently updated first."""

    sessions: list[SessionInfo]
    scope: str | None
    """The scope filter in force (the app's, or the one asked for)."""
    offset: int
    limit: int
    next_offset: int | None
    prev_offset: int | None

    def json(self) -> dict[str, Any]:
        return {
            'scope': self.scope,
            'offset': self.offset,
            'limit': self.limit,
            'next_offset': self.next_offset,
            'sessions': [session_json(info) for info in self.sessions],
        }


@dataclass(frozen=True)
class WindowMark:
    """Where the model's window starts on the active path, and what the next request sends."""

    start: int
    """The first position of the kept tail (the archive's length when nothing is kept)."""
    messages: int
    """How many messages the next request starts from (head, summary-carrying request and tail)."""
    tokens: int
    """Their tokens, as `session_store._display.window_tokens` counts them."""
    head: list[int]
    """Positions of pinned head messages before the tail (a system prompt kept from the start)."""
    summary_number: int | None
    """The number of the summary the window carries, if any."""


Rows = list[tuple[Literal['band', 'marker', 'message'], Any]]
"""The conversation as the session page lays it out: summary bands and the window marker between messages."""


@dataclass(frozen=True)
class SessionPage:
    """A page of a session's path, with its summaries, window and branches."""

    session_id: str
    title: str | None
    """Its conversation's title, if it has one."""
    scope: str | None
    """The session's own scope."""
    message_count: int
    """Messages on the path shown."""
    offset: int
    limit: int
    messages: list[MessageView]
    summaries: list[StoredSummary]
    """The links of the active path's summary chain that cover messages of this page (none on another branch)."""
    summary_count: int
    """The links in the active path's whole chain."""
    window: WindowMark | None
    """The active path's window (`None` when another branch is shown)."""
    branches: list[Branch]
    """Every branch, when the session has more than one; empty when its archive is one path."""
    branch: str | None
    """The branch shown, as its tip; `None` for the active path."""
    branch_count: int
    at: int | None = None
    """The position a link asked for, highlighted."""

    @property
    def next_offset(self) -> int | None:
        end = self.offset + len(self.messages)
        return end if end < self.message_count else None

    @property
    def prev_offset(self) -> int | None:
        return max(0, self.offset - self.limit) if self.offset > 0 else None

    @property
    def last_offset(self) -> int:
        return max(0, self.message_count - self.limit)

    @property
    def on_active_path(self) -> bool:
        return self.branch is None

    @property
    def active_tip(self) -> str | None:
        """The active branch's tip, when the session has more than one path."""
        return next((b.tip for b in self.branches if b.active), None)

    @property
    def active_number(self) -> int | None:
        """The active branch's number, when the session has more than one path."""
        return next((b.number for b in self.branches if b.active), None)

    @property
    def shown_number(self) -> int | None:
        """The number of the branch shown, when it is not the active path."""
        return next((b.number for b in self.branches if b.tip == self.branch), None)

    def rows(self) -> Rows:
        """The page's messages, with a band where each summary's range starts and the window marker."""
        rows: Rows = []
        start = self.offset
        for message in self.messages:
            for summary in self.summaries:
                if message.position == max(summary.covers_from, start):
                    rows.append(('band', summary))
            if self.window is not None and message.position == self.window.start:
                rows.append(('marker', self.window))
            rows.append(('message', message))
        end = self.offset + len(self.messages)
        if self.window is not None and self.window.start == end == self.message_count:
            rows.append(('marker', self.window))
        return rows

    def band_of(self, position: int) -> int | None:
        """The index of the summary whose range holds `position`, if any: its band's colour."""
        for summary in self.summaries:
            if summary.covers_from <= position < summary.covers_to:
                return summary.index
        return None

    def json(self) -> dict[str, Any]:
        return {
            'session_id': self.session_id,
            'title': self.title,
            'scope': self.scope,
            'branch': self.branch,
            'message_count': self.message_count,
            'offset': self.offset,
            'limit': self.limit,
            'next_offset': self.next_offset,
            'messages': messages_json(self.messages, self._raw),
            'summary_count': self.summary_count,
            'summaries': [summary_json(summary) for summary in self.summaries],
            'window': None if self.window is None else asdict(self.window),
            'branch_count': self.branch_count,
            'branches': [branch_json(branch) for branch in self.branches],
        }

    _raw: list[ModelMessage] = field(default_factory=list[ModelMessage], repr=False)


@dataclass(frozen=True)
class ContextPage:
    """What the session's next request sends: the window, each message with its position and tokens."""

    session_id: str
    scope: str | None
    message_count: int
    messages: list[MessageView]
    tokens: list[int]
    window: WindowMark
    _raw: list[ModelMessage] = field(default_factory=list[ModelMessage], repr=False)

    def json(self) -> dict[str, Any]:
        return {
            'session_id': self.session_id,
            'scope': self.scope,
            'archived_messages': self.message_count,
            'tokens': sum(self.tokens),
            'window': asdict(self.window),
            'messages': [
                {**item, 'tokens': tokens}
                for item, tokens in zip(messages_json(self.messages, self._raw), self.tokens, strict=True)
            ],
        }


@dataclass(frozen=True)
class SearchPage:
    """Search hits across the sessions in scope, newest (or best) first."""

    query: str
    match: Literal['phrase', 'words']
    hits: list[SearchHit]
    error: str | None = None

    def snippets(self) -> list[tuple[SearchHit, tuple[str, str, str]]]:
        return [(hit, snippet(hit.text, self.query if self.match == 'phrase' else '')) for hit in self.hits]

    def json(self) -> dict[str, Any]:
        return {
            'query': self.query,
            'match': self.match,
            'error': self.error,
            'hits': [
                {
                    'session_id': hit.session_id,
                    'scope': hit.scope,
                    'position': hit.position,
                    'text': hit.text,
                    'message': json.loads(dump_messages([hit.message]))[0],
                }
                for hit in self.hits
            ],
        }


def session_json(info: SessionInfo) -> dict[str, Any]:
    return {
        'session_id': info.session_id,
        'title': info.title,
        'scope': info.scope,
        'message_count': info.message_count,
        'summary_count': info.summary_count,
        'branch_count': info.branch_count,
        'usage': dump_usage(info.usage),
        'created_at': info.created_at.isoformat(),
        'updated_at': info.updated_at.isoformat(),
        'metadata': info.metadata,
    }


def branch_json(branch: Branch) -> dict[str, Any]:
    data = asdict(branch)
    data['updated_at'] = branch.updated_at.isoformat()
    return data


def messages_json(views: Sequence[MessageView], raw: Sequence[ModelMessage]) -> list[dict[str, Any]]:
    """Each message as its position, role, ids and pydantic-ai's own JSON (what `ModelMessagesTypeAdapter` loads).

    `entry_id` is the message's id in the archive (`None` on the context page, whose window is not read by entry),
    and `message_id` what a user message is resubmitted under to edit or regenerate it (`None` for the others).
    """
    dumped: list[Any] = json.loads(dump_messages(list(raw)))
    return [
        {
            'position': view.position,
            'role': view.role,
            'ui_message_id': view.ui_message_id,
            'entry_id': view.entry_id,
            'message_id': view.message_id,
            'message': message,
        }
        for view, message in zip(views, dumped, strict=True)
    ]


class UnknownBranch(LookupError):
    """A page asked for a branch the session (which exists) does not have; its message names the ones it has."""

    def __init__(self, session_id: str, branch: str, tips: Sequence[str]) -> None:
        super().__init__(f"Session {session_id!r} has no branch {branch!r}; its branches' tips are {', '.join(tips)}.")


# --- reading ---------------------------------------------------------------------------------------


async def sessions_page(
    store: SessionStore, *, scope: str | None, asked_scope: str | None, offset: int, limit: int
) -> SessionsPage:
    """A page of sessions: the app's scope, or the one asked for when the app has none; one past `limit` is read
    to tell whether there is a next page."""
    shown = scope if scope is not None else asked_scope
    if scope is not None and asked_scope not in (None, scope):
        infos: list[SessionInfo] = []  # another scope than the app's: nothing of it is visible
    else:
        infos = await store.sessions(scope=shown, offset=offset, limit=limit + 1)
    more = len(infos) > limit
    return SessionsPage(
        sessions=infos[:limit],
        scope=shown,
        offset=offset,
        limit=limit,
        next_offset=offset + limit if more else None,
        prev_offset=max(0, offset - limit) if offset > 0 else None,
    )


async def visible_record(store: SessionStore, session_id: str, scope: str | None) -> ConversationRecord:
    """The session's record (its scope, usage, branches left behind); `SessionNotFound` unless visible under `scope`.

    One read (`conversations.read_record`), which never creates a session. An id the store would refuse
    (empty, too long, unprintable) is simply not found.
    """
    try:
        record = await store.conversations.read_record(session_id)
    except ValueError:
        raise SessionNotFound(session_id[:255], scope) from None
    if record is None or (scope is not None and record.scope != scope):
        raise SessionNotFound(session_id, scope)
    return record


async def session_scope(store: SessionStore, session_id: str, scope: str | None) -> str | None:
    """The scope the session was saved with; `SessionNotFound` if it is not visible under the app's `scope`."""
    return (await visible_record(store, session_id, scope)).scope


def _window_mark(
    positions: Sequence[int], message_count: int, tokens: int, chain: Sequence[StoredSummary]
) -> WindowMark:
    """Where the contiguous tail that runs to the end of the archive starts; what comes before it is the head."""
    start = message_count
    for position in reversed(positions):
        if position != start - 1:
            break
        start = position
    head = [position for position in positions if position < start]
    carried = next((summary.number for summary in reversed(chain) if summary.covers_to <= start), None)
    return WindowMark(start=start, messages=len(positions), tokens=tokens, head=head, summary_number=carried)


async def page_entry_ids(
    store: SessionStore,
    session_id: str,
    scope: str | None,
    branch: Branch | None,
    first: int,
    count: int,
    *,
    revision: str,
) -> dict[int, str] | None:
    """The entry id of each message at positions `first` to `first + count - 1` of the session's active path (or
    of `branch`'s), by position, in one read: one range scan per segment the page crosses, whatever the archive's
    size. `None` if the session is no longer at `revision`: its paths may have moved since its page was read."""
    async with store._database.read() as db:  # the store has no public read of entry ids by position
        row = await find_session(db, session_id, scope)
        if row.revision != revision:
            return None
        if count <= 0:
            return {}
        tip, length = (
            (active_segment(row), row.message_count) if branch is None else (int(branch.tip), branch.message_count)
        )
        spans = await path_spans(db, row.pk, tip, length)
        query = on_path(select(MessageRow.position, MessageRow.entry_id), spans, (first, min(length, first + count)))
        return {position: entry_id for position, entry_id in (await db.execute(query)).all()}


def page_offset(message_count: int, limit: int, offset: int | None, at: int | None) -> int:
    """The first position of the page: `offset` as asked, else the page holding `at`, else the last page."""
    if offset is not None:
        return max(0, min(offset, max(0, message_count - 1)))
    if at is not None and 0 <= at < message_count:
        return at - at % limit
    return max(0, message_count - limit)


async def session_page(
    store: SessionStore,
    session_id: str,
    *,
    scope: str | None,
    offset: int | None,
    limit: int,
    branch: str | None,
    at: int | None,
) -> SessionPage:
    """A page of the session's active path (or of `branch`'s), with its summary bands, window and branches, and
    each message's entry id.

    The page's reads are one snapshot: read again (up to `PAGE_READS` times) while another writer moves the session
    meanwhile, so no Edit button carries the id of a message other than the one it shows; then, if it still moves,
    without the entry ids (a message stored without a UI message id has no buttons until the page is reloaded).
    """
    for attempt in range(PAGE_READS):
        page = await _session_page(
            store, session_id, scope, offset, limit, branch, at, with_entry_ids=attempt < PAGE_READS - 1
        )
        if page is not None:
            return page
    raise AssertionError('the last read of a page always gives one')


PAGE_READS = 3
"""How many times a session page is read while other writers keep moving the session."""


async def _session_page(
    store: SessionStore,
    session_id: str,
    scope: str | None,
    offset: int | None,
    limit: int,
    branch: str | None,
    at: int | None,
    *,
    with_entry_ids: bool,
) -> SessionPage | None:
    """`session_page`'s reads; `None` when the session moved before its entry ids were read."""
    record = await visible_record(store, session_id, scope)
    own_scope = record.scope
    window = await store.window(session_id, scope=own_scope)
    branches: list[Branch] = []
    if record.branches or branch is not None:
        # Listing branches reads the tree; a session that never branched has one path and skips it.
        session = await store.session(session_id, scope=own_scope)  # it exists: this only opens it
        branches = await session.branches()
    active = next((b.tip for b in branches if b.active), None)
    if branch == active:
        branch = None
    shown: Branch | None = None
    if branch is None:
        count = window.message_count
        chain = await store.summaries(session_id, scope=own_scope)
        mark = _window_mark(window.positions, count, sum(window_tokens(window)), chain)
    else:
        shown = next((b for b in branches if b.tip == branch), None)
        if shown is None:
            raise UnknownBranch(session_id, branch, [b.tip for b in branches])
        count, chain, mark = shown.message_count, SummaryChain(), None
    first = page_offset(count, limit, offset, at)
    messages = await store.history(session_id, scope=own_scope, offset=first, limit=limit, branch=branch)
    entry_ids: dict[int, str] | None = {}
    if with_entry_ids:
        entry_ids = await page_entry_ids(
            store, session_id, own_scope, shown, first, len(messages), revision=record.revision
        )
        if entry_ids is None:
            return None
    return SessionPage(
        session_id=session_id,
        title=record.title,
        scope=own_scope,
        message_count=count,
        offset=first,
        limit=limit,
        messages=message_views(messages, range(first, first + len(messages)), entry_ids),
        summaries=[s for s in chain if s.covers_to > first and s.covers_from < first + len(messages)],
        summary_count=len(chain),
        window=mark,
        branches=branches,
        branch=branch,
        branch_count=max(1, len(branches)),
        at=at,
        _raw=messages,
    )


async def context_page(store: SessionStore, session_id: str, *, scope: str | None) -> ContextPage:
    """The window the session's next request sends, message by message with its tokens."""
    own_scope = await session_scope(store, session_id, scope)
    window = await store.window(session_id, scope=own_scope)
    chain = await store.summaries(session_id, scope=own_scope)
    tokens = window_tokens(window)
    return ContextPage(
        session_id=session_id,
        scope=own_scope,
        message_count=window.message_count,
        messages=message_views(window.messages, window.positions),
        tokens=tokens,
        window=_window_mark(window.positions, window.message_count, sum(tokens), chain),
        _raw=window.messages,
    )


async def search_page(
    store: SessionStore, query: str, *, scope: str | None, match: Literal['phrase', 'words'], limit: int
) -> SearchPage:
    """Archived messages matching `query` in every session under `scope` (each session's active path)."""
    if not query.strip():
        return SearchPage(query=query, match=match, hits=[])
    try:
        hits = await store.search(query, scope=scope, match=match, limit=limit)
    except (ValueError, KeyUnavailable) as error:  # a text it can't search for; keys it can't search with
        return SearchPage(query=query, match=match, hits=[], error=str(error))
    return SearchPage(query=query, match=match, hits=hits)
