"""The database server's share of a turn: what PostgreSQL itself does for ours and for the OpenAI Agents SDK's
`SQLAlchemySession`, and the bytes each keeps per stored message.

Run it from the repo root (the project venv is fine, so is a bare `python3`):

    python benchmarks/server_share.py                # 10,000 and 100,000 archived messages
    python benchmarks/server_share.py --quick        # 1,000: does it run, roughly how

With many application servers on one database, the server is what runs out, so its work is counted where it is
done: `pg_stat_statements` (top-level statements), on a throwaway server this script starts with the extension
preloaded and stops at the end (the PostgreSQL programs must be installed). Per turn, over `--turns` turns after a
warm-up cycle, each contender on its own database:

- door turn: ours `store.conversations.load` + `save` of a scripted agent's run (4 new messages), on a store with
  a summarizing processor (`_conversations_door.py`); the peer's `get_items(limit=20)` + `add_items` of the same
  turn's 4 items.
- `Session.run`: ours `session.run(agent, prompt)` on the same archive, the same processor; the peer as above.

Ours keeps a full-text index (GIN), whose entries queue up and are merged in batches, a few thousand blocks at
a time, by whichever insert finds the queue full, or by autovacuum, which `pg_stat_statements` doesn't count.
So autovacuum is off on this server, and each of our measures ends by merging what its turns queued
(`gin_clean_pending_list`), counted with them: each turn carries its share of the index upkeep, wherever the
merges would fall.

Each line gives statements, shared blocks (hit + read: the pages the server touched) and server time, and the
ratio of shared blocks, ours over the peer's. Bytes per stored message: every table of each contender with its
indexes and TOAST (ours: sessions, segments, messages with their full-text index, summaries), over the messages
stored.
"""

# The third-party imports follow the environment bootstrap, which must run first.
# ruff: noqa: E402

from __future__ import annotations

from _bench_env import AGENTS_SQLALCHEMY, ensure_environment

ensure_environment([AGENTS_SQLALCHEMY])

import argparse
import asyncio
import tempfile
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

from _bench_util import machine
from _conversations_door import CYCLE, Door, PeerTurns, contenders
from _scripted_turn import prompt
from _store_contenders import HAVE_PEER, PostgresDatabases
from _store_conversation import TAIL, peer_turn
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from testkit.postgres import PostgresUnavailable, Server, _bindir, _run, _server_user, start_server, stop_server

OURS = ('sessions', 'segments', 'messages', 'summaries')
PEERS = ('agent_sessions', 'agent_messages')


@dataclass(frozen=True)
class Share:
    """What the server did per turn for one contender."""

    statements: float
    blocks: float
    milliseconds: float

    def __str__(self) -> str:
        return f'{self.statements:.1f} statements, {self.blocks:.1f} shared blocks, {self.milliseconds:.2f} ms'


async def share(
    server: str,
    database: str,
    turns: int,
    run: Callable[[], Awaitable[None]],
    by_statement: bool = False,
    settle: Callable[[], Awaitable[None]] | None = None,
) -> Share:
    """`run` `turns` times, then `settle` (the upkeep those turns left, counted with them; run before as well, so
    no earlier turn's is); what `pg_stat_statements` counted for `database` meanwhile, per turn, and, with
    `by_statement`, each statement's blocks per turn printed, most first."""
    engine = create_async_engine(server)
    try:
        async with engine.connect() as connection:
            if settle is not None:
                await settle()
            await connection.execute(text('SELECT pg_stat_statements_reset()'))
            await connection.commit()
            for _ in range(turns):
                await run()
            if settle is not None:
                await settle()
            calls, blocks, milliseconds = (
                await connection.execute(
                    text(
                        'SELECT sum(calls), sum(shared_blks_hit + shared_blks_read), sum(total_exec_time) '
                        'FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = :name'
                    ),
                    {'name': database},
                )
            ).one()
            if by_statement:
                await print_statements(connection, database, turns)
    finally:
        await engine.dispose()
    return Share(float(calls) / turns, float(blocks) / turns, float(milliseconds) / turns)


async def print_statements(connection: AsyncConnection, database: str, turns: int) -> None:
    """Each statement `pg_stat_statements` counted for `database`: its shared blocks and calls per turn."""
    rows = await connection.execute(
        text(
            'SELECT calls, shared_blks_hit + shared_blks_read AS blocks, query '
            'FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = :name '
            'ORDER BY blocks DESC'
        ),
        {'name': database},
    )
    for calls, blocks, query in rows:
        print(f'    {blocks / turns:6.1f} blocks {calls / turns:4.1f} calls  {" ".join(query.split())[:150]}')


async def bytes_per_message(url: str, tables: tuple[str, ...], messages: int) -> str:
    """The bytes `tables` take on disk per stored message, in all and as table, indexes and TOAST."""
    engine = create_async_engine(url)
    try:
        async with engine.connect() as connection:
            heap, indexes, total = (
                await connection.execute(
                    text(
                        'SELECT sum(pg_relation_size(t)), sum(pg_indexes_size(t)), sum(pg_total_relation_size(t)) '
                        'FROM unnest(CAST(:tables AS regclass[])) AS t'
                    ),
                    {'tables': list(tables)},
                )
            ).one()
    finally:
        await engine.dispose()
    parts = {'table': heap, 'indexes': indexes, 'TOAST': total - heap - indexes}
    return f'{total / messages:,.0f} (' + ', '.join(f'{k} {v / messages:,.0f}' for k, v in parts.items()) + ')'


