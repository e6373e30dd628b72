"""A writer to be killed: runs turns on a few sessions until SIGKILL, saying what it started and stored.

    python -m tests._crash_worker URL NUMBER

Prints `started <id>` before each run and `stored <id>` once the run's transaction committed.
"""

from __future__ import annotations

import asyncio
import random
import sys

from pydantic_ai.models.function import FunctionModel

from processors import SummarizationProcessor
from session_store import SessionStore
from testkit.scripted import ParallelToolAssistant, RecordingSummarizer, scripted_agent


async def main(url: str, seed: str) -> None:
    rng = random.Random(seed)
    processor = SummarizationProcessor(
        FunctionModel(RecordingSummarizer()), trigger=('messages', 16), keep=('messages', 6)
    )
    async with SessionStore(url, processor=processor) as store:
        agent = scripted_agent(ParallelToolAssistant())
        print('ready', flush=True)
        for run in range(10**6):
            session = await store.session(f'crash-{rng.randrange(3)}')
            prompt_id = f'{seed}{run:06d}'  # digits only, so the marker reads it back
            print('started', prompt_id, flush=True)
            await session.run(agent, f'Turn M{prompt_id} please')
            print('stored', prompt_id, flush=True)


if __name__ == '__main__':
    asyncio.run(main(sys.argv[1], sys.argv[2]))
