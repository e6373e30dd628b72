"""A conformance and fault suite for any pydantic-ai `ConversationStore` backend, as a pytest plugin.

Opt in with `pytest -p session_store.conformance` (or `pytest_plugins = ['session_store.conformance']` in the root
`conftest.py`); it is never loaded on its own. Declare a backend with a factory at a test module's top level:

```python
from session_store.conformance import conformance_backend

@conformance_backend(persistent=True)
async def my_store(folder):
    async with MyStore(folder / 'db') as store:
        yield store
```

and each check runs as its own test, `test_my_store.py::my_store::test_semantics` and so on (see `CHECKS`).
`validate()` runs the same checks without pytest's collection, and says how each went.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from ._backend import (
    CHECKS,
    PROCESS_CHECKS,
    Capabilities,
    ConformanceBackend,
    Factory,
    conformance_backend,
    detect,
    importable,
)
from ._checks import CHECK_FUNCTIONS, REQUIREMENTS
from ._diff import bounded
from ._harness import Harness
from ._semantics import semantics

__all__ = ('CHECKS', 'ConformanceBackend', 'Factory', 'Outcome', 'conformance_backend', 'validate')


class Skipped(Exception):
    """A check that cannot run on a backend, and why."""


@dataclass(frozen=True)
class Outcome:
    """How one check went on a backend, as `validate` reports it."""

    check: str
    status: Literal['passed', 'failed', 'skipped']
    detail: str
    """The failure or the reason for the skip; empty when it passed."""
    divergence: str | None
    """The reason the backend declared for diverging from this check, if it did."""


_CAPABILITIES: dict[int, Capabilities] = {}
"""Each backend's detected capabilities, probed once per run."""


def capabilities_of(backend: ConformanceBackend) -> Capabilities:
    """What `backend` supports of the optional parts of the protocol (detected once, on a store of its own)."""
    found = _CAPABILITIES.get(id(backend))
    if found is None:
        with tempfile.TemporaryDirectory(prefix='conformance-probe-') as folder:
            found = asyncio.run(detect(backend, Path(folder)))
        _CAPABILITIES[id(backend)] = found
    return found


def run_check(
    backend: ConformanceBackend,
    check: str,
    place: Path,
    *,
    child: str | None,
    child_reason: str = 'no import path was given',
    cost: bool = False,
    report: Callable[[str], None] = print,
) -> None:
    """Run one check; raises `Skipped` (with why) when it cannot run, and the failure when the backend fails it."""
    if check not in CHECKS:
        raise ValueError(f'check must be one of {list(CHECKS)}; got {check!r}.')
    needs = REQUIREMENTS.get(check, frozenset())
    if 'persistent' in needs and not backend.persistent:
        raise Skipped(
            'the backend is not persistent (declare persistent=True when two stores over one folder share data)'
        )
    if 'erases' in needs and not backend.erases:
        raise Skipped(
            'the backend does not declare that its delete erases (declare erases=True when no read finds a '
            "deleted conversation's entries after)"
        )
    if 'processes' in needs and child is None:
        raise Skipped(f'no child process can open the backend: {child_reason}')
    if check == 'cost' and not cost:
        raise Skipped('the cost check is optional: pass --conformance-cost to measure (reported, never failed)')
    harness = Harness(backend, place, capabilities_of(backend), child, child_reason, report)
    if check == 'semantics':
        semantics(harness)
    else:
        asyncio.run(CHECK_FUNCTIONS[check](harness))


def validate(
    backend: ConformanceBackend,
    place: Path,
    *,
    checks: Iterable[str] = CHECKS,
    child: str | None = None,
    cost: bool = False,
    report: Callable[[str], None] = print,
) -> list[Outcome]:
    """Run `checks` on `backend`, each in a folder of its own under `place`, and say how each went.

    `child` is the `module:name` a child process imports the backend by (the process-level checks skip without
    it). Runs without pytest's collection: from a script, or a test of a test suite.
    """
    outcomes = []
    for check in checks:
        status: Literal['passed', 'failed', 'skipped'] = 'passed'
        detail = ''
        try:
            run_check(backend, check, place / check, child=child, cost=cost, report=report)
        except Skipped as skipped:
            status, detail = 'skipped', str(skipped)
        except Exception as error:  # a check's failure is whatever the backend or an assertion raised
            status, detail = 'failed', bounded(f'{type(error).__name__}: {error}')
        outcomes.append(Outcome(check, status, detail, backend.divergences.get(check)))
    return outcomes


# --- the pytest plugin --------------------------------------------------------------------------------------

_REPORTED: list[str] = []
"""Lines for the run's summary: each backend's capabilities and the cost check's figures."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup('conformance', 'pydantic-ai ConversationStore conformance suite')
    group.addoption(
        '--conformance-cost',
        action='store_true',
        help='also time load and save at 100 and 10,000 stored messages (reported, never failed)',
    )


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> Any:
    """A `ConformanceBackend` at a test module's top level is collected as a class of one test per check."""
    if isinstance(obj, ConformanceBackend) and isinstance(collector, pytest.Module):
        return _Suite.from_parent(collector, name=name)
    return None


class _Suite(pytest.Class):
    """The checks on one declared backend, collected as a class of tests named for them."""

    def _getobj(self) -> Any:
        module = self.getparent(pytest.Module)
        assert module is not None
        return _suite(getattr(module.obj, self.name), module.obj.__name__, self.name)


def _suite(backend: ConformanceBackend, module: str, name: str) -> type:
    namespace: dict[str, Any] = {'__module__': module, '__doc__': f'The conformance checks on {name}.'}
    for check in CHECKS:
        namespace[f'test_{check}'] = _test(backend, check, module, name)
    return type(name, (), namespace)


def _test(backend: ConformanceBackend, check: str, module: str, name: str) -> Any:
    def test(self: object, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        child_reason = importable(module, name, backend) if check in PROCESS_CHECKS else None
        found = capabilities_of(backend)
        missing = ', '.join(f'{cap} ({why})' for cap, why in sorted(found.reasons.items()))
        request.node.user_properties.append(('capabilities', sorted(found.supported)))

        def report(line: str) -> None:
            _REPORTED.append(f'{name} {check}: {line}')
            request.node.user_properties.append((check, line))

        if missing and check == 'semantics':
            _REPORTED.append(f'{name}: without {missing}; the checks leave those out')
        try:
            run_check(
                backend,
                check,
                tmp_path,
                child=None if child_reason else f'{module}:{name}',
                child_reason=child_reason or '',
                cost=bool(request.config.getoption('conformance_cost', False)),
                report=report,
            )
        except Skipped as skipped:
            pytest.skip(f'{name}: {skipped}')

    test.__name__ = test.__qualname__ = f'test_{check}'
    test.__doc__ = (CHECK_FUNCTIONS.get(check, semantics)).__doc__
    marks = [*backend.marks, *(backend.process_marks if check in PROCESS_CHECKS else ())]
    if check in backend.divergences:
        marks.append(pytest.mark.xfail(strict=True, reason=backend.divergences[check]))
    for mark in marks:
        test = mark(test)
    return test


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _REPORTED:
        terminalreporter.section('ConversationStore conformance')
        for line in _REPORTED:
            terminalreporter.write_line(line)
