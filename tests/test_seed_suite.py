"""summarization-pydantic-ai's own tests, fetched at test time, run against `processors` through an import shim.

At least 90% of the tests that use only that package's public names must pass, and every one that fails must be
listed, with the reason we differ, in `KNOWN_FAILURES` and in the docs' "Coming from summarization-pydantic-ai" page.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests._seed_suite import KNOWN_FAILURES, SeedUnavailable, fetch_seed, run_seed_suite

PAGE = Path(__file__).resolve().parent.parent / 'docs' / 'coming-from-summarization.md'


@pytest.mark.slow
def test_the_seed_packages_own_tests_pass_against_processors(tmp_path: Path) -> None:
    try:
        seed = fetch_seed(tmp_path)
    except SeedUnavailable as error:
        pytest.skip(str(error))
    report = run_seed_suite(seed, tmp_path)
    print(report.describe())
    assert len(report.public) >= 100, report.describe()  # the classification found the suite's public tests
    assert report.public_rate >= 0.9, report.describe()
    assert sorted(report.public_failures) == sorted(KNOWN_FAILURES), report.describe()


def _section() -> str:
    text = PAGE.read_text()
    start = text.index('### The seed tests on public names that fail here, and why')
    end = text.find('\n#', start + 1)
    return text[start : end if end > 0 else len(text)]


def test_the_docs_list_every_seed_test_that_fails_and_why() -> None:
    section = _section()
    for nodeid in KNOWN_FAILURES:
        name = nodeid.rsplit('::', 1)[-1]
        assert re.search(rf'`{re.escape(name)}`', section), f'{name} is not listed on {PAGE.name}'
