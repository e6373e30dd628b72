"""benchmarks/store.py part 1, append throughput: messages (items) stored per second, turn by turn on one
session, on fresh databases; ours through an agent, then our store's own write inside `session.run` (its
`session_store.store_run` span) against the peer's `add_items`, alone and after what a run reads first (our
`session_store.load_window` span, the peer's `get_items()`). See store.py's docstring for the protocol."""

from __future__ import annotations

import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from _bench_util import quiet_gc
from _scripted_turn import prompt, turn_agent
from _store_contenders import HAVE_PEER, Databases, WindowedAgent, peer_engine, peer_session
from _store_conversation import TRIGGER, peer_turn
from _store_measuring import PEER_MISSING, print_target, rate, versus
from _store_spans import LOAD_WINDOW, STORE_RUN, time_spans

from session_store import SessionStore

TARGET_APPEND = {'SQLite': 2.0, 'PostgreSQL': 1.5}
"""Our store_run span's throughput at least this many times the peer's add_items at equal durability, by backend
(issue 19: the search index stays in the write transaction, and the earlier 3 x is withdrawn)."""


@dataclass(frozen=True)
class AgentRates:
    """Messages per second through `session.run`, and by the same agent on the same windows, nothing stored."""

    session: float
    alone: float


async def ours_through_agent(url: str, turns: int) -> AgentRates:
    """`session.run(agent, prompt)` per turn, the agent's own work included. Before each run, untimed, the
    session's window is read, and the agent alone runs on it with the same window capability (its result is
    dropped): the difference is what the session adds to a run."""
    windowed = WindowedAgent.sliding(TRIGGER)
    in_session = alone = 0.0
    async with SessionStore(url, processor=windowed.processor) as store:
        session = await store.session('bench')
        with quiet_gc():
            for turn in range(turns):
                history = await session.context()
                by_itself, stored_too = await windowed.alone_then_in_session(session, history, f'Turn M{turn}')
                alone += by_itself
                in_session += stored_too
        stored = (await store.sessions())[0].message_count
    assert stored == 4 * turns, f'ours stored {stored} messages for {turns} turns'
    return AgentRates(session=rate(stored, in_session), alone=rate(stored, alone))


Step = Callable[[int], Awaitable[tuple[float, float]]]
"""Appends one turn; returns the seconds spent reading what a run starts from, then storing the turn."""


@asynccontextmanager
async def our_appender(url: str, turns: int) -> AsyncIterator[Step]:
    """`session.run` of the scripted agent (`_scripted_turn`), which stores each turn's 4 messages `our_turn(turn)`
    on a session whose window slides at `TRIGGER` messages keeping `TAIL`; timed, the store's own read and write
    in the run, its `load_window` and `store_run` spans (`_store_spans`), the agent's work left out."""
    agent = turn_agent()
    async with SessionStore(url, processor=WindowedAgent.sliding(TRIGGER).processor) as store:
        session = await store.session('raw')

        async def step(turn: int) -> tuple[float, float]:
            spent = time_spans()
            await session.run(agent, prompt(turn))
            return spent[LOAD_WINDOW], spent[STORE_RUN]

        yield step
        stored = (await store.sessions())[0].message_count
    assert stored == 4 * turns, f'ours stored {stored} messages for {turns} turns'


@asynccontextmanager
async def peer_appender(url: str, turns: int, *, synchronous_normal: bool) -> AsyncIterator[Step]:
    """The peer's `add_items` of each turn's 4 items, after the `get_items()` its Runner starts with."""
    runs = [peer_turn(turn) for turn in range(turns)]
    engine = peer_engine(url, synchronous_normal=synchronous_normal)
    try:
        session = peer_session('raw', engine)
        await session.get_items()  # creates the tables, untimed

        async def step(turn: int) -> tuple[float, float]:
            start = time.perf_counter()
            await session.get_items()
            loaded_at = time.perf_counter()
            await session.add_items(runs[turn])
            return loaded_at - start, time.perf_counter() - loaded_at

        yield step
        stored = len(await session.get_items())
    finally:
        await engine.dispose()
    assert stored == 4 * turns, f'the peer stored {stored} items for {turns} turns'


@dataclass(frozen=True)
class Append:
    """Items per second of one contender: storing alone, and a run's read-then-store cycle."""

    store: float
    cycle: float


def append_contenders(databases: Databases, turns: int) -> dict[str, AbstractAsyncContextManager[Step]]:
    """Ours and the peer (if installed), each on a fresh database; on SQLite, the peer with
    `synchronous=NORMAL` too."""
    contenders: dict[str, AbstractAsyncContextManager[Step]] = {'ours': our_appender(databases.url('ours'), turns)}
    if not HAVE_PEER:
        return contenders
    contenders['peer'] = peer_appender(databases.url('peer'), turns, synchronous_normal=False)
    if databases.sqlite:
        contenders['peer_normal'] = peer_appender(databases.url('peer-normal'), turns, synchronous_normal=True)
    return contenders


