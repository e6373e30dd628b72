"""The export document and its JSON Lines file: a session's whole tree, whole or refused, never half-imported."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic_ai.models.function import FunctionModel
from sqlalchemy import update

from processors import SummarizationProcessor
from session_store import ExportError, SessionExport, SessionNotFound, SessionStore
from session_store.cli import main
from session_store.rows import SessionRow
from testkit.scripted import (
    MARKER,
    PREVIOUS,
    ParallelToolAssistant,
    RecordingSummarizer,
    scripted_agent,
    shape,
    summarized_markers,
)
from testkit.templates import NewDatabase

StoreFactory = Callable[..., SessionStore]
FORMAT_2 = Path(__file__).parent / 'fixtures' / 'export-format-2.jsonl'
"""A session exported by the last version to write format 2 (`fixtures/make_export_format_2.py`)."""


def summarizing(summarizer: RecordingSummarizer | None = None) -> SummarizationProcessor:
    return SummarizationProcessor(
        FunctionModel(summarizer or RecordingSummarizer()), trigger=('messages', 20), keep=('messages', 6)
    )


async def summarized_export(store: SessionStore, turns: int = 10) -> SessionExport:
    """A session of `turns` tool-using turns, summarized along the way, as exported."""
    session = await store.session('s1', scope='team', processor=summarizing())
    agent = scripted_agent(ParallelToolAssistant())
    for turn in range(turns):
        await session.run(agent, f'Turn M{turn}')
    return await store.export('s1', scope='team')


async def branched(store: SessionStore) -> None:
    """Session `tree` under scope `team`, summarized on two of its three branches, the first one active.

    `tree` is a conversation-store fork of `origin`'s turn 0. Branch A: turns 0-7 (32 messages), later
    turns 8-10 too. Branch B: A's first 20 messages, then turns 100-105. Branch C: B with its last
    answer regenerated. The conversation record lists B's and C's tips, the paths left.
    """
    origin = await store.session('origin', scope='team')
    agent = scripted_agent(ParallelToolAssistant())
    await origin.run(agent, 'Turn M0')
    await store.conversations.fork('origin', new_conversation_id='tree')
    session = await store.session('tree', scope='team', processor=summarizing())
    for turn in range(1, 8):
        await session.run(agent, f'Turn M{turn}')
    await session.rewind(20)
    for turn in range(100, 106):
        await session.run(agent, f'Turn M{turn}')
    await session.regenerate(agent)
    await session.switch((await session.branches())[0].tip)
    for turn in range(8, 11):
        await session.run(agent, f'Turn M{turn}')


async def tree_view(store: SessionStore, session_id: str) -> dict[str, Any]:
    """Everything a reader sees of a session, without store-local ids: paths, summaries, windows, branches, record.

    Each branch is switched to in turn for its own summary chain and window, then the active one again.
    """
    session = await store.session(session_id)
    branches = await session.branches()
    tips = [branch.tip for branch in branches]
    record = await store.conversations.read_record(session_id)
    assert record is not None and record.head_id is not None
    view: dict[str, Any] = {
        'history': await store.history(session_id),
        'summaries': await store.summaries(session_id),
        'window': await store.window(session_id),
        'head': [entry.message for entry in await store.conversations.read_history(record.head_id)],
        'record': (record.forked_from, record.forked_at, record.scope, record.usage),
        'record branches': [
            [entry.message for entry in await store.conversations.read_history(tip)] for tip in record.branches
        ],
        'branches': [
            (b.active, b.message_count, b.forked_at, None if b.parent is None else tips.index(b.parent), b.preview)
            for b in branches
        ],
    }
    for tip in tips:
        await session.switch(tip)
        path = await store.history(session_id, branch=tip)
        view[f'branch {tips.index(tip)}'] = (path, await store.summaries(session_id), await store.window(session_id))
    await session.switch(next(branch.tip for branch in branches if branch.active))
    assert view['window'] == await store.window(session_id), 'switching back restored the window'
    return view


def unlabelled(prompts: list[str]) -> list[str]:
    """Summarizer prompts without the tool call ids each run generates afresh."""
    return [re.sub(r'pyd_ai_\w+', 'pyd_ai_', prompt) for prompt in prompts]


@pytest.fixture(scope='module')
def documents() -> dict[tuple[str, str], SessionExport]:
    """The documents `exported` and `tree` made, by name and backend: each is made once for the module."""
    return {}


async def document(
    request: pytest.FixtureRequest,
    new_database: NewDatabase,
    documents: dict[tuple[str, str], SessionExport],
    name: str,
    make: Callable[[SessionStore], Awaitable[SessionExport]],
) -> SessionExport:
    """`make`'s document, exported by a store on the backend under test; a copy of its own for each test.

    The tests given one only read it (a changed document is a new one, made with `replace`), so running the
    conversation again for each of them would repeat the same work.
    """
    key = (name, request.node.callspec.params['new_database'])
    if key not in documents:
        async with SessionStore(new_database()) as store:
            documents[key] = await make(store)
    return copy.deepcopy(documents[key])


async def make_tree(store: SessionStore) -> SessionExport:
    await branched(store)
    return await store.export('tree')


@pytest.fixture
async def exported(
    request: pytest.FixtureRequest, new_database: NewDatabase, documents: dict[tuple[str, str], SessionExport]
) -> SessionExport:
    """`summarized_export`'s document on the backend under test."""
    return await document(request, new_database, documents, 'exported', summarized_export)


