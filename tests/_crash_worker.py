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


def say(line: str) -> None:
    """Write one whole line in one write, so a SIGKILL can't leave half of it for the reader.

    `print('started', id)` makes four writes when the output is unbuffered (`PYTHONUNBUFFERED=1`, as here).
    """
    sys.stdout.write(f'{line}\n')
    sys.stdout.flush()


async def main(url: str, seed: str) -> None:
    rng = random.Random(seed)
    processor = SummarizationProcessor(
        FunctionModel(RecordingSummarizer()), trigger=('messages', 16), keep=('messages', 6)
    )
    async with SessionStore(url, processor=processor) as store:
        agent = scripted_agent(ParallelToolAssistant())
        say('ready')
        for run in range(10**6):
            session = await store.session(f'crash-{rng.randrange(3)}')
            prompt_id = f'{seed}{run:06d}'  # digits only, so the marker reads it back
            say(f'started {prompt_id}')
            await session.run(agent, f'Turn M{prompt_id} please')
            say(f'stored {prompt_id}')


if __name__ == '__main__':
    asyncio.run(main(sys.argv[1], sys.argv[2]))
