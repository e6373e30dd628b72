"""The table of message part kinds: what each kind of part is called, the role it plays, and how it reads.

A part is read in its stored JSON form: a message as a row's payload holds it (`ModelMessagesTypeAdapter`'s JSON:
`kind` `request` or `response`, its `parts`, a request's `instructions`), each part keyed by its `part_kind`. So
the command line shows a session's archive without importing pydantic-ai (most of its start-up); a caller holding
pydantic-ai's messages reads them through `_codec.stored_form`. A stored part reads as pydantic-ai loads it: a part
of a kind it upgrades on loading (the deprecated `retry-prompt`) reads as the part it loads as, and a file in a tool
result as the file item it is rebuilt into (see `_tool_value`).

The command line (`cli/_messages`) and the web page (`web/_present`) both show a part by looking it up here
and laying out its `Reading` by its kind's role, each in its own way. A part kind pydantic-ai adds is one
row here; a new role is a new case in both renderers, which mypy holds them to. A part of a kind this
table has no row for (from a pydantic-ai release newer than it) plays the role `other`, showing the text
it carries.

`part_text` is how each part reads as text for search (`message_text`), the same text `processors.text.part_text` gives
the loaded part for token counting; `tests/test_parts_stored.py` holds the two equal.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, get_args
from urllib.parse import urlparse

import pydantic_core

__all__ = (
    'PART_KINDS',
    'UPGRADES',
    'FileItem',
    'Message',
    'MessageRole',
    'Part',
    'PartKind',
    'Reading',
    'Role',
    'Side',
    'kind_of',
    'message_role',
    'message_text',
    'part_text',
    'read_part',
    'side_of',
)

Part: TypeAlias = Mapping[str, Any]
"""A message part in its stored JSON form, its kind under `part_kind`."""
Message: TypeAlias = Mapping[str, Any]
"""A message in its stored JSON form: `kind` (`request` or `response`), `parts`, and a request's `instructions`."""

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
    'capability',
    'other',
]
"""What a part does in the conversation, which is what a renderer lays out: `summary` is one the application
wrote (in a request), `compaction` a provider's (in a response); `capability` is what a capability or the
application told the model mid-conversation (pydantic-ai's `CapabilityPart`, framed as data or as an instruction
when sent); `other` is a record nothing is said in."""

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
    """A call's arguments, or a return's or a retry's content, as stored: JSON values, a tool result's files as
    `FileItem`s."""
    outcome: str = 'success'
    """How a tool call ended, for a return: `success`, `failed`, `denied`, `interrupted` or `retried`."""
    provider: str | None = None
    """The provider that wrote a compaction."""
    capability: str = ''
    """A capability part's kind, `namespace.name`."""


@dataclass(frozen=True)
class FileItem:
    """A file (an image, a document, ...) in a tool result, standing for the item pydantic-ai rebuilds it into:
    written out (`str`, which `json.dumps(default=str)` falls back on) as that item's `repr`."""

    shown: str

    def __str__(self) -> str:
        return self.shown


@dataclass(frozen=True)
class PartKind:
    """One kind of part: one row of the table."""

    name: str
    """What pydantic-ai calls the kind (its `part_kind`), which is what a part of role `other` is labelled."""
    role: Role
    side: Side | None
    """Where the kind stands, `None` for either message; a part on the other side has no row."""
    read: Callable[[Part], Reading]
    native: bool = False
    """A provider's built-in tool, run on the provider's side."""


