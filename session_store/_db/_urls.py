"""A PostgreSQL URL as libpq and hosted PostgreSQL services write it, made into what SQLAlchemy's asyncpg dialect
and asyncpg's `connect()` take: its hosts and its query parameters.

SQLAlchemy's asyncpg dialect hands every query parameter to `asyncpg.connect` as a keyword argument of text, and
asyncpg spells libpq's parameters differently or reads them only from a DSN: `?sslmode=require` would fail there
with `TypeError: connect() got an unexpected keyword argument`. Here each parameter is translated, or refused with
an `InvalidURL` (a `ValueError` too) that names it and says what to write instead, before anything connects.

libpq's several hosts (`postgresql://user@h1:5432,h2:5433/db`, or `?host=h1,h2&port=5432,5433`) become one form,
`?host=h1,h2&port=5432,5433` with every port written out, which SQLAlchemy's dialect reads as asyncpg's lists of
hosts and ports. Messages never show the URL's password: only host lists and parameters are quoted.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._store_error import InvalidURL

__all__ = ('DEFAULT_URL', 'Query', 'asyncpg_arguments', 'flag', 'host_list', 'hosts_in_query', 'seconds')

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

_HOST_FORMS = 'postgresql://user@h1:5432,h2:5433/db, or ?host=h1,h2&port=5432,5433'
"""The forms of several hosts that every refusal of a host list shows."""

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
    'load_balance_hosts': (
        'asyncpg tries the hosts in the order given: remove it, and list the hosts in the order to try them '
        f'({_HOST_FORMS}).'
    ),
}
"""libpq parameters asyncpg has no equivalent of, and what to write instead."""


def flag(name: str, text: object) -> bool:
    """A URL parameter that is true or false.

    Raises:
        InvalidURL: Neither.
    """
    value = str(text).lower()
    if value not in ('true', 'false', '1', '0'):
        raise InvalidURL(f'The URL parameter {name} must be true or false; got {text!r}.')
    return value in ('true', '1')


Query = dict[str, str | tuple[str, ...]]
"""A URL's query parameters, as SQLAlchemy's `URL.query` holds them: a parameter given more than once as a tuple."""


def seconds(name: str, value: str | tuple[str, ...]) -> float:
    """A URL parameter that is a number of seconds above 0.

    Raises:
        InvalidURL: Given more than once, not a number, or not above 0.
    """
    return float(_number(name, float, _single(name, value)))


def asyncpg_arguments(query: Mapping[str, str | tuple[str, ...]]) -> tuple[Query, dict[str, Any]]:
    """The query parameters that stay in the URL (which SQLAlchemy hands to asyncpg as they are), and the `connect()`
    arguments the others make.

    Raises:
        InvalidURL: A parameter given twice, of the wrong kind, naming a file that is not there, or that asyncpg has
            no equivalent of; each message says what to write instead.
    """
    left = dict(query)
    given = {name: _single(name, left.pop(name)) for name in list(left) if name != 'host'}
    arguments: dict[str, Any] = {}
    if 'ssl' in given:  # SQLAlchemy's own spelling of sslmode
        if 'sslmode' in given:
            raise InvalidURL('The URL gives both ssl and sslmode: give sslmode only.')
        given['sslmode'] = given.pop('ssl')
    tls = {name: given.pop(name) for name in _TLS if name in given}
    if tls:
        arguments.update(_tls_arguments(tls))
    if 'connect_timeout' in given:
        if 'timeout' in given:
            raise InvalidURL('The URL gives both connect_timeout and timeout: give one of them.')
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
        raise InvalidURL(
            f'The URL parameter target_session_attrs must be one of {", ".join(_SESSION_ATTRIBUTES)}; '
            f'got {attributes!r}.'
        )
    for name in given:
        if name not in _TEXT:
            raise InvalidURL(f'The URL parameter {name} {_refusal(name)}')
        left[name] = given[name]
    return left, arguments


_ADDRESS = re.compile(r'(?P<head>postgres(?:ql)?(?:\+\w+)?://)(?P<netloc>[^/?#]*)(?P<tail>.*)', re.DOTALL)
"""A PostgreSQL URL's scheme, its address (user, password and hosts, before the path) and the rest."""

_HOST_PORT = re.compile(r'(?:\[(?P<bracketed>[^\[\]]*)\]|(?P<name>[^\[\]:]*))(?::(?P<port>.*))?', re.DOTALL)
"""One host of a list, as libpq's address and SQLAlchemy's repeated `host=` write it: `name`, `name:port`,
`[IPv6]` or `[IPv6]:port`."""


