"""`Encryption`: the keys a store encrypts its archive with at rest.

Pass one to `SessionStore(url, encryption=Encryption(keys={'k2': secret2, 'k1': secret1}))`. The
first key encrypts everything written from then on; every key listed can still be read, so a store
rotated to a new key keeps working while `session-store rekey` moves its old rows over. What is
encrypted and how: see `_db.sealing`.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path

__all__ = ('ENV_KEYS', 'Encryption')

ENV_KEYS = 'SESSION_STORE_KEYS'
"""The environment variable the command line reads keys from: `k2=SECRET,k1=SECRET`, newest first."""

KEY_BYTES = 32
_KEY_ID = re.compile(r'[A-Za-z0-9_.-]{1,32}')


class Encryption:
    """Master keys by id, newest first: the first encrypts new writes, all of them decrypt.

    Args:
        keys: Each key id (1 to 32 letters, digits, `_`, `.` or `-`; stored beside every ciphertext
            it made, so it must stay the same for as long as rows use it) mapped to a 32-byte secret,
            as bytes or as urlsafe base64 text of them (`Encryption.generate_key()` makes one).

    Keep the secrets outside the database: a key lost is every row it encrypted lost.
    """

    __slots__ = ('_keys',)

    def __init__(self, keys: Mapping[str, bytes | str]) -> None:
        try:
            import cryptography  # noqa: F401
        except ImportError:
            raise ImportError(
                "Encryption needs the cryptography package: pip install 'pydantic-ai-session-store[encryption]'."
            ) from None
        if not isinstance(keys, Mapping) or not keys:
            raise ValueError('keys must map at least one key id to its secret, newest first.')
        checked: dict[str, bytes] = {}
        for key_id, secret in keys.items():
            if not isinstance(key_id, str) or not _KEY_ID.fullmatch(key_id):
                shown = repr(key_id) if isinstance(key_id, str) and len(key_id) <= 32 else 'a longer one'
                raise ValueError(
                    f'keys: key id {shown} must be 1 to 32 letters, digits, "_", "." or "-" (it is stored '
                    'beside every ciphertext, so it cannot hold ":").'
                )
            checked[key_id] = _secret(key_id, secret)
        self._keys = checked

    @property
    def keys(self) -> Mapping[str, bytes]:
        """The secrets by key id, newest first."""
        return dict(self._keys)

    @property
    def current(self) -> str:
        """The id of the key new writes are encrypted with: the first."""
        return next(iter(self._keys))

    def __repr__(self) -> str:
        # Never the secrets: a repr ends up in logs.
        return f'Encryption(keys={list(self._keys)!r})'

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Encryption) and list(self._keys.items()) == list(other._keys.items())

    def __hash__(self) -> int:
        return hash(tuple(self._keys.items()))

    @staticmethod
    def generate_key() -> str:
        """A new random secret, as the urlsafe base64 text `keys` accepts."""
        return base64.urlsafe_b64encode(secrets.token_bytes(KEY_BYTES)).decode()

    @classmethod
    def parse(cls, text: str, *, source: str = 'keys') -> Encryption:
        """Keys written as `ID=SECRET` pairs, newest first, separated by commas or new lines (`#` starts a comment).

        The form `SESSION_STORE_KEYS` and a `--key-file` take; `source` names where the text came from
        in errors.
        """
        keys: dict[str, str] = {}
        pairs = [pair for line in text.splitlines() for pair in line.split('#', 1)[0].split(',') if pair.strip()]
        for number, pair in enumerate(pairs, 1):
            key_id, equals, secret = pair.partition('=')
            if not (equals and key_id.strip() and secret.strip()):
                # Never the text itself: it may be a secret.
                raise ValueError(f'{source}: key {number} is not written as ID=SECRET.')
            if key_id.strip() in keys:
                raise ValueError(f'{source}: key id {key_id.strip()!r} is listed twice.')
            keys[key_id.strip()] = secret.strip()
        if not keys:
            raise ValueError(f'{source} holds no keys: write ID=SECRET pairs, newest first.')
        try:
            return cls(keys)
        except ValueError as error:
            raise ValueError(f'{source}: {error}') from None

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Encryption:
        """Keys from a file of `ID=SECRET` lines, newest first."""
        try:
            text = Path(path).read_text()
        except OSError as error:
            raise ValueError(f'key file {str(path)!r} cannot be read: {error.strerror or error}.') from None
        return cls.parse(text, source=f'key file {str(path)!r}')

    @classmethod
    def from_env(cls, variable: str = ENV_KEYS) -> Encryption | None:
        """Keys from an environment variable (`SESSION_STORE_KEYS`), or `None` when it is unset or empty."""
        text = os.environ.get(variable, '')
        return cls.parse(text, source=f'${variable}') if text.strip() else None


def _secret(key_id: str, secret: bytes | str) -> bytes:
    if isinstance(secret, str):
        text = secret.strip()
        try:
            secret = base64.b64decode(text + '=' * (-len(text) % 4), altchars=b'-_', validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f'keys: the secret of key {key_id!r} is not urlsafe base64 text.') from None
    if not isinstance(secret, bytes) or len(secret) != KEY_BYTES:
        size = len(secret) if isinstance(secret, bytes) else type(secret).__name__
        raise ValueError(
            f'keys: the secret of key {key_id!r} must be {KEY_BYTES} bytes (or urlsafe base64 of them); got {size}. '
            'Encryption.generate_key() makes one.'
        )
    return secret
