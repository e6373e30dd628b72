"""The code blocks of the project's Markdown (README.md and docs/*.md), found and run as a reader would run them.

Every fenced block has a language, and its language says how it is checked:

- ```python: the complete program a reader would copy. It runs in its own Python process, in a fresh
  temporary working directory (so a database it makes lands there) that holds a copy of the offline demo's
  `./sessions.db`, which it must leave byte for byte as it was, with warnings as errors, and must exit
  cleanly with nothing on stderr. What it prints must equal its `#>` lines, which every Python block must
  have, so each one checks a result and not only that nothing raised.
- ```bash: one command a line (a trailing `# comment` is for the reader; a line ending in `\\` continues on the
  next, as in a shell, so that a long command fits the site's 88 columns). Each `session-store ...` command
  runs as its own process (`python -m session_store`), in the block's working directory, which starts with
  a copy of the offline demo's `./sessions.db` (`session-store demo`, as the README has a new user run it
  first). It must exit 0; the `#>` lines after it, if any, must equal what it printed (stdout and stderr,
  at rich's 80 columns).
- ```text: a picture or a file's shape, not code; nothing runs.
- ```tsx: a browser's code (a React front end), which nothing here can run: it is always marked not run.
- ```sql: statements for a database server, which a reader runs with their own client: always marked not run,
  the marker naming the test that runs them against a real server.

A block that can't run here is marked on the line before its fence: `<!-- not run: REASON -->`. The reason
says why (it starts a server, installs packages, runs the test suite itself) and, when something else runs it,
what.

A Python block whose one line is `--8<-- "docs/examples/NAME.py"` shows that file whole: mkdocs pastes it in
(pymdownx.snippets, which fails the build on a missing file). Such a file is a program of its own (a server,
say), so it is not run as a block: its own test module, `tests/test_NAME.py`, runs it, and must exist. Every file
in `docs/examples/` is shown so on some page.

Offline substitution: before a Python block runs, its source text is rewritten so that every provider model
name in a string literal (`'openai:gpt-4.1'`, any `'provider:model'`) becomes `offline_model()`, a pydantic-ai
`TestModel` whose profile gives a context window of 1,000,000 tokens (as genai-prices records for the GPT-4.1
models), so `('fraction', f)` triggers resolve as they would against the real model. The rewritten program
gets only that one name, and runs with `pydantic_ai.models.ALLOW_MODEL_REQUESTS = False`, so a name the
rewrite missed fails instead of calling a provider. Nothing inside pydantic-ai or this project is patched. A
block that names a provider model in its code (not only in a comment) must say what it needs before it: the
text since the block before mentions the provider's `..._API_KEY`.
"""

from __future__ import annotations

import atexit
import functools
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import tokenize
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / 'README.md'
DOCS = REPO / 'docs'
EXAMPLES = DOCS / 'examples'
"""Example files a page shows whole, each run by a test module of its own."""
TIMEOUT = 120.0

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

LANGUAGES = {
    'python': 'python',
    'py': 'python',
    'bash': 'bash',
    'sh': 'bash',
    'text': 'text',
    'tsx': 'tsx',
    'sql': 'sql',
}
"""The fence languages a block may have, each with how it is checked."""

NOT_RUN = re.compile(r'^<!--\s*not run:\s*(?P<reason>.+?)\s*-->$')

SNIPPET = re.compile(r'^--8<--\s*"(?P<path>[^"]+)"$')
"""A pymdownx.snippets line: mkdocs pastes the file it names in its place."""


@dataclass(frozen=True)
class Block:
    """One fenced block of a Markdown file."""

    file: str  # relative to the repository, e.g. 'README.md', 'docs/sessions.md'
    heading: str
    index: int  # among the blocks under the same heading
    line: int  # of the block's first source line in the file
    language: str  # as LANGUAGES names it: 'python', 'bash', 'text', 'tsx' or 'sql'
    source: str
    preamble: str
    """The text between the block before (or the file's start) and this block's fence."""
    not_run: str | None
    """Why the block is not run, from its `<!-- not run: ... -->` marker."""

    @property
    def id(self) -> str:
        slug = re.sub(r'[^a-z0-9]+', '-', self.heading.lower()).strip('-')
        page = '' if self.file == 'README.md' else f'{Path(self.file).stem}/'
        return f'{page}{slug}-{self.index}'

    @property
    def where(self) -> str:
        return f'{self.file} line {self.line} ({self.id})'

    def expected_output(self) -> str:
        """The block's `#>` lines, as the text it must print."""
        return _shown(self.source.splitlines())

    @property
    def included(self) -> Path | None:
        """The file the block shows whole (its one line `--8<-- "PATH"`, PATH from the repository), if it does."""
        match = SNIPPET.match(self.source.strip())
        return REPO / match['path'] if match else None


