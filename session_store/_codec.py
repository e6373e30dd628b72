"""Stored values to and from Python: messages exactly as pydantic-ai serializes them, usage, and UTC times."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pydantic
import pydantic_core
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from pydantic_ai.usage import RunUsage

from .errors import StoreError

__all__ = (
    'decode',
    'dump_message',
    'dump_messages',
    'dump_usage',
    'load_message',
    'load_usage',
    'now',
    'utc',
)

_MESSAGE: pydantic.TypeAdapter[ModelMessage] = pydantic.TypeAdapter(
    ModelMessage, config=pydantic.ConfigDict(defer_build=True, ser_json_bytes='base64', val_json_bytes='base64')
)
"""One message, with the same settings as `ModelMessagesTypeAdapter`, so a stored row is one element of its list."""

_USAGE = pydantic.TypeAdapter(RunUsage)


def dump_message(message: ModelMessage) -> str:
    """`message` as the JSON a row holds.

    Raises:
        ValueError: It can't be stored: text no database can hold (a lone surrogate), or a value JSON can't hold.
    """
    try:
        return _MESSAGE.dump_json(message).decode()
    except pydantic_core.PydanticSerializationError as error:
        raise ValueError(
            f'A {message.kind} of the run cannot be stored ({str(error).splitlines()[0]}); nothing of the run was '
            'stored. Text must be valid Unicode (no lone surrogates), and every value JSON-serializable.'
        ) from None


def load_message(payload: str | bytes) -> ModelMessage:
    return _MESSAGE.validate_json(payload)


def dump_messages(messages: list[ModelMessage]) -> bytes:
    return ModelMessagesTypeAdapter.dump_json(messages)


def decode(session_id: str, position: int, payload: str) -> ModelMessage:
    """A stored message, or an error naming the session and position if its row is corrupt."""
    try:
        return load_message(payload)
    except (pydantic.ValidationError, ValueError) as error:
        raise StoreError(
            f'Session {session_id!r}: the message at position {position} is corrupt and cannot be read '
            f'({str(error).splitlines()[0]}). Other messages and sessions are unaffected.'
        ) from None


def dump_usage(usage: RunUsage) -> dict[str, Any]:
    return _USAGE.dump_python(usage, mode='json')  # type: ignore[no-any-return]


def load_usage(data: dict[str, Any] | None) -> RunUsage:
    return _USAGE.validate_python(data or {})


def now() -> datetime:
    return datetime.now(UTC)


def utc(moment: datetime) -> datetime:
    """SQLite hands datetimes back naive; they were stored as UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
