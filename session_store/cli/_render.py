"""Showing what the store holds: clipped text, counts, JSON for scripts, and suggested commands.

Messages are shown by `_messages`, which imports pydantic-ai: this module does not, for the review commands that
show none.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from typing import Any

import click
from rich.text import Text

from .._codec import dump_usage
from ..results import StoredSummary
from ._runtime import Settings, out

__all__ = (
    'CLIP',
    'clip',
    'compaction_line',
    'echo_json',
    'plural',
    'print_suggestion',
    'record_json',
)

CLIP = 300
"""How many characters of a message part a listing shows, unless `--full`."""


def clip(text: str, full: bool) -> str:
    """`text` whole, or flattened to one line and cut at `CLIP` characters, saying how much was left out."""
    if full:
        return text
    flat = ' '.join(text.split())
    return flat if len(flat) <= CLIP else f'{flat[:CLIP]}… (+{len(flat) - CLIP} chars)'


def record_json(record: Any) -> dict[str, Any]:
    """A result dataclass (`SessionInfo`, `StoredSummary`) as JSON values: usage as pydantic-ai dumps it, ISO times."""
    from pydantic_ai.usage import RunUsage  # a record holding one was made with pydantic-ai imported

    data: dict[str, Any] = asdict(record)
    for name, value in vars(record).items():
        if isinstance(value, RunUsage):
            data[name] = dump_usage(value)
        elif isinstance(value, datetime):
            data[name] = value.isoformat()
    return data


def plural(count: int, noun: str) -> str:
    """`1 message`, `2,048 messages`, `3 summaries`: a count and its noun, in the plural unless it is 1."""
    if count == 1:
        return f'{count:,} {noun}'
    return f'{count:,} {noun[:-1] + "ies" if noun.endswith("y") else noun + "s"}'


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def print_suggestion(settings: Settings, text: str) -> None:
    """A dim hint naming a command to run next, with what to set first if the command can't name the database."""
    out.print(Text(text, style='dim'))
    if settings.env_note:
        out.print(Text(settings.env_note, style='dim'))


def compaction_line(session_id: str, summary: StoredSummary | None) -> str:
    """What a compaction did, in one line."""
    if summary is None:
        return f'Nothing to compact in {session_id!r} yet: its history is no longer than the tail it keeps.'
    return (
        f'Compacted {session_id!r}: summary {summary.number} folds in messages '
        f'{summary.covers_from}-{summary.covers_to - 1} ({summary.tokens} tokens); the window now starts at '
        f'{summary.covers_to}.'
    )
