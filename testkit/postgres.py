"""A real PostgreSQL server for the tests: found, or started and thrown away.

The API, smallest first:

- ``postgres_url()`` -> ``str | None``: an async SQLAlchemy URL
  (``postgresql+asyncpg://USER:PASS@127.0.0.1:PORT/DBNAME``) for a server that accepted a
  connection, or None. It is worked out once per process and cached:

  1. ``$SESSION_STORE_TEST_PG_URL`` (``ENV_VAR``), when set, is the answer if a connection to it
     succeeds, and None otherwise: a server that was asked for by name is never silently swapped
     for another one.
  2. Otherwise, when PostgreSQL's server programs are installed (``initdb``/``pg_ctl`` on PATH or
     under ``/usr/lib/postgresql/*/bin``), a throwaway cluster is started in a temporary folder,
     listening on 127.0.0.1 only, and stopped and deleted by an ``atexit`` handler.
  3. Otherwise None.
- ``share_with_child_processes()``: resolves the server now and names it in ``$SESSION_STORE_TEST_PG_URL``,
  so that the processes this one starts afterwards (pytest-xdist's workers) test against it instead of each
  starting a cluster of its own.
- ``require_postgres()`` -> ``str``: the same URL, or an exception saying why there is none:
  ``RuntimeError`` under CI (``$CI`` non-empty), where a missing server is a broken build, and
  ``PostgresUnavailable`` elsewhere, for a fixture to turn into ``pytest.skip(str(exc))``.
- ``fresh_database(url, template=None)`` -> ``str``: creates a uniquely named database on the server of
  ``url``, empty or a copy of the database ``template`` (``CREATE DATABASE ... TEMPLATE``), and returns its
  URL; ``drop_database(url)`` removes it again; ``seal_template(url)`` keeps connections out of a template.
- ``run_async(make)``: runs the coroutine ``make()`` makes to completion on a loop in a thread of its own,
  so that the synchronous helpers here work inside a running event loop too.
- ``start_server(root)`` / ``stop_server(root)``: the one implementation of "start a throwaway
  cluster", for a server that must outlive this process. ``.ci/run`` uses it through the command
  line::

      python -m testkit.postgres start DIR   # prints the URL; the server keeps running
      python -m testkit.postgres stop DIR    # stops it and deletes DIR

- ``replicated_pair()``: a context manager yielding a ``ReplicatedPair``, a primary and a streaming standby
  that every commit waits for (synchronous replication), for a failover test: ``stop_now(pair.primary)`` stops
  the primary hard, ``promote(pair.standby)`` makes the standby a primary, and
  ``clear_synchronous_standbys(pair.standby)`` lets the promoted node commit without a standby of its own.
  ``pair.url`` lists both servers in one libpq multi-host URL with ``target_session_attrs=read-write``.
  Both servers are stopped and their folder deleted as the block ends.

Only 127.0.0.1 is ever listened on or connected to by what this module starts. When run as root
(CI is), the server runs as the ``postgres`` system user, because PostgreSQL refuses to run as root.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import functools
import glob
import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import asyncpg  # type: ignore[import-untyped]  # ships no type hints
from sqlalchemy.engine import URL, make_url

__all__ = [
    'ENV_VAR',
    'STANDBY_NAME',
    'PostgresUnavailable',
    'ReplicatedPair',
    'Server',
    'clear_synchronous_standbys',
    'drop_database',
    'fresh_database',
    'postgres_url',
    'promote',
    'replicated_pair',
    'require_postgres',
    'run_async',
    'seal_template',
    'share_with_child_processes',
    'start_replicated_pair',
    'start_server',
    'stop_now',
    'stop_replicated_pair',
    'stop_server',
]

ENV_VAR = 'SESSION_STORE_TEST_PG_URL'
"""The environment variable naming an already running server to test against."""

HOST = '127.0.0.1'
"""The only address a throwaway server listens on."""

SUPERUSER = 'postgres'
"""The superuser that a throwaway cluster is initialised with."""

DATABASE = 'session_store_test'
"""The database that ``start_server`` creates, named in the URL it returns."""

CONNECT_TIMEOUT = 10.0
"""Seconds to wait for a connection before calling a server unusable."""

_T = TypeVar('_T')


class PostgresUnavailable(Exception):
    """No PostgreSQL server could be found or started; the message says why."""


@dataclass(frozen=True)
class Server:
    """A running throwaway cluster: where it lives and how to reach it."""

    url: str
    """The async SQLAlchemy URL of its database ``DATABASE``."""
    root: Path
    """The folder holding the data directory, socket and log; ``stop_server(root)`` removes it."""
    version: str
    """The server's ``server_version``, e.g. ``15.18 (Debian 15.18-0+deb12u1)``."""
    bindir: Path
    """The folder of the ``initdb``/``pg_ctl``/``postgres`` programs it was started with."""


