"""`SessionExport`: a session's whole tree as a document (branches, token counts, summaries, window), and its file.

The file format is JSON Lines, one record a line, so a large session streams and a person can read it:

    {"kind": "session", "format": "session-store/3", "session_id": ..., "segment_count": G, "message_count": N,
     "summary_count": S, "active_segment": 0, "head_end": 0, "window_start": 32, "branches": [[1, 43]],
     "title": "Refund for ORD-1042", ...}
    {"kind": "segment", "segment": 0, "parent": null, "starts_at": 0, "head_end": null, "window_start": null}
    {"kind": "message", "segment": 0, "position": 0, "tokens": 12, "stored_at": "...", "message": {...}}
    ...                                        each segment's record, then its own messages; N messages in all
    {"kind": "summary", "summary": 0, "segment": 0, "previous": null, "covers_from": 0, "covers_to": 16, ...}   x S
    {"kind": "end", "segments": G, "messages": N, "summaries": S, "sha256": "<digest of every line above>"}

A session is a tree of segments (`session_store.rows.SegmentRow`): each segment holds messages at
consecutive positions and leaves its parent's path at `starts_at`. Segments and summaries are numbered in
the file (parents and extended summaries come first), and records refer to each other by those numbers,
never by the store's keys. A document says what it holds: the header's counts, and the closing line's
counts and digest. Reading refuses, naming what is missing, a file cut short (at a line boundary or not),
one with lines changed, and one whose tree, window or summaries don't fit together.

Entry ids (pydantic-ai's `ConversationEntry.id`, unique in a database) don't travel: an import mints fresh
ones, so a session can be imported next to the one it was exported from. The conversation record's
`branches` travel as (segment, position) of each tip, and come back as the tips' new entry ids; a tip the
session no longer holds is dropped on export. `forked_at` names an entry of the conversation it was forked
from (a fork copies its messages), so it travels as it is, like `forked_from`.

Files of format `session-store/2` (one path, counted, with a closing line) and `session-store/1` (written
by session-store 0.1, without counts or closing line) are still read, as one-segment trees; format 1 gets
the consistency checks only. Fields added to a header since, as its `deferred_tool_requests` and `title`, are read
when present and default when not (a file written before them had none), so the format stays
`session-store/3`: an older version reading a newer file ignores them (one before titles has nowhere to keep one).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pydantic
from pydantic_ai.messages import ModelMessage
from pydantic_ai.usage import RunUsage

from ._codec import dump_message, dump_usage, load_message, load_usage, utc
from ._ids import check_id
from ._paths import Segments, spans_of
from .errors import ExportError
from .results import StoredSummary

__all__ = ('FORMAT', 'ExportedSegment', 'ExportedSummary', 'SessionExport', 'path_of')

FORMAT = 'session-store/3'
"""The format this version writes."""
_LINEAR = ('session-store/2', 'session-store/1')
"""Older formats, each holding one path, that this version still reads."""


@dataclass(frozen=True)
class ExportedSegment:
    """A segment of a session's tree: messages at consecutive positions, leaving its parent's path at `starts_at`."""

    parent: int | None
    """The index, in `SessionExport.segments`, of the segment it forks from (an earlier one); `None` for a root."""
    starts_at: int
    """The position of its first message; its path's positions below it are its parent's path's (0 for a root)."""
    messages: list[ModelMessage]
    """Its own messages, at positions `starts_at` on."""
    tokens: list[int]
    """Each of its messages' stored token count."""
    head_end: int | None = None
    """Its path's window head, saved when another path was made active; `None` if never saved."""
    window_start: int | None = None
    """Its path's window tail start, saved with `head_end`."""
    stored_at: list[datetime] = field(default_factory=list[datetime])
    """When each of its messages was stored, if the document says (an older file doesn't: an import then dates each
    message by its own timestamp). A branch's "updated" time is its last message's."""

    @property
    def end(self) -> int:
        """One past its last position: the length of its path."""
        return self.starts_at + len(self.messages)


