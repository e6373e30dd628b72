"""Faults to inject into a PostgreSQL server of a test's own: restart it, stop it and start it again, reconfigure
it, and put PgBouncer in transaction mode in front of it.

A test that restarts a server must own it: ``own_server()`` starts a throwaway cluster (``testkit.postgres``'s
one implementation) and yields an ``OwnServer`` that restarts, stops and starts it with ``pg_ctl``, and changes its
settings (``configure``) and its client authentication (``allow_first``). ``pgbouncer`` starts Debian's
``pgbouncer`` in front of a server, in ``pool_mode = transaction``, and yields the URL through it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

from testkit.postgres import (
    HOST,
    Server,
    _execute,
    _free_port,
    _run,
    _server_user,
    run_async,
    start_server,
    stop_server,
)

__all__ = ('OwnServer', 'PoolerUnavailable', 'own_server', 'pgbouncer')


class PoolerUnavailable(Exception):
    """Debian's `pgbouncer` is not installed here: the tests through a pooler skip, as PostgreSQL's do without a
    server (never under CI, which installs it)."""


@dataclass(frozen=True)
class OwnServer:
    """A cluster this test alone uses, so it may restart it."""

    server: Server

    @property
    def url(self) -> str:
        return self.server.url

    def restart(self, mode: str = 'fast') -> None:
        """`pg_ctl restart -m MODE`: every connection is closed; the server is back when it returns."""
        self._pg_ctl('restart', f'--mode={mode}')

    def stop(self, mode: str = 'fast') -> None:
        self._pg_ctl('stop', f'--mode={mode}')

    def start(self) -> None:
        self._pg_ctl('start')

    def configure(self, **settings: str) -> None:
        """Set server settings (`ALTER SYSTEM SET name = 'value'`), then restart so that every one takes effect."""
        statements = [f"ALTER SYSTEM SET {name} = '{value}'" for name, value in settings.items()]
        run_async(lambda: _execute(make_url(self.url), *statements))
        self.restart()

    def allow_first(self, line: str) -> None:
        """Put `line` (a `pg_hba.conf` rule) before the cluster's own rules; it applies from the next restart."""
        hba = self.data / 'pg_hba.conf'
        hba.write_text(f'{line}\n{hba.read_text()}')

    @property
    def data(self) -> Path:
        """The cluster's data directory (its configuration files live there)."""
        return self.server.root / 'data'

    def own(self, path: Path) -> None:
        """Give `path` to the user the server runs as, readable by it alone (as the server wants its TLS key)."""
        user = _server_user()
        if user is not None:
            account = pwd.getpwnam(user)
            os.chown(path, account.pw_uid, account.pw_gid)
        path.chmod(0o600)

    def _pg_ctl(self, *args: str) -> None:
        root = self.server.root
        _run(
            [
                self.server.bindir / 'pg_ctl',
                *args,
                '--wait',
                '--silent',
                '-D',
                self.data,
                '-l',
                root / 'server.log',
            ],
            _server_user(),
            root,
        )


@contextmanager
def own_server() -> Iterator[OwnServer]:
    """A throwaway cluster in a new temporary folder (one the server's user can reach), stopped and removed after."""
    server = start_server()
    try:
        yield OwnServer(server)
    finally:
        stop_server(server.root)


@contextmanager
def pgbouncer(server_url: str, root: Path, *, pool_size: int = 4) -> Iterator[str]:
    """PgBouncer in transaction mode in front of the server at `server_url` (every database it has), in the empty
    folder `root`; the URL through it, for the database `server_url` names. Stopped after the block.

    Raises:
        PoolerUnavailable: Debian's `pgbouncer` is not installed (RuntimeError under CI, where it must be).
    """
    program = shutil.which('pgbouncer') or '/usr/sbin/pgbouncer'
    if not os.access(program, os.X_OK):
        missing = 'pgbouncer is not installed (Debian: apt-get install pgbouncer)'
        raise RuntimeError(f'{missing}; CI must have it') if os.environ.get('CI') else PoolerUnavailable(missing)
    url = make_url(server_url)
    port = _free_port()
    root.mkdir(parents=True, exist_ok=True)
    (root / 'users.txt').write_text(f'"{url.username}" "{url.password}"\n')
    (root / 'pgbouncer.ini').write_text(
        '\n'.join(
            [
                '[databases]',
                f'* = host={url.host} port={url.port}',
                '[pgbouncer]',
                f'listen_addr = {HOST}',
                f'listen_port = {port}',
                f'unix_socket_dir = {root}',
                'auth_type = plain',
                f'auth_file = {root / "users.txt"}',
                'pool_mode = transaction',
                'max_client_conn = 500',
                f'default_pool_size = {pool_size}',
                f'logfile = {root / "pgbouncer.log"}',
                f'pidfile = {root / "pgbouncer.pid"}',
                'ignore_startup_parameters = extra_float_digits',
                '',
            ]
        )
    )
    user = _server_user()  # PgBouncer, like PostgreSQL, refuses to run as root
    if user is not None:
        account = pwd.getpwnam(user)
        for path in (root, *root.iterdir()):
            os.chown(path, account.pw_uid, account.pw_gid)
    subprocess.run(
        [program, '-d', str(root / 'pgbouncer.ini')], user=user, group=user, check=True, capture_output=True, timeout=30
    )
    deadline = time.monotonic() + 10
    while not (root / 'pgbouncer.pid').exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield url.set(host=HOST, port=port).render_as_string(hide_password=False)
    finally:
        pid = int((root / 'pgbouncer.pid').read_text())
        os.kill(pid, signal.SIGTERM)
