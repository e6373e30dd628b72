"""Messages to and from their stored JSON, exactly as pydantic-ai serializes them."""

from __future__ import annotations

import pydantic
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

_MESSAGE: pydantic.TypeAdapter[ModelMessage] = pydantic.TypeAdapter(
    ModelMessage, config=pydantic.ConfigDict(defer_build=True, ser_json_bytes='base64', val_json_bytes='base64')
)
"""One message, with the same settings as `ModelMessagesTypeAdapter`, so a stored row is one element of its list."""


def dump_message(message: ModelMessage) -> str:
    return _MESSAGE.dump_json(message).decode()


def load_message(payload: str) -> ModelMessage:
    return _MESSAGE.validate_json(payload)


def dump_messages(messages: list[ModelMessage]) -> bytes:
    return ModelMessagesTypeAdapter.dump_json(messages)


def load_messages(data: str | bytes) -> list[ModelMessage]:
    return ModelMessagesTypeAdapter.validate_json(data)
