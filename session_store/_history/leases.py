"""Leases: how runs that asked to wait queue behind the run in progress on a session.

A lease is two columns of the session's row (owner, expiry). A holder renews it while its run goes
on; a crashed holder's lease lapses by itself after `LEASE_TTL`, so it delays others by at most that.
"""

from __future__ import annotations

import asyncio
import random
from datetime import datetime, timedelta

from sqlalchemy import or_, update
from sqlalchemy.ext.asyncio import AsyncSession

from .._codec import now
from .._db.database import Database
from ..errors import SessionConflict
from ..rows import SessionRow

__all__ = ('LEASE_TTL', 'acquire_lease', 'release_lease', 'renew_lease')

LEASE_TTL = timedelta(seconds=30)
"""How long a waiting writer's lease lasts without renewal: what a crashed holder can delay others by."""


async def acquire_lease(database: Database, session_id: str, owner: str, *, timeout: float | None) -> None:
    """Take the session's lease for `owner`, waiting while another holder's lease is live.

    Raises:
        SessionConflict: The lease was not free within `timeout` seconds.
    """
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    pause = 0.02
    while True:
        moment = now()

        async def take(db: AsyncSession, moment: datetime = moment) -> bool:
            taken = await db.execute(
                update(SessionRow)
                .where(
                    SessionRow.session_id == session_id,
                    or_(SessionRow.lease_owner.is_(None), SessionRow.lease_expires < moment),
                )
                .values(lease_owner=owner, lease_expires=moment + LEASE_TTL)
            )
            return bool(taken.rowcount == 1)  # type: ignore[attr-defined]

        if await database.write(session_id, take):
            return
        if deadline is not None and loop.time() + pause > deadline:
            raise SessionConflict(session_id, f'was still held by another run after waiting {timeout}s')
        await asyncio.sleep(pause * (0.5 + random.random()))
        pause = min(pause * 2, 0.5)


async def renew_lease(database: Database, session_id: str, owner: str) -> None:
    """Push the lease's expiry forward while its run goes on."""

    async def renew(db: AsyncSession) -> None:
        await db.execute(
            update(SessionRow)
            .where(SessionRow.session_id == session_id, SessionRow.lease_owner == owner)
            .values(lease_expires=now() + LEASE_TTL)
        )

    await database.write(session_id, renew)


async def release_lease(database: Database, session_id: str, owner: str) -> None:
    """Free the lease, if `owner` still holds it."""

    async def release(db: AsyncSession) -> None:
        await db.execute(
            update(SessionRow)
            .where(SessionRow.session_id == session_id, SessionRow.lease_owner == owner)
            .values(lease_owner=None, lease_expires=None)
        )

    await database.write(session_id, release)
