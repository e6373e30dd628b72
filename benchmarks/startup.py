"""How long `session-store` takes to start: each command's wall and CPU time as a new process, against `python -c
pass` (the interpreter alone) run side by side.

Run it from the repo root (the project venv):

    python benchmarks/startup.py
    python benchmarks/startup.py --quick        # fewer repeats: does it run, roughly how

Each command runs as a user's shell runs it (pyproject.toml's console-script entry point, in a new interpreter) on
a small SQLite store made first through the public API; every figure is the median over `--repeats`, the commands
taken in turn within each repeat so load from other processes falls on each alike. The target (issue 29): the
help and the review commands answer within 1.0 s of wall time; `history --json` (pydantic-ai's own JSON, so it
imports pydantic-ai) is shown beside them for scale.
"""

# The third-party imports follow the environment bootstrap, which must run first.
# ruff: noqa: E402

from __future__ import annotations

from _bench_env import ensure_environment

ensure_environment()  # no peer: the repo root on sys.path (for `testkit`), and the project installed

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from _bench_util import load_average, machine

from session_store import SessionStore
from testkit.command import REPO, command_program
from testkit.scripted import ParallelToolAssistant, scripted_agent

TARGET = 1.0
"""Seconds of wall time the help and the review commands may take to answer."""


@dataclass
class Timed:
    """One command's runs: wall and CPU (user + system) seconds of each."""

    label: str
    argv: list[str]
    held: bool = True
    """Held to the target: not a `--json` form, which imports pydantic-ai to print its own JSON."""
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)

    def run(self) -> None:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(self.argv, capture_output=True, text=True, env={**os.environ, 'PYTHONPATH': str(REPO)})
        self.walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != 0:
            raise SystemExit(f'{self.label} exited {done.returncode}:\n{done.stderr[-2_000:]}')

    @property
    def wall(self) -> float:
        return statistics.median(self.walls)

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpus)


async def _seed(url: str) -> int:
    """A store of one session of five tool-using turns; its message count."""
    async with SessionStore(url) as store:
        session = await store.session('seeded')
        for turn in range(5):
            await session.run(scripted_agent(ParallelToolAssistant()), f'Turn M{turn}')
        return len(await store.history('seeded'))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='3 repeats instead of --repeats')
    parser.add_argument('--repeats', type=int, default=9)
    options = parser.parse_args()
    repeats = 3 if options.quick else options.repeats
    with tempfile.TemporaryDirectory() as folder:
        url = f'sqlite+aiosqlite:///{Path(folder) / "seeded.db"}'
        messages = asyncio.run(_seed(url))
        commands = [
            ['--help'],
            ['history', '--help'],
            ['sessions'],
            ['history', 'seeded'],
            ['search', 'M1'],
            ['summaries', 'seeded'],
            ['branches', 'seeded'],
            ['history', 'seeded', '--json'],
        ]
        baseline = Timed('python -c pass', [sys.executable, '-c', 'pass'])
        database = {'--help': []}  # the help reaches no database
        timed = [
            Timed(
                f'session-store {" ".join(words)}',
                [sys.executable, '-c', command_program([*words, *database.get(words[-1], ['--db', url])])],
                held='--json' not in words,
            )
            for words in commands
        ]
        print(machine())
        print(load_average('before'))
        for _ in range(repeats):
            for each in (baseline, *timed):
                each.run()
        print(load_average('after'))
    print(f'median of {repeats} runs each; a SQLite store of 1 session, {messages} messages')
    print(f'startup: {baseline.label}: wall {baseline.wall:.3f} s, cpu {baseline.cpu:.3f} s')
    for each in timed:
        verdict = f'target <= {TARGET} s: {"met" if each.wall <= TARGET else "MISSED"}' if each.held else 'no target'
        print(
            f'startup: {each.label}: wall {each.wall:.3f} s, cpu {each.cpu:.3f} s -> '
            f'{each.wall / baseline.wall:.1f} x python -c pass ({verdict})'
        )


if __name__ == '__main__':
    main()
