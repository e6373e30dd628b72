"""How long a migration holds writers up: the longest a write to `messages` waits while a database at revision 0004
(before the UI id column) is brought to this release's head, on PostgreSQL.

Run it from the repo root (the project venv):

    python benchmarks/migration.py                   # 1,000,000 archived messages
    python benchmarks/migration.py --quick           # 20,000: does it run, roughly how

`store.migrate()` expands, then fills in: the revisions commit at once (they only add), then the UI id column
is filled a batch per transaction and its index built `CONCURRENTLY`. Meanwhile a writer inserts a message a
statement at a time, each its own transaction, as a process of the release before goes on storing turns. The
figure is the longest one of those inserts took while the migration ran, beside the longest over as long a time
with no migration (the baseline: what the machine's load alone makes). Releases before revision 0007 ran the
revisions, the backfill and the index build in one transaction, and `ADD COLUMN` holds `messages`' exclusive lock
until its commit: measured so on 1,000,000 messages, the writer waited the whole migration (97 s).

The archive: a few hundred messages stored through the conversation door, their prompts carrying UI ids as a chat
front end's do (`VercelAIAdapter.load_messages`), copied in SQL to the size asked. PostgreSQL only (the server
`testkit/postgres.py` finds or starts): on SQLite every migration holds the one write lock, so a writer there
waits for the whole step it meets.
"""

# The third-party imports follow the environment bootstrap, which must run first.
# ruff: noqa: E402

from __future__ import annotations

from _bench_env import ensure_environment

ensure_environment()  # no peer: the repo root on sys.path (for `testkit.postgres`), and the project installed

import argparse
import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from importlib import resources

from _bench_db import postgres_server
from _bench_util import machine
from alembic import command
from alembic.config import Config
from pydantic_ai.conversation import Conversation
from pydantic_ai.ui.vercel_ai import VercelAIAdapter
from pydantic_ai.ui.vercel_ai.request_types import TextUIPart, UIMessage
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from session_store import SessionStore
from testkit.postgres import drop_database, fresh_database

SEEDED = 400
"""Messages stored through the store (100 turns of a prompt with a UI id and a reply), before the copies."""
WRITTEN = itertools.count(1)
"""Numbers the writer's messages (their position, negated, and entry id) across measurements."""
COLUMNS = 'session_pk, segment_pk, position, entry_id, run_id, kind, payload, text, tokens, created_at'
"""`messages`' columns at revision 0004 that a copy writes (the key and the search vector are made)."""


async def seed(url: str, messages: int) -> None:
    """A database at revision 0004 holding `messages` messages, a quarter of them prompts with a UI id."""
    async with SessionStore(url) as store:
        ui_messages = [
            UIMessage(id=f'ui-{n}', role=role, parts=[TextUIPart(text=f'{text} ORD-{n:05d}')])
            for n in range(SEEDED // 2)
            for role, text in (('user', 'Where is order'), ('assistant', 'It left the warehouse on Monday,'))
        ]
        history = VercelAIAdapter.load_messages(ui_messages)
        await store.conversations.save(Conversation(conversation_id='seed', messages=history))
        engine = store.engine
        async with engine.begin() as connection:
            await connection.run_sync(lambda sync: command.downgrade(_alembic(sync), '0004'))
            copies = max(0, messages // SEEDED - 1)
            await connection.execute(
                text(
                    f'INSERT INTO messages ({COLUMNS}) SELECT session_pk, segment_pk, position + k * {SEEDED}, '
                    "entry_id || '.' || k, run_id, kind, payload, text, tokens, created_at "
                    'FROM messages, generate_series(1, :copies) AS k'
                ),
                {'copies': copies},
            )
        async with engine.connect() as connection:
            await (await connection.execution_options(isolation_level='AUTOCOMMIT')).execute(text('VACUUM ANALYZE'))


def _alembic(connection: Connection) -> Config:
    """alembic's configuration for the migrations the package ships, run on `connection`."""
    with resources.as_file(resources.files('session_store.migrations')) as scripts:
        config = Config()
        config.set_main_option('script_location', str(scripts))
    config.attributes['connection'] = connection
    return config


async def migrate(url: str) -> None:
    store = SessionStore(url)
    try:
        await store.migrate()
    finally:
        await store.close()


async def idle(seconds: float) -> None:
    await asyncio.sleep(seconds)


async def longest_write(engine: AsyncEngine, stop: asyncio.Event) -> tuple[float, int]:
    """Insert a message at a time until `stop`: the longest an insert took, in seconds, and how many were made."""
    longest, made = 0.0, 0
    async with engine.connect() as connection:
        connection = await connection.execution_options(isolation_level='AUTOCOMMIT')
        while not stop.is_set():
            made += 1
            written = next(WRITTEN)
            began = time.perf_counter()
            await connection.execute(
                text(
                    f'INSERT INTO messages ({COLUMNS}) SELECT session_pk, segment_pk, -CAST(:n AS integer), :entry, '
                    'run_id, kind, payload, text, tokens, created_at FROM messages WHERE pk = 1'
                ),
                {'n': written, 'entry': f'written-meanwhile-{written}'},
            )
            longest = max(longest, time.perf_counter() - began)
    return longest, made


async def measure(url: str, work: Callable[[], Awaitable[None]]) -> tuple[float, float, int]:
    """`work` with a writer running: its seconds, the longest write's, and the writes made."""
    engine = create_async_engine(url)
    try:
        stop = asyncio.Event()
        writer = asyncio.create_task(longest_write(engine, stop))
        await asyncio.sleep(0.2)
        began = time.perf_counter()
        await work()
        took = time.perf_counter() - began
        await asyncio.sleep(0.2)
        stop.set()
        longest, made = await writer
        return took, longest, made
    finally:
        await engine.dispose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='20,000 messages')
    parser.add_argument('--messages', type=int, help='archived messages (default 1,000,000)')
    args = parser.parse_args()
    messages = args.messages or (20_000 if args.quick else 1_000_000)
    print(machine())
    server, why = postgres_server()
    if server is None:
        print(f'=== PostgreSQL figures skipped: {why}')
        return
    url = fresh_database(server, prefix='session_store_bench')
    try:
        await seed(url, messages)
        took, longest, made = await measure(url, lambda: migrate(url))
        _, baseline, _ = await measure(url, lambda: idle(took))
    finally:
        drop_database(url)
    print(
        f'migration 0004 -> head of {messages:,} messages on PostgreSQL: {took:.2f} s, '
        f'longest write {longest * 1000:.1f} ms ({made:,} writes), with no migration {baseline * 1000:.1f} ms'
    )


if __name__ == '__main__':
    asyncio.run(main())
