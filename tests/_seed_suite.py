"""Runs summarization-pydantic-ai's own test suite against `processors`, through an import shim.

The seed package's sdist is fetched with `pip download` at test time, into a temporary directory,
and never stored in this repository. Its tests import `pydantic_ai_summarization`; a tiny generated
package of that name answers each public name with ours (`processors.<name>`). A name that is private
to the seed package (`_cutoff.find_safe_cutoff`, `processor._summarization_agent`, ...) is served as
a stand-in that raises when used, so a test file that imports one still loads and its other tests run.

Which tests count: those that use only the seed package's public names (its root `__all__` and each
public module's `__all__`), found by reading each test's code (and the module-level helpers it calls).
The pass rate is over those. Run `python -m tests._seed_suite` for the report.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tarfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

SEED = 'summarization-pydantic-ai'
SEED_VERSION = '0.1.11'
SEED_PACKAGE = 'pydantic_ai_summarization'
SEED_TEST_FILES = (
    'test_processor.py',
    'test_sliding_window.py',
    'test_cutoff.py',
    'test_system_prompt_preservation.py',
    'test_capability.py',
    'test_limit_warner.py',
)

_ITSELF = (
    'Fails against summarization-pydantic-ai 0.1.11 itself too: pydantic-ai 2.x refuses dict items in '
    'UserPromptPart.content.'
)
_HEAD_TOKENS = (
    'count_tokens_approximately adds 3 tokens per message to its text (and reads every part kind), so a '
    '200-character message is 53 tokens, not 50, and two no longer fit a 100-token head.'
)
_TRUNCATION = (
    'Tool outputs are shortened in what the model is sent (before_model_request), not by after_tool_execute, '
    "which would change the run's history: the archive keeps every output whole. after_tool_execute passes the "
    'result through.'
)

KNOWN_FAILURES: dict[str, str] = {
    'test_processor.py::TestTokenCounting::test_count_tokens_user_prompt_multipart': _ITSELF,
    'test_processor.py::TestFormatMessages::test_format_user_message_multipart': _ITSELF,
    'test_processor.py::TestFormatMessages::test_format_user_message_multipart_empty': _ITSELF,
    'test_processor.py::TestAsyncTokenCounterCallPath::test_call_async_counter_below_trigger': (
        'The token counter is called once per message and the counts are summed, so a request costs its new '
        'messages, not the history; a counter that answers 5 whatever it is given counts 24 messages as 120, '
        'over the trigger of 100.'
    ),
    'test_sliding_window.py::TestSlidingWindowProcessor::test_call_zero_keep_does_not_empty_history': (
        "keep=('messages', 0) keeps the request in flight (and the system prompt) in the sliding window as in "
        'summarization; the seed leaves the history untouched, a window that never trims.'
    ),
    'test_sliding_window.py::TestKeepHead::test_keep_head_multiple_messages': (
        'keep_head 3 and keep 2 make a window of 5 messages, at its trigger of 5: a window is kept below every '
        'trigger after compacting (or the next request compacts again), so the tail keeps 1. Until issue 26 the first '
        'compaction counted no head and matched this by accident; later ones counted it.'
    ),
    'test_sliding_window.py::TestKeepHead::test_keep_head_with_token_based': _HEAD_TOKENS,
    'test_sliding_window.py::TestKeepHead::test_keep_head_fraction_based': _HEAD_TOKENS,
    'test_capability.py::TestContextManagerCapability::test_tool_output_truncation': _TRUNCATION,
    'test_capability.py::TestContextManagerCapability::test_tool_return_long_text_return_value_truncated': _TRUNCATION,
}
"""Seed tests on public names that fail against `processors`, each with why we differ (as
`docs/coming-from-summarization.md` lists them)."""


class SeedUnavailable(Exception):
    """The seed package's sdist could not be fetched (no network, no index)."""


