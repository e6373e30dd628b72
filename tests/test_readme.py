"""Every code block of README.md runs as the reader it is written for would run it (`tests/_markdown.py` says how
each kind is checked), and its two set-up commands work: the one that sets up and runs the demo, in a fresh copy
of the checkout, and the one that runs the tests, which is what CI runs."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from tests._markdown import (
    README,
    REPO,
    Block,
    check_block_kinds,
    markdown_blocks,
    names_a_provider_model,
    offline,
    run_block,
    runnable,
    shell_commands,
)

BLOCKS = markdown_blocks(README)


def _block(heading: str, index: int = 0) -> Block:
    (found,) = [block for block in BLOCKS if block.heading == heading and block.index == index]
    return found


def test_readme_has_its_blocks() -> None:
    assert {block.id for block in BLOCKS} >= {'install-0', 'install-1', 'the-demo-0', 'quick-start-0', 'tests-0'}


def test_every_block_shows_its_output_and_says_what_it_needs() -> None:
    check_block_kinds(BLOCKS)


def test_offline_rewrites_every_provider_model() -> None:
    source = "Agent('openai:gpt-4.1', x=\"anthropic:claude-sonnet-4-5\"); TiktokenCounter('gpt-4.1')"
    assert offline(source) == "Agent(offline_model(), x=offline_model()); TiktokenCounter('gpt-4.1')"
    assert names_a_provider_model(source)
    assert not names_a_provider_model("Agent(TestModel())  # or 'openai:gpt-4.1'\n")


@pytest.mark.slow  # each block runs as its own program, in a new process
@pytest.mark.parametrize('block', runnable(BLOCKS), ids=[block.id for block in runnable(BLOCKS)])
def test_readme_block(block: Block, tmp_path: Path) -> None:
    run_block(block, tmp_path)


def _set_up_command() -> str:
    """The README's command that sets up a checkout and runs the demo: the first block of its Install section."""
    block = _block('Install', 0)
    (command,) = shell_commands(block)
    assert command.words[:3] == ['python3', '-m', 'venv'] and command.words[-2:] == ['session-store', 'demo']
    return block.source  # bash itself joins a line ending in a backslash with the next


def test_the_test_command_is_what_ci_runs() -> None:
    """The README's test command (the first line of its Tests block, and the Install section's second command) is
    a command `.ci/run` runs as written, so CI runs exactly what a reader is told passes."""
    (install,) = shell_commands(_block('Install', 1))
    tests = shell_commands(_block('Tests'))[0]
    assert install.words == tests.words == ['python', '-m', 'pytest', '-q']
    ci = [line.strip() for line in (REPO / '.ci' / 'run').read_text().splitlines()]
    assert shlex.join(tests.words) in ci


@pytest.mark.slow  # a new virtual environment, every package of the dev extra installed into it, then the demo
def test_the_set_up_command_works_in_a_fresh_copy_of_the_checkout(tmp_path: Path) -> None:
    files = subprocess.run(
        ['git', 'ls-files', '--cached', '--others', '--exclude-standard', '-z'],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split('\0')
    checkout = tmp_path / 'session-store'
    for name in filter(None, files):
        source = REPO / name
        if source.is_file():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            (checkout / name).write_bytes(source.read_bytes())
    # A reader's shell: no virtual environment active, none of the test run's settings.
    environment = {k: v for k, v in os.environ.items() if k != 'VIRTUAL_ENV' and not k.startswith('SESSION_STORE_')}
    active = os.environ.get('VIRTUAL_ENV')
    if active:
        environment['PATH'] = os.pathsep.join(
            part for part in environment['PATH'].split(os.pathsep) if not part.startswith(active)
        )
    done = subprocess.run(
        ['bash', '-c', _set_up_command()],
        cwd=checkout,
        env=environment,
        capture_output=True,
        text=True,
        timeout=1_800,
    )
    assert done.returncode == 0, f'{done.stdout[-3000:]}\n{done.stderr[-3000:]}'
    assert 'Demo finished' in done.stdout and (checkout / 'sessions.db').is_file()
    assert (checkout / '.venv' / 'bin' / 'session-store').is_file()
