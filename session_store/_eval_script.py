"""The retention eval's conversations: long, tool-using chats with planted facts and questions, made from a seed.

A user talks to an assistant about one item after another, in one of the `Domain`s of `_eval_domains` (a
support chat, a coding session). Every few turns the user plants a fact about an item (an order number, a
file, a decision), or asks for something only a tool's return holds; some facts are corrected many turns
later, some items get a second fact (so a question can join the two), and some items are asked about what was
never said of them. Between them, filler turns call tools, as a busy session does. Every value is unique in the
conversation, and no prompt repeats, so a request's oldest prompt tells where its window starts. The
assistant is scripted (a `FunctionModel`), so a run of the eval depends only on the seed and the summarizer
under test.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic_ai import Agent, Tool
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

__all__ = (
    'QUESTION_KINDS',
    'Conversation',
    'Domain',
    'Draw',
    'FactKind',
    'KindSpec',
    'PlantedFact',
    'Question',
    'QuestionKind',
    'ScriptedModel',
    'ScriptedTurn',
    'ToolSpec',
    'ToolStep',
    'make_conversation',
    'scripted_agent',
)

FactKind = str
"""A kind of planted fact, as its domain names it (`order`, `file`, ...)."""

QuestionKind = Literal['lookup', 'join', 'order', 'unanswerable']
QUESTION_KINDS: tuple[QuestionKind, ...] = ('lookup', 'join', 'order', 'unanswerable')
"""The kinds of questions, scored apart: one fact's value; two facts of one item joined; which of a corrected
fact's values is current; and a question about what was never said, which must not be answered."""

PLANT_EVERY = 5
"""Turns from one planted fact to the next; the turns between are filler."""
FIRST_PLANT = 1
"""The turn the first fact is planted on (0-based): the first turn greets."""
JOIN_EVERY = 3
"""Every third planted fact is a second fact about an earlier item, which a `join` question asks for."""
UNANSWERABLE_EVERY = 4
"""Every fourth new item is asked, once planted, about a kind of fact never given for it."""


@dataclass(frozen=True)
class PlantedFact:
    """A fact the user (or a tool) states once, which the assistant should still know many turns later."""

    id: str
    """`<kind>-<n>`, unique in the conversation."""
    kind: FactKind
    item: str
    """What it is about: a value counts only bound to it (`_eval_match`)."""
    value: str
    """The planted value."""
    turn: int
    """The turn that plants it (0-based)."""
    question: str
    """A question whose answer is the value (the latest one, once corrected)."""
    cue: str
    """What the recall probe searches the archive with: the kind's topic, which names no item, so that it
    matches every fact of the kind and the search has to rank."""
    corrected_value: str | None = None
    """The value a later turn corrects it to; `None` when it is never corrected."""
    corrected_turn: int | None = None

    def values_at(self, turn: int) -> tuple[str, str | None]:
        """The value that is right after `turn` (0-based) has run, and the stale one it replaced, if any yet."""
        if self.corrected_value is not None and self.corrected_turn is not None and self.corrected_turn <= turn:
            return self.corrected_value, self.value
        return self.value, None


@dataclass(frozen=True)
class Question:
    """A question beyond one fact's lookup: `join`, `order` or `unanswerable` (`QUESTION_KINDS`)."""

    id: str
    """`<kind>-q<n>` (`join-q1`, ...): never a fact's id."""
    kind: QuestionKind
    text: str
    item: str
    turn: int
    """Asked at every compaction after this turn: once all it needs is planted."""
    facts: tuple[str, ...]
    """The facts it needs: for `join` the one it names and the one it asks for, for `order` the corrected one,
    none for `unanswerable`."""
    topic: FactKind | None = None
    """For `unanswerable`: the kind of fact asked for, never given for the item."""


@dataclass(frozen=True)
class ToolStep:
    """One tool call the scripted assistant makes in a turn, and what the tool returns for it."""

    tool: str
    argument: str
    result: str


