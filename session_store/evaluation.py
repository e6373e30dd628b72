"""The retention eval: how much of a long conversation a summarizer keeps, measured through a real `Session`.

`evaluate_retention` generates a long, tool-using conversation with planted facts and questions, in one of two
domains (a support chat or a coding session, deterministic from a seed: see `_eval_script` and
`_eval_domains`), runs it turn by turn through a `Session` on a real store for each `Contender` (a summarizer
with its trigger, keep and prompt, or the sliding window), and after every compaction asks, on the window the
request after it really sent (the chat model records what pydantic-ai sends it, so never one re-derived):

- **lookup**, of every fact planted before it: is the fact's value (its latest one, once corrected) in context,
  bound to its item (`_eval_match`: in a sentence that names the item, normalized)? A corrected fact whose
  window holds only the old value is *stale*, not kept.
- **join**, **order** and **unanswerable** questions, scored apart (`_eval_checks`): two facts of one item
  joined, which value of a corrected fact is current, and a question about what was never said, whose answer
  the window must not seem to hold.
- **recallable**: for a fact not in context, do the recall tools (`search_history`, searched with the fact's
  topic, which names no item and matches every fact of its kind) return its value bound to its item?
- **budget**: how many facts the summary itself holds, per 1,000 of its tokens.
- **answered** (with an `answer_model`): asked each question on the window the next run starts from, is the
  model's answer right (normalized match; no judge model)?
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

from processors import SlidingWindowProcessor, SummarizationProcessor, summary_text
from processors.specs import ContextMessages
from processors.summarization import DEFAULT_SUMMARY_PROMPT
from processors.summary import find_summary
from processors.text import part_text

from ._display import tiktoken_counter
from ._eval_checks import IN_CONTEXT, FactStatus, answer_right, fact_status, question_held
from ._eval_domains import DOMAINS
from ._eval_match import Reading, holds
from ._eval_plot import Series, draw
from ._eval_script import (
    QUESTION_KINDS,
    Conversation,
    FactKind,
    PlantedFact,
    Question,
    QuestionKind,
    ScriptedModel,
    scripted_agent,
)
from ._eval_script import make_conversation as _make
from ._history.windows import WindowProcessor
from ._ids import new_token
from ._offline import TEST_MODEL, resolve_model, resolve_summarizer
from .session import Session
from .store import SessionStore

__all__ = (
    'DOMAINS',
    'QUESTION_KINDS',
    'SLIDING_WINDOW',
    'Checkpoint',
    'Contender',
    'ContenderResult',
    'FactCheck',
    'FactKind',
    'FactStatus',
    'PlantedFact',
    'Question',
    'QuestionCheck',
    'QuestionKind',
    'RetentionReport',
    'evaluate_retention',
    'fact_status',
    'holds',
    'make_conversation',
    'plot_retention',
)

SLIDING_WINDOW = 'window'
"""The `summarizer` of a `Contender` that summarizes nothing: the sliding window, the baseline to beat."""

MAX_TURNS = 10_000
"""The longest conversation the eval generates."""


def make_conversation(turns: int, seed: int, domain: str = 'support') -> Conversation:
    """The conversation the eval runs: `turns` user turns in `domain` (`support` or `coding`), made from `seed`."""
    return _make(DOMAINS[domain], turns, seed)


@dataclass(frozen=True)
class Contender:
    """One configuration under test: a summarizer (or the sliding window) with its trigger, keep and prompt.

    Args:
        summarizer: Any pydantic-ai model or model name; `test` is the offline extractive summarizer, and
            `SLIDING_WINDOW` (`window`) summarizes nothing.
        trigger: Compact once the window reaches this many messages.
        keep: Messages kept verbatim at each compaction; less than `trigger`.
        summary_prompt: The summarizer's prompt, with `{messages}` where the previous summary and the new
            messages go.
        label: How tables and plots name it; made from the settings when not given.
    """

    summarizer: Model | str = TEST_MODEL
    trigger: int = 40
    keep: int = 12
    summary_prompt: str = DEFAULT_SUMMARY_PROMPT
    label: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.trigger, bool) or not isinstance(self.trigger, int) or self.trigger < 2:
            raise ValueError(f'Contender(trigger={self.trigger!r}): give a whole number of messages, at least 2.')
        if isinstance(self.keep, bool) or not isinstance(self.keep, int) or not 1 <= self.keep < self.trigger:
            raise ValueError(
                f'Contender(keep={self.keep!r}): give a whole number of messages from 1 to one less than the '
                f'trigger ({self.trigger}): the window is compacted at the trigger, down to the newest keep.'
            )
        if '{messages}' not in self.summary_prompt:
            raise ValueError(
                'Contender(summary_prompt=...): the prompt needs a {messages} placeholder, where the previous '
                'summary and the new messages go.'
            )

    @property
    def name(self) -> str:
        """Its label, or what it is: `test summarizer, trigger 40, keep 12`, `sliding window, ...`."""
        if self.label is not None:
            return self.label
        if self.summarizer == SLIDING_WINDOW:
            what = 'sliding window'
        elif isinstance(self.summarizer, Model):
            what = f'{self.summarizer.model_name} summarizer'
        else:
            what = f'{self.summarizer} summarizer'
        custom = '' if self.summary_prompt == DEFAULT_SUMMARY_PROMPT else ', own prompt'
        return f'{what}, trigger {self.trigger}, keep {self.keep}{custom}'

    def processor(self) -> WindowProcessor:
        """The processor a session under test compresses with; resolving a model name builds its provider."""
        trigger: ContextMessages = ('messages', self.trigger)
        keep: ContextMessages = ('messages', self.keep)
        if self.summarizer == SLIDING_WINDOW:
            return SlidingWindowProcessor(trigger=trigger, keep=keep, token_counter=tiktoken_counter())
        return SummarizationProcessor(
            resolve_summarizer(self.summarizer),
            trigger=trigger,
            keep=keep,
            summary_prompt=self.summary_prompt,
            token_counter=tiktoken_counter(),
        )


@dataclass(frozen=True)
class FactCheck:
    """One planted fact's lookup at one checkpoint."""

    fact: str
    """The fact's id (`order-1`, ...)."""
    kind: FactKind
    status: FactStatus
    recallable: bool | None
    """For a fact not in context: whether the recall tools found its value; `None` when in context or not asked."""
    answered: bool | None = None
    """Whether the answer model's answer held its value; `None` without an answer model."""

    @property
    def in_context(self) -> bool:
        return self.status in IN_CONTEXT