def _shown(lines: list[str]) -> str:
    shown = [line.strip() for line in lines if line.strip().startswith('#>')]
    return ''.join(line.removeprefix('#>').removeprefix(' ') + '\n' for line in shown)


def markdown_blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, with the heading each sits under and its marker, if any."""
    name = str(path.relative_to(REPO))
    blocks: list[Block] = []
    heading = 'top'
    fence: str | None = None  # the language of the open fenced block, '' when it has none
    start = 0
    body: list[str] = []
    before: list[str] = []
    per_heading: dict[str, int] = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if fence is None:
            if line.startswith('```'):
                fence = line[3:].strip()
                start, body = number + 1, []
            else:
                if line.startswith('#'):
                    heading = line.lstrip('#').strip()
                before.append(line)
        elif line.strip() == '```':
            index = per_heading.get(heading, 0)
            per_heading[heading] = index + 1
            marked = [NOT_RUN.match(text.strip()) for text in before[-1:]]
            reason = marked[0]['reason'] if marked and marked[0] else None
            assert fence in LANGUAGES, (
                f'{name} line {start - 1}: a block needs one of the languages {sorted(LANGUAGES)}'
            )
            preamble = '\n'.join(before)
            blocks.append(
                Block(name, heading, index, start, LANGUAGES[fence], '\n'.join(body) + '\n', preamble, reason)
            )
            fence, before = None, []
        else:
            body.append(line)
    assert fence is None, f'{name}: the block opened at line {start - 1} is never closed'
    return blocks


def docs_pages() -> list[Path]:
    """Every Markdown page of the documentation site, sorted."""
    return sorted(DOCS.rglob('*.md'))


def offline(source: str) -> str:
    """The block with every provider model name replaced by `offline_model()`."""
    return PROVIDER_MODEL.sub('offline_model()', source)


def names_a_provider_model(source: str) -> bool:
    """Whether the program's code (its comments aside) names a provider model."""
    code = [
        token.string
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type not in (tokenize.COMMENT, tokenize.NL)
    ]
    return any(PROVIDER_MODEL.fullmatch(text) for text in code)


def run_python(block: Block, cwd: Path) -> str:
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
        env=_environment(),
    )
    assert done.returncode == 0 and not done.stderr, (
        f'{block.where} failed with exit status {done.returncode}:\n{done.stderr}\n--- stdout ---\n{done.stdout}'
    )
    return done.stdout


@dataclass(frozen=True)
class Command:
    """One command of a shell block, with what it must print (`None`: not shown, so not checked)."""

    line: int
    words: list[str]
    expected: str | None


def shell_commands(block: Block) -> list[Command]:
    """The block's commands, each with the `#>` lines that follow it."""
    commands: list[Command] = []
    shown: list[str] = []

    def close() -> None:
        if commands and shown:
            last = commands[-1]
            commands[-1] = Command(last.line, last.words, _shown(shown))

    continued: list[str] = []  # the lines so far of a command whose last line ends in a backslash
    for offset, text in enumerate(block.source.splitlines()):
        stripped = text.strip()
        if continued:
            continued.append(stripped)
        elif stripped.startswith('#>'):
            assert commands, f'{block.where}: output shown before any command'
            shown.append(stripped)
            continue
        elif stripped and not stripped.startswith('#'):
            close()
            shown = []
            continued = [stripped]
        else:
            continue
        if continued[-1].endswith('\\'):
            continued[-1] = continued[-1].removesuffix('\\')
        else:
            line = block.line + offset - len(continued) + 1
            commands.append(Command(line, shlex.split(' '.join(continued), comments=True), None))
            continued = []
    assert not continued, f'{block.where}: the last command ends in a backslash'
    close()
    return commands


