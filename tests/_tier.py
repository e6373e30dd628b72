"""The quick tier's guard: a test without the `slow` marker that starts a process fails, naming what it started.

A new process costs the quick tier a Python start-up and its imports (a second or more here), a server's
start-up or a fork of the whole test process, and that is what made the tier overrun its time budget. A test
about a process itself (the installed command, a SIGKILL, a restart) belongs in the slow tier, next to a
cheaper quick test of the same behaviour in this process (`CliRunner`, a second store, Starlette's test
client). The guard sees every way Python starts one (`subprocess`, `asyncio`'s subprocesses, `os.fork`,
`os.posix_spawn`, `os.system`, ...) through the interpreter's audit events (PEP 578), in any thread, during
a test's setup, call and teardown, fixtures of a wider scope included.

`@pytest.mark.spawns('mount', 'umount', reason=...)` lets a quick test run the short-lived system tools it
names (by program name, through `subprocess`; never Python, never a server): the reason says why that is
cheap and why the test cannot do without. Anything else such a test starts still fails it.
"""

from __future__ import annotations

import sys
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import PurePath

import pytest

__all__ = ['SPAWNING_EVENTS', 'Watch']

SPAWNING_EVENTS = frozenset(
    {'subprocess.Popen', 'os.fork', 'os.forkpty', 'os.posix_spawn', 'os.spawn', 'os.system', 'os.exec', 'pty.spawn'}
)
"""The audit events raised by whatever starts a process (asyncio's subprocesses go through `subprocess.Popen`)."""


@dataclass
class Watch:
    """One running test's record of the processes it started: a quick test's, or a slow one's (not watched)."""

    nodeid: str
    quick: bool
    allowed: frozenset[str] = frozenset()
    """The programs its `spawns` marker names."""
    started: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, item: pytest.Item) -> Watch:
        spawns = item.get_closest_marker('spawns')
        if spawns is None:
            return cls(item.nodeid, quick=item.get_closest_marker('slow') is None)
        if not (spawns.args and spawns.kwargs.get('reason')):
            raise pytest.UsageError(f"{item.nodeid}: say `@pytest.mark.spawns('program', ..., reason='why')`")
        if any(str(name).startswith('python') for name in spawns.args):
            raise pytest.UsageError(f'{item.nodeid}: a test that starts Python belongs in the slow tier')
        return cls(item.nodeid, quick=item.get_closest_marker('slow') is None, allowed=frozenset(spawns.args))

    def note(self, event: str, args: tuple[object, ...]) -> None:
        if self.quick and _program(event, args) not in self.allowed:
            self.started.append(f'{event} {_command(event, args)}')

    def check(self) -> None:
        """Fail the test if it started a process since the last check."""
        started, self.started = self.started, []
        if started:
            raise pytest.fail.Exception(
                f'{self.nodeid} is in the quick tier (no `slow` marker) but started a process: '
                + '; '.join(started)
                + '. Mark it `@pytest.mark.slow` (saying what quick test still covers the behaviour), or test '
                'the same thing in this process (CliRunner, a second store, a test client).',
                pytrace=False,
            )


_running: list[Watch] = []
"""The tests running now, innermost last: more than one only while a test runs pytest in this process."""


def _audit(event: str, args: tuple[object, ...]) -> None:
    if _running and event in SPAWNING_EVENTS:
        _running[-1].note(event, args)


def _program(event: str, args: tuple[object, ...]) -> str | None:
    """The name of the program a `subprocess.Popen` runs (`mount` for `/bin/mount`); None for other events."""
    if event != 'subprocess.Popen' or len(args) < 2:
        return None
    executable, argv = args[0], args[1]
    if executable is None:
        executable = argv.split()[0] if isinstance(argv, str) else next(iter(argv), None)  # type: ignore[call-overload]
    return None if executable is None else PurePath(str(executable)).name


def _command(event: str, args: tuple[object, ...]) -> str:
    if event == 'subprocess.Popen' and len(args) >= 2:
        return repr(args[1])  # (executable, args, cwd, env)
    return repr(args[:2]) if args else ''


sys.addaudithook(_audit)  # an audit hook cannot be removed; it does nothing while no test runs


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    _running.append(Watch(item.nodeid, quick=False))  # teardown pops it even if the marker is refused
    _running[-1] = Watch.of(item)
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    result = yield
    _running[-1].check()  # what setup and the call started
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    try:
        result = yield
    finally:
        watch = _running.pop()
    watch.check()  # what the teardown started (or setup, when the call never ran)
    return result
