"""The retention eval measures what it claims: on one seeded conversation, run through real sessions, the extractive
summarizer keeps more planted facts in context than the sliding window, one that drops every number keeps fewer, a
correction counts only when its new value is kept, and an answer model's answers are checked against the window it
was really given. The quick tier runs a 16-turn conversation; longer runs, the command's own runs (the 200-turn one
twice), PostgreSQL and the answer model are in the slow tier, and tests/test_docs.py checks the docs page's figures.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from session_store import SessionStore
from session_store._eval_script import ScriptedModel, scripted_agent
from session_store._offline import SUMMARY_BUDGET
from session_store.evaluation import (
    DOMAINS,
    Checkpoint,
    Contender,
    ContenderResult,
    FactKind,
    PlantedFact,
    evaluate_retention,
    fact_status,
    make_conversation,
)
from tests.test_cli import cli, fails, ok
from tests.test_retention_defects import drops_corrections, summarizer

SEED = 63
"""A seed whose decision is corrected early (planted on turn 1, corrected on turn 13), so a short run sees it."""
TURNS = 36
TRIGGER, KEEP = 12, 4
"""A compaction every three turns or so: many checkpoints in few turns."""


def _in_context(result: ContenderResult, kind: FactKind | None = None) -> int:
    return result.total(lambda checkpoint: checkpoint.in_context(kind))


async def test_the_extractive_summarizer_keeps_strictly_more_facts_in_context_than_the_window() -> None:
    # Quick: 16 turns, a compaction every one or two, and an address corrected on turn 12 (seed 195).
    report = await evaluate_retention([Contender('test', 8, 3), Contender('window', 8, 3)], turns=16, seed=195)
    extractive, window = report.results
    # Both cut at the same turns (the same trigger and keep on the same conversation), so every checkpoint
    # weighs the same facts.
    assert [c.turn for c in extractive.checkpoints] == [c.turn for c in window.checkpoints]
    assert len(extractive.checkpoints) >= 6
    assert _in_context(extractive) > _in_context(window)
    assert extractive.retention > window.retention
    assert extractive.summaries == len(extractive.checkpoints) and window.summaries == 0
    assert extractive.summarizer_input_tokens > 0 and extractive.last_summary_tokens > 0
    # The summary carries the corrected address once the correction has left the kept tail; the window has neither.
    last = extractive.checkpoints[-1]
    assert [check.status for check in last.checks if check.fact == 'address-1'] == ['corrected']
    # The window keeps only its tail: what it lost is gone from the window, never from the archive.
    last = window.checkpoints[-1]
    assert last.count('lost') > 0
    assert all(check.recallable for check in last.checks if not check.in_context)


@pytest.mark.slow
async def test_what_a_summarizer_drops_the_eval_counts_lost_or_stale() -> None:
    """A summarizer that drops every number scores lower than one that keeps them; one that drops corrections
    keeps the old values, which count as stale, never as kept."""
    contenders = [
        Contender('test', TRIGGER, KEEP),
        Contender(summarizer(lambda text: re.sub(r'\d', '', text), 'no-numbers', SUMMARY_BUDGET), TRIGGER, KEEP),
        Contender(summarizer(drops_corrections, 'no-corrections', SUMMARY_BUDGET), TRIGGER, KEEP),
    ]
    report = await evaluate_retention(contenders, turns=TURNS, seed=SEED)
    kept, dropped, uncorrected = report.results

    assert _in_context(dropped) < _in_context(kept)
    # Every value but a gift-wrap colour holds digits: those kinds lose; the colours are not hurt.
    for kind in ('order', 'address', 'decision', 'tool'):
        assert _in_context(dropped, kind) < _in_context(kept, kind), kind
    assert _in_context(dropped, 'preference') >= _in_context(kept, 'preference')

    (decision,) = [fact for fact in report.facts if fact.kind == 'decision' and fact.corrected_turn is not None]
    assert (decision.turn, decision.corrected_turn) == (1, 13)

    def statuses(result: ContenderResult, since: int = 0, until: int = TURNS) -> set[str]:
        return {
            check.status
            for checkpoint in result.checkpoints
            if since <= checkpoint.turn <= until
            for check in checkpoint.checks
            if check.fact == decision.id
        }

    # Before the correction the old value is the fact, and it is kept.
    assert statuses(kept, until=12) == {'kept'}
    # Once the correction has left the kept tail, the extractive summary still carries it (until its budget drops
    # it, the oldest point first); the summary that drops it holds only the old value (stale), until its budget
    # drops that too (lost): never kept, never corrected.
    assert statuses(kept, since=15, until=32) == {'corrected'}
    assert 'stale' in statuses(uncorrected, since=15) <= {'stale', 'lost'}
    # A stale fact is out of context, and the recall tools find the newer value in the archive.
    stale = [check for c in uncorrected.checkpoints for check in c.checks if check.status == 'stale']
    assert stale and all(not check.in_context and check.recallable for check in stale)


@pytest.mark.slow_on_postgresql
async def test_the_recall_tools_serve_an_agent_outside_the_session_and_store_nothing(
    store_factory: Callable[..., SessionStore],
) -> None:
    """`Session.recall_toolset()`: the probe the eval's recall check is, for any agent run outside the session."""
    conversation = make_conversation(8, 3)
    session = await store_factory().session('probed', processor=Contender('window', 6, 2).processor())
    model = ScriptedModel(conversation)
    agent = scripted_agent(model)
    for turn, step in enumerate(conversation.turns):
        model.start(turn)
        await session.run(agent, step.prompt)
    archived = await session.history()
    fact = conversation.facts[0]
    found: list[str] = []

    def searcher(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [part for part in messages[-1].parts if isinstance(part, ToolReturnPart)]
        if returns:
            found.extend(str(part.content) for part in returns)
            return ModelResponse(parts=[TextPart('done')])
        return ModelResponse(parts=[ToolCallPart('search_history', {'query': fact.cue})])

    probe: Agent[None, str] = Agent(FunctionModel(searcher))
    await probe.run('Look it up.', toolsets=[session.recall_toolset()])
    assert len(found) == 1 and fact.value in found[0]
    assert await session.history() == archived  # the probe's run is not the session's


def test_fact_status_reads_the_latest_value_whole() -> None:
    fact = PlantedFact('address-1', 'address', 'kettle', '46 Mill Lane', 3, 'Where?', 'delivered')
    corrected = PlantedFact(**{**fact.__dict__, 'corrected_value': '9 Elm Road', 'corrected_turn': 10})
    assert fact_status(fact, 'the kettle: deliver to 46  MILL lane, York', 5) == 'kept'
    assert fact_status(fact, 'the kettle: deliver to 146 Mill Lane', 5) == 'lost'  # matched whole, not inside another
    assert fact_status(fact, 'deliver to 46 Mill Lane', 5) == 'lost'  # bound to no item
    assert fact_status(corrected, 'kettle to 46 Mill Lane', 9) == 'kept'  # not corrected yet
    assert fact_status(corrected, 'kettle to 46 Mill Lane', 10) == 'stale'
    assert fact_status(corrected, 'kettle to 46 Mill Lane, then 9 Elm Road', 10) == 'corrected'
    assert fact_status(corrected, 'nothing here', 10) == 'lost'


@pytest.mark.parametrize('domain', ['support', 'coding'])
def test_a_conversation_is_its_seed_and_plants_every_value_once(domain: str) -> None:
    conversation = make_conversation(120, 7, domain)
    assert conversation == make_conversation(120, 7, domain)
    assert conversation != make_conversation(120, 8, domain)
    assert {fact.kind for fact in conversation.facts} == set(DOMAINS[domain].fact_kinds)
    assert any(fact.corrected_turn is not None for fact in conversation.facts)
    for fact in conversation.facts:
        for value, turn in ((fact.value, fact.turn), (fact.corrected_value, fact.corrected_turn)):
            if value is None:
                continue
            said = [n for n, step in enumerate(conversation.turns) if value in repr(step)]
            assert said == [turn], (fact, said)  # found in a window, the value can only mean this fact
        if DOMAINS[domain].kinds[fact.kind].tool is not None:  # the tool's return holds it, and no prompt or reply
            step = conversation.turns[fact.turn]
            assert fact.value not in step.prompt + step.reply and fact.value in step.calls[0].result
    # The other questions: a join asks for two facts of one item, once both are planted; an order question
    # follows its fact's correction; an unanswerable one asks for a kind never given for its item.
    assert {question.kind for question in conversation.questions} == {'join', 'order', 'unanswerable'}
    for question in conversation.questions:
        facts = [conversation.fact(fact_id) for fact_id in question.facts]
        if question.kind == 'join':
            assert len(facts) == 2 and {fact.item for fact in facts} == {question.item}
            assert question.turn == facts[1].turn > facts[0].turn and facts[0].value in question.text
        elif question.kind == 'order':
            (fact,) = facts
            assert question.turn == fact.corrected_turn and fact.item in question.text
        else:
            assert not facts and question.item in question.text
            assert not [f for f in conversation.facts if (f.item, f.kind) == (question.item, question.topic)]


@pytest.mark.slow
async def test_answers_are_checked_against_the_window_the_model_was_given() -> None:
    """An answer model that answers with everything it was sent answers exactly the facts in context; one that
    knows nothing answers none."""

    def parrot(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(repr(messages))])

    def blank(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart('I do not know.')])

    contender = [Contender('test', TRIGGER, KEEP)]
    told = await evaluate_retention(contender, turns=TURNS, seed=SEED, recall=False, answer_model=FunctionModel(parrot))
    (result,) = told.results
    assert told.answered and not told.recall and result.checkpoints
    for checkpoint in result.checkpoints:
        assert [check.answered for check in checkpoint.checks] == [check.in_context for check in checkpoint.checks]
        assert all(check.recallable is None for check in checkpoint.checks)
    none = await evaluate_retention(contender, turns=TURNS, seed=SEED, recall=False, answer_model=FunctionModel(blank))
    (blank_result,) = none.results
    assert blank_result.total(Checkpoint.answered) == 0
    # Knowing nothing is the right answer to an unanswerable question, and only to it; the parrot, which says every
    # value it was sent, answers some of them wrongly.
    for kind, right in (('join', 0), ('unanswerable', blank_result.total(lambda c: c.asked('unanswerable')))):
        assert blank_result.total(lambda c, kind=kind: c.answered_right(kind)) == right, kind  # type: ignore[misc]
    asked = result.total(lambda c: c.asked('unanswerable'))
    assert asked and result.total(lambda c: c.answered_right('unanswerable')) < asked


