"""The UI message id a message carries: the id a chat front end gave the message it came from.

pydantic-ai's UI adapters (Vercel AI, AG-UI) keep it in the message's metadata, and match a resubmitted message
(an edit, a regenerate) on it. pydantic-ai has no public reader yet, so this module is the one place that reads
and writes it through pydantic-ai's private helpers (`tests/test_transactions.py` lists the exception).
"""

from __future__ import annotations

from dataclasses import replace

from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart
from pydantic_ai.ui._utils import get_ui_message_id, set_ui_message_id

__all__ = ('prompt_ui_id', 'ui_message_id', 'with_ui_message_id')


def ui_message_id(message: ModelMessage) -> str | None:
    """The UI message id `message` was loaded from, if a UI adapter gave it one."""
    return get_ui_message_id(message)


def prompt_ui_id(message: ModelMessage) -> str | None:
    """The UI message id of a request holding a user prompt: the only messages a front end can resubmit."""
    if not isinstance(message, ModelRequest) or not any(isinstance(part, UserPromptPart) for part in message.parts):
        return None
    return get_ui_message_id(message)


def with_ui_message_id(message: ModelMessage, ui_id: str) -> ModelMessage:
    """A copy of `message` carrying `ui_id` as its UI message id (the original is left as it was)."""
    copied = replace(message, metadata=dict(message.metadata or {}))
    set_ui_message_id(copied, ui_id)
    return copied
