"""benchmarks/instructions.py's measured process, run under `valgrind --tool=callgrind --instr-atstart=no`:

    python benchmarks/_instructions_worker.py PLAN.json

PLAN.json (written by instructions.py) names the archives it built, per backend and size: ours and the peer's.
This process opens them as benchmarks/conversations.py does, runs every measure once uninstrumented (imports,
compiled SQL, prepared statements and caches warm), then starts callgrind's instrumentation and runs `repeats`
rounds of every measure, each counting its regions with `_callgrind.ClientRequests.region`, labelled
`backend|size|figure|contender|repeat|part`. It prints nothing of its own: the dumps are the result.

The measures, per backend and size (see instructions.py's docstring): `first open` (ours, the peer), `door turn`
(ours: `load` and `save` regions around a scripted agent's run, which is not counted; the peer: `get_items(20)` +
`add_items(4)`), `Session.run store part` (ours: the regions are the store's `load_window` and `store_run` spans).

Only `_bench_env.fix_sys_path` runs first, not `ensure_environment`: instructions.py already settled the
environment and runs this with its own interpreter; without the peer here, its measures are left out.
"""
# The third-party imports follow sys.path's fix, which must run first.
# ruff: noqa: E402

from __future__ import annotations

from _bench_env import fix_sys_path

fix_sys_path()

import asyncio
import gc
import itertools
import json
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, AsyncExitStack, contextmanager, nullcontext
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from _callgrind import ClientRequests
from _conversations_door import CYCLE, SESSION, TRIGGER
from _scripted_turn import UNLIMITED, prompt, turn_agent
from _store_contenders import HAVE_PEER, peer_engine, peer_session
from _store_conversation import TAIL, Summarizer, peer_turn
from _store_spans import LOAD_WINDOW, STORE_RUN
from opentelemetry import trace
from sqlalchemy.ext.asyncio import create_async_engine

from session_store import SessionStore

FIRST_OPEN, DOOR_TURN, SESSION_RUN = 'first open', 'door turn', 'Session.run store part'
FIGURES = (DOOR_TURN, SESSION_RUN, FIRST_OPEN)
OURS, PEER = 'ours', 'peer'
EMPTY = 'empty'
"""The label of the empty regions: what a region's own client requests count, taken off every region."""
EMPTY_REGIONS = 5
OPERATIONS = {FIRST_OPEN: 1, DOOR_TURN: CYCLE, SESSION_RUN: CYCLE}
"""Operations in one measure of each figure: its count is per operation."""
SPANS = (LOAD_WINDOW, STORE_RUN)
LOAD, COMPACTING, SAVE, TURN, OPEN = 'load', 'compacting load', 'save', 'turn', 'open'
"""The parts counted: a door turn's `load` (`compacting load` when it summarized: one a cycle) and `save` (ours),
the peer's whole turn, an open; ours' runs count the store's spans, each named as its span is without
`session_store.`: `load_window`, `store_run`."""
REGIONS = {
    (FIRST_OPEN, OURS): {OPEN: 1},
    (FIRST_OPEN, PEER): {OPEN: 1},
    (DOOR_TURN, OURS): {LOAD: CYCLE - 1, COMPACTING: 1, SAVE: CYCLE},
    (DOOR_TURN, PEER): {TURN: CYCLE},
    (SESSION_RUN, OURS): {span.rpartition('.')[2]: CYCLE for span in SPANS},
}
"""The regions of one measure of each figure and contender, by part: the report checks every one was counted."""
PEER_OF = {FIRST_OPEN: FIRST_OPEN, DOOR_TURN: DOOR_TURN, SESSION_RUN: DOOR_TURN}
"""What the peer does for each figure: a `Session.run`'s store part is held against the peer's turn."""

Region = Callable[[str | Callable[[], str]], AbstractContextManager[None]]
"""Opens one counted region of the part of the operation named, or named by the function once done (or, for the
uninstrumented first pass, nothing)."""
Measure = Callable[[Region], Awaitable[None]]


def measure_key(backend: str, size: int, figure: str, contender: str) -> str:
    """A measure's name; its regions are labelled `<name>|<repeat>|<part>`."""
    return f'{backend}|{size}|{figure}|{contender}'


_SPAN_REGION: ContextVar[Region | None] = ContextVar('span_region', default=None)
"""While a `Session.run` is measured: the region each of the store's spans `load_window`, `store_run` counts in."""


class _SpanRegions(trace.Tracer):
    """Counts the store's `load_window` and `store_run` spans as regions while `_SPAN_REGION` is set; records
    nothing."""

    def start_span(self, name: str, *args: Any, **kwargs: Any) -> trace.Span:
        return trace.INVALID_SPAN

    @contextmanager
    def start_as_current_span(self, name: str, *args: Any, **kwargs: Any) -> Iterator[trace.Span]:
        region = _SPAN_REGION.get()
        with region(name.rpartition('.')[2]) if region is not None and name in SPANS else nullcontext():
            yield trace.INVALID_SPAN


