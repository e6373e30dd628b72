"""What the web pages need from `SessionStore.sessions()`: pages of the list (`offset`) and each session's
branch count, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from session_store import SessionStore

StoreFactory = Callable[..., SessionStore]


async def test_store_sessions_pages_with_offset_and_counts_branches(store_factory: StoreFactory) -> None:
    store = store_factory()
    for number in range(7):
        await store.session(f's{number}', scope='even' if number % 2 == 0 else 'odd')
    everything = [info.session_id for info in await store.sessions()]
    pages = [[info.session_id for info in await store.sessions(offset=start, limit=3)] for start in (0, 3, 6)]
    assert [len(page) for page in pages] == [3, 3, 1] and [s for page in pages for s in page] == everything
    assert [i.session_id for i in await store.sessions(offset=2)] == everything[2:]
    assert [i.session_id for i in await store.sessions(scope='even', offset=1, limit=2)] == [
        s for s in everything if int(s[1:]) % 2 == 0
    ][1:3]
    assert await store.sessions(offset=10) == []
    with pytest.raises(ValueError, match='offset must be between 0 and'):
        await store.sessions(offset=-1)
    session = await store.session('s0', scope='even')
    assert {info.branch_count for info in await store.sessions()} == {1}
    agent = Agent(TestModel())
    await session.run(agent, 'first')
    await session.run(agent, 'second')
    await session.rewind(2)
    await session.run(agent, 'another second')
    counts = {info.session_id: info.branch_count for info in await store.sessions()}
    assert counts['s0'] == len(await session.branches()) == 2 and counts['s1'] == 1
