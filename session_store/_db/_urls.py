"""A PostgreSQL URL's query parameters, as libpq and hosted PostgreSQL services write them, made into the keyword
arguments asyncpg's `connect()` takes.

SQLAlchemy's asyncpg dialect hands every query parameter to `asyncpg.connect` as a keyword argument of text, and
asyncpg spells libpq's parameters differently or reads them only from a DSN: `?sslmode=require` would fail there
with `TypeError: connect() got an unexpected keyword argument`. Here each parameter is translated, or refused with
a `ValueError` that names it and says what to write instead, before anything connects.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ('DEFAULT_URL', 'Query', 'asyncpg_arguments', 'flag')

# Here, beside the URL rules and free of SQLAlchemy, so that the command line's help can show it at once.
DEFAULT_URL = 'sqlite+aiosqlite:///sessions.db'
"""The database a `SessionStore()` or a command opens when given none: `sessions.db` in the working directory."""

_SSL_MODES = ('disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full')
"""libpq's `sslmode` values, weakest first; asyncpg knows them all."""

_TLS_FILES = ('sslrootcert', 'sslcert', 'sslkey', 'sslcrl')
_TLS = ('sslmode', *_TLS_FILES, 'sslpassword', 'ssl_min_protocol_version', 'ssl_max_protocol_version')
"""libpq's TLS parameters, which asyncpg reads only from a DSN (and then as libpq does: `require` with a root
certificate verifies it, `verify-full` also checks the host name): they reach it as one, beside the URL's other
arguments, which win over the DSN's."""

_STARTUP = ('application_name', 'options')
"""Sent to the server as the session starts (asyncpg's `server_settings`): `options` as `-c name=value` settings."""

_SESSION_ATTRIBUTES = ('any', 'primary', 'standby', 'prefer-standby', 'read-write', 'read-only')

_NUMBERS: dict[str, type[int] | type[float]] = {
    # asyncpg's connect() takes these as numbers; from a URL's query they would reach it as text.
    'statement_cache_size': int,
    'max_cached_statement_lifetime': int,
    'max_cacheable_statement_size': int,
    'command_timeout': float,
    'timeout': float,
    'prepared_statement_cache_size': int,
}

_TEXT = ('host', 'port', 'user', 'password', 'passfile', 'target_session_attrs', 'krbsrvname', 'gsslib')
"""Keyword arguments of asyncpg's `connect()` (and SQLAlchemy's multi-host `host`) that take text as it is."""

_NO_KEEPALIVES = "asyncpg has no TCP keepalive settings: remove it (the store's pool replaces connections found dead)."
_INSTEAD = {
    'keepalives': _NO_KEEPALIVES,
    'keepalives_idle': _NO_KEEPALIVES,
    'keepalives_interval': _NO_KEEPALIVES,
    'keepalives_count': _NO_KEEPALIVES,
    'tcp_user_timeout': _NO_KEEPALIVES,
    'client_encoding': 'asyncpg always talks UTF-8 to the server: remove it.',
    'gssencmode': 'asyncpg does not encrypt with GSSAPI: remove it, and use TLS (sslmode=require) instead.',
    'dbname': "put the database's name in the URL's path instead: postgresql://user@host/NAME.",
    'hostaddr': "put the address in the URL's host instead: postgresql://user@10.0.0.5/NAME.",
}
"""libpq parameters asyncpg has no equivalent of, and what to write instead."""


def flag(name: str, text: object) -> bool:
    """A URL parameter that is true or false.

    Raises:
        ValueError: Neither.
    """
    value = str(text).lower()
    if value not in ('true', 'false', '1', '0'):
        raise ValueError(f'The URL parameter {name} must be true or false; got {text!r}.')
    return value in ('true', '1')


Query = dict[str, str | tuple[str, ...]]
"""A URL's query parameters, as SQLAlchemy's `URL.query` holds them: a parameter given more than once as a tuple."""


