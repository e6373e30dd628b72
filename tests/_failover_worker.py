"""A writer through a failover: runs turns until told to stop, saying in a JSON line what it started, stored and saw
fail.

    python -m tests._failover_worker URL NUMBER DOOR STOP_FILE

`DOOR` is `session` (`Session.run`, over two sessions of this worker's own) or `conversation` (pydantic-ai's door:
`conversations.load`, `agent.run(conversation=...)`, `conversations.save`, over one conversation). Each run's prompt
holds its marker, `M{NUMBER}-{run}`. The lines, one JSON object each, written whole:

- `{"event": "ready"}` once the store is open;
- `{"event": "started", "id": ..., "t": ...}` before a run, `t` the wall clock (`time.time()`);
- `{"event": "stored", "id": ..., "t": ...}` once the run (and for the door, its save) returned;
- `{"event": "failed", "id": ..., "t": ..., "error": CLASS, "module": ..., "store_error": bool, "nothing_stored":
  bool, "message": ...}` for whatever a run raised, `nothing_stored` true where the error says nothing of the run
  was stored;
- `{"event": "done"}` once `STOP_FILE` exists (checked between runs) and the store is closed.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from pydantic_ai.conversation import Conversation
from pydantic_ai.usage import UsageLimits

from session_store import ServerRefused, SessionConflict, SessionStore, StoreError, StoreUnavailable
from testkit.scripted import ParallelToolAssistant, scripted_agent

LIMIT = 120.0
"""Seconds after which a worker stops whatever happens, so that none outlives a failed test."""


UNLIMITED = UsageLimits(request_limit=None)
"""pydantic-ai counts a stored conversation's usage against `request_limit`, whose default a few dozen runs pass."""


def say(**line: Any) -> None:
    """Write one whole JSON line in one write, so that no reader sees half of it."""
    sys.stdout.write(json.dumps(line) + '\n')
    sys.stdout.flush()


def nothing_stored(error: BaseException) -> bool:
    """Whether `error` says that nothing of the run was stored."""
    if isinstance(error, StoreUnavailable):
        return error.stored is False
    return isinstance(error, (SessionConflict, ServerRefused))


async def main(url: str, number: str, door: str, stop_file: Path) -> None:
    agent = scripted_agent(ParallelToolAssistant())
    async with SessionStore(url) as store:
        say(event='ready')
        ends = time.monotonic() + LIMIT
        run = 0
        while not stop_file.exists() and time.monotonic() < ends:
            marker = f'M{number}-{run}'
            prompt = f'Turn {marker} please'
            say(event='started', id=marker, t=time.time())
            try:
                if door == 'session':
                    # Opened again for every run, so that a run that failed leaves nothing stale behind.
                    session = await store.session(f'failover-{number}-{run % 2}')
                    await session.run(agent, prompt)
                else:
                    conversation_id = f'failover-{number}'
                    loaded = await store.conversations.load(conversation_id)
                    conversation = loaded or Conversation(conversation_id=conversation_id)
                    result = await agent.run(prompt, conversation=conversation, usage_limits=UNLIMITED)
                    await store.conversations.save(result)
            except Exception as error:
                say(
                    event='failed',
                    id=marker,
                    t=time.time(),
                    error=type(error).__name__,
                    module=type(error).__module__,
                    store_error=isinstance(error, StoreError),
                    nothing_stored=nothing_stored(error),
                    message=str(error)[:500],
                    # where an error that is not the store's came from, for the test's message
                    traceback=None if isinstance(error, StoreError) else ''.join(traceback.format_exception(error)),
                )
                await asyncio.sleep(0.05)  # no spinning while no server takes writes
            else:
                say(event='stored', id=marker, t=time.time())
            run += 1
    say(event='done')


if __name__ == '__main__':
    url, number, door, stop_file = sys.argv[1:]
    asyncio.run(main(url, number, door, Path(stop_file)))