@dataclass(frozen=True)
class QuestionCheck:
    """One `join`, `order` or `unanswerable` question at one checkpoint."""

    question: str
    """The question's id (`join-q1`, ...)."""
    kind: QuestionKind
    held: bool
    """Whether the window holds what it needs (for `unanswerable`: no answer to make up)."""
    answered: bool | None = None
    """Whether the answer model answered it rightly; `None` without an answer model."""


@dataclass(frozen=True)
class Checkpoint:
    """The window right after one compaction, and what it held of the facts and questions planted before it."""

    compaction: int
    """Which compaction, from 1."""
    turn: int
    """The turn (0-based) whose request was the first sent after it."""
    window_messages: int
    """How many messages that request held."""
    checks: tuple[FactCheck, ...]
    questions: tuple[QuestionCheck, ...] = ()
    summary_tokens: int = 0
    """The summary's tokens in that request (0 for the sliding window)."""
    in_summary: int = 0
    """The facts whose current value the summary itself holds, bound to their item."""

    def count(self, status: FactStatus, kind: FactKind | None = None) -> int:
        return sum(c.status == status and kind in (None, c.kind) for c in self.checks)

    def planted(self, kind: FactKind | None = None) -> int:
        return sum(kind in (None, c.kind) for c in self.checks)

    def in_context(self, kind: FactKind | None = None) -> int:
        return sum(c.in_context and kind in (None, c.kind) for c in self.checks)

    def recallable(self, kind: FactKind | None = None) -> int:
        return sum(bool(c.recallable) and kind in (None, c.kind) for c in self.checks)

    def answered(self, kind: FactKind | None = None) -> int:
        return sum(bool(c.answered) and kind in (None, c.kind) for c in self.checks)

    def asked(self, kind: QuestionKind) -> int:
        """The questions of `kind` asked here (a lookup per planted fact)."""
        return self.planted() if kind == 'lookup' else sum(q.kind == kind for q in self.questions)

    def held(self, kind: QuestionKind) -> int:
        """The questions of `kind` whose needs the window holds (a lookup's: its fact in context)."""
        return self.in_context() if kind == 'lookup' else sum(q.held and q.kind == kind for q in self.questions)

    def answered_right(self, kind: QuestionKind) -> int:
        """The questions of `kind` the answer model answered rightly."""
        if kind == 'lookup':
            return self.answered()
        return sum(bool(q.answered) and q.kind == kind for q in self.questions)


