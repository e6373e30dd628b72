"""The offline demo's conversation: a scripted support agent and a scripted summarizer.

Both models are pydantic-ai `FunctionModel`s, so the demo needs no provider key and no network, and
it is deterministic. The assistant answers every customer turn with two or three parallel tool calls
(order look-ups, shipping status, return policy) and then a reply naming the orders; the summarizer
builds its summary from the previous summary plus the newly evicted transcript, carrying the turn
count and every order's last known status forward, so a summary made after a restart visibly
continues the one before it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from processors import SummarizationProcessor, TiktokenCounter

__all__ = (
    'DEMO_SCOPE',
    'SYSTEM_PROMPT',
    'ScriptedAssistant',
    'ScriptedSummarizer',
    'demo_agent',
    'demo_processor',
    'order_for',
    'prompt_for',
)

DEMO_SCOPE = 'demo'
"""The scope the demo's sessions are stored under (`session-store sessions --scope demo`)."""

SYSTEM_PROMPT = 'You are the support agent of an online shop. Look orders up before answering.'

ORDERS = 60
"""How many distinct orders the customer asks about; each comes up every `ORDERS` turns."""

_ORDER = re.compile(r'ORDER-\d+')
_STATUS_IN_RETURN = re.compile(r'"order_id":\s*"(ORDER-\d+)",\s*"status":\s*"([a-z ]+)"')
_STATUS_IN_SUMMARY = re.compile(r'(ORDER-\d+): ([a-z ]+)')
_PREVIOUS = re.compile(r'<previous_summary>\n(.*?)\n</previous_summary>', re.S)
_NEW = re.compile(r'<new_messages>\n(.*?)\n</new_messages>', re.S)
_SUMMARY_NUMBER = re.compile(r'^Summary (\d+):')
_TURNS_SO_FAR = re.compile(r'(\d+) customer turns so far')

_STATUSES = ('processing', 'shipped', 'in transit', 'out for delivery', 'delivered', 'delayed')
_ITEMS = ('headphones', 'desk lamp', 'coffee grinder', 'rain jacket', 'keyboard', 'backpack', 'kettle')
_CARRIERS = ('UPS', 'DHL', 'FedEx')


def order_for(turn: int, shift: int = 0) -> str:
    """The order a turn asks about: 17 and 60 are coprime, so every order comes up once per 60 turns.

    Turn 6 (and 66, 126, ...) asks about ORDER-1042, the one the demo suggests searching for.
    """
    return f'ORDER-{1000 + (turn * 17 + shift) % ORDERS}'


def prompt_for(turn: int) -> str:
    """The customer's message on `turn` (0-based): one of three kinds of request, each about concrete orders."""
    order = order_for(turn)
    kind = turn % 3
    if kind == 0:
        return f'Hi, where is my order {order}? It was supposed to arrive by now.'
    if kind == 1:
        return f'Can I still return {order}? The item is not what I expected.'
    return f'I also ordered {order_for(turn, 29)}. Will it ship together with {order}?'


def lookup_order(order_id: str) -> dict[str, Any]:
    """What the shop knows about an order: item, price, date placed."""
    n = int(order_id.split('-')[1])
    return {
        'order_id': order_id,
        'item': _ITEMS[n % len(_ITEMS)],
        'price_eur': round(19.5 + (n * 7.3) % 180, 2),
        'placed': f'2025-{1 + n % 12:02d}-{1 + n % 28:02d}',
    }


def shipping_status(order_id: str) -> dict[str, Any]:
    """Where an order is: status, carrier and tracking number."""
    n = int(order_id.split('-')[1])
    return {
        'order_id': order_id,
        'status': _STATUSES[n % len(_STATUSES)],
        'carrier': _CARRIERS[n % len(_CARRIERS)],
        'tracking': f'TRK{n * 7919 % 1_000_000:06d}',
    }


def return_policy(order_id: str) -> dict[str, Any]:
    """Whether an order can still be returned, and how."""
    n = int(order_id.split('-')[1])
    return {'order_id': order_id, 'returnable': n % 4 != 0, 'window_days': 30, 'label': f'RMA-{n}'}