def hosts_in_query(text: str) -> str:
    """`text` with libpq's several hosts in its address (`postgresql://user@h1:5432,h2:5433/db`) written as libpq's
    equivalent lists in its query (`postgresql://user@/db?host=h1,h2&port=5432,5433`, a port left out as an empty
    item), which SQLAlchemy reads (`host_list` then checks them); any other `text` as it is.

    SQLAlchemy's URL parser takes `h1:5432,h2:5433` for one host with the port `5432,h2:5433`, and fails on it with a
    bare `ValueError`.

    Raises:
        InvalidURL: Hosts both in the address and in the query, or an IPv6 address without its closing bracket.
    """
    address = _ADDRESS.fullmatch(text)
    if address is None:
        return text
    userinfo, at, hostspec = address['netloc'].rpartition('@')  # a password's own @ is written %40
    if ',' not in hostspec:
        return text
    path, _, query = address['tail'].partition('?')
    if {name for name, _ in urllib.parse.parse_qsl(query, keep_blank_values=True)} & {'host', 'port'}:
        raise InvalidURL(
            'The URL names hosts both before the path and in its query (host=, port=): name them in one place, as '
            f'{_HOST_FORMS}.'
        )
    hosts, ports = [], []
    for item in hostspec.split(','):
        host, port = _host_port(item)
        hosts.append(urllib.parse.unquote(host))
        ports.append(port)
    lists = urllib.parse.urlencode({'host': ','.join(hosts), 'port': ','.join(ports)})
    return f'{address["head"]}{userinfo}{at}{path}?{query}{"&" if query else ""}{lists}'


def host_list(query: Mapping[str, str | tuple[str, ...]], *, port: int | None) -> Query | None:
    """For a URL whose query names several hosts, the query with them in one form: `host=h1,h2` and
    `port=5432,5433`, every port written out (a host without one gets the default, `$PGPORT` or 5432, as in libpq),
    which SQLAlchemy's asyncpg dialect hands asyncpg as its lists of hosts and ports. `None` for a URL with one host
    or none, which needs nothing done. Hosts in the query replace the address's, as in libpq; `port` is the address's
    port, which every host in the query without a `port=` of its own is on.

    The query's forms: libpq's `host=h1,h2` with one `port=` for every host or one per host (`port=5432,5433`,
    an empty item for the default), and SQLAlchemy's `host=h1:5432&host=h2:5433`.

    Raises:
        InvalidURL: An empty host, a port that is not a port, not as many ports as hosts, ports both with the hosts
            and in `port=`, or a port in a libpq list of hosts; each message shows the forms that work.
    """
    given = query.get('host')
    ports_given = query.get('port')
    if isinstance(ports_given, tuple):
        raise InvalidURL(
            f'The URL parameter port is given {len(ports_given)} times: give it once, one port for every host or a '
            f'list of one per host, as in {_HOST_FORMS}.'
        )
    if isinstance(given, tuple):  # SQLAlchemy's form: host=h1:5432&host=h2:5433
        if ports_given is not None:
            raise InvalidURL(
                f'The URL gives ports both with each host and in port=: give them in one place, as in {_HOST_FORMS}.'
            )
        pairs = [_host_port(item) for item in given]
        hosts, ports = [host for host, _ in pairs], [given_port for _, given_port in pairs]
    else:
        hosts = [] if given is None else given.split(',')
        ports = [] if ports_given is None else ports_given.split(',')
        if len(ports) > 1 and len(ports) != max(len(hosts), 1):
            count = max(len(hosts), 1)
            raise InvalidURL(
                f'The URL gives {count} host{"s" if count > 1 else ""} and {len(ports)} ports: give one port for '
                f'every host, or one per host, as in {_HOST_FORMS}.'
            )
        if len(hosts) < 2:
            return None  # one host (or the default), as SQLAlchemy and asyncpg take it
        assert given is not None
        hosts = [_unbracketed(item, given) for item in hosts]
        if not ports:
            ports = ['' if port is None else str(port)]
        if len(ports) == 1:
            ports = ports * len(hosts)
    for host in hosts:
        if not host:
            raise InvalidURL(f'The URL names an empty host in its list of hosts: write them as {_HOST_FORMS}.')
    numbers = [_port_number(host, text) for host, text in zip(hosts, ports, strict=True)]
    left = {name: value for name, value in query.items() if name not in ('host', 'port')}
    return {**left, 'host': ','.join(hosts), 'port': ','.join(map(str, numbers))}


