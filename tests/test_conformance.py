"""The conformance suite on pydantic-ai's reference store and on ours."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from pydantic_ai.conversation_store import ConversationStore, InMemoryConversationStore

from session_store import SessionStore
from session_store.conformance import conformance_backend


@conformance_backend(examples=10)
def reference(folder: Path) -> ConversationStore:
    return InMemoryConversationStore()


@conformance_backend(persistent=True, examples=10)
async def sqlite(folder: Path) -> AsyncIterator[ConversationStore]:
    async with SessionStore(f'sqlite+aiosqlite:///{folder}/sessions.db') as store:
        yield store.conversations
