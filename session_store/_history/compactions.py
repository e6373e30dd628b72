"""Compactions a run kept, taken in line: the summary a compaction put in a conversation becomes the next link of
the session's summary chain, never an archived message.

pydantic-ai 2.78 compacts a run's history through its capabilities' `compact_history` hook, whoever handles it
(session-store's `Summarization`, another library's summarizer): the run's `conversation` then holds every message
the run was given and made, with each summary as a request of its own right after the messages it stands in for.
Saved as it is, that request would read as a message the user sent, and the next window would open at the first
message again. Taken in line, the archive keeps every raw message once, in order, the summary covers the archived
messages before it that no earlier link covers, and the window opens right after it, as it would after a summary
the store's own processor made.
"""

from __future__ import annotations

from dataclasses import replace

from pydantic_ai.messages import CompactionPart, ModelMessage, ModelRequest, SystemPromptPart
from pydantic_ai.usage import RunUsage

from .records import LoadedWindow, NewSummary, RunRecord

__all__ = ('compaction_text', 'summaries_in_line')


def compaction_text(message: ModelMessage) -> str | None:
    """The summary `message` carries, if it is a compaction's own request: the standing system prompt's parts at
    most, then one `CompactionPart` with a summary, and nothing the user or a tool said."""
    if not isinstance(message, ModelRequest) or not message.parts:
        return None
    *head, last = message.parts
    if not isinstance(last, CompactionPart) or not last.content or last.provider_name is not None:
        return None
    return last.content if all(isinstance(part, SystemPromptPart) for part in head) else None


def summaries_in_line(loaded: LoadedWindow, record: RunRecord) -> RunRecord:
    """`record` with each compaction's request among its messages taken out and stored as a summary instead.

    A summary the run's own processor reported (`record.summaries`, the same text) is stored once, as reported.
    The window opens after the newest one, where its kept messages start.
    """
    if not any(compaction_text(message) is not None for message in record.messages):
        return record
    reported = {summary.text for summary in record.summaries}
    covered = max([loaded.window_start, *(summary.covers_to for summary in record.summaries)])
    window_start = record.window_start
    kept: list[int] = []
    summaries = list(record.summaries)
    for index, message in enumerate(record.messages):
        text = compaction_text(message)
        if text is None:
            kept.append(index)
            continue
        opens_at = loaded.message_count + len(kept)
        if text not in reported and opens_at > covered:
            summaries.append(NewSummary(covered, opens_at, text, record.tokens[index], None, RunUsage()))
            covered = opens_at
        window_start = max(window_start, opens_at)
    entry_ids = None if record.entry_ids is None else [record.entry_ids[i] for i in kept]
    return replace(
        record,
        messages=[record.messages[i] for i in kept],
        tokens=[record.tokens[i] for i in kept],
        entry_ids=entry_ids,
        summaries=summaries,
        window_start=window_start,
        head_end=min(record.head_end, window_start),
    )
