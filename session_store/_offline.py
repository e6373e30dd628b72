"""The offline models named `test`, which the command line and the browser view share: a chat model and a summarizer.

Neither needs a provider package, a key or a network, and each behaves one way wherever it is named:
`chat --model test` and `serve --chat test` answer with `echo_model` (it quotes the prompt, streamed a
word at a time), and every `--summarizer test` summarizes with `extractive_summarizer`, which makes a real
summary offline: the previous summary's points, then the user's requests and the tool results of the
messages newly folded in, within a budget. So a summary it stores still holds what the conversation was
about, and a window built on it loses nothing a person would look for.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models import Model, infer_model
from pydantic_ai.models.function import AgentInfo, FunctionModel

__all__ = (
    'SUMMARY_BUDGET',
    'TEST_MODEL',
    'echo_model',
    'extractive_summarizer',
    'resolve_model',
    'resolve_summarizer',
)

TEST_MODEL = 'test'
"""The model name that needs no provider, for chat models and summarizers alike."""

SUMMARY_BUDGET = 4_000
"""Characters an extractive summary holds at most (about 1,000 tokens): it rides in every request after it."""
POINT_CHARS = 300
"""Characters one point of an extractive summary keeps of the request or tool result it comes from."""

HEADING = 'The conversation so far (offline extractive summary: what the user asked and what tools returned):'
"""The first line of every extractive summary; the lines after it are its points, oldest first."""

# The blocks `processors.summarization.summarizer_input` puts into the prompt. The previous summary ends where
# the new messages' block opens; the new messages end at the last closing tag (a focus block may follow it).
_PREVIOUS = re.compile(r'<previous_summary>\n(.*?)\n</previous_summary>\n\n<new_messages>\n', re.S)
_NEW = re.compile(r'<new_messages>\n(.*)\n</new_messages>', re.S)
# Where each part of the transcript starts: the speakers `processors.text.speaker` writes, at a line's start.
_SPEAKER = re.compile(
    r'^(User|Tool result \S+(?: \(([a-z-]+)\))?|Tool call \S+|System|Assistant(?: \(thinking\))?'
    r'|Earlier summary|Feedback|Context): ',
    re.M,
)
_LEFT_OUT = re.compile(r'^\((\d+) earlier points? left out')


def _prompt(messages: list[ModelMessage]) -> str:
    """The text of the last user prompt in the last message sent; empty when it has none."""
    prompt = next((part.content for part in reversed(messages[-1].parts) if isinstance(part, UserPromptPart)), None)
    return prompt if isinstance(prompt, str) else ''


def _reply(messages: list[ModelMessage]) -> str:
    return f'(test model, offline) You said: {_prompt(messages) or "nothing I can read"}'


def echo_model(delay: float = 0.02) -> FunctionModel:
    """An offline chat model that answers every prompt by quoting it, streamed a word at a time (`delay` s apart)."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(_reply(messages))])

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        words = _reply(messages).split(' ')
        for index, word in enumerate(words):
            yield word if index == len(words) - 1 else f'{word} '
            await asyncio.sleep(delay)

    return FunctionModel(respond, stream_function=stream, model_name=TEST_MODEL)


def _clip(text: str, limit: int = POINT_CHARS) -> str:
    flat = ' '.join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + '…'


def _new_points(transcript: str) -> list[str]:
    """The user's requests and the tool results in a summarizer transcript, one point each, in order."""
    points = []
    starts = list(_SPEAKER.finditer(transcript))
    for start, after in zip(starts, [*starts[1:], None], strict=True):
        said = transcript[start.end() : None if after is None else after.start()]
        speaker, outcome = start.group(1), start.group(2)
        if speaker == 'User':
            points.append(_clip(f'User asked: {said}'))
        elif speaker.startswith('Tool result'):
            tool, _, result = said.strip().partition(' ')  # a tool result reads `<tool name> <content>`
            points.append(_clip(f'{tool} {"returned" if outcome is None else f"({outcome})"}: {result}'))
    return points


def _summary(prompt: str, budget: int) -> str:
    """The previous summary's points and the new messages' points, the oldest left out first to fit `budget`."""
    previous = _PREVIOUS.search(prompt)
    new = _NEW.search(prompt)
    points: list[str] = []
    left_out = 0
    for line in (previous.group(1) if previous else '').splitlines():
        line = line.strip().removeprefix('- ')
        if line == HEADING or not line:
            continue
        if line.startswith('('):  # a note of this summarizer's own, not a point
            left_out += int(match[1]) if (match := _LEFT_OUT.match(line)) else 0
        else:
            points.append(_clip(line))  # also a summary another summarizer wrote, a line per point
    points += _new_points(new.group(1) if new else '')

    def text() -> str:
        notes = [f'({left_out} earlier points left out to stay within {budget:,} characters)'] if left_out else []
        if not points:
            notes.append('(nothing yet: no user request or tool result in the messages summarized)')
        return '\n'.join([HEADING, *(f'- {line}' for line in [*notes, *points])])

    while len(text()) > budget and points:
        points.pop(0)
        left_out += 1
    return text()


def extractive_summarizer(budget: int = SUMMARY_BUDGET) -> FunctionModel:
    """An offline summarizer that summarizes for real, by extraction, within `budget` characters.

    Given what `SummarizationProcessor` sends (the previous summary and the newly evicted messages), it
    answers with the previous summary's points followed by one point per user request and per tool
    result of the new messages, each clipped to `POINT_CHARS`; when they outgrow `budget`, the oldest
    points go first and a note counts them. A focus asked for is not acted on: it keeps every point alike.
    """

    def summarize(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(_summary(_prompt(messages), budget))])

    return FunctionModel(summarize, model_name=f'{TEST_MODEL}-extractive')


def _named(model: Model | str, offline: Callable[[], Model]) -> Model:
    if isinstance(model, Model):
        return model
    return offline() if model == TEST_MODEL else infer_model(model)


def resolve_model(model: Model | str) -> Model:
    """A chat model: the one given, or one by name (`test` is `echo_model()`, offline).

    Resolving builds the provider, so a missing provider package or API key fails here, before any input.
    """
    return _named(model, echo_model)


def resolve_summarizer(model: Model | str) -> Model:
    """A summarizer: the one given, or one by name (`test` is `extractive_summarizer()`, offline).

    Resolving builds the provider, so a missing provider package or API key fails here, before any input.
    """
    return _named(model, extractive_summarizer)
