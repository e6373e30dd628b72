"""What a user can type wrong on the command line is refused in one line, exit 1, naming the option and what it takes.

Numbers past what a database can hold (SQLite's and PostgreSQL's integers, Python's dates) used to reach it and
end in an `OverflowError` traceback; blank ids were taken as ids. Through click's `CliRunner`, on both backends.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from session_store.cli import main
from testkit.templates import NewDatabase
from tests._cli import fails, ok
from tests._demo import two_demo_turns

pytestmark = pytest.mark.usefixtures('wide_console')

HUGE = '9223372036854775807'
"""2**63 - 1: the largest SQLite INTEGER, which Python's int passes to the driver as it is."""
HUGER = '99999999999999999999'


@pytest.fixture
def demo(new_database: NewDatabase) -> str:
    """`demo`: two turns of the demo conversation (8 messages)."""
    return new_database(fill=two_demo_turns)


def invoke(url: str, *args: str) -> Result:
    return CliRunner().invoke(main, ['--db', url, *args])


def session_ids(url: str) -> list[str]:
    return [info['session_id'] for info in json.loads(ok(invoke(url, 'sessions', '--json')))]


@pytest.mark.slow_on_postgresql
@pytest.mark.parametrize(
    ('args', 'said'),
    [
        (['history', 'demo', '--limit', HUGE], f'--limit must be from 1 to 1,000,000,000; got {HUGE}.'),
        (['history', 'demo', '--offset', HUGE], f'--offset must be from 0 to 1,000,000,000; got {HUGE}.'),
        (['sessions', '--limit', HUGE], f'--limit must be from 1 to 1,000,000,000; got {HUGE}.'),
        (['search', 'ORDER', '--limit', HUGE], f'--limit must be from 1 to 1,000,000,000; got {HUGE}.'),
        (['sessions', '--limit', '0'], '--limit must be from 1 to 1,000,000,000; got 0.'),
        (['encrypt', '--batch', HUGER], f'--batch must be from 1 to 100,000; got {HUGER}.'),
        (['rekey', '--batch', '0'], '--batch must be from 1 to 100,000; got 0.'),
        (['prune', '--older-than', '999999d'], "--older-than must be from 1m to 36500d (100 years); got '999999d'."),
        (['prune', '--older-than', f'{HUGER}m'], '--older-than must be from 1m to 36500d (100 years)'),
        (['prune', '--older-than', '0h'], "--older-than must be from 1m to 36500d (100 years); got '0h'."),
        (['rewind', 'demo', HUGER], f'POSITION must be from 0 to 1,000,000,000; got {HUGER}.'),
        (['fork', 'demo', '--at', HUGER, '--to', 'copy'], f'--at must be from 0 to 1,000,000,000; got {HUGER}.'),
        (['compact', 'demo', '--summarizer', 'test', '--keep', HUGE], '--keep must be from 1 to 1,000,000,000'),
        (['demo', '--turns', HUGE], f'--turns must be from 2 to 10,000; got {HUGE}.'),
        (['serve', '--port', '70000'], '--port must be from 0 to 65,535; got 70000.'),
    ],
)
def test_a_number_out_of_bounds_fails_in_one_line_naming_the_bounds(demo: str, args: list[str], said: str) -> None:
    fails(invoke(demo, *args), said)
    assert session_ids(demo) == ['demo']


def test_what_is_not_a_number_stays_a_usage_error(demo: str) -> None:
    refused = invoke(demo, 'history', 'demo', '--limit', 'ten')
    assert refused.exit_code == 2 and "'ten' is not a valid integer" in refused.output


@pytest.mark.parametrize(
    'args',
    [
        ['history', '  '],
        ['summaries', ' '],
        ['context', '\t'],
        ['branches', '  '],
        ['fork', 'demo', '--at', '4', '--to', '  '],
        ['sessions', '--scope', ' '],
        ['search', 'ORDER', '--session', '  '],
        ['delete', '  ', '--yes'],
        ['chat', '  ', '--model', 'test'],
        ['export', ' '],
    ],
)
def test_a_blank_id_or_scope_is_refused_everywhere(demo: str, args: list[str]) -> None:
    fails(invoke(demo, *args), 'is blank: give at least one character other than spaces.')
    assert session_ids(demo) == ['demo']


def test_import_refuses_a_blank_id_or_scope(demo: str, tmp_path: Path) -> None:
    exported = tmp_path / 'demo.jsonl'
    ok(invoke(demo, 'export', 'demo', '-o', str(exported)))
    fails(invoke(demo, 'import', str(exported), '--session-id', '  '), '--session-id is blank')
    fails(invoke(demo, 'import', str(exported), '--session-id', 'copy', '--scope', ' '), '--scope is blank')
    assert session_ids(demo) == ['demo']
