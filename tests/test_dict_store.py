"""The docs page's backend (`docs/examples/dict_store.py`, shown on docs/testing-your-store.md) under the suite as
the page runs it: `pytest -p session_store.conformance dict_store.py`, in a folder of its own, reports each check."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from docs.examples import dict_store
from session_store.conformance import CHECKS

PASSES = {'semantics', 'revisions', 'orphans', 'isolation', 'concurrency', 'atomicity', 'scopes', 'bad_input'}
"""What the page says the dict store passes; the rest skip, as it is not persistent (and cost is optional)."""


@pytest.mark.slow  # a pytest run of its own, the whole suite
def test_the_page_command_reports_each_check(tmp_path: Path) -> None:
    shutil.copy(dict_store.__file__, tmp_path / 'dict_store.py')
    done = subprocess.run(
        [sys.executable, '-m', 'pytest', '-p', 'session_store.conformance', 'dict_store.py', '-v'],
        cwd=tmp_path,
        env={**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    outcomes = dict(re.findall(r'^dict_store\.py::dict_store::test_(\w+) (PASSED|SKIPPED|FAILED)', done.stdout, re.M))
    assert done.returncode == 0, done.stdout[-3000:]
    assert outcomes == {check: 'PASSED' if check in PASSES else 'SKIPPED' for check in CHECKS}, done.stdout
    page = (Path(__file__).parent.parent / 'docs' / 'testing-your-store.md').read_text()
    for check in CHECKS:  # and the page shows that very report
        shown = 'PASSED' if check in PASSES else 'SKIPPED'
        assert f'dict_store.py::dict_store::test_{check} {shown}' in page