@pytest.fixture
async def tree(
    request: pytest.FixtureRequest, new_database: NewDatabase, documents: dict[tuple[str, str], SessionExport]
) -> SessionExport:
    """`branched`'s session `tree`, exported, on the backend under test."""
    return await document(request, new_database, documents, 'tree', make_tree)


@pytest.mark.slow_on_postgresql
def test_json_lines_round_trip_the_document(exported: SessionExport) -> None:
    lines = list(exported.to_json_lines())
    kinds = [json.loads(line)['kind'] for line in lines]
    assert kinds == ['session', 'segment'] + ['message'] * 40 + ['summary'] * len(exported.summaries) + ['end']
    assert len(exported.summaries) >= 2 and len(exported.segments) == 1
    assert exported.segments[0].messages == exported.messages and exported.archived == 40
    assert [s.previous for s in exported.summaries] == [None, *range(len(exported.summaries) - 1)]
    again = SessionExport.from_json_lines(lines, source='f')
    assert again == exported
    assert list(again.to_json_lines()) == lines


@pytest.mark.slow_on_postgresql
def test_a_tree_round_trips_through_its_file(tree: SessionExport) -> None:
    lines = list(tree.to_json_lines())
    records = [json.loads(line) for line in lines]
    header, closing = records[0], records[-1]
    assert header['format'] == 'session-store/3' and header['active_segment'] == 0
    assert (header['segment_count'], header['message_count'], header['summary_count']) == (3, 44 + 24 + 3, 3)
    assert header['branches'] == [[1, 43], [2, 43]], "the record's tips: the paths left, B's and C's"
    assert header['forked_from'] == 'origin' and isinstance(header['forked_at'], str)
    assert {key: closing[key] for key in ('segments', 'messages', 'summaries')} == {
        'segments': 3,
        'messages': 71,
        'summaries': 3,
    }
    segments = [(r['segment'], r['parent'], r['starts_at']) for r in records if r['kind'] == 'segment']
    assert segments == [(0, None, 0), (1, 0, 20), (2, 1, 41)]
    # Each segment's own messages follow its record, numbered by position on its path.
    owners = [(r['segment'], r['position']) for r in records if r['kind'] == 'message']
    assert owners == [(0, p) for p in range(44)] + [(1, p) for p in range(20, 44)] + [(2, p) for p in range(41, 44)]
    # A's first summary, extended on B (whose path shares its messages), and on A.
    summaries = [(r['segment'], r['previous'], r['covers_from'], r['covers_to']) for r in records[-4:-1]]
    assert summaries == [(0, None, 0, 16), (1, 0, 16, 32), (0, 0, 16, 32)]

    again = SessionExport.from_json_lines(lines, source='tree.jsonl')
    assert again == tree
    assert list(again.to_json_lines()) == lines
    assert len(again.messages) == 44 and again.active_segment == 0
    assert again.segments[2].messages[-1] != tree.segments[1].messages[-1], 'the regenerated answer differs'


