"""The quick tier's guard (`tests/_tier.py`): a quick test that starts a process fails, naming it."""

from __future__ import annotations

import sys

import pytest
from hypothesis import settings

from tests._hypothesis import QUICK, examples, leaves_out_the_slow_tier

INI = """
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
markers =
    slow: the slow tier
    spawns(*programs, reason): may run these system tools
"""

TESTS = """
import asyncio, os, subprocess, sys

import pytest


def test_runs_a_tool():
    subprocess.run(['true'], check=True)


def test_starts_python():
    subprocess.run([sys.executable, '-c', 'pass'], check=True)


async def test_starts_a_process_through_asyncio():
    process = await asyncio.create_subprocess_exec('true')
    await process.wait()


@pytest.fixture
def tool():
    yield
    subprocess.run(['true'], check=True)


def test_whose_fixture_runs_a_tool_at_teardown(tool):
    pass


def test_forks():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


@pytest.mark.slow
def test_slow_starts_python():
    subprocess.run([sys.executable, '-c', 'pass'], check=True)


@pytest.mark.spawns('true', reason='a system tool of a millisecond')
def test_allowed_tool():
    subprocess.run(['true'], check=True)


@pytest.mark.spawns('true', reason='a system tool of a millisecond')
def test_allowed_tool_but_starts_another():
    subprocess.run(['true'], check=True)
    subprocess.run(['false'], check=False)


def test_starts_nothing():
    assert sum(range(4)) == 6
"""


@pytest.mark.spawns('true', 'false', reason='the planted tests below run these tools of a millisecond, not Python')
def test_a_quick_test_that_starts_a_process_fails_naming_it(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_planted=TESTS)
    result = pytester.runpytest_inprocess('-p', 'tests._tier', '-p', 'no:cacheprovider', '-rfE')
    result.assert_outcomes(passed=4, failed=5, errors=1)  # the teardown test's call passes, its teardown fails
    failed = {line.split(' ')[1] for line in result.outlines if line.startswith(('FAILED ', 'ERROR '))}
    assert failed == {
        f'test_planted.py::{name}'
        for name in (
            'test_runs_a_tool',
            'test_starts_python',
            'test_starts_a_process_through_asyncio',
            'test_forks',
            'test_allowed_tool_but_starts_another',
            'test_whose_fixture_runs_a_tool_at_teardown',
        )
    }
    out = result.stdout.str()
    quick = 'is in the quick tier (no `slow` marker) but started a process:'
    assert f"test_planted.py::test_runs_a_tool {quick} subprocess.Popen ['true']." in out
    assert f"test_planted.py::test_allowed_tool_but_starts_another {quick} subprocess.Popen ['false']." in out
    assert f'test_planted.py::test_forks {quick} os.fork' in out
    assert f"test_planted.py::test_starts_python {quick} subprocess.Popen ['{sys.executable}', '-c', 'pass']" in out
    assert f"test_planted.py::test_whose_fixture_runs_a_tool_at_teardown {quick} subprocess.Popen ['true']" in out
    assert 'Mark it `@pytest.mark.slow`' in out


def test_a_run_leaving_out_the_slow_tier_runs_the_quick_hypothesis_budget(pytestconfig: pytest.Config) -> None:
    # The saving of the quick profile is lost without a failure if conftest stops loading it: this run checks it.
    quick = leaves_out_the_slow_tier(pytestconfig.option.markexpr)
    assert settings().max_examples == settings.get_profile(QUICK if quick else 'default').max_examples
    assert examples(25) == (8 if quick else 25) and examples(1) == 1
    expressions = ('not slow', 'not  slow and not x', 'slow', '', 'not slowly')
    assert [leaves_out_the_slow_tier(given) for given in expressions] == [True, True, False, False, False]
