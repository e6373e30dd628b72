"""An import keeps when the conversation happened: each branch's "updated" time is its last message's, not the import's.

On SQLite and PostgreSQL: a session with two branches, exported, and imported under a new id a while later.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from session_store import SessionStore
from testkit.scripted import ParallelToolAssistant, scripted_agent

StoreFactory = Callable[..., SessionStore]
LATER = 1.5
"""Seconds between the conversation and its import."""


async def test_an_import_keeps_the_branches_updated_times(store_factory: StoreFactory) -> None:
    store = store_factory()
    session = await store.session('tree')
    agent = scripted_agent(ParallelToolAssistant())
    for turn in range(2):
        await session.run(agent, f'Turn M{turn}')
    await session.rewind(4)
    await session.run(agent, 'Turn M9')
    before = await session.branches()
    assert len(before) == 2

    await asyncio.sleep(LATER)
    await store.import_(await store.export('tree'), session_id='copy')
    after = await (await store.session('copy')).branches()

    assert [(b.message_count, b.forked_at, b.active) for b in after] == [
        (b.message_count, b.forked_at, b.active) for b in before
    ]
    for original, imported in zip(before, after, strict=True):
        # Stored a moment after it was made, then; dated by when it was made, now: well within the wait.
        assert abs((imported.updated_at - original.updated_at).total_seconds()) < LATER / 2, (original, imported)
