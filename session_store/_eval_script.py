"""The retention eval's conversations: long, tool-using support chats with planted facts, made from a seed.

A customer talks to a support agent about one item after another. Every few turns the customer plants a
fact about a new item (an order number, a delivery address, a gift-wrap preference, a decision on a
replacement model), or asks for a parcel to be tracked, whose tracking number only the tool's return holds;
some addresses and decisions are corrected many turns later. Between them, filler turns look orders and
policies up with tools, as a busy support chat does. Every value is unique in the conversation, so finding
it in a window means that fact, and no prompt repeats, so a request's oldest prompt tells where its window
starts. The agent is scripted (a `FunctionModel`), so a run of the eval depends only on the seed and the
summarizer under test.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Literal

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

__all__ = (
    'FACT_KINDS',
    'SYSTEM_PROMPT',
    'Conversation',
    'FactKind',
    'PlantedFact',
    'ScriptedSupport',
    'ScriptedTurn',
    'ToolStep',
    'make_conversation',
    'support_agent',
)

FactKind = Literal['order', 'address', 'preference', 'decision', 'tool']
FACT_KINDS: tuple[FactKind, ...] = ('order', 'address', 'preference', 'decision', 'tool')
"""The kinds of planted facts, in the order tables list them; `tool` is a fact only a tool's return holds."""

SYSTEM_PROMPT = (
    'You are the support agent of an online shop. Look orders, parcels and policies up with your tools before '
    'answering, and remember what the customer tells you about their orders.'
)

PLANT_EVERY = 5
"""Turns from one planted fact to the next; the turns between are filler."""
FIRST_PLANT = 1
"""The turn the first fact is planted on (0-based): the first turn greets."""
CORRECTED = ('address', 'decision')
"""The kinds of facts a later turn may correct."""

_ITEMS = (
    'headphones', 'desk lamp', 'coffee grinder', 'rain jacket', 'keyboard', 'backpack', 'kettle', 'office chair',
    'yoga mat', 'blender', 'monitor', 'tent', 'toaster', 'drill', 'camera bag', 'water bottle', 'scarf',
    'bookshelf', 'frying pan', 'smartwatch', 'sleeping bag', 'speaker', 'vacuum cleaner', 'mirror', 'wall clock',
    'hiking boots', 'printer', 'duvet', 'teapot', 'bicycle helmet', 'air purifier', 'rug', 'standing desk',
    'microphone', 'suitcase', 'tripod', 'electric toothbrush', 'board game', 'winter coat', 'plant pot',
    'gaming mouse', 'cutlery set', 'paddle board', 'hair dryer', 'chess set', 'beanbag', 'telescope', 'ukulele',
)  # fmt: skip
_STREETS = ('Willow Court', 'Elm Road', 'Harbour Street', 'Mill Lane', 'Station Road', 'Orchard Way', 'Kings Avenue')
_CITIES = ('Leeds', 'York', 'Bristol', 'Glasgow', 'Cardiff', 'Norwich', 'Brighton', 'Belfast')
_COLOURS = (
    'teal', 'crimson', 'mustard', 'lilac', 'charcoal', 'coral', 'olive', 'navy', 'ivory', 'plum', 'saffron',
    'turquoise', 'burgundy', 'mint', 'amber', 'indigo', 'peach', 'cobalt', 'sage', 'magenta',
)  # fmt: skip
_POLICIES = ('returns', 'exchanges', 'late deliveries', 'damaged parcels', 'gift cards', 'price matching')
_STATUSES = ('processing', 'packed', 'shipped', 'in transit', 'out for delivery', 'delivered')
_WAREHOUSES = ('Manchester', 'Coventry', 'Rotterdam', 'Dublin')


@dataclass(frozen=True)
class PlantedFact:
    """A fact the customer (or a tool) states once, which the agent should still know many turns later."""

    id: str
    """`<kind>-<n>`, unique in the conversation."""
    kind: FactKind
    item: str
    """What it is about: each fact has an item of its own."""
    value: str
    """The planted value, found by exact (case- and space-insensitive) match."""
    turn: int
    """The turn that plants it (0-based)."""
    question: str
    """A question whose answer is the value (the latest one, once corrected)."""
    cue: str
    """The words an agent would search the archive with for it: its item and topic, never its value."""
    corrected_value: str | None = None
    """The value a later turn corrects it to; `None` when it is never corrected."""
    corrected_turn: int | None = None

    def values_at(self, turn: int) -> tuple[str, str | None]:
        """The value that is right after `turn` (0-based) has run, and the stale one it replaced, if any yet."""
        if self.corrected_value is not None and self.corrected_turn is not None and self.corrected_turn <= turn:
            return self.corrected_value, self.value
        return self.value, None


@dataclass(frozen=True)
class ToolStep:
    """One tool call the scripted agent makes in a turn, and what the tool returns for it."""

    tool: str
    argument: str
    result: str