def fetch_seed(directory: Path) -> Path:
    """Download and unpack the seed sdist into `directory`; the unpacked project root."""
    downloads = directory / 'download'
    try:
        done = subprocess.run(
            [
                sys.executable,
                '-m',
                'pip',
                'download',
                '--no-deps',
                '--no-binary',
                ':all:',
                '--disable-pip-version-check',
                '--dest',
                str(downloads),
                f'{SEED}=={SEED_VERSION}',
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise SeedUnavailable(
            f'pip download {SEED}=={SEED_VERSION} timed out: the package index is unreachable'
        ) from error
    archives = sorted(downloads.glob('*.tar.gz'))
    if done.returncode != 0 or not archives:
        tail = ' | '.join(done.stderr.strip().splitlines()[-3:])
        raise SeedUnavailable(f'pip download {SEED}=={SEED_VERSION} failed (is the package index reachable?): {tail}')
    with tarfile.open(archives[0]) as archive:
        archive.extractall(directory / 'sdist', filter='data')
    (root,) = (directory / 'sdist').iterdir()
    return root


def _dunder(name: str) -> bool:
    return name.startswith('__') and name.endswith('__')


def _all_names(path: Path) -> set[str]:
    """The names a seed module lists in `__all__`."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == '__all__' for t in node.targets):
            value = ast.literal_eval(node.value)
            return set(value)
    return set()


def seed_modules(seed: Path) -> dict[str, set[str]]:
    """Each seed module (`''` for the package itself) and its public names; a private module has none."""
    package = seed / 'src' / SEED_PACKAGE
    modules: dict[str, set[str]] = {}
    for path in sorted(package.glob('*.py')):
        name = '' if path.stem == '__init__' else path.stem
        modules[name] = set() if name.startswith('_') else _all_names(path)
    return modules


def public_names(modules: dict[str, set[str]]) -> frozenset[str]:
    """Every name the seed package makes public, in any of its modules."""
    return frozenset(name for names in modules.values() for name in names)


_SHIM = '''\
"""Generated for session-store's seed-suite test: `{module}` answered by `processors`."""

import processors as _ours

_PUBLIC = frozenset({public!r})


class _Private:
    """A name private to summarization-pydantic-ai, which the shim does not provide."""

    def __init__(self, name):
        self._name = name

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(f'{{self._name}}: private to summarization-pydantic-ai, not served by the shim')

    def __getattr__(self, attribute):
        raise NotImplementedError(f'{{self._name}}: private to summarization-pydantic-ai, not served by the shim')


def __getattr__(name):
    if _dunder(name):
        raise AttributeError(name)
    if name in _PUBLIC:
        return getattr(_ours, name)
    return _Private(f'{{__name__}}.{{name}}')


def _dunder(name):
    return name.startswith('__') and name.endswith('__')
'''


def write_shim(directory: Path, modules: dict[str, set[str]]) -> Path:
    """A directory holding the `pydantic_ai_summarization` shim package, to put on `PYTHONPATH`."""
    public = sorted(public_names(modules))
    package = directory / 'shim' / SEED_PACKAGE
    package.mkdir(parents=True)
    for module in modules:
        path = package / ('__init__.py' if module == '' else f'{module}.py')
        path.write_text(_SHIM.format(module=f'{SEED_PACKAGE}.{module}'.rstrip('.'), public=public))
    return package.parent


@dataclass(frozen=True)
class SeedTest:
    """One seed test, and the seed package's private names its code uses (none: it counts)."""

    nodeid: str
    private: tuple[str, ...]


def classify(path: Path, public: frozenset[str]) -> list[SeedTest]:
    """The tests in a seed test file, each with the private seed names it uses (through helpers too)."""
    tree = ast.parse(path.read_text())
    helpers = {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and not node.name.startswith('Test')
    }
    private_imports: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or '').split('.')[0] == SEED_PACKAGE:
            for alias in node.names:
                if alias.name not in public:
                    private_imports[alias.asname or alias.name] = f'{node.module}.{alias.name}'

    def uses(node: ast.AST, seen: set[str]) -> set[str]:
        found: set[str] = set()
        for sub in ast.walk(node):
            if isinstance(sub, ast.ImportFrom) and (sub.module or '').split('.')[0] == SEED_PACKAGE:
                found |= {f'{sub.module}.{a.name}' for a in sub.names if a.name not in public}
            elif isinstance(sub, ast.Attribute):
                own = isinstance(sub.value, ast.Name) and sub.value.id == 'self'
                if sub.attr.startswith('_') and not _dunder(sub.attr) and not own:
                    found.add(f'.{sub.attr}')
            elif isinstance(sub, ast.Name):
                if sub.id in private_imports:
                    found.add(private_imports[sub.id])
                elif sub.id in helpers and sub.id not in seen:
                    seen.add(sub.id)
                    found |= uses(helpers[sub.id], seen)
        return found

    tests: list[SeedTest] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith('test'):
            tests.append(SeedTest(f'{path.name}::{node.name}', tuple(sorted(uses(node, set())))))
        elif isinstance(node, ast.ClassDef) and node.name.startswith('Test'):
            for member in node.body:
                if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef) and member.name.startswith('test'):
                    nodeid = f'{path.name}::{node.name}::{member.name}'
                    tests.append(SeedTest(nodeid, tuple(sorted(uses(member, set())))))
    return tests


_CONFTEST = '''\
"""Generated: records each test's outcome, and keeps real model requests off (FunctionModel and TestModel only)."""

import json
import os

import pydantic_ai.models

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False
_outcomes = {}


def pytest_runtest_logreport(report):
    nodeid = report.nodeid.split('/', 1)[-1].split('[')[0]
    if report.when == 'call' or report.outcome != 'passed':
        previous = _outcomes.get(nodeid, 'passed')
        _outcomes[nodeid] = report.outcome if previous == 'passed' else previous


def pytest_sessionfinish(session):
    with open(os.environ['SEED_SUITE_OUTCOMES'], 'w') as file:
        json.dump(_outcomes, file)
'''

_INI = """\
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
"""


@dataclass
class SeedReport:
    """What the seed suite did against `processors`, and against the seed package itself for reference."""

    tests: list[SeedTest]
    outcomes: dict[str, str]
    reference: dict[str, str]
    """Each test's outcome against summarization-pydantic-ai's own code, with the installed pydantic-ai."""
    output: str = field(repr=False)

    @property
    def public(self) -> list[SeedTest]:
        return [test for test in self.tests if not test.private]

    def passed(self, test: SeedTest) -> bool:
        return self.outcomes.get(test.nodeid) == 'passed'

    @property
    def public_failures(self) -> list[str]:
        return [test.nodeid for test in self.public if not self.passed(test)]

    @property
    def public_rate(self) -> float:
        return sum(self.passed(test) for test in self.public) / len(self.public)

    def describe(self) -> str:
        public = self.public
        private = [test for test in self.tests if test.private]
        itself = sum(self.reference.get(t.nodeid) == 'passed' for t in public)
        lines = [
            f'{SEED} {SEED_VERSION}: {len(self.tests)} tests, {len(public)} on public names only, '
            f'{sum(self.passed(t) for t in public)} of them pass against processors ({self.public_rate:.1%}) '
            f'and {itself} against the seed package itself; '
            f'{sum(self.passed(t) for t in private)} of {len(private)} tests that use private names pass.',
        ]
        for nodeid in self.public_failures:
            reason = KNOWN_FAILURES.get(nodeid, 'NOT LISTED')
            lines.append(f'  FAIL {nodeid} ({self.outcomes.get(nodeid, "not run")}): {reason}')
        fixed = sorted(set(KNOWN_FAILURES) - set(self.public_failures))
        lines += [f'  listed as failing but passes: {nodeid}' for nodeid in fixed]
        return '\n'.join(lines)


def run_seed_suite(seed: Path, directory: Path) -> SeedReport:
    """Run the seed's named test files against `processors` in a subprocess; classify and collect outcomes."""
    modules = seed_modules(seed)
    public = public_names(modules)
    shim = write_shim(directory, modules)
    suite = directory / 'suite'
    tests_dir = suite / 'tests'
    tests_dir.mkdir(parents=True)
    (tests_dir / '__init__.py').write_text('')
    for name in SEED_TEST_FILES:
        (tests_dir / name).write_text((seed / 'tests' / name).read_text())
    (tests_dir / 'conftest.py').write_text(_CONFTEST)
    (suite / 'pytest.ini').write_text(_INI)
    outcomes, output = _pytest(suite, shim, directory / 'outcomes.json')
    reference, _ = _pytest(suite, seed / 'src', directory / 'reference.json')
    tests = [test for name in SEED_TEST_FILES for test in classify(tests_dir / name, public)]
    return SeedReport(tests=tests, outcomes=outcomes, reference=reference, output=output)


def _pytest(suite: Path, path: Path, outcomes_path: Path) -> tuple[dict[str, str], str]:
    """Run the suite in a subprocess with `path` first on `PYTHONPATH`; each test's outcome, and the output."""
    environment = {
        **{k: v for k, v in os.environ.items() if not k.endswith('_API_KEY')},
        'PYTHONPATH': str(path),
        'SEED_SUITE_OUTCOMES': str(outcomes_path),
    }
    done = subprocess.run(
        [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', '--continue-on-collection-errors', 'tests'],
        cwd=suite,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    outcomes = json.loads(outcomes_path.read_text()) if outcomes_path.exists() else {}
    return {nodeid.removeprefix('tests/'): outcome for nodeid, outcome in outcomes.items()}, done.stdout + done.stderr


def main() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        report = run_seed_suite(fetch_seed(directory), directory)
        if '-v' in sys.argv:
            print(textwrap.indent(report.output[-20_000:], '| '))
        print(report.describe())


if __name__ == '__main__':
    main()