# --- finding and running the server programs -------------------------------------------------


def _bindir() -> Path:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres``, or raise PostgresUnavailable."""
    candidates: list[Path] = []
    on_path = shutil.which('initdb')
    if on_path:
        # Resolve symlinks (e.g. /usr/local/bin/initdb -> /usr/lib/postgresql/15/bin/initdb) so that
        # pg_ctl, initdb and postgres all come from one installation.
        candidates.append(Path(on_path).resolve().parent)

    def major(path: str) -> int:
        match = re.search(r'/postgresql/(\d+)/', path)
        return int(match.group(1)) if match else -1

    # Debian keeps the server programs off PATH, one folder per major version: newest first.
    for initdb in sorted(glob.glob('/usr/lib/postgresql/*/bin/initdb'), key=major, reverse=True):
        candidates.append(Path(initdb).parent)
    for bindir in candidates:
        if all(os.access(bindir / program, os.X_OK) for program in ('initdb', 'pg_ctl', 'postgres')):
            return bindir
    raise PostgresUnavailable(
        'no PostgreSQL server programs (initdb, pg_ctl, postgres) on PATH or in /usr/lib/postgresql'
    )


def _server_user() -> str | None:
    """The user to run the server as: None for ourselves, ``postgres`` when we are root."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam('postgres')
    except KeyError:
        raise PostgresUnavailable(
            "running as root, which PostgreSQL refuses, and there is no 'postgres' user to run it as"
        ) from None
    return 'postgres'


