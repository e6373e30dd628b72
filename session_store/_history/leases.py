"""Leases: how runs that asked to wait queue behind the run in progress on a session.

A lease is two columns of the session's row (owner, expiry). A holder renews it while its run goes
on; a crashed holder's lease lapses by itself after `LEASE_TTL`, so it delays others by at most that.
A lease this store failed to release (the server away just then) is taken over by its next acquire of
that session, so it delays this store's own next run by nothing.
"""

from __future__ import annotations

import asyncio
import random
from datetime import datetime, timedelta

from sqlalchemy import or_, update
from sqlalchemy.ext.asyncio import AsyncSession

from .._codec import now
from .._db.database import Database
from ..errors import SessionConflict, StoreError
from ..rows import SessionRow

__all__ = ('LEASE_TTL', 'Leases')

LEASE_TTL = timedelta(seconds=30)
"""How long a waiting writer's lease lasts without renewal: what a crashed holder can delay others by."""


class Leases:
    """The leases a store's sessions take, and those it could not release, which it takes over next time."""

    def __init__(self, database: Database, ttl: timedelta = LEASE_TTL) -> None:
        self.database = database
        self.ttl = ttl
        """How long a lease lasts unrenewed; its holder renews it three times in that."""
        self._left: dict[str, str] = {}
        """The owner of each session's lease that a release failed to free."""

    async def acquire(self, session_id: str, owner: str, *, timeout: float | None) -> None:
        """Take the session's lease for `owner`, waiting while another holder's lease is live.

        Raises:
            SessionConflict: The lease was not free within `timeout` seconds.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        pause = 0.02
        while True:
            moment = now()
            left = self._left.get(session_id)

            async def take(db: AsyncSession, moment: datetime = moment, left: str | None = left) -> bool:
                free = [SessionRow.lease_owner.is_(None), SessionRow.lease_expires < moment]
                if left is not None:
                    free.append(SessionRow.lease_owner == left)
                taken = await db.execute(
                    update(SessionRow)
                    .where(SessionRow.session_id == session_id, or_(*free))
                    .values(lease_owner=owner, lease_expires=moment + self.ttl)
                )
                return bool(taken.rowcount == 1)  # type: ignore[attr-defined]

            if await self.database.write(session_id, take):
                self._left.pop(session_id, None)
                return
            if deadline is not None and loop.time() + pause > deadline:
                raise SessionConflict(session_id, f'was still held by another run after waiting {timeout}s')
            await asyncio.sleep(pause * (0.5 + random.random()))
            pause = min(pause * 2, 0.5)

    async def renew(self, session_id: str, owner: str) -> None:
        """Push the lease's expiry forward while its run goes on."""

        async def renew(db: AsyncSession) -> None:
            await db.execute(
                update(SessionRow)
                .where(SessionRow.session_id == session_id, SessionRow.lease_owner == owner)
                .values(lease_expires=now() + self.ttl)
            )

        await self.database.write(session_id, renew)

    async def release(self, session_id: str, owner: str) -> None:
        """Free the lease, if `owner` still holds it; one that can't be freed now is taken over by the next acquire.

        Raises:
            StoreError: The release failed (the lease lapses by itself, or this store's next acquire takes it).
        """

        async def release(db: AsyncSession) -> None:
            await db.execute(
                update(SessionRow)
                .where(SessionRow.session_id == session_id, SessionRow.lease_owner == owner)
                .values(lease_owner=None, lease_expires=None)
            )

        try:
            await self.database.write(session_id, release)
        except StoreError:
            self._left[session_id] = owner
            raise