class _SpanRegionsProvider(trace.TracerProvider):
    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return _SpanRegions()


def load_part(summarizer: Summarizer) -> Callable[[], str]:
    """Names a `load` once done: `compacting load` if the summarizer ran meanwhile."""
    before = summarizer.calls
    return lambda: LOAD if summarizer.calls == before else COMPACTING


def ours(url: str, store: SessionStore, summarizer: Summarizer, size: int) -> dict[str, Measure]:
    """Our measures on one archive; `store` is open on it with the summarizing processor."""
    agent = turn_agent()
    turns = itertools.count(size // 4)
    conversations = store.conversations

    async def first_open(region: Region) -> None:
        opened = SessionStore(url)
        try:
            with region(OPEN):
                window = await (await opened.session(SESSION)).context()
        finally:
            await opened.close()
        assert 0 < len(window) <= TRIGGER + 2, len(window)

    async def door_turn(region: Region) -> None:
        for _ in range(CYCLE):
            with region(load_part(summarizer)):
                conversation = await conversations.load(SESSION)
            assert conversation is not None and len(conversation.messages) <= TRIGGER + 2
            result = await agent.run(prompt(next(turns)), conversation=conversation, usage_limits=UNLIMITED)
            with region(SAVE):
                await conversations.save(result)

    async def session_run(region: Region) -> None:
        session = await store.session(SESSION)
        for _ in range(CYCLE):
            armed = _SPAN_REGION.set(region)
            try:
                await session.run(agent, prompt(next(turns)))
            finally:
                _SPAN_REGION.reset(armed)

    return {FIRST_OPEN: first_open, DOOR_TURN: door_turn, SESSION_RUN: session_run}


async def peer(stack: AsyncExitStack, url: str, sqlite: bool, size: int) -> dict[str, Measure]:
    """The peer's measures on its archive: its engine at ours' durability on SQLite (`synchronous=NORMAL`)."""
    engine = peer_engine(url, synchronous_normal=sqlite)
    stack.push_async_callback(engine.dispose)
    session = peer_session(SESSION, engine)
    turns = itertools.count(size // 4)

    async def first_open(region: Region) -> None:
        opened = create_async_engine(url)
        try:
            with region(OPEN):
                items = await peer_session(SESSION, opened).get_items(TAIL)
        finally:
            await opened.dispose()
        assert len(items) == TAIL, len(items)

    async def door_turn(region: Region) -> None:
        for _ in range(CYCLE):
            with region(TURN):
                items = await session.get_items(TAIL)
                await session.add_items(peer_turn(next(turns)))
            assert len(items) == TAIL, len(items)

    return {FIRST_OPEN: first_open, DOOR_TURN: door_turn}


def regions(requests: ClientRequests, name: str) -> Region:
    """Regions labelled `<name>|<part>`."""

    def region(part: str | Callable[[], str]) -> AbstractContextManager[None]:
        return requests.region(lambda: f'{name}|{part if isinstance(part, str) else part()}')

    return region


async def main(plan: dict[str, Any]) -> None:
    requests = ClientRequests()
    assert requests.running_on_valgrind(), 'run this under valgrind --tool=callgrind --instr-atstart=no'
    trace.set_tracer_provider(_SpanRegionsProvider())
    measures: dict[str, Measure] = {}
    async with AsyncExitStack() as stack:
        for backend in plan['backends']:
            for archive in backend['archives']:
                title, size = backend['title'], archive['size']
                summarizer = Summarizer()
                store = await stack.enter_async_context(
                    SessionStore(archive['ours'], processor=summarizer.processor(TRIGGER, TAIL))
                )
                for figure, measure in ours(archive['ours'], store, summarizer, size).items():
                    measures[measure_key(title, size, figure, OURS)] = measure
                if HAVE_PEER and archive['peer'] is not None:
                    for figure, measure in (await peer(stack, archive['peer'], backend['sqlite'], size)).items():
                        measures[measure_key(title, size, figure, PEER)] = measure
        for measure in measures.values():  # warm, uncounted
            await measure(lambda part: nullcontext())
        gc.collect()
        gc.disable()  # no collection inside a region, as in `timeit`
        requests.start_instrumentation()
        for _ in range(EMPTY_REGIONS):
            with requests.region(EMPTY):
                pass
        for repeat in range(plan['repeats']):
            for key, measure in measures.items():
                await measure(regions(requests, f'{key}|{repeat}'))
            gc.enable()
            gc.collect()
            gc.disable()
        requests.stop_instrumentation()
        gc.enable()


if __name__ == '__main__':
    asyncio.run(main(json.loads(Path(sys.argv[1]).read_text())))
