"""Conversations whose window and summaries a store keeps, which a summarizing capability must not compact too.

A store that hands a conversation's history out through pydantic-ai's own door (session-store's
`store.conversations`, directly or under a UI adapter) marks its id here, in the current context. A
summarizing capability on the agent (`Summarization`, `ContextManagerCapability`) then refuses the run at its
first request: the summaries it would make reach neither the store nor the next run, so every run would
summarize from scratch, and the store already shapes the window. The mark is a context variable, so it
follows the load into the run it feeds, and no further.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from pydantic_ai.exceptions import UserError

__all__ = ('check_not_kept', 'keep_conversation', 'unkept')

_KEPT: ContextVar[frozenset[str]] = ContextVar('processors_kept_conversations', default=frozenset())


def keep_conversation(conversation_id: str) -> None:
    """Mark the conversation as one a store keeps windows and summaries of, for the rest of this context."""
    _KEPT.set(_KEPT.get() | {conversation_id})


@contextmanager
def unkept(conversation_id: str) -> Iterator[None]:
    """The mark cleared inside the block: a store running the conversation itself, with its own copy of the
    capability (a `Session`'s run), stores what that copy makes."""
    token = _KEPT.set(_KEPT.get() - {conversation_id})
    try:
        yield
    finally:
        _KEPT.reset(token)


def check_not_kept(conversation_id: str | None, capability: str) -> None:
    """Refuse a summarizing `capability` on a conversation a store keeps, saying what to do instead.

    Raises:
        UserError: The conversation's history came from a store's `conversations` door.
    """
    if conversation_id is None or conversation_id not in _KEPT.get():
        return
    raise UserError(
        f'Conversation {conversation_id!r} was loaded from a SessionStore, which keeps its window and summaries, '
        f'but the agent also carries a {capability}, whose summaries would be made from scratch on every run and '
        'never stored. Give it to the store instead and drop it from the agent: SessionStore(url, '
        'processor=SummarizationProcessor(...)) (or the ContextManagerCapability), or run the agent through a '
        'session, whose runs store what it makes: store.session(id, processor=...).run(agent, ...).'
    )