@dataclass(frozen=True)
class ScriptedTurn:
    """A customer's message, the tool calls the agent answers it with (in parallel), and the agent's reply."""

    prompt: str
    calls: tuple[ToolStep, ...]
    reply: str


@dataclass(frozen=True)
class Conversation:
    """A whole generated conversation: its turns, and the facts they plant."""

    seed: int
    turns: tuple[ScriptedTurn, ...]
    facts: tuple[PlantedFact, ...]
    _turn_of: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        turn_of = {turn.prompt: index for index, turn in enumerate(self.turns)}
        assert len(turn_of) == len(self.turns), 'every prompt of a conversation is unique'
        object.__setattr__(self, '_turn_of', turn_of)

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


class _Draw:
    """Seeded draws of values that never repeat within one conversation."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        self._used: set[str] = set()

    def unique(self, make: str, low: int, high: int) -> str:
        while True:
            value = make.format(self.random.randint(low, high))
            if value not in self._used:
                self._used.add(value)
                return value

    def address(self) -> str:
        while True:
            value = f'{self.random.randint(2, 198)} {self.random.choice(_STREETS)}'
            if value not in self._used:
                self._used.add(value)
                return value


@dataclass(frozen=True)
class _Template:
    """How a kind of fact is planted: the customer's message, the agent's reply, and how it is asked after.

    Each may name `{item}`, `{value}`, `{city}` and `{warehouse}`."""

    question: str
    cue: str
    prompt: str
    reply: str
    tool_result: str | None = None
    """A `track_parcel` return that holds the value, for the fact only a tool's return holds."""


_TEMPLATES: dict[FactKind, _Template] = {
    'order': _Template(
        'What is the order number of my {item}?',
        '{item} order number',
        'The order number for my {item} is {value}; please keep it on file for later.',
        'Noted: your {item} order is on file.',
    ),
    'address': _Template(
        'Which street address should the {item} be delivered to?',
        '{item} delivered',
        'Please have the {item} delivered to {value}, {city}.',
        'Understood, the {item} will be delivered to the address you gave.',
    ),
    'preference': _Template(
        'Which colour of gift wrap did I ask for the {item}?',
        '{item} gift wrap colour',
        'The {item} is a present: gift wrap colour {value}, please, with no invoice in the box.',
        'Of course, the {item} will be gift wrapped as you asked.',
    ),
    'decision': _Template(
        'Which replacement model did we decide on for the {item}?',
        '{item} replacement model decided',
        'Decided: instead of a refund for the {item}, send me the replacement model {value}.',
        'Agreed, a replacement for the {item} is on its way once the return arrives.',
    ),
    'tool': _Template(
        'What is the tracking number of the {item} parcel?',
        '{item} parcel tracking number',
        'Could you track the parcel with my {item}?',
        'I have checked: the parcel with your {item} is in transit and due in two days.',
        'Parcel with the {item}: tracking number {value}, left {warehouse}, in transit, due in two days.',
    ),
}


def _value(kind: FactKind, draw: _Draw, colour: str) -> str:
    if kind == 'order':
        return draw.unique('ORD-{}', 40000, 89999)
    if kind == 'address':
        return draw.address()
    if kind == 'decision':
        return draw.unique('KX-{}', 100, 999)
    return colour if kind == 'preference' else draw.unique('TRK{}', 1000000, 9999999)


def _plant(
    kind: FactKind, index: int, item: str, turn: int, draw: _Draw, colour: str
) -> tuple[PlantedFact, ScriptedTurn]:
    """The `index`-th fact of `kind`, about `item`, and the turn that plants it."""
    template = _TEMPLATES[kind]
    names = {
        'item': item,
        'value': _value(kind, draw, colour),
        'city': draw.random.choice(_CITIES),
        'warehouse': draw.random.choice(_WAREHOUSES),
    }
    fact = PlantedFact(
        f'{kind}-{index}',
        kind,
        item,
        names['value'],
        turn,
        template.question.format_map(names),
        template.cue.format_map(names),
    )
    calls = (
        ()
        if template.tool_result is None
        else (ToolStep('track_parcel', item, template.tool_result.format_map(names)),)
    )
    return fact, ScriptedTurn(template.prompt.format_map(names), calls, template.reply.format_map(names))


def _correct(fact: PlantedFact, draw: _Draw) -> tuple[str, str]:
    """A new value for `fact`, and the customer's message that corrects it (which never repeats the old value)."""
    if fact.kind == 'address':
        value = draw.address()
        return value, f'Correction for the {fact.item}: I have moved, please have it delivered to {value} instead.'
    value = draw.unique('KX-{}', 100, 999)
    return value, f'Change of plan for the {fact.item}: we decided on the replacement model {value} after all.'


