"""An import keeps when the conversation happened: each branch's "updated" time is its last message's, not the import's.

On SQLite and PostgreSQL: a session with two branches, exported, and imported under a new id a while later.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

import pytest

from session_store import ExportError, SessionExport, SessionStore
from testkit.scripted import ParallelToolAssistant, scripted_agent

StoreFactory = Callable[..., SessionStore]
LATER = 0.05
"""Seconds between the conversation and its import: times are stored to the microsecond, and this is three ticks of
the coarsest clock Python runs on (Windows', 15.6 ms), so an import dated by itself is seen."""


@pytest.mark.slow_on_postgresql
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
    # The export carries when each message was stored: the import's branches were updated exactly when the source's.
    assert [b.updated_at for b in after] == [b.updated_at for b in before]


async def test_a_file_whose_messages_disagree_on_their_storing_times_is_refused(store_factory: StoreFactory) -> None:
    store = store_factory()
    session = await store.session('dated')
    await session.run(scripted_agent(ParallelToolAssistant()), 'Turn M1')
    lines = list((await store.export('dated')).to_json_lines())
    undated = [re.sub(r'"stored_at": "[^"]*", ', '', line) if n == 3 else line for n, line in enumerate(lines)]
    assert undated != lines
    with pytest.raises(ExportError, match='line 4: a message that does not say when it was stored'):
        SessionExport.from_json_lines(undated)
