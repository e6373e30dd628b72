"""A child process of the process-level checks: opens the backend by its import path and runs one job.

    python -m session_store.conformance._child MODULE:NAME FOLDER append WRITER TURNS
    python -m session_store.conformance._child MODULE:NAME FOLDER until_killed

`append` saves TURNS turns of WRITER to the conversation `shared` and to `own-WRITER`, both at once.
`until_killed` appends turns `k<n>` to `killed` without end, printing how many turns are stored after each save.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from pathlib import Path

from ._backend import ConformanceBackend, opened
from ._harness import append_turns
from ._messages import TURN_LENGTH


async def _run(backend: ConformanceBackend, folder: Path, job: str, args: list[str]) -> None:
    async with opened(backend.factory, folder) as store:
        if job == 'append':
            writer, turns = args[0], int(args[1])
            labels = [f'w{writer}-{k}' for k in range(turns)]
            await asyncio.gather(append_turns(store, 'shared', labels), append_turns(store, f'own-{writer}', labels))
            return
        loaded = await store.load('killed')
        stored = 0 if loaded is None else len(loaded.messages) // TURN_LENGTH
        while True:
            await append_turns(store, 'killed', [f'k{stored}'])
            stored += 1
            # One write for the whole line: print() writes the number and its newline apart when the output is
            # unbuffered (PYTHONUNBUFFERED), and the kill may fall between them.
            sys.stdout.write(f'{stored}\n')
            sys.stdout.flush()


def main(argv: list[str]) -> None:
    path, folder, job, *args = argv
    module, _, name = path.partition(':')
    backend = getattr(importlib.import_module(module), name)
    asyncio.run(_run(backend, Path(folder), job, args))


if __name__ == '__main__':
    main(sys.argv[1:])
