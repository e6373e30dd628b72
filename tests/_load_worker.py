"""One process of the load test: concurrent tasks running many short runs on a few shared sessions.

    python -m tests._load_worker URL NUMBER TASKS RUNS SESSIONS OUT.json

Every run's prompt carries a unique id, and the outcome of each (stored, or the conflict it
reported) is written to OUT.json for the parent to check against the database.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys

from session_store import SessionConflict, SessionStore
from testkit.scripted import ParallelToolAssistant, scripted_agent


async def task(store: SessionStore, name: str, index: int, runs: int, sessions: int) -> list[tuple[str, str, str]]:
    rng = random.Random(f'{name}-{index}')
    agent = scripted_agent(ParallelToolAssistant())
    outcomes = []
    for run in range(runs):
        session_id = f'shared-{rng.randrange(sessions)}'
        # Half the tasks queue behind the run in progress; the others fail fast with a conflict.
        session = await store.session(session_id, wait=index % 2 == 0, timeout=60)
        prompt_id = f'{name}{index:03d}{run:03d}'  # digits only, so the marker reads it back
        try:
            await session.run(agent, f'Turn M{prompt_id} please')
            outcomes.append((session_id, prompt_id, 'stored'))
        except SessionConflict as conflict:
            assert session_id in str(conflict)
            outcomes.append((session_id, prompt_id, 'conflict'))
    return outcomes


async def main(url: str, name: str, tasks: int, runs: int, sessions: int, out: str) -> None:
    async with SessionStore(url) as store:
        results = await asyncio.gather(*(task(store, name, i, runs, sessions) for i in range(tasks)))
    with open(out, 'w') as file:
        json.dump([outcome for result in results for outcome in result], file)


if __name__ == '__main__':
    url, name, tasks, runs, sessions, out = sys.argv[1:]
    asyncio.run(main(url, name, int(tasks), int(runs), int(sessions), out))