@dataclass(frozen=True)
class ScriptedTurn:
    """A user's message, the tool calls the assistant answers it with (in parallel), and its reply."""

    prompt: str
    calls: tuple[ToolStep, ...]
    reply: str


@dataclass(frozen=True)
class ToolSpec:
    """A tool of a domain's assistant: its name, its one string parameter, and what it does."""

    name: str
    parameter: str
    description: str


class Draw:
    """Seeded draws of values that never repeat within one conversation."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        self._used: set[str] = set()

    def fresh(self, make: Callable[[random.Random], str]) -> str:
        """A value `make` draws that no earlier draw gave."""
        while True:
            value = make(self.random)
            if value not in self._used:
                self._used.add(value)
                return value

    def unique(self, template: str, low: int, high: int) -> str:
        """`template` with a number from `low` to `high` in its `{}`, unused so far."""
        return self.fresh(lambda rng: template.format(rng.randint(low, high)))


@dataclass(frozen=True)
class KindSpec:
    """How a kind of fact is planted and asked after; the texts may name `{item}`, `{value}` and the domain's
    `extras`."""

    noun: str
    """What the value is, in questions that join or order facts: `order number`, `file`."""
    question: str
    cue: str
    prompt: str
    reply: str
    value: Callable[[Draw], str]
    tool: tuple[str, str] | None = None
    """For a fact only a tool's return holds: the tool, and its return holding `{value}` (and `{item}`)."""
    correction: str | None = None
    """For a kind a later turn may correct: the message that does, naming `{item}` and the new `{value}`."""


@dataclass(frozen=True)
class Domain:
    """A kind of session the eval can generate."""

    name: str
    system_prompt: str
    thing: str
    """What its items are called in a join question: `item`, `component`."""
    items: tuple[str, ...]
    kinds: dict[FactKind, KindSpec]
    tools: tuple[ToolSpec, ...]
    filler: Callable[[Draw], ScriptedTurn]
    extras: Callable[[Draw], dict[str, str]] = lambda draw: {}
    updated: str = 'Updated: the {item} record now has your change.'
    """The reply to a correction."""

    @property
    def fact_kinds(self) -> tuple[FactKind, ...]:
        return tuple(self.kinds)


@dataclass(frozen=True)
class Conversation:
    """A whole generated conversation: its turns, and the facts and questions they plant."""

    seed: int
    domain: str
    turns: tuple[ScriptedTurn, ...]
    facts: tuple[PlantedFact, ...]
    questions: tuple[Question, ...]
    items: tuple[str, ...]
    """Every item the domain may name: a value bound across another one is not bound (`_eval_match`)."""
    tools: tuple[ToolSpec, ...]
    system_prompt: str
    _turn_of: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        turn_of = {turn.prompt: index for index, turn in enumerate(self.turns)}
        assert len(turn_of) == len(self.turns), 'every prompt of a conversation is unique'
        object.__setattr__(self, '_turn_of', turn_of)

    def fact(self, fact_id: str) -> PlantedFact:
        (fact,) = [fact for fact in self.facts if fact.id == fact_id]
        return fact

    def window_start(self, messages: list[ModelMessage]) -> int:
        """The turn whose prompt is the oldest one `messages` hold; the number of turns when they hold none."""
        turns = [self._turn_of.get(prompt, len(self.turns)) for prompt in _prompts(messages)]
        return min(turns, default=len(self.turns))

    def result(self, turn: int, tool: str, argument: str) -> str:
        """What `tool` returns for `argument` on `turn`: the scripted result, or a refusal for an unplanned call."""
        for step in self.turns[turn].calls:
            if step.tool == tool and step.argument == argument:
                return step.result
        return f'No {tool} record for {argument!r}.'


def _prompts(messages: list[ModelMessage]) -> Iterator[str]:
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                yield part.content


