"""Histories with every part kind and repeated tool call ids, through the store: kept exactly, windowed pair-safe.

The drawn histories (`testkit.real_histories`) hold thinking, native tool calls (their results in the same
response or the next), files, a provider's compaction, retried tool returns, output validation feedback, tool
returns with media, parallel calls answered out of order, empty and thinking-only responses, and calls left
waiting, with ids unique or numbered `call_0`, `call_1`, ... in every response. Saved through pydantic-ai's door,
each is archived exactly as it was, and the window a load hands out (compacted first, its summary stored) never
separates a call from its answer.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from processors import SummarizationProcessor
from session_store import SessionStore
from testkit.histories import pair_violations
from testkit.real_histories import histories
from tests._hypothesis import examples

pytestmark = pytest.mark.slow_on_postgresql  # the same codec and window code on both; SQLite's in the quick tier


def _summarize(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart('what came before, summarized')])


def _stamped(history: list[ModelMessage]) -> list[ModelMessage]:
    """`history` with each message's position in its metadata, which the store keeps, to trace a window by."""
    return [replace(message, metadata={'at': at}) for at, message in enumerate(history)]


def _traced(window: list[ModelMessage], archive: list[ModelMessage]) -> list[ModelMessage]:
    """`window` in terms of `archive`'s own message and part objects, for the pair-safety oracle (which traces by
    identity): each archived message as it is, or, where the window put its bridge in front, behind the bridge."""
    traced: list[ModelMessage] = []
    for message in window:
        at = (message.metadata or {}).get('at')
        if at is None:
            traced.append(message)  # a bridge standing alone: no archived message
            continue
        stored = archive[at]
        extra = len(message.parts) - len(stored.parts)
        assert extra >= 0 and list(message.parts[extra:]) == list(stored.parts), (at, message, stored)
        if extra:
            assert isinstance(stored, ModelRequest)
            traced.append(replace(stored, parts=[*message.parts[:extra], *stored.parts]))
        else:
            traced.append(stored)
    return traced


async def _round_trip(url: str, history: list[ModelMessage]) -> None:
    processor = SummarizationProcessor(FunctionModel(_summarize), trigger=('messages', 12), keep=('messages', 4))
    conversation_id = f'drawn-{uuid.uuid4().hex}'
    stamped = _stamped(history)
    async with SessionStore(url, processor=processor) as store:
        await store.conversations.save(Conversation(conversation_id=conversation_id, messages=stamped))
        archive = await store.history(conversation_id)
        # As saved, every field: the drawn histories hold only parts pydantic-ai loads as they were written.
        assert ModelMessagesTypeAdapter.dump_json(archive) == ModelMessagesTypeAdapter.dump_json(stamped)
        loaded = await store.conversations.load(conversation_id)
        assert loaded is not None
        assert pair_violations(_traced(loaded.messages, archive), archive) == []
        if await store.summaries(conversation_id):
            # The load compacted: its window is the summary and a tail, shorter than the archive.
            summary = [
                p for m in loaded.messages for p in m.parts if isinstance(p, CompactionPart) and not p.provider_name
            ]
            assert [p.content for p in summary] == ['what came before, summarized']
            assert len(loaded.messages) < len(archive)
        # Nothing was lost by compacting: the archive is still every message, in order.
        assert ModelMessagesTypeAdapter.dump_json(await store.history(conversation_id)) == (
            ModelMessagesTypeAdapter.dump_json(archive)
        )


@settings(
    max_examples=examples(12),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=histories(max_steps=30))
def test_every_part_kind_is_archived_exactly_and_windowed_pair_safe(db_url: str, history: list[ModelMessage]) -> None:
    asyncio.run(_round_trip(db_url, history))
