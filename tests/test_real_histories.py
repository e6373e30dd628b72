"""Long conversations as real models send them, through every door: ids repeated in every response, thinking, retries.

Many OpenAI-compatible servers number tool calls `call_0`, `call_1`, ... afresh in every response. Each door
(the two capabilities on a plain agent, `Session.run`, pydantic-ai's `conversation=` through
`store.conversations`) runs 40 turns with unique ids, `call_0` every turn, and `call_0`/`call_1` every response,
a thinking part in every response and a tool retry every 7th turn, and must give: every turn its answer in the
requests the script needs (2, or 3 with the retry), every tool result the model is sent the tool's real output
right after its call, no request over 30 messages, at least 4 summaries with no prompt summarized twice, and an
archive holding every message in order.
"""

from __future__ import annotations

import pytest

from testkit.doors import DOORS, NUMBERINGS, Door, Numbering, TurnScript, check_report, function_model, run_door

QUICK_TURNS = 24
"""The quick tier runs the numbering every repeated-id defect of the old engine failed on (two calls numbered afresh
in every response) through every door for 24 turns, past 4 compactions; the slow tier runs all three numberings
for the issue's 40 turns."""

RUNS = [
    pytest.param('call_0_call_1', QUICK_TURNS, id='call_0_call_1-quick'),
    *(pytest.param(numbering, 40, id=numbering, marks=pytest.mark.slow) for numbering in NUMBERINGS),
]


@pytest.mark.parametrize(('numbering', 'turns'), RUNS)
@pytest.mark.parametrize('door', [door for door in DOORS if door in ('sliding_window', 'summarization')])
async def test_a_capability_on_a_plain_agent(door: Door, numbering: Numbering, turns: int) -> None:
    script = TurnScript(numbering)
    report = await run_door(door, function_model(script), turns=turns)
    check_report(report, script, door, turns)


@pytest.mark.slow_on_postgresql  # the SQLite variants, in the quick tier, run the same window code
@pytest.mark.parametrize(('numbering', 'turns'), RUNS)
@pytest.mark.parametrize('door', [door for door in DOORS if door in ('session', 'conversations')])
async def test_a_store_door(door: Door, numbering: Numbering, turns: int, db_url: str) -> None:
    script = TurnScript(numbering)
    report = await run_door(door, function_model(script), url=db_url, turns=turns)
    check_report(report, script, door, turns)