@dataclass(frozen=True)
class ExportedSummary(StoredSummary):
    """A summary of an exported session: a `StoredSummary`, with the segment it was made on and the one it extends.

    Its `index` is its place in `SessionExport.summaries`.
    """

    segment: int
    """The index, in `SessionExport.segments`, of the segment whose path it was made on (and covers positions of)."""
    previous: int | None
    """The index, in `SessionExport.summaries`, of the summary it extends (an earlier one); `None` for a first."""


@dataclass(frozen=True)
class SessionExport:
    """A whole session, as `SessionStore.export()` reads it and `SessionStore.import_()` stores it.

    `messages`, `tokens`, `head_end` and `window_start` describe the active path, what the next run continues;
    `segments` hold the whole tree, every branch with its own messages. A document made without `segments`
    is a one-path session: one segment holding `messages`.
    """

    session_id: str
    scope: str | None
    messages: list[ModelMessage]
    """The active path: what `SessionStore.history()` reads."""
    tokens: list[int]
    """Each message's stored token count."""
    summaries: list[ExportedSummary]
    """Every summary, on any branch, oldest first; for a one-path session, its chain."""
    head_end: int = 0
    """Messages before this position open every window verbatim."""
    window_start: int = 0
    """Where the window's tail starts: what lies before it (past the head) is summarized or dropped."""
    usage: RunUsage = field(default_factory=RunUsage)
    metadata: dict[str, Any] = field(default_factory=dict[str, Any])
    segments: list[ExportedSegment] = field(default_factory=list[ExportedSegment])
    """The session's tree of segments, each parent before its children; `messages` is the active one's path."""
    active_segment: int = 0
    """The index, in `segments`, of the segment the active path ends in."""
    branches: list[tuple[int, int]] = field(default_factory=list[tuple[int, int]])
    """pydantic-ai's `ConversationRecord.branches`: the tip of each branch it left, as (segment, position)."""
    forked_from: str | None = None
    """pydantic-ai's `ConversationRecord.forked_from`: the conversation this one was forked from."""
    forked_at: str | None = None
    """pydantic-ai's `ConversationRecord.forked_at`: the entry of `forked_from` where it was forked."""
    deferred_tool_requests: dict[str, Any] | None = None
    """The tool calls the session's last run left waiting for approval or results (pydantic-ai's JSON)."""
    title: str | None = None
    """pydantic-ai's `ConversationRecord.title`: what the conversation is about, if it was given one."""

    def __post_init__(self) -> None:
        if not self.segments:
            object.__setattr__(self, 'segments', [ExportedSegment(None, 0, self.messages, self.tokens)])

    @property
    def archived(self) -> int:
        """How many messages the session holds, on every branch (`len(messages)` counts the active path's)."""
        return _archived(self.segments)

    def check(self, source: str = 'the export') -> None:
        """Refuse a document whose parts disagree: a tree out of order, or a window, summary or tip outside it.

        Raises:
            ExportError: Naming what is inconsistent.
        """
        _check_tree(self.segments, self.active_segment, source)
        messages, tokens = path_of(self.segments, self.active_segment)
        if self.messages != messages or self.tokens != tokens:
            raise ExportError(
                f'{source}: its {len(self.messages)} messages and {len(self.tokens)} token counts are not the path '
                f'of its active segment {self.active_segment}, which holds {len(messages)}.'
            )
        count = len(messages)
        if not 0 <= self.head_end <= count or not 0 <= self.window_start <= count:
            raise ExportError(
                f'{source}: the window (head end {self.head_end}, tail start {self.window_start}) points past its '
                f'{count} messages; the file is incomplete.'
            )
        tree = _tree(self.segments)
        for index in range(len(self.summaries)):
            _check_summary(self.segments, tree, self.summaries, index, source)
        for segment, position in self.branches:
            held = 0 <= segment < len(self.segments) and _holds(self.segments[segment], position)
            if not held:
                raise ExportError(f'{source}: branch tip ({segment}, {position}) is not a message it holds.')

    def to_json_lines(self) -> Iterator[str]:
        """The document as JSON Lines (without newlines), closing with its counts and digest."""
        digest = hashlib.sha256()

        def emit(line: str) -> str:
            digest.update(line.encode())
            digest.update(b'\n')
            return line

        counts = {
            'segments': len(self.segments),
            'messages': self.archived,
            'summaries': len(self.summaries),
        }
        header = {
            'kind': 'session',
            'format': FORMAT,
            'session_id': self.session_id,
            'scope': self.scope,
            **{_COUNTS[noun]: count for noun, count in counts.items()},
            'active_segment': self.active_segment,
            'head_end': self.head_end,
            'window_start': self.window_start,
            'usage': dump_usage(self.usage),
            'metadata': self.metadata,
            'branches': [list(tip) for tip in self.branches],
            'forked_from': self.forked_from,
            'forked_at': self.forked_at,
            'deferred_tool_requests': self.deferred_tool_requests,
            'title': self.title,
        }
        yield emit(json.dumps(header, ensure_ascii=False))
        for key, segment in enumerate(self.segments):
            record = {
                'kind': 'segment',
                'segment': key,
                'parent': segment.parent,
                'starts_at': segment.starts_at,
                'head_end': segment.head_end,
                'window_start': segment.window_start,
            }
            yield emit(json.dumps(record))
            for position, (message, tokens) in enumerate(zip(segment.messages, segment.tokens, strict=True)):
                stored = f'"stored_at": "{segment.stored_at[position].isoformat()}", ' if segment.stored_at else ''
                # The payload is pydantic-ai's own JSON, spliced in as it is, not re-encoded.
                yield emit(
                    f'{{"kind": "message", "segment": {key}, "position": {segment.starts_at + position}, '
                    f'"tokens": {tokens}, {stored}"message": {dump_message(message)}}}'
                )
        for index, summary in enumerate(self.summaries):
            record = {
                'kind': 'summary',
                'summary': index,
                'segment': summary.segment,
                'previous': summary.previous,
                'covers_from': summary.covers_from,
                'covers_to': summary.covers_to,
                'text': summary.text,
                'tokens': summary.tokens,
                'model_name': summary.model_name,
                'usage': dump_usage(summary.usage),
                'created_at': summary.created_at.isoformat(),
            }
            yield emit(json.dumps(record, ensure_ascii=False))
        yield json.dumps({'kind': 'end', **counts, 'sha256': digest.hexdigest()})

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