def run_shell(block: Block, cwd: Path) -> None:
    """Run each `session-store` command of the block in `cwd`, in order, checking its exit status and output."""
    commands = shell_commands(block)
    assert commands, f'{block.where}: a shell block with no command'
    for command in commands:
        program, *arguments = command.words
        assert program == 'session-store', (
            f'{block.file} line {command.line}: only session-store commands run here; mark the block '
            '`<!-- not run: REASON -->` if it must show another'
        )
        done = subprocess.run(
            [sys.executable, '-m', 'session_store', *arguments],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=TIMEOUT,
            env=_environment(),
        )
        where = f'{block.file} line {command.line} ({shlex.join(command.words)})'
        assert done.returncode == 0, f'{where} exited {done.returncode}:\n{done.stdout}'
        if command.expected is not None:
            assert done.stdout == command.expected, f'{where} printed:\n{done.stdout}'


def _environment() -> dict[str, str]:
    """This process's environment without the settings a reader's shell wouldn't have: no database, keys or
    token of the test run's, and rich at its 80 columns."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith('SESSION_STORE_')}
    return {**kept, 'COLUMNS': '80'}


@functools.cache
def demo_database() -> Path:
    """The database `session-store demo` writes, as the README has a new user make it first: made once per test
    run (the demo takes seconds), in a folder removed when the run ends."""
    folder = Path(tempfile.mkdtemp(prefix='session-store-docs-demo-'))
    atexit.register(shutil.rmtree, folder, True)
    done = subprocess.run(
        [sys.executable, '-m', 'session_store', 'demo'],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        env=_environment(),
    )
    assert done.returncode == 0, done.stderr
    return folder / 'sessions.db'


def copy_database(database: Path, folder: Path) -> None:
    """Copy a closed SQLite database (with any WAL files beside it) into `folder`."""
    for path in database.parent.glob(f'{database.name}*'):
        shutil.copy(path, folder / path.name)


def runnable(blocks: list[Block]) -> list[Block]:
    """The blocks a test runs: Python and shell blocks without a `not run` marker, save those showing a file."""
    return [
        block
        for block in blocks
        if block.language in ('python', 'bash') and block.not_run is None and block.included is None
    ]


def check_block_kinds(blocks: list[Block]) -> None:
    """What holds of every block without running it: each Python block runs and shows its output, and names a
    provider model only after saying what it needs, unless it shows an example file that a test module of its own
    runs; only shell, TSX and SQL blocks may be marked not run, and TSX and SQL blocks must be."""
    for block in blocks:
        assert block.included is not None or '--8<--' not in block.source, (
            f'{block.where}: a block shows a file whole, as its one line `--8<-- "docs/examples/NAME.py"`'
        )
        if block.included is not None:
            example = block.included
            assert block.language == 'python' and block.not_run is None, f'{block.where}: shows a Python file'
            assert example.parent == EXAMPLES and example.suffix == '.py' and example.is_file(), (
                f'{block.where}: {block.source.strip()} names no Python file in docs/examples/'
            )
            assert (REPO / 'tests' / f'test_{example.stem}.py').is_file(), (
                f'{block.where}: {example.name} is run by a test module of its own, tests/test_{example.stem}.py'
            )
        elif block.language == 'python':
            assert block.not_run is None, f'{block.where}: every Python block runs'
            assert block.expected_output(), f'{block.where}: show what the block prints in `#>` lines'
            if names_a_provider_model(block.source):
                assert '_API_KEY' in block.preamble, (
                    f'{block.where} names a provider model: say before it what it needs (its package and key)'
                )
        elif block.language == 'text':
            assert block.not_run is None, f'{block.where}: a text block never runs, so needs no marker'
        elif block.language in ('tsx', 'sql'):
            assert block.not_run is not None, f'{block.where}: say why the block is not run, and what checks it'


def run_block(block: Block, cwd: Path) -> None:
    """Run one runnable block in `cwd` (a fresh directory), checking it as its kind says (see the module's doc)."""
    copy_database(demo_database(), cwd)
    if block.language == 'python':
        # A reader runs the examples where the demo left its database: an example must never touch data it did
        # not make (the README's encryption example once sealed that file under keys it then threw away).
        before = _contents(cwd, 'sessions.db')
        assert run_python(block, cwd) == block.expected_output()
        assert _contents(cwd, 'sessions.db') == before, f'{block.where} changed the ./sessions.db it did not make'
    else:
        run_shell(block, cwd)


def _contents(folder: Path, name: str) -> dict[str, bytes]:
    """The bytes of a SQLite database and of any WAL files beside it."""
    return {path.name: path.read_bytes() for path in sorted(folder.glob(f'{name}*'))}
