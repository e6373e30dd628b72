"""The export document and its JSON Lines file: whole or refused, never half-imported."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic_ai.models.function import FunctionModel

from processors import SummarizationProcessor
from session_store import ExportError, SessionExport, SessionNotFound, SessionStore
from session_store.cli import main
from testkit.scripted import ParallelToolAssistant, RecordingSummarizer, scripted_agent

StoreFactory = Callable[..., SessionStore]


async def summarized_export(store: SessionStore, turns: int = 10) -> SessionExport:
    """A session of `turns` tool-using turns, summarized along the way, as exported."""
    processor = SummarizationProcessor(
        FunctionModel(RecordingSummarizer()), trigger=('messages', 20), keep=('messages', 6)
    )
    session = await store.session('s1', scope='team', processor=processor)
    agent = scripted_agent(ParallelToolAssistant())
    for turn in range(turns):
        await session.run(agent, f'Turn M{turn}')
    return await store.export('s1', scope='team')


@pytest.fixture
async def exported(store_factory: StoreFactory) -> SessionExport:
    async with store_factory() as store:
        return await summarized_export(store)


def test_json_lines_round_trip_the_document(exported: SessionExport) -> None:
    lines = list(exported.to_json_lines())
    kinds = [json.loads(line)['kind'] for line in lines]
    assert kinds == ['session'] + ['message'] * 40 + ['summary'] * len(exported.summaries) + ['end']
    assert len(exported.summaries) >= 2
    again = SessionExport.from_json_lines(lines, source='f')
    assert again == exported
    assert list(again.to_json_lines()) == lines


def test_a_file_cut_at_any_line_boundary_is_refused(exported: SessionExport) -> None:
    lines = list(exported.to_json_lines())
    for cut in range(1, len(lines)):
        with pytest.raises(ExportError, match='incomplete') as refused:
            SessionExport.from_json_lines(lines[:cut], source='cut.jsonl')
        assert str(refused.value).startswith('cut.jsonl: incomplete')


def test_a_file_cut_mid_line_or_changed_is_refused(exported: SessionExport) -> None:
    lines = list(exported.to_json_lines())
    with pytest.raises(ExportError, match=r'line 5: not JSON'):
        SessionExport.from_json_lines([*lines[:4], lines[4][:30]], source='f')
    changed = [line.replace('Turn M3', 'Turn M9') for line in lines]
    assert changed != lines
    with pytest.raises(ExportError, match='changed since export'):
        SessionExport.from_json_lines(changed, source='f')


def test_a_window_or_summary_outside_the_archive_is_refused(exported: SessionExport) -> None:
    too_far = SessionExport(**{**vars(exported), 'window_start': len(exported.messages) + 1})
    with pytest.raises(ExportError, match='points past its 40 messages'):
        too_far.check()
    outside = SessionExport(**{**vars(exported), 'messages': exported.messages[:10], 'tokens': exported.tokens[:10]})
    with pytest.raises(ExportError):
        outside.check()


def test_a_format_1_file_from_the_last_release_still_imports(exported: SessionExport) -> None:
    lines = [json.loads(line) for line in exported.to_json_lines()][:-1]
    header = {k: v for k, v in lines[0].items() if k not in ('message_count', 'summary_count')}
    old = [json.dumps({**header, 'format': 'session-store/1'}), *(json.dumps(line) for line in lines[1:])]
    assert SessionExport.from_json_lines(old) == exported
    # Without counts, a cut that leaves the window pointing past the end is still caught.
    with pytest.raises(ExportError, match='points past'):
        SessionExport.from_json_lines(old[:20])


async def test_import_refuses_an_inconsistent_document_and_stores_nothing(
    exported: SessionExport, new_database: Callable[[], str]
) -> None:
    broken = SessionExport(**{**vars(exported), 'summaries': exported.summaries[::-1]})
    async with SessionStore(new_database()) as store:
        with pytest.raises(ExportError, match='summary 1 covers'):
            await store.import_(broken)
        assert await store.sessions() == []
        with pytest.raises(SessionNotFound):
            await store.history('s1')


def test_the_cli_refuses_a_truncated_or_non_utf8_file_in_one_line(exported: SessionExport, tmp_path: Path) -> None:
    db = f'sqlite:///{tmp_path / "target.db"}'
    lines = list(exported.to_json_lines())
    (tmp_path / 'cut.jsonl').write_text('\n'.join(lines[:30]) + '\n')
    (tmp_path / 'binary.jsonl').write_bytes(b'\xff\xfe\x00garbage')
    runner = CliRunner()
    for name, expected in (('cut.jsonl', 'incomplete: the header announces'), ('binary.jsonl', 'not UTF-8')):
        result = runner.invoke(main, ['--db', db, 'import', str(tmp_path / name)])
        assert result.exit_code == 1, result.output
        assert expected in result.stderr and len(result.stderr.strip().splitlines()) == 1
        assert 'Traceback' not in result.stderr
    assert not (tmp_path / 'target.db').exists() or 'Imported' not in result.stdout
