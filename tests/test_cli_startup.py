"""The `session-store` command as installed (its console-script entry point, run as a new process): what it imports
before it answers, and what Ctrl-C prints, during its imports or after.

Which modules a command imported is a deterministic check of its start-up (the wall time is measured in
`benchmarks/startup.py`, never asserted here): `--help` needs click alone, not pydantic-ai, SQLAlchemy or alembic,
which take seconds to import on a small machine; a review command's own help, `sessions`, `summaries`, and the
human forms of `history`, `search` and `branches` need SQLAlchemy at most, never pydantic-ai or alembic (issue 29:
they answer within a second); `serve`'s help neither, nor the web extra it serves with (issue 47). The `--json`
forms, which print pydantic-ai's own normalised JSON, and `context`, which rebuilds the window with the store's
processor and counts its tokens, import pydantic-ai.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

import pytest

from session_store import SessionStore
from testkit.command import REPO, command_program
from testkit.scripted import ParallelToolAssistant, scripted_agent

pytestmark = pytest.mark.slow

HEAVY = ('pydantic_ai', 'sqlalchemy', 'alembic')
"""The dependencies that make a start slow: each takes a large part of a second or more to import."""
WEB = ('starlette', 'uvicorn', 'jinja2')
"""The web extra, which only `serve` runs on: no help, `serve`'s own included, imports it."""
ABORTED = '\nAborted!\n'
"""What click prints on stderr when Ctrl-C stops a running command, exiting with 1."""
WAIT = 60.0
"""Seconds a child may take to reach the point a test waits for: generous, on a machine shared by many."""


def _environment() -> dict[str, str]:
    return {**os.environ, 'PYTHONPATH': str(REPO), 'PYTHONUNBUFFERED': '1', 'COLUMNS': '100'}


def _imported(tmp_path: Path, *args: str, expect: int = 0) -> set[str]:
    """The top-level packages in `sys.modules` when `session-store ARGS` exits (after checking it exited `expect`)."""
    listing = tmp_path / 'modules.json'
    program = command_program(
        args,
        before=(
            'import atexit, json, sys\n'
            f'atexit.register(lambda: open({str(listing)!r}, "w").write(json.dumps(sorted(sys.modules))))\n'
        ),
    )
    done = subprocess.run(
        [sys.executable, '-c', program], env=_environment(), capture_output=True, text=True, timeout=WAIT, cwd=tmp_path
    )
    assert done.returncode == expect, done.stderr
    return {name.partition('.')[0] for name in json.loads(listing.read_text())}


async def _seeded(tmp_path: Path) -> str:
    url = f'sqlite+aiosqlite:///{tmp_path / "seeded.db"}'
    async with SessionStore(url) as store:
        session = await store.session('seeded')
        for turn in range(2):
            await session.run(scripted_agent(ParallelToolAssistant()), f'Turn M{turn}')
    return url


def test_the_help_imports_none_of_the_heavy_dependencies(tmp_path: Path) -> None:
    assert not _imported(tmp_path, '--help') & {*HEAVY, *WEB}
    assert not _imported(tmp_path, '--version') & {*HEAVY, *WEB}


LIGHT_HELP = ('sessions', 'history', 'summaries', 'context', 'search', 'branches', 'serve')
"""Commands whose own `--help` imports neither pydantic-ai nor alembic (nor the web extra): the review commands',
`branches`' and `serve`'s (issue 47: its help took 1.4 s, importing pydantic-ai for its summarizer options)."""
LIGHT_RUNS = (
    (['sessions'], 0),
    (['sessions', '--scope', 'nobody'], 0),
    (['summaries', 'seeded'], 0),
    (['summaries', 'nobody'], 1),
    (['history', 'seeded'], 0),
    (['history', 'seeded', '--offset', '2', '--limit', '3'], 0),
    (['history', 'nobody'], 1),
    (['search', 'M1'], 0),
    (['search', 'M1', '--session', 'seeded'], 0),
    (['search', 'M1', '--session', 'nobody'], 1),
    (['branches', 'seeded'], 0),
    (['branches', 'nobody'], 1),
)
"""Runs that read the store with SQLAlchemy alone, with the exit code each ends with: an unknown session's error is
mapped to its line without pydantic-ai too."""