def test_bad_settings_are_refused_naming_the_parameter() -> None:
    with pytest.raises(ValueError, match=r'keep=12.*trigger \(12\)'):
        Contender('test', trigger=12, keep=12)
    with pytest.raises(ValueError, match=r'\{messages\} placeholder'):
        Contender('test', summary_prompt='Summarize.')
    with pytest.raises(ValueError, match='turns=0'):
        asyncio.run(evaluate_retention([Contender()], turns=0))
    with pytest.raises(ValueError, match='contenders is empty'):
        asyncio.run(evaluate_retention([]))


# The command


@pytest.mark.slow
def test_eval_prints_its_tables_and_json_offline(tmp_path: Path) -> None:
    args = ['eval', '--turns', '12', '--trigger', '8', '--keep', '3', '--seed', str(SEED)]
    text = ok(cli(*args, cwd=tmp_path, env={'COLUMNS': '80'}))  # a terminal's width, as the docs page shows
    # Without --vs-* the summarizer is compared with the sliding window of the same trigger and keep.
    for title in (
        'test summarizer, trigger 8, keep 3:\nquestions the window held after each compaction',
        'sliding window, trigger 8, keep 3:\nevery lookup of a planted fact, by kind',
        f'Support, seed {SEED}, 12 turns, 3 facts',
        'facts per 1k summary tokens',
    ):
        assert title in text, text
    # The titles fit those 80 columns too, as the tables do.
    assert max(len(line) for line in text.splitlines()) <= 80, text
    data = json.loads(ok(cli(*args, '--vs-keep', '5', '--json', cwd=tmp_path)))
    assert [result['contender'] for result in data['results']] == [
        'test summarizer, trigger 8, keep 3',
        'test summarizer, trigger 8, keep 5',
    ]
    assert (data['seed'], data['turns'], len(data['facts'])) == (SEED, 12, 3)
    checks = data['results'][0]['checkpoints'][0]['checks']
    assert checks and set(checks[0]) == {'fact', 'kind', 'status', 'recallable', 'answered'}
    assert set(data['results'][0]['by_question_kind']) == {'lookup', 'join', 'order', 'unanswerable'}
    coding = json.loads(ok(cli(*args, '--domain', 'coding', '--json', cwd=tmp_path)))
    assert coding['domain'] == 'coding' and {fact['kind'] for fact in coding['facts']} <= {
        'file',
        'decision',
        'library',
        'error',
    }
    assert not list(tmp_path.iterdir()), 'the eval leaves no database behind'