async def test_a_tree_imports_whole_into_a_new_database_and_next_to_its_source(
    store_factory: StoreFactory, new_database: Callable[[], str]
) -> None:
    source = store_factory(processor=summarizing())
    await branched(source)
    document = await source.export('tree')
    expected = await tree_view(source, 'tree')
    assert len(expected['branches']) == 3 and expected['record branches'][0] == expected['branch 1'][0]
    assert [len(expected[f'branch {b}'][1]) for b in range(3)] == [2, 2, 2], 'two branches summarized their own'

    async with SessionStore(new_database(), processor=summarizing()) as fresh:
        assert await fresh.import_(document) == 'tree'
        assert await tree_view(fresh, 'tree') == expected
        # Viewed the same way (each branch switched to), each holds the same tree.
        again = await fresh.export('tree')
    assert again == await source.export('tree')
    # Next to its source, under another id: fresh entry ids, the same tree; the source is untouched.
    assert await source.import_(document, session_id='tree-2', scope='other') == 'tree-2'
    copy = await tree_view(source, 'tree-2')
    assert copy == {**expected, 'record': (*expected['record'][:2], 'other', expected['record'][3])}
    assert await tree_view(source, 'tree') == expected
    assert (await source.export('tree-2', scope='other')).segments == again.segments

    # A tip the record names but the session no longer holds is left out of the export.
    record = await source.conversations.read_record('tree-2')
    assert record is not None
    async with source.engine.begin() as connection:
        await connection.execute(
            update(SessionRow)
            .where(SessionRow.session_id == 'tree-2')
            .values(branches=['an-entry-since-deleted', *record.branches])
        )
    assert (await source.export('tree-2')).branches == document.branches == [(1, 43), (2, 43)]

    # The next runs resume from the stored summary, exactly as the source's would.
    runs: list[tuple[RecordingSummarizer, ParallelToolAssistant]] = []
    for session_id in ('tree', 'tree-2'):
        summarizer, assistant = RecordingSummarizer(), ParallelToolAssistant()
        session = await source.session(session_id, processor=summarizing(summarizer))
        for turn in range(9, 12):
            await session.run(scripted_agent(assistant), f'Turn M{turn}')
        runs.append((summarizer, assistant))
    (summarizer, assistant), (summarizer_2, assistant_2) = runs
    assert unlabelled(summarizer_2.inputs) == unlabelled(summarizer.inputs)
    assert shape(assistant_2.requests[0]) == shape(assistant.requests[0])
    latest = expected['summaries'][-1]
    assert latest.text in str(assistant_2.requests[0]), 'the first request starts from the stored summary'
    assert len(summarizer_2.inputs) == 1 and PREVIOUS.findall(summarizer_2.inputs[0]) == [latest.text]
    covered = set(MARKER.findall(str(expected['history'][: latest.covers_to])))
    assert not summarized_markers(summarizer_2.inputs)[0] & covered, 'no summarized message was summarized again'


def test_a_format_2_file_from_the_previous_version_still_reads(tmp_path: Path) -> None:
    document = SessionExport.from_json_lines(FORMAT_2.read_text().splitlines(), source='old.jsonl')
    assert (document.session_id, document.scope, document.metadata) == ('format-2', 'team', {'customer': 'C-7'})
    assert len(document.messages) == 24 and (document.head_end, document.window_start) == (0, 16)
    assert [(s.covers_from, s.covers_to, s.text, s.segment, s.previous) for s in document.summaries] == [
        (0, 8, 'SUMMARY-1 of the conversation so far', 0, None),
        (8, 16, 'SUMMARY-2 of the conversation so far', 0, 0),
    ]
    assert len(document.segments) == 1 and document.segments[0].messages == document.messages
    assert 'Turn M5' in str(document.messages[20]) and document.tokens[0] > 0
    # Format 1 (session-store 0.1): the same records, without counts or a closing line.
    lines = [json.loads(line) for line in FORMAT_2.read_text().splitlines()][:-1]
    header = {k: v for k, v in lines[0].items() if k not in ('message_count', 'summary_count')}
    old = [json.dumps({**header, 'format': 'session-store/1'}), *(json.dumps(line) for line in lines[1:])]
    assert SessionExport.from_json_lines(old) == document
    # Without counts, a cut that leaves the window pointing past the end is still caught.
    with pytest.raises(ExportError, match='points past its 12 messages'):
        SessionExport.from_json_lines(old[:13])


