"""The table of message part kinds: what each kind of pydantic-ai part is called, the role it plays, and how it reads.

The command line (`cli/_render`) and the web page (`web/_present`) both show a part by looking it up here
and laying out its `Reading` by its kind's role, each in its own way. A part kind pydantic-ai adds is one
row here; a new role is a new case in both renderers, which mypy holds them to. A part of a kind this
table has no row for (from a pydantic-ai release newer than it) plays the role `other`, showing the text
it carries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, get_args

from pydantic_ai.messages import (
    BaseToolCallPart,
    BaseToolReturnPart,
    CapabilityLoadDeltaPart,
    CompactionPart,
    FilePart,
    InstructionBaselinePart,
    InstructionDeltaPart,
    ModelMessage,
    ModelRequest,
    ModelSettingsDeltaPart,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryFeedbackPart,
    RetryPromptPart,
    SpeechPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolAvailabilityDeltaPart,
    UserPromptPart,
)

from processors import part_text

__all__ = ('PART_KINDS', 'MessageRole', 'PartKind', 'Reading', 'Role', 'Side', 'kind_of', 'message_role', 'read_part')

Role: TypeAlias = Literal[
    'system',
    'user',
    'summary',
    'tool-return',
    'retry',
    'assistant',
    'thinking',
    'tool-call',
    'file',
    'compaction',
    'speech',
    'other',
]
"""What a part does in the conversation, which is what a renderer lays out: `summary` is one the application
wrote (in a request), `compaction` a provider's (in a response); `other` is a record nothing is said in."""

Side: TypeAlias = Literal['request', 'response']
"""The message a part stands in: a `ModelRequest` or a `ModelResponse`."""

MessageRole: TypeAlias = Literal['user', 'assistant', 'tool', 'request']
"""Who a message is from: `tool` for tool returns, `request` for anything else sent to the model."""

_OPAQUE = '(opaque to this store)'
"""What a compaction reads as when its provider keeps its content to itself (OpenAI's encrypted one)."""


@dataclass(frozen=True)
class Reading:
    """What one part says, read the same way for every renderer; a kind leaves what it lacks at the default."""

    text: str = ''
    """What it says as text: a prompt, an answer, a summary, a file's media type, a record's content."""
    media: int = 0
    """How many media items (images, audio, documents) a user prompt holds besides its text."""
    tool_name: str = ''
    """The tool a call, a return or a retry is for; a retry that answers no call has none."""
    call_id: str | None = None
    """The tool call id, linking a call to its return or retry."""
    value: Any = None
    """A call's arguments, or a return's or a retry's content, as pydantic-ai holds them."""
    outcome: str = 'success'
    """How a tool call ended, for a return: `success`, `failed`, `denied`, `interrupted` or `retried`."""
    provider: str | None = None
    """The provider that wrote a compaction."""


@dataclass(frozen=True)
class PartKind:
    """One kind of part: one row of the table. Subclasses of `cls` (pydantic-ai's typed tool parts) read as it does."""

    name: str
    """What pydantic-ai calls the kind (its `part_kind`), which is what a part of role `other` is labelled."""
    role: Role
    cls: type
    side: Side | None
    """Where the kind stands, `None` for either message; a part on the other side has no row."""
    read: Callable[[Any], Reading]
    native: bool = False
    """A provider's built-in tool, run on the provider's side."""


def _content(part: SystemPromptPart | TextPart | ThinkingPart) -> Reading:
    return Reading(text=part.content)


def _prompt(part: UserPromptPart) -> Reading:
    text, media = part_text(part)
    return Reading(text=text, media=media)


def _compaction(part: CompactionPart) -> Reading:
    return Reading(text=part.content or _OPAQUE, provider=part.provider_name)


def _tool_call(part: BaseToolCallPart) -> Reading:
    return Reading(tool_name=part.tool_name, call_id=part.tool_call_id, value=part.args)


def _tool_return(part: BaseToolReturnPart[Any]) -> Reading:
    return Reading(tool_name=part.tool_name, call_id=part.tool_call_id, value=part.content, outcome=part.outcome)