def asyncpg_arguments(query: Mapping[str, str | tuple[str, ...]]) -> tuple[Query, dict[str, Any]]:
    """The query parameters that stay in the URL (which SQLAlchemy hands to asyncpg as they are), and the `connect()`
    arguments the others make.

    Raises:
        ValueError: A parameter given twice, of the wrong kind, naming a file that is not there, or that asyncpg has
            no equivalent of; each message says what to write instead.
    """
    left = dict(query)
    given = {name: _single(name, left.pop(name)) for name in list(left) if name != 'host'}
    arguments: dict[str, Any] = {}
    if 'ssl' in given:  # SQLAlchemy's own spelling of sslmode
        if 'sslmode' in given:
            raise ValueError('The URL gives both ssl and sslmode: give sslmode only.')
        given['sslmode'] = given.pop('ssl')
    tls = {name: given.pop(name) for name in _TLS if name in given}
    if tls:
        arguments.update(_tls_arguments(tls))
    if 'connect_timeout' in given:
        if 'timeout' in given:
            raise ValueError('The URL gives both connect_timeout and timeout: give one of them.')
        arguments['timeout'] = _number('connect_timeout', float, given.pop('connect_timeout'))
    for name, kind in _NUMBERS.items():
        if name in given:
            arguments[name] = _number(name, kind, given.pop(name))
    if 'fallback_application_name' in given:
        given.setdefault('application_name', given['fallback_application_name'])
        del given['fallback_application_name']
    startup = {name: given.pop(name) for name in _STARTUP if name in given}
    if startup:
        arguments['server_settings'] = startup
    attributes = given.get('target_session_attrs')
    if attributes is not None and attributes not in _SESSION_ATTRIBUTES:
        raise ValueError(
            f'The URL parameter target_session_attrs must be one of {", ".join(_SESSION_ATTRIBUTES)}; '
            f'got {attributes!r}.'
        )
    for name in given:
        if name not in _TEXT:
            raise ValueError(f'The URL parameter {name} {_refusal(name)}')
        left[name] = given[name]
    return left, arguments


def _single(name: str, value: str | tuple[str, ...]) -> str:
    if isinstance(value, str):
        return value
    raise ValueError(f'The URL parameter {name} is given {len(value)} times: give it once.')


def _number(name: str, kind: type[int] | type[float], text: str) -> int | float:
    try:
        number = kind(text)
    except ValueError:
        raise ValueError(f'The URL parameter {name} must be a number; got {text!r}.') from None
    if name in ('timeout', 'connect_timeout') and number <= 0:
        # libpq waits for ever on 0; asyncpg needs a bound.
        raise ValueError(f'The URL parameter {name} must be a number of seconds above 0; got {text!r}.')
    return number


def _refusal(name: str) -> str:
    if name in _INSTEAD:
        return f'(a libpq setting) has no asyncpg equivalent: {_INSTEAD[name]}'
    return (
        'is not one that session-store or asyncpg knows: remove it, or give asyncpg keyword arguments as '
        "engine_options={'connect_args': {...}}."
    )


def _tls_arguments(tls: dict[str, str]) -> dict[str, Any]:
    """asyncpg's arguments for libpq's TLS parameters: a DSN holding them, or `ssl=True` for the system's roots."""
    mode = tls.get('sslmode')
    if mode is not None and mode not in _SSL_MODES:
        raise ValueError(f'The URL parameter sslmode must be one of {", ".join(_SSL_MODES)}; got {mode!r}.')
    if tls.get('sslrootcert') == 'system':
        # libpq 16's "the system's root certificates", which asyncpg takes as ssl=True; it verifies the host name
        # too, and libpq allows no weaker mode with it.
        if mode not in (None, 'verify-full') or len(tls) > 1 + (mode is not None):
            raise ValueError(
                "The URL's sslrootcert=system verifies the server against the system root certificates and goes with "
                'sslmode=verify-full alone; for a client certificate, give the CA certificate file as sslrootcert=PATH.'
            )
        return {'ssl': True}
    for name in _TLS_FILES:
        if name in tls and not os.access(tls[name], os.R_OK):
            raise ValueError(f'The URL parameter {name} names {tls[name]!r}: no file this process can read.')
    if mode in ('verify-ca', 'verify-full') and 'sslrootcert' not in tls and _default_root() is None:
        raise ValueError(
            f"The URL's sslmode={mode} checks the server's certificate against a CA certificate: add "
            "sslrootcert=PATH (the file your provider gives), or sslrootcert=system for the system's root certificates."
        )
    return {'dsn': f'postgresql://?{urllib.parse.urlencode(tls)}'}


def _default_root() -> Path | None:
    """The root certificate libpq (and asyncpg) use when the URL names none, if there is one."""
    named = os.environ.get('PGSSLROOTCERT')
    path = Path(named) if named else Path.home() / '.postgresql' / 'root.crt'
    return path if path.is_file() else None
