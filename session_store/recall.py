"""Recall: tools that let an agent look up what its summaries left out, in its own session's archive.

A summary is lossy; the archive is not. A session opened with `recall=True` hands its agent two
tools: `search_history` (full-text, best match first, with a little surrounding context) and
`read_history` (a range of positions). They only ever read the current session under its scope,
and every answer fits a token budget, so a lookup can't itself overflow the window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic_ai import ModelRetry
from pydantic_ai.messages import ModelMessage
from pydantic_ai.toolsets import FunctionToolset

from processors.text import format_messages

from ._db.database import Database
from ._history import review
from ._history.search import search

__all__ = ('Recall', 'recall_toolset')

_CHARS_PER_TOKEN = 4
_READ_AT_MOST = 20


@dataclass(frozen=True)
class Recall:
    """How much the recall tools return."""

    max_tokens: int = 2_000
    """The budget of one tool answer, at about four characters a token."""
    max_hits: int = 8
    """The most hits `search_history` returns, whatever the model asks for."""
    context: int = 1
    """How many messages either side of a hit come with it."""

    def __post_init__(self) -> None:
        for name in ('max_tokens', 'max_hits'):
            if getattr(self, name) < 1:
                raise ValueError(f'Recall({name}={getattr(self, name)!r}): it must be >= 1.')
        if self.context < 0:
            raise ValueError(f'Recall(context={self.context!r}): it must be >= 0.')


def _render(position: int, message: ModelMessage, max_chars: int) -> str:
    text = format_messages([message], max_part_chars=max_chars)
    return f'[{position}] {text}' if text else f'[{position}] ({message.kind} with no text)'


_MORE = '\n(more was found than fits; narrow the query or read a range)'


class _Budget:
    """Collects lines until the answer would exceed its token budget (the note saying so included)."""

    def __init__(self, max_tokens: int) -> None:
        self.left = max_tokens * _CHARS_PER_TOKEN - len(_MORE)
        self.lines: list[str] = []
        self.full = False

    def add(self, line: str) -> bool:
        if len(line) + 1 > self.left:
            self.full = True
            return False
        self.lines.append(line)
        self.left -= len(line) + 1
        return True

    def text(self, empty: str) -> str:
        if not self.lines:
            return empty
        return '\n'.join(self.lines) + (_MORE if self.full else '')


def recall_toolset(database: Database, session_id: str, scope: str | None, settings: Recall) -> FunctionToolset[Any]:
    """The recall tools for one session: they read nothing outside `session_id` under `scope`."""
    toolset: FunctionToolset[Any] = FunctionToolset()
    part_chars = settings.max_tokens * _CHARS_PER_TOKEN // 4

    @toolset.tool_plain
    async def search_history(query: str, limit: int = 5) -> str:
        """Search this conversation's complete archive, including details earlier summaries left out.

        Args:
            query: Words to look for, e.g. an order number, a name or a topic.
            limit: How many matching messages to return, best match first.

        Returns:
            Matching messages as `[position] speaker: text`, each with the messages around it.
        """
        hits = await search(
            database,
            query,
            session_id=session_id,
            scope=scope,
            match='words',
            limit=max(1, min(limit, settings.max_hits)),
        )
        budget = _Budget(settings.max_tokens)
        for hit in hits:
            around = await review.read_history(
                database,
                session_id,
                scope=scope,
                offset=max(0, hit.position - settings.context),
                limit=2 * settings.context + 1,
            )
            first = max(0, hit.position - settings.context)
            block = [
                ('>> ' if first + i == hit.position else '   ') + _render(first + i, message, part_chars)
                for i, message in enumerate(around)
            ]
            if not budget.add('\n'.join(block)):
                break
        return budget.text(f'Nothing in this conversation matches {query!r}.')

    @toolset.tool_plain
    async def read_history(start: int, end: int) -> str:
        """Read archived messages of this conversation by position, from `start` up to but not including `end`.

        Args:
            start: The first position, as `search_history` shows them.
            end: One past the last position; at most 20 messages are read at once.
        """
        if start < 0 or end <= start:
            raise ModelRetry(f'Give 0 <= start < end; got start={start}, end={end}.')
        messages = await review.read_history(
            database, session_id, scope=scope, offset=start, limit=min(end - start, _READ_AT_MOST)
        )
        budget = _Budget(settings.max_tokens)
        for offset, message in enumerate(messages):
            if not budget.add(_render(start + offset, message, part_chars)):
                break
        return budget.text(f'This conversation has no messages from position {start}.')

    return toolset