def test_the_review_commands_help_imports_neither_pydantic_ai_nor_alembic(tmp_path: Path) -> None:
    for command in LIGHT_HELP:
        assert not _imported(tmp_path, command, '--help') & {'pydantic_ai', 'alembic', *WEB}, command


async def test_the_listings_read_the_store_without_pydantic_ai_or_alembic(tmp_path: Path) -> None:
    # The commands still import what they need when run (the group finds each in its module): SQLAlchemy.
    url = await _seeded(tmp_path)
    for command, code in LIGHT_RUNS:
        imported = _imported(tmp_path, *command, '--db', url, expect=code)
        assert 'sqlalchemy' in imported, command
        assert not imported & {'pydantic_ai', 'alembic'}, command


async def test_the_commands_showing_messages_import_pydantic_ai_when_run(tmp_path: Path) -> None:
    url = await _seeded(tmp_path)
    for command in (
        ['history', 'seeded', '--json'],
        ['search', 'M1', '--json'],
        ['sessions', '--json'],
        ['context', 'seeded'],
    ):
        assert {'pydantic_ai', 'sqlalchemy'} <= _imported(tmp_path, *command, '--db', url), command


def _started(tmp_path: Path, *args: str, report_imports: bool = False) -> subprocess.Popen[str]:
    # `-X importtime` reports each module on stderr as its import completes: how a test sees the child's progress.
    # Only where the test reads stderr as it comes: the report would otherwise fill the pipe and stall the child.
    program = command_program(args)
    return subprocess.Popen(
        [sys.executable, *(['-X', 'importtime'] if report_imports else []), '-c', program],
        env=_environment(),
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _read_until(stream: IO[str] | None, wanted: str) -> list[str]:
    """Lines of the child's `stream` up to and including the first holding `wanted`."""
    assert stream is not None
    lines: list[str] = []
    while line := stream.readline():
        lines.append(line)
        if wanted in line:
            return lines
    raise AssertionError(f'the child ended before printing {wanted!r}: {lines[-5:]}')


def _interrupted(child: subprocess.Popen[str], seen: list[str]) -> tuple[int, str, list[str]]:
    """Ctrl-C to the child; its exit code, its stderr without the import report, and every module it imported."""
    child.send_signal(signal.SIGINT)
    _, rest = child.communicate(timeout=WAIT)
    lines = [*seen, *rest.splitlines(keepends=True)]
    report = [line for line in lines if line.startswith('import time:')]
    modules = [line.rpartition('|')[2].strip() for line in report]
    return child.returncode, ''.join(line for line in lines if not line.startswith('import time:')), modules


async def test_ctrl_c_while_a_command_imports_prints_clicks_one_line(tmp_path: Path) -> None:
    url = await _seeded(tmp_path)
    child = _started(tmp_path, 'sessions', '--db', url, report_imports=True)
    # click is in: the command has begun importing its own modules, and still has the store and pydantic-ai to go.
    seen = _read_until(child.stderr, ' click\n')
    code, stderr, modules = _interrupted(child, seen)
    assert 'Traceback' not in stderr
    assert (code, stderr) == (1, ABORTED)
    assert 'pydantic_ai' not in modules, 'the signal came after the imports: this test proved nothing'


async def test_ctrl_c_after_start_up_prints_the_same_line(tmp_path: Path) -> None:
    url = await _seeded(tmp_path)
    child = _started(tmp_path, 'chat', 'talk', '--model', 'test', '--db', url)
    assert child.stdin is not None
    child.stdin.write('Where is ORDER-1042?\n')
    child.stdin.flush()
    # A whole turn answered (the test model quotes the prompt): the chat now waits for the next line.
    _read_until(child.stdout, 'ORDER-1042')
    code, stderr, _ = _interrupted(child, [])
    assert 'Traceback' not in stderr
    assert (code, stderr) == (1, ABORTED)