@dataclass
class _Builder:
    """One conversation being generated: its script, facts and questions so far."""

    domain: Domain
    turns: int
    draw: Draw
    script: list[ScriptedTurn | None]
    facts: list[PlantedFact] = field(default_factory=list[PlantedFact])
    questions: list[Question] = field(default_factory=list[Question])
    unasked: set[tuple[str, FactKind]] = field(default_factory=set[tuple[str, FactKind]])
    """The (item, kind) pairs an unanswerable question asks for, never to be planted."""
    kinds: list[FactKind] = field(default_factory=list[FactKind])

    def next_kind(self) -> FactKind:
        if not self.kinds:
            self.kinds = list(self.domain.fact_kinds)
            self.draw.random.shuffle(self.kinds)
        return self.kinds.pop()

    def plant(self, kind: FactKind, item: str, turn: int) -> PlantedFact:
        spec = self.domain.kinds[kind]
        names = {'item': item, 'value': spec.value(self.draw), **self.domain.extras(self.draw)}
        index = sum(fact.kind == kind for fact in self.facts) + 1
        fact = PlantedFact(
            f'{kind}-{index}',
            kind,
            item,
            names['value'],
            turn,
            spec.question.format_map(names),
            spec.cue.format_map(names),
        )
        calls = () if spec.tool is None else (ToolStep(spec.tool[0], item, spec.tool[1].format_map(names)),)
        self.script[turn] = ScriptedTurn(spec.prompt.format_map(names), calls, spec.reply.format_map(names))
        if spec.correction is not None and self.draw.random.random() < 0.5:
            fact = self._correct(fact, spec.correction)
        self.facts.append(fact)
        return fact

    def _correct(self, fact: PlantedFact, correction: str) -> PlantedFact:
        """`fact`, corrected 10 to 40 turns later if the conversation lasts (the message never repeats the old
        value), with the question of which value is current."""
        later = fact.turn + self.draw.random.randint(10, 40)
        while later < self.turns and (self.script[later] is not None or (later - FIRST_PLANT) % PLANT_EVERY == 0):
            later += 1
        if later >= self.turns:
            return fact
        value = self.domain.kinds[fact.kind].value(self.draw)
        names = {'item': fact.item, 'value': value}
        self.script[later] = ScriptedTurn(correction.format_map(names), (), self.domain.updated.format_map(names))
        noun = self.domain.kinds[fact.kind].noun
        text = f'The {noun} of the {fact.item} was changed: which {noun} is the current one?'
        self.questions.append(
            Question(f'order-q{len(self._of("order")) + 1}', 'order', text, fact.item, later, (fact.id,))
        )
        return replace(fact, corrected_value=value, corrected_turn=later)

    def _of(self, kind: QuestionKind) -> list[Question]:
        return [question for question in self.questions if question.kind == kind]

    def given(self, item: str) -> set[FactKind]:
        return {fact.kind for fact in self.facts if fact.item == item}

    def join(self, kind: FactKind, turn: int) -> bool:
        """Plant `kind` about an earlier item that lacks it (named by a value never corrected), with the question
        that joins the two; `False` when no earlier item can take it."""
        named = [
            fact
            for fact in self.facts
            if fact.corrected_turn is None
            and kind not in self.given(fact.item)
            and (fact.item, kind) not in self.unasked
            and fact.turn < turn
        ]
        if not named:
            return False
        earlier = self.draw.random.choice(named)
        fact = self.plant(kind, earlier.item, turn)
        kinds = self.domain.kinds
        text = (
            f'What is the {kinds[kind].noun} of the {self.domain.thing} whose {kinds[earlier.kind].noun} is '
            f'{earlier.value}?'
        )
        self.questions.append(
            Question(f'join-q{len(self._of("join")) + 1}', 'join', text, fact.item, turn, (earlier.id, fact.id))
        )
        return True

    def unanswerable(self, fact: PlantedFact) -> None:
        """Ask about `fact`'s item a kind of fact never given for it, and never to be."""
        kind = self.draw.random.choice([kind for kind in self.domain.fact_kinds if kind not in self.given(fact.item)])
        self.unasked.add((fact.item, kind))
        text = self.domain.kinds[kind].question.format_map({'item': fact.item})
        number = len(self._of('unanswerable')) + 1
        self.questions.append(Question(f'unanswerable-q{number}', 'unanswerable', text, fact.item, fact.turn, (), kind))