# How pydantic-ai rebuilds the items of a user prompt and a tool result: by their `kind`.
_URL_KINDS = {'image-url': 'ImageUrl', 'audio-url': 'AudioUrl', 'document-url': 'DocumentUrl', 'video-url': 'VideoUrl'}
_URL_FIELDS = (('url', ...), ('force_download', False), ('vendor_metadata', None))
_FILE_FIELDS: dict[str, tuple[tuple[str, Any], ...]] = {
    **dict.fromkeys(_URL_KINDS, _URL_FIELDS),
    'binary': (('data', ...), ('media_type', ...), ('vendor_metadata', None)),
    'uploaded-file': (('file_id', ...), ('provider_name', ...), ('vendor_metadata', None)),
}
"""Each file kind's fields before its media type and identifier, with their defaults (`...`: required), in the order
its `repr` shows them."""
_DUMPED_KEYS = {
    kind: {*(name for name, _ in fields), 'kind', 'media_type', 'identifier'} for kind, fields in _FILE_FIELDS.items()
}
"""The keys a dump of each file kind writes: a mapping with others is no file a tool result recorded."""


def _render(value: Any, *, items: Literal['user', 'tool', 'plain'] = 'plain', record: Any = None) -> tuple[str, int]:
    """The text in a stored value and how many media items it holds (see `processors.render`): strings as they are,
    the files pydantic-ai rebuilds from `items`' content counted, text items by their text, the rest as its JSON."""
    if isinstance(value, str):
        return value, 0
    if value is None:
        return '', 0
    if isinstance(value, Mapping) and items != 'plain':
        kind = value.get('kind')
        if items == 'user' and kind == 'cache-point':
            return '', 0
        if items == 'user' and kind in ('text-content', 'structured-content'):
            return value.get('content', ''), 0
        if _is_file(value, items == 'tool', record):
            return '', 1
    if isinstance(value, list):
        texts: list[str] = []
        media = 0
        for item in value:
            text, item_media = _render(item, items=items, record=record)
            texts.append(text)
            media += item_media
        return '\n'.join(t for t in texts if t), media
    return pydantic_core.to_json(value, fallback=str, bytes_mode='base64').decode(), 0


def _is_file(value: Mapping[str, Any], in_tool_result: bool, record: Any) -> bool:
    """Whether pydantic-ai rebuilds `value` as a file item: in a user prompt any of a file's kind; in a tool result
    one it recorded (`content_file_digests`) or, in a result from before records, an HTTP(S) URL; a binary one always.
    """
    kind = str(value.get('kind'))
    fields = _FILE_FIELDS.get(kind)
    if fields is None or any(default is ... and name not in value for name, default in fields):
        return False
    if not in_tool_result or kind == 'binary':
        return True
    if (
        kind in _URL_KINDS
        and (media_type := value.get('media_type', '')) is not None
        and not (isinstance(media_type, str) and media_type)
    ):
        return False  # a URL a dump of ours wrote always says its media type, or `null`
    if not isinstance(record, list):  # written before tool results recorded their files
        url = value.get('url')
        return kind in _URL_KINDS and isinstance(url, str) and urlparse(url).scheme.lower() in ('http', 'https')
    if not record or not set(value) <= _DUMPED_KEYS[kind]:
        return False
    canonical = json.dumps(value, sort_keys=True, separators=(',', ':'))
    return hashlib.sha256(canonical.encode()).hexdigest() in record


def _tool_value(value: Any, record: Any) -> Any:
    """A tool result's content as pydantic-ai loads it and a renderer writes it out: its files as `FileItem`s."""
    if isinstance(value, Mapping):
        if _is_file(value, True, record):
            return FileItem(_file_repr(value, unrecorded=not isinstance(record, list)))
        return {key: _tool_value(item, record) for key, item in value.items()}
    if isinstance(value, list):
        return [_tool_value(item, record) for item in value]
    return value


def _file_repr(value: Mapping[str, Any], *, unrecorded: bool) -> str:
    """The `repr` of the file item pydantic-ai rebuilds `value` into: its fields that differ from their defaults."""
    kind = value['kind']
    shown: dict[str, Any] = {name: value.get(name, default) for name, default in _FILE_FIELDS[kind]}
    if kind == 'binary':
        shown['data'] = base64.urlsafe_b64decode(value['data'])
        name = 'BinaryImage' if str(value['media_type']).startswith('image/') else 'BinaryContent'
    else:
        shown['_media_type'] = value.get('media_type')
        name = _URL_KINDS.get(kind, 'UploadedFile')
        if unrecorded:  # a URL from before records is rebuilt as a client-sent one is kept: without forcing a download
            shown['force_download'] = False
    shown['_identifier'] = value.get('identifier')
    defaults = dict(_FILE_FIELDS[kind])
    fields = ', '.join(
        f'{key}={item!r}' for key, item in shown.items() if defaults.get(key) is ... or item != defaults.get(key)
    )
    return f'{name}({fields})'


