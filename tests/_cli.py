"""Assertions on in-process `session-store` runs (click's `CliRunner` results)."""

from __future__ import annotations

from click.testing import Result


def ok(result: Result) -> str:
    """The command succeeded; its standard output."""
    assert result.exit_code == 0, (result.exit_code, result.output, result.exception)
    return result.stdout


def fails(result: Result, *fragments: str) -> str:
    """Exit code 1 and exactly one line on stderr, `Error: ...`, holding every fragment."""
    assert result.exit_code == 1, (result.exit_code, result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('Error: '), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]
