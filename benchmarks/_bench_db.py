"""Database helpers the benchmark scripts share: the PostgreSQL server, planner statistics, server versions."""

from __future__ import annotations

import sqlite3

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from testkit.postgres import PostgresUnavailable, postgres_url, require_postgres


def postgres_server() -> tuple[str | None, str]:
    """The URL of a PostgreSQL server to measure on, or None and why there is none.

    `testkit.postgres` takes the server named by `$SESSION_STORE_TEST_PG_URL`, else starts a throwaway local
    cluster (fsync off, stopped and deleted at exit) when PostgreSQL is installed.
    """
    url = postgres_url()
    if url is not None:
        return url, ''
    try:
        require_postgres()
    except (PostgresUnavailable, RuntimeError) as error:
        return None, str(error)
    return None, 'no server'


async def analyze(engine: AsyncEngine) -> None:
    """PostgreSQL: refresh the planner's statistics, as autovacuum would after a bulk load. SQLite: nothing,
    as nothing in the store runs ANALYZE there."""
    if engine.dialect.name == 'postgresql':
        async with engine.begin() as conn:
            await conn.execute(text('ANALYZE'))


async def server_version(engine: AsyncEngine) -> str:
    """`SQLite 3.40.1` or `PostgreSQL 15.18 (Debian ...)`."""
    if engine.dialect.name == 'sqlite':
        return f'SQLite {sqlite3.sqlite_version}'
    async with engine.connect() as conn:
        return f'PostgreSQL {await conn.scalar(text("SHOW server_version"))}'


async def describe(url: str, where: str) -> str:
    """The section title of a backend: its version and where its databases are."""
    engine = create_async_engine(url)
    try:
        return f'=== {await server_version(engine)}, {where}'
    finally:
        await engine.dispose()