def part_text(part: Part) -> tuple[str, int]:
    """The text a model reads for `part`, and its media count: what `processors.text.part_text` gives it loaded."""
    part = _loaded(part)
    kind = part.get('part_kind')
    if kind in ('tool-call', 'builtin-tool-call'):
        args, media = _render(part.get('args'))
        return f'{part.get("tool_name")} {args}', media
    if kind in ('tool-return', 'builtin-tool-return'):
        content, media = _render(part.get('content'), items='tool', record=part.get('content_file_digests'))
        return f'{part.get("tool_name")} {content}', media
    if kind == 'speech':
        return part.get('transcript') or '', 0 if part.get('audio') is None else 1
    if kind == 'file':
        return '', 1
    if kind == 'compaction' and part.get('content') is None and part.get('provider_details'):
        # An opaque provider compaction (OpenAI's encrypted one) still costs its size on the wire.
        return _render(part.get('provider_details'))
    return _render(part.get('content'), items='user' if kind in ('user-prompt', 'capability') else 'plain')


def message_text(message: Message) -> str:
    """The text a message carries, its instructions and its parts' readings joined by newlines (what a search
    matches): `processors.text.message_text` of the loaded message."""
    texts = [message.get('instructions') or '', *(part_text(part)[0] for part in message.get('parts', ()))]
    return '\n'.join(text for text in texts if text)


def _content(part: Part) -> Reading:
    return Reading(text=part.get('content') or '')


def _prompt(part: Part) -> Reading:
    text, media = part_text(part)
    return Reading(text=text, media=media)


def _compaction(part: Part) -> Reading:
    return Reading(text=part.get('content') or _OPAQUE, provider=part.get('provider_name'))


def _tool_call(part: Part) -> Reading:
    return Reading(tool_name=part.get('tool_name', ''), call_id=part.get('tool_call_id'), value=part.get('args'))


def _tool_return(part: Part) -> Reading:
    return Reading(
        tool_name=part.get('tool_name', ''),
        call_id=part.get('tool_call_id'),
        value=_tool_value(part.get('content'), part.get('content_file_digests')),
        outcome=part.get('outcome', 'success'),
    )


def _retry_feedback(part: Part) -> Reading:
    return Reading(value=part.get('content'))


def _capability(part: Part) -> Reading:
    text, media = _render(part.get('content'), items='user')
    return Reading(text=text, media=media, capability=part.get('kind') or '')


def _file(part: Part) -> Reading:
    return Reading(text=(part.get('content') or {}).get('media_type') or 'file')


def _speech(part: Part) -> Reading:
    return Reading(text=part.get('transcript') or '(audio)')


def _carried(part: Part) -> Reading:
    """Whatever text a part carries, as the token counts read it: for records and kinds the table doesn't know."""
    return Reading(text=part_text(part)[0])


PART_KINDS: tuple[PartKind, ...] = (
    PartKind('system-prompt', 'system', 'request', _content),
    PartKind('user-prompt', 'user', 'request', _prompt),
    PartKind('compaction', 'summary', 'request', _compaction),
    PartKind('tool-return', 'tool-return', 'request', _tool_return),
    PartKind('retry-feedback', 'retry', 'request', _retry_feedback),
    PartKind('tool-availability-delta', 'other', 'request', _carried),
    PartKind('capability-load-delta', 'other', 'request', _carried),
    PartKind('model-settings-delta', 'other', 'request', _carried),
    PartKind('instruction-delta', 'other', 'request', _carried),
    PartKind('instruction-baseline', 'other', 'request', _carried),
    PartKind('capability', 'capability', 'request', _capability),
    PartKind('speech', 'speech', None, _speech),
    PartKind('text', 'assistant', 'response', _content),
    PartKind('thinking', 'thinking', 'response', _content),
    PartKind('tool-call', 'tool-call', 'response', _tool_call),
    PartKind('builtin-tool-call', 'tool-call', 'response', _tool_call, native=True),
    PartKind('builtin-tool-return', 'tool-return', 'response', _tool_return, native=True),
    PartKind('file', 'file', 'response', _file),
    PartKind('compaction', 'compaction', 'response', _compaction),
)
"""Every part kind pydantic-ai stores, one row each (a typed tool part, such as a tool search's, is stored under
its base kind, with a `tool_kind`)."""

