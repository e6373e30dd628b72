"""A database written by the last release opens unchanged: the same archive, summary chains and windows.

`fixtures/release-0.1.db` was written by session-store 0.1 (schema revision 0003) and
`fixtures/release-0.1.json` holds what 0.1 itself read back from it; `fixtures/make_release_0_1.py`
made both.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.models.function import FunctionModel

from processors import SummarizationProcessor
from session_store import SessionExport, SessionStore
from session_store.migration import head_revision
from testkit.scripted import ParallelToolAssistant, RecordingSummarizer, scripted_agent

FIXTURES = Path(__file__).parent / 'fixtures'
EXPECTED: dict[str, Any] = json.loads((FIXTURES / 'release-0.1.json').read_text())


def summarizing() -> SummarizationProcessor:
    """The processor 0.1 ran the `summarized` session with."""
    return SummarizationProcessor(FunctionModel(RecordingSummarizer()), trigger=('messages', 20), keep=('messages', 6))


@pytest.fixture
def release_db(tmp_path: Path) -> str:
    """A copy of the 0.1 database, upgraded to this version's schema if that has moved on."""
    shutil.copy(FIXTURES / 'release-0.1.db', tmp_path / 'sessions.db')
    return f'sqlite+aiosqlite:///{tmp_path / "sessions.db"}'


async def test_a_release_0_1_database_reads_back_as_it_was_written(release_db: str) -> None:
    store = SessionStore(release_db, migrate=False)
    if head_revision() != '0003':
        await store.migrate()
    async with store:
        assert sorted(info.session_id for info in await store.sessions()) == sorted(EXPECTED)
        for session_id, expected in EXPECTED.items():
            history = await store.history(session_id, scope=expected['scope'])
            assert json.loads(ModelMessagesTypeAdapter.dump_json(history)) == expected['history'], session_id
            chain = [
                {'covers_from': s.covers_from, 'covers_to': s.covers_to, 'text': s.text}
                for s in await store.summaries(session_id)
            ]
            assert chain == expected['summaries'], session_id
            if expected['window'] is not None:
                processor = summarizing() if expected['summaries'] else None
                session = await store.session(session_id, scope=expected['scope'], processor=processor)
                window = json.loads(ModelMessagesTypeAdapter.dump_json(await session.context()))
                assert window == expected['window'], session_id


async def test_a_release_0_1_session_carries_on_from_its_stored_summary(release_db: str) -> None:
    async with SessionStore(release_db) as store:
        summarizer = RecordingSummarizer()
        processor = SummarizationProcessor(FunctionModel(summarizer), trigger=('messages', 20), keep=('messages', 6))
        session = await store.session('summarized', scope='user-7', processor=processor)
        agent = scripted_agent(ParallelToolAssistant())
        for turn in range(12, 16):
            await session.run(agent, f'Turn M{turn} of summarized')
        chain = await store.summaries('summarized')
        assert len(chain) > len(EXPECTED['summarized']['summaries'])
        # The first new summary extended the last one 0.1 stored, rather than starting over.
        last_stored = EXPECTED['summarized']['summaries'][-1]
        assert chain[len(EXPECTED['summarized']['summaries'])].covers_from == last_stored['covers_to']
        assert last_stored['text'] in summarizer.inputs[0]
        document = await store.export('summarized', scope='user-7')
    assert SessionExport.from_json_lines(document.to_json_lines()) == document
