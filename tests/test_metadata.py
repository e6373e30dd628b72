"""What `pip show pydantic-ai-session-store` says: who made it and under which license, from `pyproject.toml`."""

from __future__ import annotations

from importlib.metadata import metadata


def test_the_distribution_names_its_author_and_license() -> None:
    shown = metadata('pydantic-ai-session-store')
    assert shown['Author'] == 'Seed 51882487 maintainers'
    assert shown['Author-email'] == 'maintainers@users.noreply.a-seed-51882487.example'
    assert shown['License-Expression'] == 'MIT'