async def test_a_format_2_file_imports_and_resumes_from_its_summary(store_factory: StoreFactory) -> None:
    document = SessionExport.from_json_lines(FORMAT_2.read_text().splitlines())
    summarizer = RecordingSummarizer()
    processor = SummarizationProcessor(FunctionModel(summarizer), trigger=('messages', 10), keep=('messages', 4))
    async with store_factory(processor=processor) as store:
        assert await store.import_(document) == 'format-2'
        assert await store.history('format-2', scope='team') == document.messages
        assert [(s.covers_from, s.covers_to, s.text) for s in await store.summaries('format-2')] == [
            (s.covers_from, s.covers_to, s.text) for s in document.summaries
        ]
        window = await store.window('format-2')
        assert window.positions == list(range(16, 24)) and 'SUMMARY-2' in str(window.messages[0])
        assistant = ParallelToolAssistant()
        await (await store.session('format-2')).run(scripted_agent(assistant), 'Turn M6')
        assert 'SUMMARY-2 of the conversation' in str(assistant.requests[0])
        assert PREVIOUS.findall(summarizer.inputs[0]) == ['SUMMARY-2 of the conversation so far']
        assert not summarized_markers(summarizer.inputs)[0] & set(MARKER.findall(str(document.messages[:16])))
        again = await store.export('format-2')
    assert again.segments[0].messages[:24] == document.messages and len(again.summaries) == 3


async def test_a_title_travels_with_its_session_and_a_file_without_one_imports_untitled(
    store_factory: StoreFactory,
) -> None:
    store = store_factory()
    await (await store.session('t1', scope='team')).run(scripted_agent(ParallelToolAssistant()), 'Turn M0')
    await store.conversations.update('t1', title='Refund for ORD-1042', metadata={'customer': 'C-7'})
    document = await store.export('t1')
    assert (document.title, document.metadata) == ('Refund for ORD-1042', {'customer': 'C-7'})
    lines = list(document.to_json_lines())
    assert json.loads(lines[0])['title'] == 'Refund for ORD-1042'
    assert SessionExport.from_json_lines(lines) == document
    await store.import_(document, session_id='t2')
    record = await store.conversations.read_record('t2')
    assert record is not None and (record.title, record.metadata) == ('Refund for ORD-1042', {'customer': 'C-7'})

    # A file of the same format written before titles travelled, its header without one, imports untitled.
    header = {key: value for key, value in json.loads(lines[0]).items() if key != 'title'}
    older = [json.dumps(header, ensure_ascii=False), *lines[1:-1]]
    digest = hashlib.sha256(''.join(f'{line}\n' for line in older).encode()).hexdigest()
    closing = json.dumps({**json.loads(lines[-1]), 'sha256': digest})
    untitled = SessionExport.from_json_lines([*older, closing])
    assert (untitled.title, untitled.metadata) == (None, {'customer': 'C-7'})
    await store.import_(untitled, session_id='t3')
    assert [(i.session_id, i.title) for i in await store.sessions() if i.session_id != 't1'] == [
        ('t3', None),
        ('t2', 'Refund for ORD-1042'),
    ]
    assert SessionExport.from_json_lines(FORMAT_2.read_text().splitlines()).title is None


def test_a_file_cut_at_any_line_boundary_is_refused(exported: SessionExport, tree: SessionExport) -> None:
    for document in (exported, tree):
        lines = list(document.to_json_lines())
        for cut in range(1, len(lines)):
            with pytest.raises(ExportError, match='incomplete') as refused:
                SessionExport.from_json_lines(lines[:cut], source='cut.jsonl')
            assert str(refused.value).startswith('cut.jsonl: incomplete')
    held = 'the file holds 2 segments, 47 messages and 0 summaries'
    with pytest.raises(ExportError, match=f'announces 3 segments, 71 messages and 3 summaries, {held}'):
        SessionExport.from_json_lines(lines[:50], source='cut.jsonl')