def _retry_prompt(part: RetryPromptPart) -> Reading:
    return Reading(tool_name=part.tool_name or '', call_id=part.tool_call_id, value=part.content)


def _retry_feedback(part: RetryFeedbackPart) -> Reading:
    return Reading(value=part.content)


def _file(part: FilePart) -> Reading:
    return Reading(text=part.content.media_type or 'file')


def _speech(part: SpeechPart) -> Reading:
    return Reading(text=part.transcript or '(audio)')


def _carried(part: Any) -> Reading:
    """Whatever text a part carries, as the token counts read it: for records and kinds the table doesn't know."""
    return Reading(text=part_text(part)[0])


PART_KINDS: tuple[PartKind, ...] = (
    PartKind('system-prompt', 'system', SystemPromptPart, 'request', _content),
    PartKind('user-prompt', 'user', UserPromptPart, 'request', _prompt),
    PartKind('compaction', 'summary', CompactionPart, 'request', _compaction),
    PartKind('tool-return', 'tool-return', BaseToolReturnPart, 'request', _tool_return),
    # Deprecated in pydantic-ai (a stored one loads as a retried return or retry feedback), still built in memory.
    PartKind('retry-prompt', 'retry', RetryPromptPart, 'request', _retry_prompt),
    PartKind('retry-feedback', 'retry', RetryFeedbackPart, 'request', _retry_feedback),
    PartKind('tool-availability-delta', 'other', ToolAvailabilityDeltaPart, 'request', _carried),
    PartKind('capability-load-delta', 'other', CapabilityLoadDeltaPart, 'request', _carried),
    PartKind('model-settings-delta', 'other', ModelSettingsDeltaPart, 'request', _carried),
    PartKind('instruction-delta', 'other', InstructionDeltaPart, 'request', _carried),
    PartKind('instruction-baseline', 'other', InstructionBaselinePart, 'request', _carried),
    PartKind('speech', 'speech', SpeechPart, None, _speech),
    PartKind('text', 'assistant', TextPart, 'response', _content),
    PartKind('thinking', 'thinking', ThinkingPart, 'response', _content),
    PartKind('tool-call', 'tool-call', BaseToolCallPart, 'response', _tool_call),
    PartKind('builtin-tool-call', 'tool-call', NativeToolCallPart, 'response', _tool_call, native=True),
    PartKind('builtin-tool-return', 'tool-return', NativeToolReturnPart, 'response', _tool_return, native=True),
    PartKind('file', 'file', FilePart, 'response', _file),
    PartKind('compaction', 'compaction', CompactionPart, 'response', _compaction),
)
"""Every part kind pydantic-ai stores, one row each."""

_ROWS: dict[tuple[type, Side], PartKind] = {
    (kind.cls, side): kind for kind in PART_KINDS for side in (get_args(Side) if kind.side is None else (kind.side,))
}


def kind_of(cls: type, side: Side) -> PartKind:
    """The row for parts of class `cls` on `side`: its own, or its nearest base class's, or one made for it."""
    for base in cls.__mro__:
        kind = _ROWS.get((base, side))
        if kind is not None:
            return kind
    return PartKind(str(getattr(cls, 'part_kind', cls.__name__)), 'other', cls, side, _carried)


def read_part(part: object, message: ModelMessage) -> tuple[PartKind, Reading]:
    """The kind of `part`, a part of `message`, and what it says."""
    kind = kind_of(type(part), 'request' if isinstance(message, ModelRequest) else 'response')
    return kind, kind.read(part)


def message_role(message: ModelMessage) -> MessageRole:
    """Who `message` is from: `user` if it holds a prompt, else `tool` if it holds a tool return."""
    if not isinstance(message, ModelRequest):
        return 'assistant'
    roles = {kind_of(type(part), 'request').role for part in message.parts}
    if 'user' in roles:
        return 'user'
    return 'tool' if 'tool-return' in roles else 'request'
