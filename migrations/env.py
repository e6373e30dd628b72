"""alembic environment: runs on the connection the store hands over, or on SESSION_STORE_URL from the command line."""

from __future__ import annotations

import asyncio
import os

from alembic import context
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from session_store._db.backfills import fill_in
from session_store._db.engine import DEFAULT_URL
from session_store._db.schema import head_revision
from session_store._db.schema import revision as revision_of
from session_store.rows import Base


def run_migrations(connection: Connection) -> None:
    # Batch mode lets SQLite, which can't ALTER most things in place, take the same migrations.
    context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


async def run_from_url(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(run_migrations)
        # What the revisions leave for after their commit (see session_store._db.backfills), once at the head.
        if await revision_of(engine) == head_revision():
            await fill_in(engine)
    finally:
        await engine.dispose()


connection = context.config.attributes.get('connection')
if connection is not None:
    run_migrations(connection)
else:
    asyncio.run(run_from_url(os.environ.get('SESSION_STORE_URL') or DEFAULT_URL))