async def storage_append(databases: Databases, turns: int) -> dict[str, Append]:
    """The storage contenders on fresh databases, appending turn by turn in alternation."""
    async with AsyncExitStack() as stack:
        steps = {
            name: await stack.enter_async_context(contender)
            for name, contender in append_contenders(databases, turns).items()
        }
        reading = dict.fromkeys(steps, 0.0)
        storing = dict.fromkeys(steps, 0.0)
        names = list(steps)
        with quiet_gc():
            for turn in range(turns):
                first = turn % len(names)
                for name in names[first:] + names[:first]:
                    read, stored = await steps[name](turn)
                    reading[name] += read
                    storing[name] += stored
    items = 4 * turns
    return {name: Append(rate(items, storing[name]), rate(items, reading[name] + storing[name])) for name in steps}


@dataclass(frozen=True)
class AppendResults:
    agent: AgentRates
    ours: Append
    peer: Append | None
    """None when the peer is not installed."""
    peer_normal: Append | None
    """SQLite only: the peer with `synchronous=NORMAL`."""


async def append_benchmark(databases: Databases, turns: int, repeats: int) -> AppendResults:
    """Each append measure `repeats` times on fresh databases; the medians."""
    agents = [await ours_through_agent(databases.url('agent'), turns) for _ in range(repeats)]
    storage = [await storage_append(databases, turns) for _ in range(repeats)]

    def median_of(name: str) -> Append | None:
        if name not in storage[0]:
            return None
        return Append(
            store=statistics.median(run[name].store for run in storage),
            cycle=statistics.median(run[name].cycle for run in storage),
        )

    ours = median_of('ours')
    assert ours is not None
    return AppendResults(
        agent=AgentRates(
            session=statistics.median(a.session for a in agents), alone=statistics.median(a.alone for a in agents)
        ),
        ours=ours,
        peer=median_of('peer'),
        peer_normal=median_of('peer_normal'),
    )


def append_row(name: str, per_second: float, note: str = '') -> None:
    print(f'   {name:<52} {per_second:>9,.0f} {4_000 / per_second:>9.2f}  {note}'.rstrip())


def print_agent_rows(agent: AgentRates) -> None:
    added = 4_000 / agent.session - 4_000 / agent.alone
    append_row('ours: session.run(agent)', agent.session)
    append_row(
        '     agent.run alone on the same windows, no store', agent.alone, f'(the session adds {added:.2f} ms/run)'
    )


def print_storage_rows(results: AppendResults, reads: bool) -> None:
    """The storage rows of one kind: 'store only', or 'read + store' when `reads`."""

    def pick(append: Append) -> float:
        return append.cycle if reads else append.store

    ours = pick(results.ours)
    print(f'   {"read + store" if reads else "store only"}:')
    append_row(f'     ours {"load_window + store_run spans" if reads else "store_run span"} of session.run', ours)
    peers = [('peer', results.peer), ('peer, synchronous=NORMAL', results.peer_normal)]
    if results.peer is None:
        print(f'     peer {PEER_MISSING}')
    for name, append in peers:
        if append is None:
            continue
        append_row(
            f'     {name} {"get_items() + " if reads else ""}add_items',
            pick(append),
            f'-> ours {versus(ours, pick(append), higher_is_better=True)}',
        )


def print_append(results: AppendResults, turns: int, backend: str) -> None:
    ours, peer = results.ours, results.peer
    print(f'1. Append throughput on {backend}: {turns} tool-using turns of 4 messages (items) on one session')
    print(f'   {"":<52} {"msgs/s":>9} {"ms/turn":>9}')
    print_agent_rows(results.agent)
    print_storage_rows(results, reads=False)
    print_storage_rows(results, reads=True)
    print()
    if peer is None:
        print(f'append (store only) on {backend}: ours {ours.store:,.0f} items/s, peer {PEER_MISSING}')
        print(f'append (read + store) on {backend}: ours {ours.cycle:,.0f} items/s, peer {PEER_MISSING}')
    else:
        print(
            f'append (store only) on {backend}: ours {ours.store:,.0f} items/s, peer {peer.store:,.0f} items/s '
            f'(add_items) -> ours/peer {ours.store / peer.store:.2f} x'
        )
        print(
            f'append (read + store) on {backend}: ours {ours.cycle:,.0f} items/s, peer {peer.cycle:,.0f} items/s '
            f'(get_items + add_items) -> ours/peer {ours.cycle / peer.cycle:.2f} x'
        )
    equal = results.peer_normal or peer  # on SQLite, the peer at our durability (synchronous=NORMAL)
    print_target(
        backend,
        'store_run span',
        TARGET_APPEND[backend],
        "the peer's add_items at equal durability" + (' (synchronous=NORMAL)' if results.peer_normal else ''),
        None if equal is None else ours.store / equal.store,
        at_least=True,
    )
    print()