def make_conversation(domain: Domain, turns: int, seed: int) -> Conversation:
    """A conversation of `turns` user turns in `domain`, the same for the same seed.

    A fact is planted every `PLANT_EVERY` turns, the kinds in a seeded order. Every `JOIN_EVERY`-th is about an
    earlier item (with a `join` question), the others each about a new item, every `UNANSWERABLE_EVERY`-th of
    which is asked about a kind of fact never given for it. Half of the facts of a kind that can be corrected
    are, 10 to 40 turns later, if the conversation lasts (with an `order` question). Every other turn is filler.
    """
    draw = Draw(seed)
    items = list(domain.items)
    draw.random.shuffle(items)
    build = _Builder(domain, turns, draw, [None] * turns)
    fresh = 0
    for turn in range(FIRST_PLANT, turns, PLANT_EVERY):
        if build.script[turn] is not None:
            continue
        kind = build.next_kind()
        if len(build.facts) % JOIN_EVERY == JOIN_EVERY - 1 and build.join(kind, turn):
            continue
        if fresh == len(items):  # every item has its fact: the rest of a very long chat is filler
            break
        fact = build.plant(kind, items[fresh], turn)
        fresh += 1
        if fresh % UNANSWERABLE_EVERY == 0:
            build.unanswerable(fact)
    done = tuple(step if step is not None else domain.filler(draw) for step in build.script)
    questions = tuple(sorted(build.questions, key=lambda question: (question.turn, question.id)))
    return Conversation(
        seed, domain.name, done, tuple(build.facts), questions, domain.items, domain.tools, domain.system_prompt
    )


@dataclass
class ScriptedModel:
    """The eval's chat model: answers each turn as the conversation scripts it, and records every request.

    Asked with a user's prompt, it makes the turn's tool calls (all at once) if it has any, else replies; asked
    with tool returns, it replies. `requests` holds the messages of each request of the current turn, exactly as
    pydantic-ai sent them: the window the eval checks.
    """

    conversation: Conversation
    turn: int = 0
    requests: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])

    def start(self, turn: int) -> None:
        self.turn = turn
        self.requests = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        step = self.conversation.turns[self.turn]
        answered = any(isinstance(part, ToolReturnPart) for part in messages[-1].parts)
        if answered or not step.calls:
            return ModelResponse(parts=[TextPart(step.reply)])
        parameter = {tool.name: tool.parameter for tool in self.conversation.tools}
        # Numbered afresh in every response, as many OpenAI-compatible servers number calls.
        return ModelResponse(
            parts=[
                ToolCallPart(call.tool, {parameter[call.tool]: call.argument}, tool_call_id=f'call_{index}')
                for index, call in enumerate(step.calls)
            ]
        )


def _tool(model: ScriptedModel, spec: ToolSpec) -> Tool[None]:
    def call(**arguments: Any) -> str:
        return model.conversation.result(model.turn, spec.name, str(arguments.get(spec.parameter, '')))

    schema = {
        'type': 'object',
        'properties': {spec.parameter: {'type': 'string'}},
        'required': [spec.parameter],
        'additionalProperties': False,
    }
    return Tool.from_schema(call, spec.name, spec.description, schema)


def scripted_agent(model: ScriptedModel) -> Agent[None, str]:
    """The assistant the eval runs: the scripted model, its domain's system prompt and tools."""
    conversation = model.conversation
    return Agent(
        FunctionModel(model, model_name=f'retention-eval-{conversation.domain}'),
        system_prompt=conversation.system_prompt,
        tools=[_tool(model, spec) for spec in conversation.tools],
    )
