"""Every Python block in README.md runs as the complete program a new user would copy.

Each ```python block is one test case, named for the heading it sits under. It runs in its own
Python process, in a fresh temporary working directory (so a `sessions.db` it makes lands there),
and must exit cleanly with warnings as errors. What it prints must equal its `#>` lines, which
every block must have, so each case checks a result and not only that nothing raised.

Offline substitution: before a block runs, its source text is rewritten so that every provider
model name in a string literal (`'openai:gpt-4.1'`, `'openai:gpt-4.1-mini'`, any `'provider:model'`)
becomes `offline_model()`, a pydantic-ai `TestModel` whose profile gives a context window of
1,000,000 tokens (as genai-prices records for the GPT-4.1 models), so `('fraction', f)` triggers
resolve as they would against the real model. The rewritten program gets only that one name, and
runs with `pydantic_ai.models.ALLOW_MODEL_REQUESTS = False`, so a name the rewrite missed fails
instead of calling a provider. Nothing inside pydantic-ai or this project is patched.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelRequest, ModelResponse, UserPromptPart

from session_store import SessionStore

README = Path(__file__).resolve().parent.parent / 'README.md'
TIMEOUT = 60.0

PROVIDER_MODEL = re.compile(
    r"""(?P<quote>['"])(?:openai|anthropic|google-gla|google-vertex|gemini|groq|mistral|cohere|bedrock|"""
    r"""deepseek|grok|xai|openrouter|huggingface|ollama|azure|heroku|vercel|cerebras):[\w.\-/]+(?P=quote)"""
)

RUNNER = textwrap.dedent(
    """
    import runpy
    import sys

    from pydantic_ai import models
    from pydantic_ai.models.test import TestModel

    models.ALLOW_MODEL_REQUESTS = False


    def offline_model() -> TestModel:
        return TestModel(profile={'context_window': 1_000_000})


    runpy.run_path(sys.argv[1], init_globals={'offline_model': offline_model}, run_name='__main__')
    """
)


@dataclass(frozen=True)
class Block:
    """One ```python block of the README."""

    heading: str
    index: int  # among the blocks under the same heading
    line: int  # of the block's first source line in README.md
    source: str

    @property
    def id(self) -> str:
        slug = re.sub(r'[^a-z0-9]+', '-', self.heading.lower()).strip('-')
        return f'{slug}-{self.index}'

    def expected_output(self) -> str:
        """The block's `#>` lines, as the text it must print."""
        shown = [line.strip() for line in self.source.splitlines() if line.strip().startswith('#>')]
        return ''.join(line.removeprefix('#>').removeprefix(' ') + '\n' for line in shown)


def readme_blocks(text: str) -> list[Block]:
    """The ```python blocks of a Markdown text, with the heading each sits under."""
    blocks: list[Block] = []
    heading = 'top'
    fence: str | None = None  # the language of the open fenced block, '' when it has none
    start = 0
    body: list[str] = []
    per_heading: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if fence is None:
            if line.startswith('```'):
                fence = line[3:].strip()
                start, body = number + 1, []
            elif line.startswith('#'):
                heading = line.lstrip('#').strip()
        elif line.strip() == '```':
            if fence in ('python', 'py'):
                index = per_heading.get(heading, 0)
                per_heading[heading] = index + 1
                blocks.append(Block(heading, index, start, '\n'.join(body) + '\n'))
            fence = None
        else:
            body.append(line)
    assert fence is None, f'README.md: the block opened at line {start - 1} is never closed'
    return blocks


def offline(source: str) -> str:
    """The block with every provider model name replaced by `offline_model()`."""
    return PROVIDER_MODEL.sub('offline_model()', source)


def run_block(block: Block, cwd: Path) -> str:
    """Run the block as a program in `cwd`; its standard output, after checking it exited cleanly."""
    program = cwd / 'example.py'
    program.write_text(offline(block.source))
    (cwd / 'run_offline.py').write_text(RUNNER)
    done = subprocess.run(
        [sys.executable, '-W', 'error', 'run_offline.py', 'example.py'],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0 and not done.stderr, (
        f'README.md line {block.line} ({block.id}) failed with exit status {done.returncode}:\n'
        f'{done.stderr}\n--- stdout ---\n{done.stdout}'
    )
    return done.stdout


def check_sessions_database(cwd: Path) -> None:
    """The Sessions block left its run in ./sessions.db, readable by a new store."""

    async def read() -> list[object]:
        async with SessionStore(f'sqlite+aiosqlite:///{cwd / "sessions.db"}', migrate=False) as store:
            return list(await store.history('support-42', scope='user-7', limit=None))

    request, response = asyncio.run(read())
    assert isinstance(request, ModelRequest)
    assert [part.content for part in request.parts if isinstance(part, UserPromptPart)] == [
        'Where is my order ORD-1042?'
    ]
    assert isinstance(response, ModelResponse)


AFTERWARDS: dict[str, Callable[[Path], None]] = {'sessions-0': check_sessions_database}
"""Checks on what a block left in its working directory, by block id."""

BLOCKS = readme_blocks(README.read_text())


def test_readme_has_python_blocks() -> None:
    assert {block.id for block in BLOCKS} >= {'quick-start-0', 'sessions-0', 'processors-alone-0'}
    assert set(AFTERWARDS) <= {block.id for block in BLOCKS}


def test_offline_rewrites_every_provider_model() -> None:
    source = "Agent('openai:gpt-4.1', x=\"anthropic:claude-sonnet-4-5\"); TiktokenCounter('gpt-4.1')"
    assert offline(source) == "Agent(offline_model(), x=offline_model()); TiktokenCounter('gpt-4.1')"


@pytest.mark.slow  # each block runs as its own program, in a new process
@pytest.mark.parametrize('block', BLOCKS, ids=[block.id for block in BLOCKS])
def test_readme_block(block: Block, tmp_path: Path) -> None:
    expected = block.expected_output()
    assert expected, f'README.md line {block.line} ({block.id}): show what the block prints in `#>` lines'
    assert run_block(block, tmp_path) == expected
    if block.id in AFTERWARDS:
        AFTERWARDS[block.id](tmp_path)
