"""libpq's multi-host URLs, as hosted providers and HA tools hand them out, translated for SQLAlchemy's asyncpg
dialect and asyncpg (or refused before anything connects, saying what to write), without a server: every form, every
`target_session_attrs`, and the password kept out of every message. The same URLs against real servers are in
`tests/test_connecting.py`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from session_store import SessionStore, StoreError
from session_store._store_error import InvalidURL
from tests._cli import fails
from tests.test_connecting import invoke

SECRET = 'n0t-in-any-message'


def connect_arguments(store: SessionStore) -> dict[str, Any]:
    """What SQLAlchemy's asyncpg dialect hands `asyncpg.connect()` for the store's URL (before `connect_args`)."""
    _, arguments = store.engine.dialect.create_connect_args(store.engine.url)
    return dict(arguments)


def hosts_of(url: str) -> tuple[list[str], list[int]]:
    """The hosts asyncpg would try, in order, and their ports."""
    arguments = connect_arguments(SessionStore(url))
    return list(arguments['host']), list(arguments['port'])


@pytest.fixture(autouse=True)
def no_pgport(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv('PGPORT', raising=False)


@pytest.mark.parametrize(
    ('url', 'hosts', 'ports'),
    [
        # libpq's URI form: a comma list of hosts, each with its own port, the form providers and HA tools write
        ('postgresql+asyncpg://app:{pw}@h1:5432,h2:5433/app', ['h1', 'h2'], [5432, 5433]),
        ('postgresql://app:{pw}@h1:6432,h2:6433,h3:6434/app', ['h1', 'h2', 'h3'], [6432, 6433, 6434]),
        (
            'postgres://app:{pw}@db-1.internal:5432,db-2.internal:5432/app',
            ['db-1.internal', 'db-2.internal'],
            [5432] * 2,
        ),
        # a host without a port gets the default (5432), as in libpq: `h1,h2:5433` is h1:5432 and h2:5433
        ('postgresql://app:{pw}@h1,h2:5433/app', ['h1', 'h2'], [5432, 5433]),
        ('postgresql://app:{pw}@h1,h2/app', ['h1', 'h2'], [5432, 5432]),
        ('postgresql://app:{pw}@[2001:db8::1]:5432,[2001:db8::2]/app', ['2001:db8::1', '2001:db8::2'], [5432, 5432]),
        ('postgresql://app:{pw}@%2Fvar%2Frun%2Fpostgresql,h2:5433/app', ['/var/run/postgresql', 'h2'], [5432, 5433]),
        # libpq's keyword lists in the query: one port for every host, or one per host (empty: the default)
        ('postgresql://app:{pw}@/app?host=h1,h2&port=5432,5433', ['h1', 'h2'], [5432, 5433]),
        ('postgresql://app:{pw}@/app?host=h1,h2&port=6432', ['h1', 'h2'], [6432, 6432]),
        ('postgresql://app:{pw}@/app?host=h1,h2&port=,5433', ['h1', 'h2'], [5432, 5433]),
        ('postgresql://app:{pw}@/app?host=h1,h2', ['h1', 'h2'], [5432, 5432]),
        ('postgresql://app:{pw}@:6432/app?host=h1,h2', ['h1', 'h2'], [6432, 6432]),
        ('postgresql://app:{pw}@/app?host=::1,10.0.0.2&port=5432,5433', ['::1', '10.0.0.2'], [5432, 5433]),
        # SQLAlchemy's own form, which worked before: host=HOST:PORT, given once per host
        ('postgresql://app:{pw}@/app?host=h1:5432&host=h2:5433', ['h1', 'h2'], [5432, 5433]),
        ('postgresql://app:{pw}@/app?host=h1&host=h2:5433', ['h1', 'h2'], [5432, 5433]),
        ('postgresql://app:{pw}@/app?host=[2001:db8::1]:5432&host=h2:5433', ['2001:db8::1', 'h2'], [5432, 5433]),
    ],
)
def test_every_multi_host_form_reaches_asyncpg_as_its_hosts_and_ports_in_order(
    url: str, hosts: list[str], ports: list[int]
) -> None:
    store = SessionStore(url.format(pw=SECRET))
    assert hosts_of(url.format(pw=SECRET)) == (hosts, ports)
    assert store.url.password == SECRET and store.url.username == 'app' and store.url.database == 'app'
    assert SECRET not in repr(store) and SECRET not in store.display_url
    assert ','.join(hosts) in str(store.url.query['host'])  # the hosts tried, named wherever the URL is shown
    # The URL the store took (`store.url`, the one its messages show) opens the same hosts again.
    assert SessionStore(store.url).url == store.url
    assert SessionStore(store.url.render_as_string(hide_password=False)).url == store.url


def test_the_default_port_of_hosts_without_one_is_pgport_as_in_libpq(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('PGPORT', '6000')
    assert hosts_of('postgresql://app@h1,h2:5433/app') == (['h1', 'h2'], [6000, 5433])


@pytest.mark.parametrize('attributes', ['any', 'primary', 'standby', 'prefer-standby', 'read-write', 'read-only'])
def test_every_target_session_attrs_reaches_asyncpg(attributes: str) -> None:
    url = f'postgresql://app:{SECRET}@h1:5432,h2:5433/app?target_session_attrs={attributes}'
    assert connect_arguments(SessionStore(url))['target_session_attrs'] == attributes
    assert hosts_of(url) == (['h1', 'h2'], [5432, 5433])


@pytest.mark.parametrize(
    ('url', 'host', 'port'),
    [
        ('postgresql://app:{pw}@db.internal:5433/app', 'db.internal', 5433),
        ('postgresql://app:{pw}@db.internal/app?target_session_attrs=read-write', 'db.internal', None),
        ('postgresql://app:{pw}@[2001:db8::1]:5433/app', '2001:db8::1', 5433),
        ('postgresql://app:{pw}@/app?host=/var/run/postgresql', '/var/run/postgresql', None),
        ('postgresql://app:{pw}@/app?host=db.internal:5433', 'db.internal', 5433),
        ('postgresql://app:{pw}@/app?host=db.internal&port=5433', 'db.internal', 5433),
    ],
)
def test_one_host_is_left_as_it_was_given(url: str, host: str, port: int | None) -> None:
    arguments = connect_arguments(SessionStore(url.format(pw=SECRET)))
    assert (arguments['host'], arguments.get('port')) == (host, port)


@pytest.mark.parametrize(
    ('url', 'says'),
    [
        ('postgresql://app:{pw}@h1:5432,h2:x/app', "port 'x' of host h2 is not a number"),
        ('postgresql://app:{pw}@h1:5432,h2:70000/app', "port '70000' of host h2 is not a number from 1 to 65535"),
        ('postgresql://app:{pw}@h1:5432,,h2/app', 'names an empty host'),
        ('postgresql://app:{pw}@h1,[2001:db8::1/app', 'an IPv6 address goes in brackets'),
        ('postgresql://app:{pw}@h1:5432,h2:5433/app?host=h3', 'names hosts both before the path and in its query'),
        ('postgresql://app:{pw}@h1,h2/app?port=5432,5433', 'names hosts both before the path and in its query'),
        ('postgresql://app:{pw}@/app?host=h1,h2,h3&port=5432,5433', 'gives 3 hosts and 2 ports'),
        ('postgresql://app:{pw}@/app?host=h1&port=5432,5433', 'gives 1 host and 2 ports'),
        ('postgresql://app:{pw}@/app?host=h1:5432,h2:5433', 'a port in a libpq host list'),
        ('postgresql://app:{pw}@/app?host=h1:5432&host=h2:5433&port=5432', 'both with each host and in port='),
        ('postgresql://app:{pw}@/app?host=h1,h2&port=5432&port=5433', 'port is given 2 times: give it once'),
        ('postgresql://app:{pw}@/app?host=h1,h2&port=a,b', "port 'a' of host h1 is not a number"),
        ('postgresql://app:{pw}@/app?host=2001:db8::1&host=h2', 'an IPv6 address goes in brackets'),
        ('postgresql://app:{pw}@h1,h2/app?target_session_attrs=master', 'target_session_attrs must be one of any'),
        ('postgresql://app:{pw}@h1,h2/app?load_balance_hosts=random', 'asyncpg tries the hosts in the order given'),
    ],
)
def test_bad_host_lists_are_refused_before_connecting_naming_the_form_to_write(
    url: str, says: str, tmp_path: Path
) -> None:
    text = url.format(pw=SECRET)
    with pytest.raises(InvalidURL) as refused:
        SessionStore(text)
    message = str(refused.value)
    assert says in message, message
    assert SECRET not in message and 'invalid literal' not in message
    assert isinstance(refused.value, StoreError) and isinstance(refused.value, ValueError)
    # Every refusal of a host list shows the form that works.
    if 'host' in says or 'port' in says or 'IPv6' in says:
        assert 'postgresql://user@h1:5432,h2:5433/db' in message or '?host=h1,h2&port=5432,5433' in message, message
    line = fails(invoke(text, 'sessions'), says)
    assert SECRET not in line


def test_every_url_the_store_refuses_is_an_invalid_url_and_a_value_error_without_its_password() -> None:
    for url in (
        'not a url',
        f'postgres//app:{SECRET}@db.internal/app',  # no colon after the scheme
        f'mysql://root:{SECRET}@localhost/db',
        f'postgresql://app:{SECRET}@db.internal:port/app',
        f'postgresql://app:{SECRET}@h/app?keepalives=1',
    ):
        with pytest.raises(InvalidURL) as refused:
            SessionStore(url)
        assert SECRET not in str(refused.value)
