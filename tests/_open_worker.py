"""One of several processes opening one empty database at once, then storing a run in a session of its own.

python -m tests._open_worker URL NAME
"""

from __future__ import annotations

import asyncio
import sys

from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from session_store import SessionStore


async def main(url: str, name: str) -> None:
    async with SessionStore(url) as store:
        session = await store.session(name)
        await session.run(Agent(TestModel()), f'hello from {name}')


if __name__ == '__main__':
    asyncio.run(main(sys.argv[1], sys.argv[2]))