def test_a_file_cut_mid_line_or_changed_is_refused(exported: SessionExport, tree: SessionExport) -> None:
    lines = list(exported.to_json_lines())
    with pytest.raises(ExportError, match=r'line 5: not JSON'):
        SessionExport.from_json_lines([*lines[:4], lines[4][:30]], source='f')
    changed = [line.replace('Turn M3', 'Turn M9') for line in lines]
    assert changed != lines
    with pytest.raises(ExportError, match='changed since export'):
        SessionExport.from_json_lines(changed, source='f')
    lines = list(tree.to_json_lines())
    moved = [line.replace('"parent": 1, "starts_at": 41', '"parent": 0, "starts_at": 41') for line in lines]
    assert moved != lines
    with pytest.raises(ExportError, match='changed since export'):
        SessionExport.from_json_lines(moved, source='f')
    with pytest.raises(ExportError, match=r'line 39: message at position 37, expected 36'):
        SessionExport.from_json_lines([*lines[:38], *lines[39:]], source='f')


def test_a_window_or_summary_outside_the_archive_is_refused(exported: SessionExport) -> None:
    too_far = SessionExport(**{**vars(exported), 'window_start': len(exported.messages) + 1})
    with pytest.raises(ExportError, match='points past its 40 messages'):
        too_far.check()
    outside = SessionExport(**{**vars(exported), 'messages': exported.messages[:10], 'tokens': exported.tokens[:10]})
    with pytest.raises(ExportError, match='its 10 messages and 10 token counts are not the path of its active seg'):
        outside.check()


Change = Callable[[SessionExport], dict[str, Any]]


def in_segment(key: int, **changes: Any) -> Change:
    return lambda t: {'segments': [replace(s, **changes) if i == key else s for i, s in enumerate(t.segments)]}


def in_summary(index: int, **changes: Any) -> Change:
    return lambda t: {'summaries': [replace(s, **changes) if i == index else s for i, s in enumerate(t.summaries)]}


BREAKS: list[tuple[Change, str]] = [
    (in_segment(2, parent=7), 'segment 2 forks from segment 7, which is not a segment before it'),
    (in_segment(2, parent=2), 'segment 2 forks from segment 2, which is not a segment before it'),
    (in_segment(1, starts_at=45), 'segment 1 leaves segment 0 at position 45, outside the 44 messages'),
    (in_segment(0, starts_at=3), 'segment 0 has no parent, so it starts at position 0, not 3'),
    (
        in_segment(1, window_start=45),
        r'segment 1: its saved window \(head end 0, tail start 45\) points past its path of 44',
    ),
    (lambda t: {'active_segment': 3}, 'its active segment 3 is not one of its 3 segments'),
    (in_summary(2, covers_to=45), r'summary 2 covers positions 16-45, outside the path of its segment 0 \(0-44\)'),
    (in_summary(2, segment=5), 'summary 2 was made on segment 5, which is not one of its segments'),
    (
        in_summary(2, previous=1),
        r'summary 2 extends summary 1, which does not end before it on its path \(it covers 16-32 of segment 1',
    ),
    (
        in_summary(2, covers_from=10),
        r'summary 2 extends summary 0, which does not end before it on its path \(it covers 0-16 of segment 0',
    ),
    (lambda t: {'summaries': t.summaries[::-1]}, 'summary 0 extends summary 0, which is not a summary before'),
    (lambda t: {'branches': [(2, 40)]}, r'branch tip \(2, 40\) is not a message it holds'),
]
"""Changes to the `tree` document that make it inconsistent, and the refusal each gets."""


def test_an_inconsistent_tree_is_refused(tree: SessionExport) -> None:
    for change, refusal in BREAKS:
        broken = replace(tree, **change(tree))
        with pytest.raises(ExportError, match=f'^doc: {refusal}'):
            broken.check('doc')
        # Written out whole (its digest matches), it is refused when read back, too.
        with pytest.raises(ExportError, match=f'^doc: {refusal}'):
            SessionExport.from_json_lines(broken.to_json_lines(), source='doc')


async def test_import_refuses_an_inconsistent_document_and_stores_nothing(
    tree: SessionExport, new_database: Callable[[], str]
) -> None:
    broken = replace(tree, summaries=tree.summaries[::-1])
    async with SessionStore(new_database()) as store:
        with pytest.raises(ExportError, match='summary 0 extends'):
            await store.import_(broken)
        assert await store.sessions() == []
        with pytest.raises(SessionNotFound):
            await store.history('tree')


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