@dataclass(frozen=True)
class ContenderResult:
    """What one contender kept over the whole conversation."""

    contender: str
    """The contender's name."""
    checkpoints: tuple[Checkpoint, ...]
    summaries: int
    """Summaries stored (none for the sliding window)."""
    summarizer_input_tokens: int
    """What every summarizer call read, as its usage reports it."""
    summarizer_output_tokens: int
    last_summary_tokens: int
    """The tokens the latest summary adds to every request after it."""

    def total(self, measure: Callable[[Checkpoint], int]) -> int:
        """`measure` summed over every checkpoint, e.g. `result.total(Checkpoint.in_context)`."""
        return sum(measure(checkpoint) for checkpoint in self.checkpoints)

    def share(self, kind: QuestionKind) -> float | None:
        """The share of the questions of `kind` whose needs the window held, over all checkpoints (0 to 1);
        `None` when none was asked."""
        asked = self.total(lambda checkpoint: checkpoint.asked(kind))
        return self.total(lambda checkpoint: checkpoint.held(kind)) / asked if asked else None

    @property
    def retention(self) -> float:
        """The share of lookups that found their fact in context, over all checkpoints (0 to 1)."""
        return self.share('lookup') or 0.0

    @property
    def per_thousand(self) -> float | None:
        """Facts the summaries held per 1,000 summary tokens, over all checkpoints: the budget they kept them in;
        `None` without a summary."""
        tokens = self.total(lambda checkpoint: checkpoint.summary_tokens)
        return 1000 * self.total(lambda checkpoint: checkpoint.in_summary) / tokens if tokens else None


@dataclass(frozen=True)
class RetentionReport:
    """A whole eval run: the conversation's settings, its facts and questions, and each contender's result."""

    seed: int
    turns: int
    facts: tuple[PlantedFact, ...]
    results: tuple[ContenderResult, ...]
    answered: bool
    """Whether an answer model was asked the questions."""
    recall: bool
    """Whether the recall tools were tried on the facts not in context."""
    domain: str = 'support'
    questions: tuple[Question, ...] = ()

    @property
    def fact_kinds(self) -> tuple[FactKind, ...]:
        """The domain's kinds of fact, in the order tables list them."""
        return DOMAINS[self.domain].fact_kinds

    def to_json(self) -> dict[str, Any]:
        """The report as plain JSON values, for scripts."""
        data = asdict(self)
        for result, shown in zip(self.results, data['results'], strict=True):
            shown['retention'] = result.retention
            shown['per_thousand_summary_tokens'] = result.per_thousand
            shown['by_question_kind'] = {kind: result.share(kind) for kind in QUESTION_KINDS}
        return data


def window_text(messages: Sequence[ModelMessage]) -> str:
    """Everything a model reads in `messages`: prompts, replies, tool calls and returns, and summaries."""
    return '\n'.join(part_text(part)[0] for message in messages for part in message.parts)


Progress = Callable[[str, int, int], None]
"""Called after each turn with the contender's name, the turns done and the turns in all."""