def url_of(engine: AsyncEngine) -> str:
    return engine.url.render_as_string(hide_password=False)


def database_of(url: str) -> str:
    name = make_url(url).database
    assert name is not None
    return name


async def measure(server: str, sizes: list[int], turns: int, by_statement: bool) -> None:
    databases = PostgresDatabases(server)
    try:
        async with AsyncExitStack() as stack:
            built = await contenders(stack, databases, sizes)
            for size in sizes:
                door, peer = built.doors[size], built.peers.get(size)
                for _ in range(CYCLE):  # a warm-up cycle: every statement prepared, one compaction made
                    await door.turn(next(door.turns))
                ours = database_of(url_of(door.store.engine))
                await report(server, size, turns, door, ours, peer, by_statement)
    finally:
        databases.close()


async def report(
    server: str, size: int, turns: int, door: Door, ours: str, peer: PeerTurns | None, by_statement: bool
) -> None:
    session = await door.store.session('archive')

    async def door_turn() -> None:
        await door.turn(next(door.turns))

    async def session_run() -> None:
        await session.run(door.agent, prompt(next(door.turns)))

    peer_share = None
    if peer is not None:
        items = peer.session

        async def peer_turn_() -> None:
            await items.get_items(TAIL)
            await items.add_items(peer_turn(next(peer.turns)))

        peer_share = await share(server, database_of(peer.url), turns, peer_turn_, by_statement)

    async def merge_pending_index_entries() -> None:
        async with door.store.engine.begin() as connection:
            await connection.execute(text(f"SELECT gin_clean_pending_list('{FULL_TEXT_INDEX}')"))

    for name, run in (('door turn', door_turn), ('Session.run', session_run)):
        mine = await share(server, ours, turns, run, by_statement, merge_pending_index_entries)
        line = f'{name} @{size:,} on PostgreSQL: ours {mine}'
        if peer_share is not None:
            line += f'; peer {peer_share} -> shared blocks ours/peer {mine.blocks / peer_share.blocks:.2f} x'
        print(line)
    ours_bytes = await bytes_per_message(url_of(door.store.engine), OURS, door.size + 4 * door.ran + 4 * turns)
    line = f'bytes per stored message @{size:,} on PostgreSQL: ours {ours_bytes}'
    if peer is not None:
        peer_bytes = await bytes_per_message(peer.url, PEERS, peer.size + 4 * (peer.ran + turns))
        line += f'; peer {peer_bytes}'
    print(line)


FULL_TEXT_INDEX = 'ix_messages_search_vector'
"""Our full-text index: GIN, which queues each insert's entries and merges them in batches, when its queue passes
`gin_pending_list_limit` (4 MB) during an insert or when (auto)vacuum runs."""


def counting_server(root: Path) -> Server:
    """A throwaway server (`testkit.postgres`) restarted with `pg_stat_statements` preloaded."""
    server = start_server(root)
    try:
        with (root / 'data' / 'postgresql.conf').open('a') as conf:
            conf.write("shared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.track = top\n")
            conf.write('autovacuum = off\n')  # its work goes uncounted: what a turn leaves is settled by a statement
        _run(
            [_bindir() / 'pg_ctl', 'restart', '--wait', '--silent', '-D', root / 'data', '-l', root / 'server.log'],
            _server_user(),
            root,
        )
    except BaseException:
        stop_server(root)
        raise
    return server


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='1,000 archived messages, 10 turns')
    parser.add_argument('--sizes', type=int, nargs='+', help='archived messages (default 10,000 and 100,000)')
    parser.add_argument('--turns', type=int, help='turns measured per contender (default 200)')
    parser.add_argument(
        '--by-statement', action='store_true', help="each statement's blocks per turn, under its contender's line"
    )
    args = parser.parse_args()
    sizes = args.sizes or ([1_000] if args.quick else [10_000, 100_000])
    turns = args.turns or (CYCLE * 2 if args.quick else 200)
    print(machine())
    if not HAVE_PEER:
        print('the peer is not installed: ours alone (PEERS UNAVAILABLE: see the first lines)')
    folder = Path(tempfile.mkdtemp(prefix='server-share-'))
    folder.chmod(0o755)  # the server may run as another user (as root, testkit runs it as `postgres`)
    root = folder / 'cluster'
    try:
        server = counting_server(root)
    except PostgresUnavailable as error:
        folder.rmdir()
        print(f'=== PostgreSQL figures skipped: {error}')
        return
    try:
        engine = create_async_engine(server.url)
        async with engine.begin() as connection:
            await connection.execute(text('CREATE EXTENSION pg_stat_statements'))
            print(f'=== PostgreSQL {await connection.scalar(text("SHOW server_version"))}, pg_stat_statements')
        await engine.dispose()
        await measure(server.url, sizes, turns, args.by_statement)
    finally:
        stop_server(root)
        folder.rmdir()


if __name__ == '__main__':
    asyncio.run(main())