def test_eval_refuses_bad_options_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fails(cli('eval', '--trigger', '8', '--keep', '8', cwd=tmp_path), '--keep (8) must be less than --trigger (8)')
    fails(cli('eval', '--vs-keep', '40', cwd=tmp_path), '--vs-keep (40) must be less than --vs-trigger (40)')
    fails(cli('eval', '--vs-keep', '12', cwd=tmp_path), 'the same configuration')
    fails(cli('eval', '--turns', '0', cwd=tmp_path), '--turns must be from 1')
    fails(cli('eval', '--summarizer', 'bogus:thing', cwd=tmp_path), 'Model error', 'bogus:thing')
    fails(cli('eval', '--prompt-file', str(tmp_path / 'none.txt'), cwd=tmp_path), 'Cannot read the prompt file')
    (tmp_path / 'prompt.txt').write_text('Summarize this.')
    fails(cli('eval', '--prompt-file', str(tmp_path / 'prompt.txt'), cwd=tmp_path), '{messages} placeholder')
    monkeypatch.setitem(sys.modules, 'matplotlib', None)  # `import matplotlib` fails, as when not installed
    fails(cli('eval', '--plot', str(tmp_path / 'r.png'), cwd=tmp_path), 'pydantic-ai-session-store[plot]')


@pytest.mark.slow
def test_the_200_turn_eval_runs_offline_and_prints_the_same_figures_twice(tmp_path: Path) -> None:
    args = ['eval', '--summarizer', 'test', '--turns', '200', '--seed', '1', '--plot', 'retention.png']
    first, second = ok(cli(*args, cwd=tmp_path)), ok(cli(*args, cwd=tmp_path))
    assert first == second
    assert 'Support, seed 1, 200 turns, 40 facts' in first
    assert (tmp_path / 'retention.png').read_bytes().startswith(b'\x89PNG\r\n\x1a\n')


@pytest.mark.slow
async def test_the_figures_are_the_store_s_whichever_backend_holds_it(db_url: str) -> None:
    """On the test's SQLite file or PostgreSQL database, the eval gives what it gives in its own temporary store."""
    contenders = [Contender('test', 8, 3), Contender('window', 8, 3)]
    here = await evaluate_retention(contenders, turns=16, seed=7, url=db_url)
    assert here.to_json() == (await evaluate_retention(contenders, turns=16, seed=7)).to_json()
