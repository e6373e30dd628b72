"""`SessionConflict`, the store's one error that is also a pydantic-ai class: `session_store.errors` hands it out."""

from __future__ import annotations

from pydantic_ai.conversation_store import ConversationConflict

from ._store_error import StoreError

__all__ = ('SessionConflict',)


class SessionConflict(ConversationConflict, StoreError):
    """Another writer changed the session since this one read it; nothing of this run was stored.

    Run it again (it will see the other writer's messages), or pass `wait=True` to wait for the
    other writer instead of failing.
    """

    __module__ = 'session_store.errors'  # where users import it from, and tracebacks name it

    def __init__(
        self,
        session_id: str,
        detail: str = 'changed while this run was in progress (another run on it was stored first)',
        *,
        advice: str = 'Run it again, or open the session with wait=True to queue behind the other writer.',
    ) -> None:
        super().__init__(session_id)
        self.session_id = session_id
        self.args = (f'Session {session_id!r} {detail}; nothing was stored. {advice}',)