_COUNTS = {'segments': 'segment_count', 'messages': 'message_count', 'summaries': 'summary_count'}
"""What a header counts, under which key."""


def _archived(segments: Sequence[ExportedSegment]) -> int:
    return sum(len(segment.messages) for segment in segments)


def _holds(segment: ExportedSegment, position: int) -> bool:
    return segment.starts_at <= position < segment.end


def _tree(segments: Sequence[ExportedSegment]) -> Segments:
    return {key: (segment.parent, segment.starts_at) for key, segment in enumerate(segments)}


def path_of(segments: Sequence[ExportedSegment], key: int) -> tuple[list[ModelMessage], list[int]]:
    """The messages and token counts of the whole path ending in segment `key`, of a checked tree."""
    messages: list[ModelMessage] = []
    tokens: list[int] = []
    for span in spans_of(_tree(segments), key, segments[key].end):
        segment = segments[span.segment_pk]
        own = slice(span.start - segment.starts_at, span.end - segment.starts_at)
        messages += segment.messages[own]
        tokens += segment.tokens[own]
    return messages, tokens


def _check_tree(segments: Sequence[ExportedSegment], active: int, source: str) -> None:
    """Refuse segments that aren't a tree in order (each parent earlier, each fork inside its parent's messages)."""
    if not 0 <= active < len(segments):
        raise ExportError(f'{source}: its active segment {active} is not one of its {len(segments)} segments.')
    for key, segment in enumerate(segments):
        where = f'{source}: segment {key}'
        if len(segment.tokens) != len(segment.messages):
            raise ExportError(f'{where} has {len(segment.messages)} messages but {len(segment.tokens)} token counts.')
        if segment.parent is None:
            if segment.starts_at != 0:
                raise ExportError(f'{where} has no parent, so it starts at position 0, not {segment.starts_at}.')
        elif not 0 <= segment.parent < key:
            raise ExportError(f'{where} forks from segment {segment.parent}, which is not a segment before it.')
        else:
            parent = segments[segment.parent]
            if not parent.starts_at < segment.starts_at <= parent.end:
                raise ExportError(
                    f'{where} leaves segment {segment.parent} at position {segment.starts_at}, outside the '
                    f'{len(parent.messages)} messages that segment holds (from position {parent.starts_at}).'
                )
        saved = (segment.head_end, segment.window_start)
        if any(value is not None and not 0 <= value <= segment.end for value in saved):
            raise ExportError(
                f'{where}: its saved window (head end {saved[0]}, tail start {saved[1]}) points past its path of '
                f'{segment.end} messages.'
            )