async def evaluate_retention(
    contenders: Sequence[Contender],
    *,
    turns: int = 200,
    seed: int = 1,
    domain: str = 'support',
    recall: bool = True,
    answer_model: Model | str | None = None,
    url: str | None = None,
    on_turn: Progress | None = None,
) -> RetentionReport:
    """Run the same seeded conversation through a session for each contender, and check its facts and questions.

    Args:
        contenders: The configurations to compare, side by side on the same conversation.
        turns: User turns in the conversation, 1 to `MAX_TURNS`.
        seed: The conversation's seed: the same seed makes the same conversation and the same figures.
        domain: `support` (a shop's support chat) or `coding` (a coding assistant's session).
        recall: Try the recall tools on every fact not in context.
        answer_model: Ask this model every question after every compaction (one request per question per
            compaction, so a provider bills them), and check its answer.
        url: The store to run in; by default a temporary SQLite file, removed afterwards. Each run makes
            sessions of its own, so an existing store keeps what it holds.
        on_turn: Called after every turn, for a progress bar.
    """
    if not contenders:
        raise ValueError('contenders is empty: give at least one Contender to evaluate.')
    if isinstance(turns, bool) or not isinstance(turns, int) or not 1 <= turns <= MAX_TURNS:
        raise ValueError(f'turns={turns!r}: give a whole number of turns from 1 to {MAX_TURNS:,}.')
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f'seed={seed!r}: give a whole number.')
    if domain not in DOMAINS:
        raise ValueError(f'domain={domain!r}: give one of {", ".join(DOMAINS)}.')
    # Resolved up front, so a missing provider package or key fails before any conversation runs.
    processors = [contender.processor() for contender in contenders]
    answerer = None if answer_model is None else resolve_model(answer_model)
    conversation = make_conversation(turns, seed, domain)
    with tempfile.TemporaryDirectory(prefix='session-store-eval-') as folder:
        async with SessionStore(url or f'sqlite+aiosqlite:///{Path(folder) / "eval.db"}') as store:
            results = []
            for contender, processor in zip(contenders, processors, strict=True):
                session = await store.session(f'retention-eval-{seed}-{new_token()}', processor=processor)
                runner = _Runner(conversation, session, contender.name, recall, answerer, on_turn)
                results.append(await runner.run())
    return RetentionReport(
        seed,
        turns,
        conversation.facts,
        tuple(results),
        answerer is not None,
        recall,
        domain,
        conversation.questions,
    )


@dataclass
class _Searcher:
    """The recall probe's model: one `search_history` call per fact (its kind's topic: never its item or value),
    all in one response; then it keeps what each search returned."""

    facts: list[PlantedFact] = field(default_factory=list[PlantedFact])
    found: dict[str, str] = field(default_factory=dict[str, str])
    """What the search for each fact returned, by the fact's id."""

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        answered = [part for part in messages[-1].parts if isinstance(part, ToolReturnPart)]
        if answered:
            self.found.update({part.tool_call_id: str(part.content) for part in answered})
            return ModelResponse(parts=[TextPart('searched')])
        calls = [ToolCallPart('search_history', {'query': fact.cue}, tool_call_id=fact.id) for fact in self.facts]
        return ModelResponse(parts=calls)