@dataclass
class ScriptedAssistant:
    """The support agent's model: tool calls for each customer message, then a reply built from the results.

    It also measures what it is sent: the tokens of every request's messages, counted with the same
    counter the store uses, so the demo can compare what the model read with what was archived.
    """

    counter: TiktokenCounter
    requests: int = 0
    tokens_sent: int = 0
    peak_request_tokens: int = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent = self.counter(messages)
        self.requests += 1
        self.tokens_sent += sent
        self.peak_request_tokens = max(self.peak_request_tokens, sent)
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        prompt = next((p.content for p in last.parts if isinstance(p, UserPromptPart)), None)
        if isinstance(prompt, str):
            return ModelResponse(parts=self._calls(prompt))
        results = [p.content for p in last.parts if isinstance(p, ToolReturnPart)]
        return ModelResponse(parts=[TextPart(self._answer(results))])

    @staticmethod
    def _calls(prompt: str) -> list[ToolCallPart]:
        orders = _ORDER.findall(prompt)
        if 'return' in prompt:
            names = [('lookup_order', orders[0]), ('return_policy', orders[0])]
        elif len(orders) > 1:
            names = [('shipping_status', orders[0]), ('shipping_status', orders[1]), ('lookup_order', orders[0])]
        else:
            names = [('lookup_order', orders[0]), ('shipping_status', orders[0])]
        return [ToolCallPart(name, {'order_id': order}) for name, order in names]

    @staticmethod
    def _answer(results: list[Any]) -> str:
        lines = []
        for result in results:
            if not isinstance(result, dict):
                continue
            order = result.get('order_id')
            if 'status' in result:
                lines.append(f'{order} is {result["status"]} with {result["carrier"]} (tracking {result["tracking"]}).')
            elif 'returnable' in result:
                verdict = 'can be returned' if result['returnable'] else 'is past its return window'
                lines.append(f'{order} {verdict}; use label {result["label"]}.')
            elif 'item' in result:
                lines.append(f'{order} is the {result["item"]} ({result["price_eur"]} EUR), placed {result["placed"]}.')
        return ' '.join(lines) or 'I could not find that order.'


@dataclass
class ScriptedSummarizer:
    """The summarizer's model: extends the previous summary with what the new transcript says.

    It keeps a running count of customer turns and each order's last known shipping status, so
    `Summary 9: 63 customer turns so far` can only come from a summarizer that read summary 8.
    """

    inputs: list[str] = field(default_factory=list[str])

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        prompt = next(p.content for p in last.parts if isinstance(p, UserPromptPart))
        assert isinstance(prompt, str)
        self.inputs.append(prompt)
        previous_match = _PREVIOUS.search(prompt)
        previous = previous_match.group(1) if previous_match else ''
        new_match = _NEW.search(prompt)
        new = new_match.group(1) if new_match else ''

        number = int(m.group(1)) + 1 if (m := _SUMMARY_NUMBER.search(previous)) else 1
        turns_before = int(m.group(1)) if (m := _TURNS_SO_FAR.search(previous)) else 0
        new_turns = sum(1 for line in new.splitlines() if line.startswith('User:'))
        status = dict(_STATUS_IN_SUMMARY.findall(previous.split('Orders: ', 1)[-1])) if previous else {}
        for order in _ORDER.findall(new):
            status.setdefault(order, 'asked about')
        status.update(_STATUS_IN_RETURN.findall(new))
        orders = '; '.join(f'{order}: {status[order]}' for order in sorted(status))
        text = (
            f'Summary {number}: {turns_before + new_turns} customer turns so far ({new_turns} new). '
            f'The customer keeps asking about deliveries and returns. Orders: {orders}'
        )
        return ModelResponse(parts=[TextPart(text)])

    @property
    def first_previous_summary(self) -> str | None:
        """The previous summary its first call extended, as that call's input held it."""
        previous = _PREVIOUS.search(self.inputs[0]) if self.inputs else None
        return previous.group(1) if previous else None


def demo_processor(summarizer: ScriptedSummarizer, counter: TiktokenCounter) -> SummarizationProcessor:
    """Summarize once the window reaches 40 messages (10 tool-using turns), keeping the last 12 verbatim."""
    return SummarizationProcessor(
        FunctionModel(summarizer, model_name='scripted-summarizer'),
        trigger=('messages', 40),
        keep=('messages', 12),
        token_counter=counter,
    )


def demo_agent(assistant: ScriptedAssistant) -> Agent[None, str]:
    """The support agent: the scripted model and three plain tools it calls in parallel."""
    agent = Agent(FunctionModel(assistant, model_name='scripted-support-agent'), system_prompt=SYSTEM_PROMPT)
    for tool in (lookup_order, shipping_status, return_policy):
        agent.tool_plain(tool)
    return agent
