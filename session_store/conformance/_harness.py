"""What a check is handed: the backend, a folder for its data, what the backend supports, and where to report."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict, ConversationRecord, ConversationStore
from pydantic_ai.messages import ModelMessage

from ._backend import Capabilities, ConformanceBackend, opened
from ._messages import TURN_LENGTH, dumped, turn

__all__ = (
    'Harness',
    'append_turns',
    'check_turns',
    'loaded_conversation',
    'messages_of',
    'rewritten',
    'snapshot',
    'stored_everywhere',
)

MAX_TRIES = 1000
"""Conflicts a writer retries a turn through before the check calls it starved."""


@dataclass(frozen=True)
class Harness:
    """One check's view of the backend under test."""

    backend: ConformanceBackend
    place: Path
    """This check's folder: the data of every store it opens."""
    capabilities: Capabilities
    child: str | None
    """`module:name` a child process imports the backend by, or `None` when it cannot."""
    child_reason: str
    """Why no child process can open the backend, when `child` is `None`."""
    report: Callable[[str], None]
    """Records a line for the run's summary (the cost check's figures)."""

    def open(self) -> AbstractAsyncContextManager[ConversationStore]:
        """A store over this check's data (a fresh one on first use; for a persistent backend, the same data)."""
        return opened(self.backend.factory, self.place / 'data')

    @asynccontextmanager
    async def stores(self, count: int) -> AsyncIterator[Sequence[ConversationStore]]:
        """`count` stores over this check's data, all open at once; one store `count` times for a backend that is
        not persistent (a second one would not share the data)."""
        async with AsyncExitStack() as stack:
            first = await stack.enter_async_context(self.open())
            rest = [
                await stack.enter_async_context(self.open()) if self.backend.persistent else first
                for _ in range(count - 1)
            ]
            yield [first, *rest]


async def append_turns(store: ConversationStore, conversation_id: str, labels: Sequence[str]) -> None:
    """Append a turn per label to the conversation, each as a run would: load, add the turn, save; a conflict
    (another writer saved first) is retried from a fresh load."""
    for label in labels:
        for _ in range(MAX_TRIES):
            conversation = await store.load(conversation_id) or Conversation(conversation_id=conversation_id)
            conversation.messages.extend(turn(label))
            try:
                await store.save(conversation)
                break
            except ConversationConflict:
                await asyncio.sleep(0)
        else:
            raise AssertionError(f'{conversation_id!r}: turn {label!r} conflicted {MAX_TRIES} times in a row')


def check_turns(conversation_id: str, history: Sequence[ModelMessage], writers: Sequence[Sequence[str]]) -> None:
    """`history` holds each writer's turns exactly once, each whole and uninterleaved, each writer's in its order."""
    expected = sum(len(labels) for labels in writers) * TURN_LENGTH
    assert len(history) == expected, f'{conversation_id!r}: {len(history)} messages stored, {expected} saved'
    labels: list[str] = []
    for start in range(0, len(history), TURN_LENGTH):
        chunk = list(history[start : start + TURN_LENGTH])
        label = _label(chunk[0])
        assert chunk == turn(label), f'{conversation_id!r}: the turn at message {start} is not whole: {chunk}'
        labels.append(label)
    for own in writers:
        mine = [label for label in labels if label in set(own)]
        assert mine == list(own), f'{conversation_id!r}: turns {list(own)} stored as {mine}'


def _label(message: ModelMessage) -> str:
    content = str(getattr(message.parts[0], 'content', ''))
    return content.removeprefix('question ')


async def stored_everywhere(store: ConversationStore, conversation_id: str) -> list[ModelMessage]:
    """Every message the conversation holds: its active path and every branch it left."""
    record = await store.read_record(conversation_id)
    if record is None:
        return []
    found: list[ModelMessage] = []
    for tip in [record.head_id, *record.branches]:
        found.extend(entry.message for entry in await store.read_history(tip))
    return found


async def messages_of(
    store: ConversationStore, conversation_id: str, scope: str | None = None
) -> list[ModelMessage] | None:
    """The messages `store` loads for `conversation_id`; `None` when it has none."""
    loaded = await store.load(conversation_id, scope=scope)
    return None if loaded is None else loaded.messages


async def loaded_conversation(store: ConversationStore, conversation_id: str) -> Conversation:
    """The conversation `store` loads for `conversation_id`, which must be stored."""
    loaded = await store.load(conversation_id)
    assert loaded is not None, f'{conversation_id!r} was saved and does not load'
    return loaded


def rewritten(record: ConversationRecord) -> ConversationRecord:
    """`record` as a write that changes nothing but its revision would store it."""
    return dataclasses.replace(record, revision=str(uuid.uuid4()))


async def snapshot(store: ConversationStore) -> Any:
    """Everything `store` lists: each record with every path of its entries, as plain values to compare."""
    records = await store.list_conversations()
    seen: list[Any] = []
    for record in records:
        paths = [await store.read_history(tip) for tip in [record.head_id, *record.branches]]
        seen.append((record, [[(e.id, e.parent_id, e.kind, dumped([e.message])) for e in path] for path in paths]))
    return seen
