"""A 200-turn tool-using conversation, restarted in a new OS process every 50 turns."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessagesTypeAdapter

from session_store import SessionStore
from testkit.scripted import PREVIOUS, summarized_markers
from tests._conversation_worker import SCOPE, SESSION_ID

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
async def test_two_hundred_turns_across_four_processes(db_url: str, tmp_path: Path) -> None:
    reports = []
    for first in range(0, 200, 50):
        out = tmp_path / f'{first}.json'
        subprocess.run(
            [sys.executable, '-m', 'tests._conversation_worker', db_url, str(first), str(first + 50), str(out)],
            cwd=ROOT,
            check=True,
            timeout=600,
        )
        reports.append(json.loads(out.read_text()))

    async with SessionStore(db_url) as store:
        archive = await store.history(SESSION_ID, scope=SCOPE, limit=None)
        summaries = await store.summaries(SESSION_ID, scope=SCOPE)

    # The archive is exactly every run's new messages, in order: nothing lost, nothing twice.
    runs = [ModelMessagesTypeAdapter.validate_python(run) for report in reports for run in report['runs']]
    assert len(runs) == 200
    assert archive == [message for run in runs for message in run]
    assert len(archive) == 800

    # Over all four processes, the summarizer read each message at most once ...
    seen: set[str] = set()
    for markers in summarized_markers([i for report in reports for i in report['summarizer_inputs']]):
        assert markers and not markers & seen, sorted(markers & seen)
        seen |= markers
    assert len(summaries) >= 20
    # ... every summary extends the one before, over contiguous archive ranges ...
    assert [s.covers_from for s in summaries[1:]] == [s.covers_to for s in summaries[:-1]]
    for report in reports[1:]:
        first_input = report['summarizer_inputs'][0]
        assert PREVIOUS.findall(first_input), 'a restarted process started its summary over'

    # ... and after each restart, opening calls no summarizer, and the first request the model received
    # equals the one the old process would have sent next (its probe, which stored nothing).
    for before, after in itertools.pairwise(reports):
        assert after['summarizer_calls_at_open'] == 0
        assert after['first_request'] == before['probe_request']
        assert after['first_request_summarizer_calls'] == before['probe_summarizer_calls']
