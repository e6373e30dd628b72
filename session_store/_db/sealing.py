"""`Sealer`: what a store does to the private values it writes and reads, encrypted at rest or not.

With `Encryption` on, every private value is sealed with AES-256-GCM under a key of its own session:
message payloads, summaries, session metadata and titles, and deferred tool requests. Ids, scopes, positions,
counts, token counts and timestamps stay clear, so the store still finds, orders and windows rows.

- **A key per session**, derived with HKDF-SHA256 from the master key and the session's internal id
  (its primary key, so a session deleted and made again under the same id gets a new key).
- **A sealed value is text**: `sealed:<key id>:<urlsafe base64 of nonce, ciphertext and tag>`. The key
  id beside the ciphertext is what lets keys rotate; a JSON column holds that text as a JSON string,
  where a clear value is an object, so clear and sealed rows can share a store while it is encrypted.
  The value's kind (`message`, `summary`, ...) is authenticated with it, so a ciphertext moved to
  another column or another session fails to open rather than reading as something else.
- **Search runs on a blind index.** A sealed message's search text is the keyed hashes (HMAC-SHA256
  under a key derived from the master key, 80 bits each) of its distinct lowercased words, sorted, so
  the index holds no word and no word order. Exact words still match; phrases are checked against the
  opened text (see `_history.search`); stemming, partial words and ranking by frequency are gone.
- **UI message ids are blind too.** A request's UI message id (`_ui_ids`), kept in its own indexed column so a
  resubmitted prompt is found in one lookup, is stored as its keyed hash under a key of its own (so it never
  equals a word's hash in the search index); a lookup asks for every key's hash, and for the clear id that
  rows stored before sealing hold.

AES-256-GCM rather than Fernet: authenticated like Fernet, with 28 bytes of overhead instead of 57
plus base64 of everything, the kind and session bound in as associated data, and hardware AES on the
hot path.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import json
import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, overload

from .._codec import decode
from ..encryption import Encryption
from ..errors import KeyUnavailable
from .fulltext import words

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from pydantic_ai.messages import ModelMessage

__all__ = ('SEALED', 'Kind', 'Sealer', 'Vault', 'key_id_of')

SEALED = 'sealed:'
"""How every sealed value begins; a clear payload is a JSON object and begins with `{`."""

Kind = Literal['message', 'summary', 'metadata', 'title', 'deferred tool requests']
"""What a sealed value is, authenticated with it."""

_NONCE = 12
_KEYS_KEPT = 4_096
_BLIND_BYTES = 10
_UI_ID_CHARACTERS = 255
"""The longest UI message id stored as it is (the column's width); a longer one is stored as its digest."""


def key_id_of(stored: Any) -> str | None:
    """The id of the key a stored value is sealed with, or `None` if it is stored clear."""
    if isinstance(stored, str) and stored.startswith(SEALED):
        return stored[len(SEALED) : stored.index(':', len(SEALED))]
    return None


class Sealer:
    """A store's encryption at work: seals what it writes under the newest key, opens what it reads under any.

    Without `Encryption` it stores values clear, and still refuses to read a sealed one as anything
    but an error naming its key.
    """

    def __init__(self, encryption: Encryption | None) -> None:
        self._masters = dict(encryption.keys) if encryption is not None else {}
        self.current = encryption.current if encryption is not None else None
        """The id of the key new values are sealed with; `None` when the store writes clear."""
        self._session_keys: OrderedDict[tuple[str, int], AESGCM] = OrderedDict()
        self._blind = {
            key_id: _derive(master, b'session-store blind index') for key_id, master in self._masters.items()
        }
        self._blind_ui_ids = {
            key_id: _derive(master, b'session-store blind ui message ids') for key_id, master in self._masters.items()
        }

    @property
    def encrypting(self) -> bool:
        return self.current is not None

    def seal(self, session_pk: int, kind: Kind, value: str) -> str:
        """`value` sealed under the session's key, or as it is when the store writes clear."""
        if self.current is None:
            return value
        nonce = os.urandom(_NONCE)
        sealed = self._cipher(self.current, session_pk).encrypt(nonce, value.encode(), kind.encode())
        return f'{SEALED}{self.current}:{base64.urlsafe_b64encode(nonce + sealed).decode()}'

    def open(self, session_id: str, session_pk: int, kind: Kind, stored: str, where: str | None = None) -> str:
        """A stored value as written: opened if sealed, else as it is.

        Raises:
            KeyUnavailable: It is sealed with a key this store wasn't given, or the secret given under
                that key id is not the one that sealed it (or the row was altered).
        """
        key_id = key_id_of(stored)
        if key_id is None:
            return stored
        what = where or f'its {kind}'
        if key_id not in self._masters:
            given = 'no keys' if not self._masters else f'only keys {", ".join(map(repr, self._masters))}'
            raise KeyUnavailable(
                session_id,
                key_id,
                f'Session {session_id!r}: {what} is encrypted with key {key_id!r}, and this store was given '
                f'{given}. Open it with encryption=Encryption(keys={{{key_id!r}: SECRET, ...}}) (on the '
                'command line, $SESSION_STORE_KEYS or --key-file). Nothing was read.',
            )
        from cryptography.exceptions import InvalidTag  # the `encryption` extra: imported once keys are given

        try:
            sealed = base64.urlsafe_b64decode(stored[len(SEALED) + len(key_id) + 1 :])
            opened = self._cipher(key_id, session_pk).decrypt(sealed[:_NONCE], sealed[_NONCE:], kind.encode())
        except (InvalidTag, binascii.Error, ValueError):
            raise KeyUnavailable(
                session_id,
                key_id,
                f'Session {session_id!r}: {what} does not decrypt with key {key_id!r}: the secret given for '
                f'{key_id!r} is not the one it was encrypted with, or the row was altered. Nothing was read.',
            ) from None
        return opened.decode()

    @overload
    def seal_json(self, session_pk: int, kind: Kind, value: dict[str, Any]) -> dict[str, Any] | str: ...
    @overload
    def seal_json(self, session_pk: int, kind: Kind, value: dict[str, Any] | None) -> dict[str, Any] | str | None: ...
    def seal_json(self, session_pk: int, kind: Kind, value: dict[str, Any] | None) -> dict[str, Any] | str | None:
        """A JSON column's value sealed (as a JSON string); `None` and `{}` stay as they are, having nothing to hide."""
        if not value or self.current is None:
            return value
        return self.seal(session_pk, kind, json.dumps(value, separators=(',', ':')))

    def open_json(self, session_id: str, session_pk: int, kind: Kind, stored: Any) -> Any:
        """A JSON column's value as written: a sealed string opened and parsed, a clear value as it is."""
        if key_id_of(stored) is None:
            return stored
        return json.loads(self.open(session_id, session_pk, kind, stored))

    def message(self, session_id: str, session_pk: int, position: int, stored: str) -> ModelMessage:
        """A stored payload opened and decoded, or an error naming the session and position."""
        return decode(session_id, position, self.payload(session_id, session_pk, position, stored))

    def payload(self, session_id: str, session_pk: int, position: int, stored: str) -> str:
        """A stored payload opened: the message's JSON, which the review reads show without decoding it."""
        return self.open(session_id, session_pk, 'message', stored, f'the message at position {position}')

    def search_text(self, message: ModelMessage) -> str:
        """What the search index holds for `message`: its text, or when sealing, the blind index of its words."""
        from processors.text import message_text  # only writes index messages: a read needs no pydantic-ai

        # PostgreSQL text can't hold NUL; the JSON payload keeps it, escaped.
        text = message_text(message).replace('\x00', '')
        if self.current is None:
            return text
        return ' '.join(sorted({_blind(self._blind[self.current], word) for word in words(text, limit=None)}))

    def search_terms(self, word: str) -> list[str]:
        """The forms `word` takes in the index: as itself in clear rows, and its blind hash under each key."""
        return [word, *(_blind(key, word) for key in self._blind.values())]

    def ui_id_form(self, message: ModelMessage) -> str | None:
        """What the `ui_message_id` column holds for `message`: the UI message id of a request holding a user prompt,
        or when sealing, its blind hash under the current key; `None` for any other message."""
        from .._ui_ids import prompt_ui_id

        ui_id = prompt_ui_id(message)
        if ui_id is None:
            return None
        if self.current is None:
            return _clear_ui_id(ui_id)
        return _blind(self._blind_ui_ids[self.current], ui_id)

    def ui_id_forms(self, ui_id: str) -> list[str]:
        """The forms UI message id `ui_id` takes in the column: as itself in clear rows, and its blind hash under each
        key; none for an id no stored message can carry (text that isn't valid Unicode, see `dump_message`)."""
        try:
            ui_id.encode()
        except UnicodeEncodeError:
            return []
        return [_clear_ui_id(ui_id), *(_blind(key, ui_id) for key in self._blind_ui_ids.values())]

    def vault(self, session_id: str, session_pk: int) -> Vault:
        """This sealer bound to one session."""
        return Vault(self, session_id, session_pk)

    def _cipher(self, key_id: str, session_pk: int) -> AESGCM:
        cipher = self._session_keys.get((key_id, session_pk))
        if cipher is None:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            info = f'session-store session {session_pk}'.encode()
            cipher = self._session_keys[key_id, session_pk] = AESGCM(_derive(self._masters[key_id], info))
            if len(self._session_keys) > _KEYS_KEPT:
                self._session_keys.popitem(last=False)
        else:
            self._session_keys.move_to_end((key_id, session_pk))
        return cipher


@dataclass(frozen=True, slots=True)
class Vault:
    """One session's values sealed and opened: its key, and its id for the errors that name it."""

    sealer: Sealer
    session_id: str
    session_pk: int

    def seal(self, kind: Kind, value: str) -> str:
        return self.sealer.seal(self.session_pk, kind, value)

    def open(self, kind: Kind, stored: str) -> str:
        return self.sealer.open(self.session_id, self.session_pk, kind, stored)

    @overload
    def seal_json(self, kind: Kind, value: dict[str, Any]) -> dict[str, Any] | str: ...
    @overload
    def seal_json(self, kind: Kind, value: dict[str, Any] | None) -> dict[str, Any] | str | None: ...
    def seal_json(self, kind: Kind, value: dict[str, Any] | None) -> dict[str, Any] | str | None:
        return self.sealer.seal_json(self.session_pk, kind, value)

    def open_json(self, kind: Kind, stored: Any) -> Any:
        return self.sealer.open_json(self.session_id, self.session_pk, kind, stored)

    def message(self, position: int, stored: str) -> ModelMessage:
        return self.sealer.message(self.session_id, self.session_pk, position, stored)

    def payload(self, position: int, stored: str) -> str:
        return self.sealer.payload(self.session_id, self.session_pk, position, stored)


def _derive(master: bytes, info: bytes) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return HKDF(algorithm=hashes.SHA256(), length=32, salt=b'session-store', info=info).derive(master)


def _clear_ui_id(ui_id: str) -> str:
    """A UI message id as a clear row holds it: itself, unless longer than the column or holding a NUL (which
    PostgreSQL text can't), then its SHA-256 digest: an id comes from the client, and must never fail a save."""
    if len(ui_id) <= _UI_ID_CHARACTERS and '\x00' not in ui_id:
        return ui_id
    return 'sha256:' + hashlib.sha256(ui_id.encode()).hexdigest()


@functools.lru_cache(maxsize=65_536)
def _blind(key: bytes, word: str) -> str:
    """A word's blind form under `key`; cached, since a conversation keeps using the same words."""
    return base64.b32encode(hmac.digest(key, word.encode(), 'sha256')[:_BLIND_BYTES]).decode().lower()