@dataclass
class _Runner:
    """One contender's pass through the conversation."""

    conversation: Conversation
    session: Session
    name: str
    recall: bool
    answerer: Model | None
    on_turn: Progress | None
    checkpoints: list[Checkpoint] = field(default_factory=list[Checkpoint])
    searcher: _Searcher = field(default_factory=_Searcher)
    recaller: Agent[None, str] = field(init=False)

    def __post_init__(self) -> None:
        self.recaller = Agent(FunctionModel(self.searcher, model_name='retention-eval-recall'))

    async def run(self) -> ContenderResult:
        model = ScriptedModel(self.conversation)
        agent = scripted_agent(model)
        turns = self.conversation.turns
        start = 0
        for turn, step in enumerate(turns):
            model.start(turn)
            await self.session.run(agent, step.prompt)
            for request in model.requests:
                # The window's oldest prompt moved on: this request is the first sent after a compaction.
                if (opened := self.conversation.window_start(request)) > start:
                    start = opened
                    await self._check(turn, request)
            if self.on_turn is not None:
                self.on_turn(self.name, turn + 1, len(turns))
        chain = await self.session.summaries()
        return ContenderResult(
            self.name,
            tuple(self.checkpoints),
            len(chain),
            sum(summary.usage.input_tokens for summary in chain),
            sum(summary.usage.output_tokens for summary in chain),
            chain[-1].tokens if chain else 0,
        )

    async def _check(self, turn: int, request: list[ModelMessage]) -> None:
        conversation = self.conversation
        reading = Reading(window_text(request), conversation.items)
        planted = [fact for fact in conversation.facts if fact.turn < turn]
        asked = [question for question in conversation.questions if question.turn < turn]
        statuses = [fact_status(fact, reading, turn) for fact in planted]
        missing = [fact for fact, status in zip(planted, statuses, strict=True) if status not in IN_CONTEXT]
        found = await self._recall(missing, turn) if self.recall else {}
        answers = await self._answers([*planted, *asked], turn) if self.answerer is not None else {}
        checks = tuple(
            FactCheck(fact.id, fact.kind, status, found.get(fact.id), answers.get(fact.id))
            for fact, status in zip(planted, statuses, strict=True)
        )
        questions = tuple(
            QuestionCheck(q.id, q.kind, question_held(conversation, q, reading, turn), answers.get(q.id)) for q in asked
        )
        at = find_summary(request)
        summary = (summary_text(request[at]) or '') if at is not None else ''
        summary_reading = Reading(summary, conversation.items)
        in_summary = sum(summary_reading.bound(fact.item, fact.values_at(turn)[0]) != [] for fact in planted)
        tokens = tiktoken_counter().count_text(summary) if summary else 0
        self.checkpoints.append(
            Checkpoint(len(self.checkpoints) + 1, turn, len(request), checks, questions, tokens, in_summary)
        )

    async def _recall(self, facts: list[PlantedFact], turn: int) -> dict[str, bool]:
        """Search the archive for each fact with the session's own recall tools, as an agent would (`_Searcher`), in
        a run outside the session: nothing of it is stored. Found means its value bound to its item."""
        if not facts:
            return {}
        self.searcher.facts, self.searcher.found = facts, {}
        await self.recaller.run('Look these facts up in the archive.', toolsets=[self.session.recall_toolset()])
        items = self.conversation.items

        def found(fact: PlantedFact) -> bool:
            reading = Reading(self.searcher.found.get(fact.id, ''), items)
            return bool(reading.bound(fact.item, fact.values_at(turn)[0]))

        return {fact.id: found(fact) for fact in facts}

    async def _answers(self, questions: list[PlantedFact | Question], turn: int) -> dict[str, bool]:
        """Ask the answer model each question (a fact's for its lookup) on the window the next run starts from
        (never stored)."""
        assert self.answerer is not None
        agent: Agent[None, str] = Agent(self.answerer)
        window = await self.session.context()
        limit = asyncio.Semaphore(4)

        async def ask(question: PlantedFact | Question) -> bool:
            text = question.question if isinstance(question, PlantedFact) else question.text
            async with limit:
                result = await agent.run(
                    f'{text} Answer with the value only, or say that you do not know.', message_history=list(window)
                )
            return answer_right(self.conversation, question, str(result.output), turn)

        found = await asyncio.gather(*(ask(question) for question in questions))
        return {question.id: answer for question, answer in zip(questions, found, strict=True)}


def plot_retention(report: RetentionReport, path: str | Path) -> Path:
    """Draw `report` as a PNG at `path`: per contender, after each compaction, the share of planted facts in
    context (solid) and in context or recallable (dashed), and the facts its summary held per 1,000 summary
    tokens, against the turn.

    Raises:
        ImportError: matplotlib is not installed; the message says which extra installs it.
    """

    def share(count: int, checkpoint: Checkpoint) -> float:
        return count / checkpoint.planted() if checkpoint.planted() else 0.0

    def density(checkpoint: Checkpoint) -> float | None:
        tokens = checkpoint.summary_tokens
        return 1000 * checkpoint.in_summary / tokens if tokens else None

    series = [
        Series(
            result.contender,
            [checkpoint.turn for checkpoint in result.checkpoints],
            [share(checkpoint.in_context(), checkpoint) for checkpoint in result.checkpoints],
            [share(c.in_context() + c.recallable(), c) for c in result.checkpoints] if report.recall else None,
            [density(checkpoint) for checkpoint in result.checkpoints],
        )
        for result in report.results
    ]
    title = f'{report.domain} domain, seed {report.seed}, {report.turns} turns'
    return draw(series, title, path)
