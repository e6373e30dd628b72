"""Stored values to and from Python: messages exactly as pydantic-ai serializes them, usage, and UTC times."""

from __future__ import annotations

import json
import pickle
from collections.abc import Sequence
from copy import deepcopy
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import StoreError

if TYPE_CHECKING:
    import pydantic
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.usage import RunUsage

__all__ = (
    'copied',
    'decode',
    'dump_message',
    'dump_messages',
    'dump_usage',
    'load_message',
    'load_usage',
    'now',
    'parse',
    'pickled',
    'stored_form',
    'utc',
)

# The adapters are made on first use, importing pydantic-ai then: the review commands read stored values without it.


@cache
def _message() -> pydantic.TypeAdapter[ModelMessage]:
    """One message, with the same settings as `ModelMessagesTypeAdapter`, so a stored row is one element of its list."""
    import pydantic
    from pydantic_ai.messages import ModelMessage

    return pydantic.TypeAdapter(
        ModelMessage, config=pydantic.ConfigDict(defer_build=True, ser_json_bytes='base64', val_json_bytes='base64')
    )


@cache
def _usage() -> pydantic.TypeAdapter[RunUsage]:
    import pydantic
    from pydantic_ai.usage import RunUsage

    return pydantic.TypeAdapter(RunUsage)


T = TypeVar('T')


def copied(value: T) -> T:
    """A deep copy of `value` (messages a store hands out or keeps), through pickle: a third of `deepcopy`'s
    instructions on a window of messages, shared objects still shared once. `deepcopy` for what pickle can't take
    (a tool's return holding a local class, a lock, ...)."""
    data = pickled(value)
    return deepcopy(value) if data is None else pickle.loads(data)


def pickled(value: object) -> bytes | None:
    """`value` pickled, to be copied from; `None` when pickle can't take it."""
    try:
        return pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return None


def dump_message(message: ModelMessage) -> str:
    """`message` as the JSON a row holds.

    Raises:
        ValueError: It can't be stored: text no database can hold (a lone surrogate), or a value JSON can't hold.
    """
    import pydantic_core

    try:
        return _message().dump_json(message).decode()
    except pydantic_core.PydanticSerializationError as error:
        raise ValueError(
            f'A {message.kind} of the run cannot be stored ({str(error).splitlines()[0]}); nothing of the run was '
            'stored. Text must be valid Unicode (no lone surrogates), and every value JSON-serializable.'
        ) from None


def load_message(payload: str | bytes) -> ModelMessage:
    return _message().validate_json(payload)


def dump_messages(messages: list[ModelMessage]) -> bytes:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    return ModelMessagesTypeAdapter.dump_json(messages)


def stored_form(messages: Sequence[ModelMessage]) -> list[dict[str, Any]]:
    """Messages in the JSON form a row's payload holds (pydantic-ai's own): what `_parts` reads, and `--json` prints."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    return ModelMessagesTypeAdapter.dump_python(list(messages), mode='json')  # type: ignore[no-any-return]


def decode(session_id: str, position: int, payload: str) -> ModelMessage:
    """A stored message, or an error naming the session and position if its row is corrupt."""
    import pydantic

    try:
        return load_message(payload)
    except (pydantic.ValidationError, ValueError) as error:
        raise _corrupt(session_id, position, str(error)) from None


def parse(session_id: str, position: int, payload: str) -> dict[str, Any]:
    """A stored message in its JSON form (see `stored_form`), without pydantic-ai; the error `decode` gives if the row
    holds no request or response of parts."""
    try:
        message = json.loads(payload)
    except ValueError as error:
        raise _corrupt(session_id, position, str(error)) from None
    parts = message.get('parts') if isinstance(message, dict) else None
    if not (
        isinstance(parts, list)
        and message.get('kind') in ('request', 'response')
        and all(isinstance(part, dict) and isinstance(part.get('part_kind'), str) for part in parts)
    ):
        raise _corrupt(session_id, position, 'not a request or a response of parts')
    return message  # type: ignore[no-any-return]


def _corrupt(session_id: str, position: int, reason: str) -> StoreError:
    return StoreError(
        f'Session {session_id!r}: the message at position {position} is corrupt and cannot be read '
        f'({reason.splitlines()[0]}). Other messages and sessions are unaffected.'
    )


def dump_usage(usage: RunUsage) -> dict[str, Any]:
    return _usage().dump_python(usage, mode='json')  # type: ignore[no-any-return]


def load_usage(data: dict[str, Any] | None) -> RunUsage:
    return _usage().validate_python(data or {})


def now() -> datetime:
    return datetime.now(UTC)


def utc(moment: datetime) -> datetime:
    """SQLite hands datetimes back naive; they were stored as UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