def _filler(turn: int, draw: _Draw) -> ScriptedTurn:
    order = draw.unique('ORD-{}', 10000, 39999)
    choice = draw.random.randrange(3)
    if choice == 0:
        status = draw.random.choice(_STATUSES)
        warehouse = draw.random.choice(_WAREHOUSES)
        result = (
            f'{{"order_id": "{order}", "status": "{status}", "warehouse": "{warehouse}", "lines": '
            f'{draw.random.randint(1, 4)}, "paid": true, "notes": "standard shipping, signature not required"}}'
        )
        return ScriptedTurn(
            f'Hi again, what is the status of order {order}?',
            (ToolStep('order_status', order, result),),
            f'Order {order} is {status}, shipping from {warehouse}.',
        )
    if choice == 1:
        policy = draw.random.choice(_POLICIES)
        days = draw.random.choice((14, 30, 60))
        result = (
            f'Policy on {policy}: customers may ask within {days} days of delivery; keep the packaging; '
            'refunds go to the original payment method within five working days; exceptions need a manager.'
        )
        return ScriptedTurn(
            f'About order {order}: what is your policy on {policy}?',
            (ToolStep('policy', policy, result),),
            f'For {policy} you have {days} days from delivery, and refunds take about five working days.',
        )
    return ScriptedTurn(
        f'Thanks. Please also add a note to order {order} that the doorbell is broken.',
        (),
        f'Done: order {order} now carries your note for the courier.',
    )


def make_conversation(turns: int, seed: int) -> Conversation:
    """A support conversation of `turns` customer turns, the same for the same seed.

    A fact is planted every `PLANT_EVERY` turns (the kinds in a seeded order, each fact about an item of its
    own), half of the addresses and decisions are corrected 10 to 40 turns later (if the conversation lasts),
    and every other turn is filler.
    """
    draw = _Draw(seed)
    items = list(_ITEMS)
    colours = list(_COLOURS)
    draw.random.shuffle(items)
    draw.random.shuffle(colours)
    kinds: list[FactKind] = []
    script: list[ScriptedTurn | None] = [None] * turns
    facts: list[PlantedFact] = []
    corrections: set[int] = set()  # the turns that correct a fact
    for turn in range(FIRST_PLANT, turns, PLANT_EVERY):
        if len(facts) == len(items):  # every item has its fact: the rest of a very long chat is filler
            break
        if script[turn] is not None:
            continue
        if not kinds:
            kinds = list(FACT_KINDS)
            draw.random.shuffle(kinds)
        kind = kinds.pop()
        index = sum(fact.kind == kind for fact in facts) + 1
        fact, step = _plant(kind, index, items[len(facts)], turn, draw, colours[len(facts) % len(colours)])
        script[turn] = step
        if kind in CORRECTED and draw.random.random() < 0.5:
            later = turn + draw.random.randint(10, 40)
            while later < turns and (later in corrections or (later - FIRST_PLANT) % PLANT_EVERY == 0):
                later += 1
            if later < turns:
                value, prompt = _correct(fact, draw)
                fact = replace(fact, corrected_value=value, corrected_turn=later)
                corrections.add(later)
                script[later] = ScriptedTurn(prompt, (), f'Updated: the {fact.item} record now has your change.')
        facts.append(fact)
    done = tuple(step if step is not None else _filler(turn, draw) for turn, step in enumerate(script))
    return Conversation(seed, done, tuple(facts))


@dataclass
class ScriptedSupport:
    """The eval's chat model: answers each turn as the conversation scripts it, and records every request.

    Asked with a customer's prompt, it makes the turn's tool calls (all at once) if it has any, else replies;
    asked with tool returns, it replies. `requests` holds the messages of each request of the current turn,
    exactly as pydantic-ai sent them: the window the eval checks.
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
        # Numbered afresh in every response, as many OpenAI-compatible servers number calls.
        return ModelResponse(
            parts=[
                ToolCallPart(call.tool, {_ARGUMENT[call.tool]: call.argument}, tool_call_id=f'call_{index}')
                for index, call in enumerate(step.calls)
            ]
        )


_ARGUMENT = {'order_status': 'order_id', 'policy': 'topic', 'track_parcel': 'item'}
"""Each tool's one parameter."""


def support_agent(model: ScriptedSupport) -> Agent[None, str]:
    """The support agent the eval runs: the scripted model, the system prompt and the three tools it calls."""
    agent = Agent(FunctionModel(model, model_name='retention-eval-support'), system_prompt=SYSTEM_PROMPT)

    @agent.tool_plain
    def order_status(order_id: str) -> str:
        """The status of an order."""
        return model.conversation.result(model.turn, 'order_status', order_id)

    @agent.tool_plain
    def policy(topic: str) -> str:
        """The shop's policy on a topic."""
        return model.conversation.result(model.turn, 'policy', topic)

    @agent.tool_plain
    def track_parcel(item: str) -> str:
        """Where the parcel holding an item is."""
        return model.conversation.result(model.turn, 'track_parcel', item)

    return agent