def _run(args: list[str | Path], user: str | None, cwd: Path) -> None:
    """Run a server program, as ``user`` if given; raise PostgresUnavailable with its output on failure."""
    # cwd must be a folder that ``user`` can enter: initdb and pg_ctl fail in one it can't (e.g. /root).
    # PG* variables of the caller (PGDATA, PGPORT, ...) must not redirect what we start.
    env = {key: value for key, value in os.environ.items() if not key.startswith('PG')}
    try:
        subprocess.run(
            [str(arg) for arg in args],
            cwd=cwd,
            env=env,
            user=user,
            group=user,
            extra_groups=[] if user else None,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
    except subprocess.CalledProcessError as exc:
        output = (exc.stdout + exc.stderr).strip()
        raise PostgresUnavailable(f'{Path(args[0]).name} failed ({exc.returncode}): {output}') from exc
    except subprocess.TimeoutExpired as exc:
        raise PostgresUnavailable(f'{Path(args[0]).name} timed out') from exc


def _free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


# --- talking to a server ---------------------------------------------------------------------


def run_async(make: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """Run a coroutine to completion on a fresh event loop in another thread.

    A thread of its own makes this safe to call from inside a running event loop (an async test or
    fixture), where ``asyncio.run`` would refuse to start a second loop.
    """
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, make()).result()


def _asyncpg_dsn(url: URL) -> str:
    """The libpq-style DSN that asyncpg takes for a SQLAlchemy URL."""
    return url.set(drivername='postgresql').render_as_string(hide_password=False)


async def _execute(url: URL, *statements: str) -> str:
    """Run ``statements`` on the database of ``url``, then return the server's version."""
    conn = await asyncpg.connect(_asyncpg_dsn(url), timeout=CONNECT_TIMEOUT)
    try:
        for statement in statements:
            await conn.execute(statement)
        return str(await conn.fetchval('SHOW server_version'))
    finally:
        await conn.close()


def _quote_ident(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def fresh_database(base_url: str, *, template: str | None = None, prefix: str = 'session_store_test') -> str:
    """Create a database with a unique name on the server of ``base_url``; return its URL.

    Empty (a copy of ``template1``) when ``template`` is None; otherwise a copy of the database named in the
    URL ``template``, made by ``CREATE DATABASE ... TEMPLATE``, which PostgreSQL refuses while anything else
    is connected to the template (``seal_template`` keeps everything out). The name is ``prefix``, this
    process's id and a random suffix, so processes sharing one server never collide. The database is created
    from a connection to the ``postgres`` maintenance database, so the user of ``base_url`` needs the CREATEDB
    privilege (the throwaway cluster's superuser has it). Safe to call from inside a running event loop.
    """
    url = make_url(base_url)
    name = f'{prefix}_{os.getpid()}_{uuid.uuid4().hex[:16]}'
    create = f'CREATE DATABASE {_quote_ident(name)}'
    if template is not None:
        source = make_url(template).database
        if not source:
            raise ValueError(f'no database named in the template URL {make_url(template)!r}')
        create += f' TEMPLATE {_quote_ident(source)}'
    run_async(lambda: _execute(url.set(database='postgres'), create))
    return url.set(database=name).render_as_string(hide_password=False)


def seal_template(url: str) -> None:
    """Refuse every new connection to the database of ``url``, so that it can be copied as a template at any time.

    Nothing should be connected to it when this is called; ``drop_database`` still drops it.
    """
    parsed = make_url(url)
    if not parsed.database:
        raise ValueError(f'no database named in {parsed!r}')
    seal = f'ALTER DATABASE {_quote_ident(parsed.database)} WITH ALLOW_CONNECTIONS false'
    run_async(lambda: _execute(parsed.set(database='postgres'), seal))


def drop_database(url: str) -> None:
    """Drop the database named in ``url``, closing any connections still open to it."""
    parsed = make_url(url)
    if not parsed.database:
        raise ValueError(f'no database named in {parsed!r}')
    # WITH (FORCE) (PostgreSQL 13+) ends leftover connections, e.g. from an engine not disposed.
    drop = f'DROP DATABASE IF EXISTS {_quote_ident(parsed.database)} WITH (FORCE)'
    run_async(lambda: _execute(parsed.set(database='postgres'), drop))


# --- a throwaway cluster ---------------------------------------------------------------------


def start_server(root: Path | None = None) -> Server:
    """Start a throwaway PostgreSQL cluster in ``root`` (a new temporary folder if None).

    ``root`` must be empty or missing. The cluster listens on 127.0.0.1 on a free port, keeps its
    unix socket inside ``root``, trades durability for speed (``fsync=off``), and has a superuser
    with a random password and an empty database ``DATABASE``. It keeps running after this process
    exits: stop it with ``stop_server(root)``. Raises PostgresUnavailable when it can't be started,
    after undoing whatever was started.
    """
    bindir = _bindir()
    user = _server_user()
    root = Path(tempfile.mkdtemp(prefix='session-store-pg-')) if root is None else root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise PostgresUnavailable(f'{root} is not empty')
    if user is not None:
        account = pwd.getpwnam(user)
        os.chown(root, account.pw_uid, account.pw_gid)
    root.chmod(0o700)
    try:
        return _start(bindir, user, root)
    except BaseException:
        stop_server(root)
        raise


def _start(bindir: Path, user: str | None, root: Path) -> Server:
    """Initialise, configure and start a cluster in the empty folder ``root``, owned by ``user``."""
    data = root / 'data'
    password = secrets.token_hex(16)
    pwfile = root / 'pwfile'
    pwfile.write_text(password + '\n')
    if user is not None:
        account = pwd.getpwnam(user)
        os.chown(pwfile, account.pw_uid, account.pw_gid)
    # C locale: the same collation everywhere, and no dependence on which locales are installed.
    # --no-sync: the cluster is thrown away, so its files need not reach the disk.
    _run(
        [
            bindir / 'initdb',
            f'--pgdata={data}',
            f'--username={SUPERUSER}',
            f'--pwfile={pwfile}',
            '--auth=scram-sha-256',
            '--encoding=UTF8',
            '--no-locale',
            '--no-sync',
        ],
        user,
        root,
    )
    pwfile.unlink()
    port = _free_port()
    # Later settings in postgresql.conf win over initdb's. Durability is off since nothing here
    # needs to survive a crash; listen_addresses keeps the server off every other address.
    settings = {
        'listen_addresses': f"'{HOST}'",
        'port': str(port),
        'unix_socket_directories': f"'{root}'",
        'fsync': 'off',
        'synchronous_commit': 'off',
        'full_page_writes': 'off',
        'max_connections': '200',
    }
    with (data / 'postgresql.conf').open('a') as conf:
        conf.write('\n# session-store tests\n')
        conf.writelines(f'{key} = {value}\n' for key, value in settings.items())
    # -l: a log file keeps the server's output off our pipes, which pg_ctl would otherwise hold open.
    _run(
        [bindir / 'pg_ctl', 'start', '--wait', '--timeout=60', '--silent', '-D', data, '-l', root / 'server.log'],
        user,
        root,
    )
    url = URL.create('postgresql+asyncpg', SUPERUSER, password, HOST, port, 'postgres')
    try:
        version = run_async(lambda: _execute(url, f'CREATE DATABASE {_quote_ident(DATABASE)}'))
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        raise PostgresUnavailable(f'the server started but refused us: {exc!r}') from exc
    return Server(url.set(database=DATABASE).render_as_string(hide_password=False), root, version, bindir)


def stop_server(root: Path) -> None:
    """Stop the cluster in ``root`` (immediately: nothing in it is kept) and delete ``root``.

    Does nothing that fails when the cluster is not running or ``root`` is gone, so it is safe in
    cleanup code that runs whether or not the start succeeded.
    """
    data = root / 'data'
    if (data / 'postmaster.pid').exists():
        try:
            _run(
                [_bindir() / 'pg_ctl', 'stop', '--mode=immediate', '--wait', '--silent', '-D', data],
                _server_user(),
                root,
            )
        except PostgresUnavailable as exc:
            print(f'testkit.postgres: could not stop the server in {root}: {exc}', file=sys.stderr)
    shutil.rmtree(root, ignore_errors=True)


# --- a primary and a synchronous standby ------------------------------------------------------

STANDBY_NAME = 'standby'
"""The standby's ``application_name``, which the primary's ``synchronous_standby_names`` names."""


@dataclass(frozen=True)
class ReplicatedPair:
    """A primary and a streaming standby of it, each a ``Server`` of its own, in one folder."""

    primary: Server
    standby: Server
    root: Path
    """The folder holding both servers' folders; ``stop_replicated_pair`` removes it."""

    @property
    def url(self) -> str:
        """Both servers in one libpq multi-host URL, primary first, that connects to whichever takes writes."""
        primary, standby = make_url(self.primary.url), make_url(self.standby.url)
        login = f'{primary.username}:{primary.password}'
        hosts = f'{HOST}:{primary.port},{HOST}:{standby.port}'
        return f'postgresql+asyncpg://{login}@{hosts}/{primary.database}?target_session_attrs=read-write'


def start_replicated_pair(root: Path | None = None) -> ReplicatedPair:
    """Start a primary and a standby that streams from it (``pg_basebackup -R``), in ``root`` (a new temporary
    folder if None), and return once the standby is the primary's synchronous standby.

    The primary is ``start_server``'s, with ``synchronous_commit = on`` and ``synchronous_standby_names`` naming
    the standby (``STANDBY_NAME``): a commit returns only once the standby has it. Both settings are in the
    primary's ``postgresql.auto.conf``, which the base backup copies, so the standby has them too and, once
    promoted, waits for a standby of its own at every commit until ``clear_synchronous_standbys`` (as a node
    configured alike would in production). Stop both with ``stop_replicated_pair``. Raises PostgresUnavailable
    when they can't be started, after undoing whatever was started.
    """
    bindir = _bindir()
    user = _server_user()
    root = Path(tempfile.mkdtemp(prefix='session-store-pg-pair-')) if root is None else root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise PostgresUnavailable(f'{root} is not empty')
    folders = (root / 'primary', root / 'standby')
    for folder in (root, *folders):
        folder.mkdir(exist_ok=True)
        if user is not None:
            account = pwd.getpwnam(user)
            os.chown(folder, account.pw_uid, account.pw_gid)
        folder.chmod(0o700)
    try:
        primary = _start(bindir, user, folders[0])
        standby = _start_standby(bindir, user, primary, folders[1])
        return ReplicatedPair(primary, standby, root)
    except BaseException:
        _stop_folders(root, folders)
        raise


def _start_standby(bindir: Path, user: str | None, primary: Server, root: Path) -> Server:
    """Make ``root``'s cluster a base backup of ``primary``, start it as its standby, and make it synchronous."""
    url = make_url(primary.url)
    names = f"'{STANDBY_NAME}'"
    # ALTER SYSTEM writes postgresql.auto.conf, which the base backup copies: the standby is set up alike. Only
    # after the standby is streaming does the primary reload them, or its commits would wait for nobody.
    run_async(
        lambda: _execute(
            url,
            "ALTER SYSTEM SET synchronous_commit = 'on'",
            f'ALTER SYSTEM SET synchronous_standby_names = {names}',
        )
    )
    conninfo = (
        f'host={HOST} port={url.port} user={url.username} password={url.password} application_name={STANDBY_NAME}'
    )
    data = root / 'data'
    # -R: standby.signal and primary_conninfo (this conninfo, with its application_name) in the copy.
    _run(
        [bindir / 'pg_basebackup', '-D', data, '-d', conninfo, '-R', '-X', 'stream', '-c', 'fast', '--no-sync'],
        user,
        root,
    )
    port = _free_port()
    # The copy's postgresql.conf is the primary's: later lines win, so the standby gets a port and socket of its own.
    with (data / 'postgresql.conf').open('a') as conf:
        conf.write(f"\n# the standby\nport = {port}\nunix_socket_directories = '{root}'\n")
    _run(
        [bindir / 'pg_ctl', 'start', '--wait', '--timeout=60', '--silent', '-D', data, '-l', root / 'server.log'],
        user,
        root,
    )
    run_async(lambda: _execute(url, 'SELECT pg_reload_conf()'))
    _wait_for_sync_standby(url)
    standby = url.set(port=port)
    version = run_async(lambda: _execute(standby))
    return Server(standby.render_as_string(hide_password=False), root, version, bindir)


def _wait_for_sync_standby(primary: URL, timeout: float = 60.0) -> None:
    """Return once the primary names its standby synchronous in ``pg_stat_replication``."""

    async def sync_state() -> str | None:
        conn = await asyncpg.connect(_asyncpg_dsn(primary), timeout=CONNECT_TIMEOUT)
        try:
            query = 'SELECT sync_state FROM pg_stat_replication WHERE application_name = $1'
            return await conn.fetchval(query, STANDBY_NAME)  # type: ignore[no-any-return]
        finally:
            await conn.close()

    deadline = time.monotonic() + timeout
    while (state := run_async(sync_state)) != 'sync':
        if time.monotonic() > deadline:
            raise PostgresUnavailable(f'the standby did not become synchronous within {timeout:g} s: {state!r}')
        time.sleep(0.1)


def stop_now(server: Server) -> None:
    """Stop ``server`` hard (``pg_ctl stop -m immediate``: its processes quit at once, as in a crash), keeping
    its folder, which ``stop_server`` or ``stop_replicated_pair`` removes later."""
    _run(
        [server.bindir / 'pg_ctl', 'stop', '--mode=immediate', '--wait', '--silent', '-D', server.root / 'data'],
        _server_user(),
        server.root,
    )


def promote(server: Server) -> None:
    """Promote the standby ``server`` to a primary (``pg_ctl promote``); return once it takes writes."""
    _run(
        [server.bindir / 'pg_ctl', 'promote', '--wait', '--silent', '-D', server.root / 'data'],
        _server_user(),
        server.root,
    )


def clear_synchronous_standbys(server: Server) -> None:
    """Empty ``synchronous_standby_names`` on ``server`` and reload: its commits stop waiting for a standby, and
    those waiting now go on. A promoted standby that inherited the setting needs it, having no standby itself."""
    url = make_url(server.url)
    run_async(lambda: _execute(url, "ALTER SYSTEM SET synchronous_standby_names = ''", 'SELECT pg_reload_conf()'))


def stop_replicated_pair(root: Path) -> None:
    """Stop both servers of the pair in ``root`` (whichever still run) and delete ``root``; never fails."""
    _stop_folders(root, (root / 'standby', root / 'primary'))


def _stop_folders(root: Path, folders: tuple[Path, ...]) -> None:
    for folder in folders:
        stop_server(folder)
    shutil.rmtree(root, ignore_errors=True)


@contextmanager
def replicated_pair() -> Iterator[ReplicatedPair]:
    """``start_replicated_pair()`` in a new temporary folder, stopped and deleted as the block ends."""
    pair = start_replicated_pair()
    try:
        yield pair
    finally:
        stop_replicated_pair(pair.root)


# --- what the tests call ---------------------------------------------------------------------


@functools.cache
def _resolve() -> str | PostgresUnavailable:
    """The URL to test against, or why there is none; decided once per process."""
    given = os.environ.get(ENV_VAR)
    if given:
        try:
            run_async(lambda: _execute(make_url(given)))
        except Exception as exc:
            return PostgresUnavailable(f'${ENV_VAR} is set, but connecting to it failed: {exc!r}')
        return given
    try:
        server = start_server()
    except PostgresUnavailable as exc:
        return exc
    atexit.register(stop_server, server.root)
    return server.url


def postgres_url() -> str | None:
    """The URL of a usable PostgreSQL server, starting a throwaway one if need be; None if none."""
    resolved = _resolve()
    return None if isinstance(resolved, PostgresUnavailable) else resolved


def share_with_child_processes() -> None:
    """Resolve the server in this process now, and name it in ``$ENV_VAR`` for the processes it starts later.

    A test run calls this before its first test: pytest-xdist's workers then share the one server (stopped
    when this process exits), and no test starts a server's programs itself, which the quick tier's process
    guard would fail. Without a usable server nothing is exported, and each process decides on its own again.
    """
    url = postgres_url()
    if url is not None:
        os.environ[ENV_VAR] = url


def require_postgres() -> str:
    """Like ``postgres_url()``, but raise instead of returning None.

    Raises RuntimeError under CI (``$CI`` non-empty), where PostgreSQL tests must not be skipped,
    and PostgresUnavailable elsewhere, for the caller to turn into a skip.
    """
    resolved = _resolve()
    if not isinstance(resolved, PostgresUnavailable):
        return resolved
    if os.environ.get('CI'):
        raise RuntimeError(f'PostgreSQL is required under CI but no server could be started: {resolved}')
    raise resolved


def _main(argv: list[str]) -> int:
    """``start DIR``: start a server that outlives us, print its URL. ``stop DIR``: stop, delete."""
    if len(argv) != 2 or argv[0] not in ('start', 'stop'):
        print('usage: python -m testkit.postgres {start|stop} DIR', file=sys.stderr)
        return 2
    command, root = argv[0], Path(argv[1])
    if command == 'stop':
        stop_server(root)
        return 0
    try:
        server = start_server(root)
    except PostgresUnavailable as exc:
        print(f'testkit.postgres: {exc}', file=sys.stderr)
        return 1
    port = make_url(server.url).port
    print(f'PostgreSQL {server.version} from {server.bindir}, on {HOST}:{port}', file=sys.stderr)
    print(server.url)
    return 0


if __name__ == '__main__':
    sys.exit(_main(sys.argv[1:]))