def _host_port(item: str) -> tuple[str, str]:
    """A host of a list and its port (`''` when it has none), from `name:port` or `[IPv6]:port`."""
    found = _HOST_PORT.fullmatch(item)
    if found is None or (found['port'] is not None and ':' in found['port']):
        # `[2001:db8::1` without its bracket, or a bare IPv6 address where a colon starts the port
        raise InvalidURL(
            f'The URL names a host {item!r} that is not one: an IPv6 address goes in brackets, as in '
            f'[2001:db8::1]:5432; write the hosts as {_HOST_FORMS}.'
        )
    return found['bracketed'] if found['bracketed'] is not None else found['name'], found['port'] or ''


def _unbracketed(item: str, given: str) -> str:
    """A host of libpq's `host=` list, which holds names and addresses alone (a bare IPv6 address, or one in
    brackets): a single colon there is a port, which libpq would take as part of the name."""
    if item.startswith('[') and item.endswith(']'):
        return item[1:-1]
    if item.count(':') == 1:
        raise InvalidURL(
            f'The URL puts a port in a libpq host list (?host={given}), where it would be read as part of the host '
            f'name: give the ports in port=, or with each host before the path, as in {_HOST_FORMS}.'
        )
    return item


def _port_number(host: str, text: str) -> int:
    """The port `text` gives `host`: the default (`$PGPORT`, or 5432) when empty, as in libpq."""
    if not text:
        return _default_port()
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= 65535):
        number = f'port {text!r} of host {host} is not a number from 1 to 65535'
        raise InvalidURL(f"The URL's {number}: write the hosts as {_HOST_FORMS}.")
    return int(text)


def _default_port() -> int:
    """The port of a host named without one: `$PGPORT` when it names one, else PostgreSQL's 5432 (libpq's, and
    asyncpg's)."""
    named = os.environ.get('PGPORT', '')
    return int(named) if named.isascii() and named.isdigit() and 1 <= int(named) <= 65535 else 5432


def _single(name: str, value: str | tuple[str, ...]) -> str:
    if isinstance(value, str):
        return value
    raise InvalidURL(f'The URL parameter {name} is given {len(value)} times: give it once.')


def _number(name: str, kind: type[int] | type[float], text: str) -> int | float:
    try:
        number = kind(text)
    except ValueError:
        raise InvalidURL(f'The URL parameter {name} must be a number; got {text!r}.') from None
    if name in _SECONDS and not number > 0:
        # libpq waits for ever on 0; asyncpg needs a bound.
        raise InvalidURL(f'The URL parameter {name} must be a number of seconds above 0; got {text!r}.')
    return number


_SECONDS = ('timeout', 'connect_timeout', 'query_wait_timeout')
"""Deadlines, which must be above 0."""


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
        raise InvalidURL(f'The URL parameter sslmode must be one of {", ".join(_SSL_MODES)}; got {mode!r}.')
    if tls.get('sslrootcert') == 'system':
        # libpq 16's "the system's root certificates", which asyncpg takes as ssl=True; it verifies the host name
        # too, and libpq allows no weaker mode with it.
        if mode not in (None, 'verify-full') or len(tls) > 1 + (mode is not None):
            raise InvalidURL(
                "The URL's sslrootcert=system verifies the server against the system root certificates and goes with "
                'sslmode=verify-full alone; for a client certificate, give the CA certificate file as sslrootcert=PATH.'
            )
        return {'ssl': True}
    for name in _TLS_FILES:
        if name in tls and not os.access(tls[name], os.R_OK):
            raise InvalidURL(f'The URL parameter {name} names {tls[name]!r}: no file this process can read.')
    if mode in ('verify-ca', 'verify-full') and 'sslrootcert' not in tls and _default_root() is None:
        raise InvalidURL(
            f"The URL's sslmode={mode} checks the server's certificate against a CA certificate: add "
            "sslrootcert=PATH (the file your provider gives), or sslrootcert=system for the system's root certificates."
        )
    return {'dsn': f'postgresql://?{urllib.parse.urlencode(tls)}'}


def _default_root() -> Path | None:
    """The root certificate libpq (and asyncpg) use when the URL names none, if there is one."""
    named = os.environ.get('PGSSLROOTCERT')
    path = Path(named) if named else Path.home() / '.postgresql' / 'root.crt'
    return path if path.is_file() else None
