"""Conversations whose window and summaries a store keeps, on which a summarizing capability compacts through
pydantic-ai's compaction protocol only.

A store that hands a conversation's history out through pydantic-ai's own door (session-store's
`store.conversations`, directly or under a UI adapter) marks it here. A summarizing capability on the agent
(`Summarization`) then leaves the window the store shaped as it is, and when its trigger fires it asks the
framework to compact (`RunContext.request_compaction`) instead of summarizing into the request alone: the summary
its `compact_history` hook makes then stands in the run's conversation, which the store keeps as the next link of
the summary chain. Summarized into the request alone, it would reach neither the store nor the next run, and every
run would summarize from scratch.

The mark is made twice, because a run may start far from the load that fed it:

- on the message objects the load handed out, which pydantic-ai passes on to the run as they are (its history
  list is a copy, its messages are not), so a run whose history holds one is known wherever the load ran: in
  another task (`asyncio.create_task`, `gather`, a task group) or another thread. A message is marked for as
  long as it lives, and only that object: a copy or an equal message built elsewhere is not.
- on the conversation id, in the current context: all a load that handed out no messages (a new conversation,
  or one with nothing stored yet) can leave. That mark follows the load into the runs of its own task, and no
  further.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from pydantic_ai.messages import ModelMessage

__all__ = ('keep_conversation', 'kept_by_store', 'unkept')

_KEPT: ContextVar[frozenset[str]] = ContextVar('processors_kept_conversations', default=frozenset())
_UNKEPT: ContextVar[frozenset[str]] = ContextVar('processors_unkept_conversations', default=frozenset())

_LOADED: dict[int, tuple[weakref.ref[ModelMessage], str]] = {}
"""The id of the conversation each message a store handed out was loaded as, keyed by the message's identity (a
message compares by value, so it is no dict key itself), beside the weak reference whose callback removes the
entry as the message goes, before its identity can be reused: the map holds live messages only, and keeps none
alive."""


def keep_conversation(conversation_id: str, messages: Iterable[ModelMessage] = ()) -> None:
    """Mark the conversation as one a store keeps windows and summaries of: its `messages`, the ones the store
    handed out, wherever they go, and its id for the rest of this context."""
    _KEPT.set(_KEPT.get() | {conversation_id})
    for message in messages:
        _mark(message, conversation_id)


def _mark(message: ModelMessage, conversation_id: str) -> None:
    """Mark `message` as one of conversation `conversation_id`'s a store handed out, for as long as it lives."""
    key = id(message)
    found = _LOADED.get(key)
    if found is not None and found[1] == conversation_id:
        return  # marked already: the same objects kept again (a load hands out copies, each marked once)

    def forget(_: weakref.ref[ModelMessage]) -> None:
        _LOADED.pop(key, None)

    _LOADED[key] = (weakref.ref(message, forget), conversation_id)


@contextmanager
def unkept(*conversation_ids: str) -> Iterator[None]:
    """These conversations count as unmarked inside the block, however they were marked: a store running the
    conversation itself, with its own copy of the capability (a `Session`'s run), stores what that copy makes."""
    token = _UNKEPT.set(_UNKEPT.get() | set(conversation_ids))
    try:
        yield
    finally:
        _UNKEPT.reset(token)


def kept_by_store(conversation_id: str | None, messages: Sequence[ModelMessage]) -> str | None:
    """The conversation a store keeps that a run on `conversation_id` with the history `messages` (the run's,
    `RunContext.messages`) continues, if any.

    One dictionary lookup per message of the run's history, so the check costs what the window is long.
    """
    exempt = _UNKEPT.get()
    if conversation_id is not None and conversation_id in _KEPT.get() and conversation_id not in exempt:
        return conversation_id
    if not _LOADED:  # no message a store handed out is alive: a process without a store looks nothing up
        return None
    for message in messages:
        found = _LOADED.get(id(message))
        if found is not None and found[1] not in exempt:
            return found[1]
    return None
