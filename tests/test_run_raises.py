"""`Session.run`'s docstring says what it takes, returns and raises, and each error it names is one a run really
raises, each run here on a store where it happens (a database out of reach, `StoreUnavailable`, takes a server
stopped mid-session: tests/test_production.py runs that one)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from session_store import Session, SessionConflict, SessionNotFound, SessionStore

EXPECTED = {'SessionConflict', 'SessionNotFound', 'StoreUnavailable', 'TypeError', 'ValueError'}


def sections(docstring: str) -> dict[str, list[str]]:
    """A Google-style docstring's sections (`Args`, `Returns`, `Raises`), each with the names its entries start with
    (`agent`, `SessionConflict`), or its lines for a section of prose."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in inspect.cleandoc(docstring).splitlines():
        if match := re.fullmatch(r'(\w+):', line):
            current = found.setdefault(match[1], [])
        elif current is not None and (entry := re.match(r' {4}(\*{0,2}\w+)(?: \([^)]*\))?:', line)):
            current.append(entry[1])
        elif current is not None and line.startswith('    ') and not line.startswith('     ') and ':' not in line:
            current.append(line.strip())
    return found


def test_run_says_what_it_takes_returns_and_raises() -> None:
    documented = sections(Session.run.__doc__ or '')
    assert documented.get('Args') == ['agent', 'user_prompt', '**kwargs']
    assert documented.get('Returns')
    assert set(documented.get('Raises', [])) == EXPECTED


def answering(text: str = 'answered') -> Agent[None, str]:
    return Agent(TestModel(custom_output_text=text))


async def test_a_run_another_writer_beat_raises_session_conflict_and_stores_nothing(
    store_factory: Callable[..., SessionStore],
) -> None:
    """While this run waits on its model, another process's run on the session is stored first."""
    mine, theirs = store_factory(), store_factory()
    session = await mine.session('s')
    other = await theirs.session('s')

    async def slow_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await other.run(answering('theirs'), 'meanwhile')
        return ModelResponse(parts=[TextPart('mine')])

    with pytest.raises(SessionConflict):
        await session.run(Agent(FunctionModel(slow_model)), 'mine')
    stored = await theirs.history('s')
    said = [p.content for m in stored for p in m.parts if isinstance(p, UserPromptPart | TextPart)]
    assert said == ['meanwhile', 'theirs']


async def test_a_run_on_a_session_deleted_since_raises_session_not_found(
    store_factory: Callable[..., SessionStore],
) -> None:
    store = store_factory()
    session = await store.session('s')
    await store.delete('s')
    with pytest.raises(SessionNotFound):
        await session.run(answering(), 'hello')
    assert await store.sessions() == []


async def test_a_run_given_a_history_raises_type_error(store_factory: Callable[..., SessionStore]) -> None:
    session = await store_factory().session('s')
    with pytest.raises(TypeError, match='message_history'):
        await session.run(answering(), 'hello', message_history=[])


async def test_a_prompt_no_database_can_store_raises_value_error(store_factory: Callable[..., SessionStore]) -> None:
    store = store_factory()
    session = await store.session('s')
    with pytest.raises(ValueError, match='lone surrogate'):
        await session.run(answering(), 'broken \ud800 text')
    assert await store.history('s') == []