def _check_summary(
    segments: Sequence[ExportedSegment], tree: Segments, summaries: Sequence[ExportedSummary], index: int, source: str
) -> None:
    """Refuse summary `index` if it covers positions off its segment's path, or extends one that isn't before it."""
    summary = summaries[index]
    where = f'{source}: summary {index}'
    if not 0 <= summary.segment < len(segments):
        raise ExportError(f'{where} was made on segment {summary.segment}, which is not one of its segments.')
    end = segments[summary.segment].end
    if not 0 <= summary.covers_from < summary.covers_to <= end:
        raise ExportError(
            f'{where} covers positions {summary.covers_from}-{summary.covers_to}, outside the path of its segment '
            f'{summary.segment} (0-{end}).'
        )
    if summary.previous is None:
        return
    if not 0 <= summary.previous < index:
        raise ExportError(f'{where} extends summary {summary.previous}, which is not a summary before it.')
    previous = summaries[summary.previous]
    spans = spans_of(tree, summary.segment, end)
    on_path = any(span.segment_pk == previous.segment and previous.covers_to <= span.end for span in spans)
    if not on_path or previous.covers_to > summary.covers_from:
        raise ExportError(
            f'{where} extends summary {summary.previous}, which does not end before it on its path (it covers '
            f'{previous.covers_from}-{previous.covers_to} of segment {previous.segment}).'
        )