_ROWS: dict[tuple[str, Side], PartKind] = {
    (kind.name, side): kind for kind in PART_KINDS for side in (get_args(Side) if kind.side is None else (kind.side,))
}

_ERROR_KEYS = ('type', 'loc', 'msg', 'input', 'ctx', 'url')
"""The keys of a validation error's details (pydantic-core's `ErrorDetails`), in the order it writes them."""


def _legacy_retry(part: Part) -> Part:
    """A stored `retry-prompt` (pydantic-ai's deprecated `RetryPromptPart`) as pydantic-ai loads it: a retry that
    answers a tool call is that call's return, `retried`; one that answers none is retry feedback."""
    content = part.get('content')
    if isinstance(content, list):
        content = [{key: error[key] for key in _ERROR_KEYS if key in error} for error in content]
    if part.get('tool_name') is None:
        return {'part_kind': 'retry-feedback', 'content': content}
    if isinstance(content, list):
        content = _without_repeated_input(content)
    return {
        'part_kind': 'tool-return',
        'tool_name': part['tool_name'],
        'tool_call_id': part.get('tool_call_id'),
        'content': content,
        'outcome': 'retried',
    }


def _without_repeated_input(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Errors as a retried return carries them: without `ctx`, and each root error's `input` only where it is not
    the first root error's (pydantic-ai's `_dump_error_details`)."""
    kept: list[dict[str, Any]] = []
    root: tuple[Any] | None = None
    for error in errors:
        drop = {'ctx'}
        if len(error.get('loc', ())) <= 1:
            if root is None:
                root = (error.get('input'),)
            elif error.get('input') == root[0]:
                drop.add('input')
        kept.append({key: value for key, value in error.items() if key not in drop})
    return kept


UPGRADES: dict[str, Callable[[Part], Part]] = {'retry-prompt': _legacy_retry}
"""Request parts of a kind pydantic-ai upgrades when it loads them, and what each loads as."""


def _loaded(part: Part) -> Part:
    """`part` as pydantic-ai loads it from a request (the only side with upgrades), or as it is."""
    upgrade = UPGRADES.get(part.get('part_kind', ''))
    return part if upgrade is None else upgrade(part)


def kind_of(name: str, side: Side) -> PartKind:
    """The row for parts of kind `name` on `side`, or one made for a kind the table doesn't know."""
    return _ROWS.get((name, side)) or PartKind(name, 'other', side, _carried)


def side_of(message: Message) -> Side:
    """The side `message` stands on: `request` or `response`."""
    return 'request' if message.get('kind') == 'request' else 'response'


def read_part(part: Part, side: Side) -> tuple[PartKind, Reading]:
    """The kind of `part`, a part of a message on `side`, and what it says."""
    if side == 'request':
        part = _loaded(part)
    kind = kind_of(str(part.get('part_kind')), side)
    return kind, kind.read(part)


def message_role(message: Message) -> MessageRole:
    """Who `message` is from: `user` if it holds a prompt, else `tool` if it holds a tool return."""
    if side_of(message) != 'request':
        return 'assistant'
    roles = {read_part(part, 'request')[0].role for part in message.get('parts', ())}
    if 'user' in roles:
        return 'user'
    return 'tool' if 'tool-return' in roles else 'request'