class _Reader:
    """Reads an export line by line, checking order, counts and digest as it goes."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.header: dict[str, Any] | None = None
        self.fields: dict[str, Any] = {}
        """The document's fields the header gives."""
        self.segments: list[ExportedSegment] = []
        self.summaries: list[ExportedSummary] = []
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
            self._take_header(where, record)
        elif self.header is None:
            raise ExportError(f'{where}: expected the session header first; is this a `session-store export` file?')
        elif kind == 'segment' and self.header['format'] == FORMAT:
            if record['segment'] != len(self.segments):
                raise ExportError(f'{where}: segment {record["segment"]!r}, expected {len(self.segments)}.')
            self.segments.append(
                ExportedSegment(
                    parent=_optional_int(record['parent']),
                    starts_at=int(record['starts_at']),
                    messages=[],
                    tokens=[],
                    head_end=_optional_int(record['head_end']),
                    window_start=_optional_int(record['window_start']),
                )
            )
        elif kind == 'message':
            if not self.segments:
                raise ExportError(f'{where}: a message before any segment record.')
            segment = self.segments[-1]
            key = len(self.segments) - 1
            if record.get('segment', key) != key:
                raise ExportError(f"{where}: a message of segment {record['segment']!r} among segment {key}'s.")
            if record['position'] != segment.end:
                raise ExportError(f'{where}: message at position {record["position"]!r}, expected {segment.end}.')
            dated = 'stored_at' in record
            if segment.messages and dated != bool(segment.stored_at):  # all of a segment's messages say, or none
                said = 'says' if dated else 'does not say'
                raise ExportError(f'{where}: a message that {said} when it was stored, unlike the ones before it.')
            segment.messages.append(load_message(json.dumps(record['message'])))
            segment.tokens.append(int(record['tokens']))
            if dated:
                segment.stored_at.append(utc(datetime.fromisoformat(record['stored_at'])))
        elif kind == 'summary':
            index = len(self.summaries)
            if self.header['format'] != FORMAT:  # one path: each summary extends the one before it
                record = {'summary': index, 'segment': 0, 'previous': index - 1 if index else None, **record}
            if record['summary'] != index:
                raise ExportError(f'{where}: summary {record["summary"]!r}, expected {index}.')
            self.summaries.append(
                ExportedSummary(
                    index=index,
                    covers_from=int(record['covers_from']),
                    covers_to=int(record['covers_to']),
                    text=str(record['text']),
                    tokens=int(record['tokens']),
                    model_name=record.get('model_name'),
                    usage=load_usage(record.get('usage')),
                    created_at=utc(datetime.fromisoformat(record['created_at'])),
                    segment=int(record['segment']),
                    previous=_optional_int(record['previous']),
                )
            )
        elif kind == 'end':
            self.closing = record
        else:
            kinds = (
                'session, segment, message, summary or end'
                if self.header['format'] == FORMAT
                else ('session, message, summary or end')
            )
            raise ExportError(f'{where}: unknown kind {kind!r}; expected {kinds}.')

    def _take_header(self, where: str, record: dict[str, Any]) -> None:
        if self.header is not None:
            raise ExportError(f'{where}: a second session header; export one session per file.')
        format_ = record.get('format')
        if format_ != FORMAT and format_ not in _LINEAR:
            raise ExportError(f'{where}: format {format_!r}; this version reads {", ".join((FORMAT, *_LINEAR))}.')
        self.fields = {
            'scope': record.get('scope'),
            'head_end': int(record.get('head_end', 0)),
            'window_start': int(record.get('window_start', 0)),
            'usage': load_usage(record.get('usage')),
            'metadata': dict(record.get('metadata') or {}),
            # Files written before titles travelled have none: the session was untitled, or its title stays behind.
            'title': _optional_str(record.get('title')),
        }
        if format_ == FORMAT:
            self.fields |= {
                'active_segment': int(record['active_segment']),
                'branches': [(int(segment), int(position)) for segment, position in record['branches']],
                'forked_from': record['forked_from'],
                'forked_at': record['forked_at'],
                # Files written before it was carried have none: they were refused when paused, or had none.
                'deferred_tool_requests': record.get('deferred_tool_requests'),
            }
        else:  # one path: its records are one segment's, with no record of their own
            self.segments.append(ExportedSegment(None, 0, [], []))
        self.header = record

    def finish(self) -> SessionExport:
        header = self.header
        if header is None:
            raise ExportError(f'{self.source}: empty; expected a `session-store export` file.')
        if header['format'] != 'session-store/1':
            self._check_complete(header)
        try:
            session_id = check_id(header.get('session_id'))
        except ValueError as error:
            raise ExportError(f'{self.source}: the header has no usable session id ({error})') from None
        _check_tree(self.segments, self.fields.get('active_segment', 0), self.source)
        messages, tokens = path_of(self.segments, self.fields.get('active_segment', 0))
        document = SessionExport(
            session_id=session_id,
            messages=messages,
            tokens=tokens,
            summaries=self.summaries,
            segments=self.segments,
            **self.fields,
        )
        document.check(self.source)
        return document

    def _check_complete(self, header: dict[str, Any]) -> None:
        counted = {
            'segments': len(self.segments),
            'messages': _archived(self.segments),
            'summaries': len(self.summaries),
        }
        if header['format'] != FORMAT:
            del counted['segments']
        held = _listing(counted)
        expected = _listing({noun: header.get(_COUNTS[noun]) for noun in counted})
        if held != expected:
            raise ExportError(f'{self.source}: incomplete: the header announces {expected}, the file holds {held}.')
        if self.closing is None:
            raise ExportError(f'{self.source}: incomplete: it holds {held} but ends without its closing line.')
        if self.closing.get('sha256') != self.digest.hexdigest():
            raise ExportError(f'{self.source}: its lines were changed since export (the digest does not match).')


def _listing(counts: Mapping[str, object]) -> str:
    """`{'messages': 40, 'summaries': 3}` as '40 messages and 3 summaries'."""
    said = [f'{count} {noun}' for noun, count in counts.items()]
    return f'{", ".join(said[:-1])} and {said[-1]}'


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _optional_str(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f'expected a string or null, got {value!r:.40}')
    return value
