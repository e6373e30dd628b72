"""Session storage cost of `session_store.SessionStore` against the OpenAI Agents SDK's `SQLAlchemySession`,
on SQLite and on PostgreSQL.

Run it with one command from the repo root (the project venv is fine, so is a bare `python3`):

    python benchmarks/store.py
    python benchmarks/store.py --turns 100 --sizes 100 10000 --repeats 5     # a quicker pass
    python benchmarks/store.py --backends postgresql                          # one backend
    python benchmarks/store.py --quick          # tiny sizes, one repeat, in seconds: does it run, roughly how

`--quick` sets the defaults to 8 turns, sizes 100 and 1,000, one repeat of everything; flags given with it
win. Its figures are noisy and only show that every contender runs and roughly how they compare.

The peer is never a dependency of this project. When `openai-agents[sqlalchemy]` isn't importable, the
script re-executes itself in the private venv `<repo>/.bench-venv` (gitignored), made or brought up to
date first with this project (editable) and every benchmark's peer: see `_bench_env.py`. The peer never
calls a model: no API keys, no network beyond pip. When that venv can't be made (no package index), the
script says so on its first lines (`PEERS UNAVAILABLE: ...`) and measures ours alone.

Backends, each library with its own defaults in its own database:
- SQLite: an aiosqlite file in a temporary directory.
- PostgreSQL (asyncpg): a fresh database on a real server from `testkit/postgres.py` (the server named by
  `$SESSION_STORE_TEST_PG_URL`, else a throwaway local cluster when PostgreSQL is installed; it runs with
  fsync off, for both libraries alike), dropped at the end. Skipped, saying why, when there is no server.
  After an archive is built, ANALYZE refreshes the planner's statistics, as autovacuum would.

The conversation is made of tool-using turns of 4 messages: a user request, a response calling a tool,
the request returning its result, a text answer. The peer stores the same turn as 4 OpenAI Responses
input items (a user message, a `function_call`, a `function_call_output`, an assistant message).

1. Append throughput, messages (items) stored per second over `--turns` turns on one session, on a
   fresh database each time, median of 3 (of 1 with `--quick`):
   - ours through an agent: `session.run(agent, prompt)` with a pydantic-ai `Agent` on the tests'
     scripted `FunctionModel` (one turn per run), so the agent's own work is included. The store's
     processor is a sliding window (trigger 100 messages, keep 20), the steady state of a long session.
     Before each run, untimed, the session's window is read and the same agent runs on it alone, with
     the same window capability and nothing stored: the difference is what the session adds per run.
   - storage alone: our `store.store_run(...)` of the turn's 4 messages (token counts made beforehand,
     the window sliding to keep the last 20 messages) against the peer's `add_items(...)` of the 4
     items. "Store only" times just that call; "read + store" adds what a run reads first: our
     `store.load_window(...)` (summary + kept tail), the peer's `get_items()` (all items: what its
     Runner loads by default). On SQLite the peer runs twice, with its defaults (WAL,
     `synchronous=FULL`: each commit is fsynced) and with `synchronous=NORMAL`, the setting ours uses:
     equal durability. On PostgreSQL durability is the server's, the same for both.
     The contenders append turn by turn in alternation, so load from other processes on the machine
     falls on each alike.

2. Opening a session and building its window, with 100, 10k and 100k archived messages. Ours holds the
   archive of a summarizing session: a summary chain (one summary per 80 messages, each extending the
   last) whose latest summary covers all but the last 20 messages, and `window_start` there; it is
   built with `store_run` in batches of 5,000 messages. The peer's archive is filled with `add_items`
   in batches of 5,000 items. Every archive is built first; then the median over `--repeats`, every
   size and figure taken in turns (so the growth with archive size is measured under the same load):
   - first open: a new `SessionStore(url)` (engine, schema revision check) + `await store.session(id)`
     + `await session.context()` (the `load_window` a run starts with); the peer: a new engine +
     `SQLAlchemySession(id, engine=..., create_tables=True)` + `await session.get_items()`. Closing
     the store or disposing of the engine is not timed.
   - warm: `store.session(id)` + `session.context()` on an open store; the peer's `get_items()` on an
     open session.
   The peer is measured both with `get_items()` (all items, what its Runner loads) and with
   `get_items(limit=20)` (the tail alone, a like-for-like read without the summary).

3. Branched against linear, ours alone (the peer has no branches): opening a session and building its
   window, first open and warm as in 2, when the active path crosses 10 branch points in a tree of 100k
   archived messages, against a linear session whose active path has the same length (10k messages), in
   the same database. The tree is what 10 rewinds leave: each of the path's first 10 segments runs on for
   9,000 messages past the point where the next one forks from it, so the 90,000 messages beyond the path
   lie in 10 branches off it. It is built the way a session grows one: `store_run` in batches of 5,000
   messages, then the public `session.rewind(fork point)`. Both sessions carry the summary chain of 2 (one
   summary per 80 messages along every path, the active path's latest 20 messages before its end), so
   both windows are the same summary + 20-message tail: what differs is the tree walked to find them.
   With `--quick`: 1,000 messages in the tree, a path of 400 crossing 3 branch points.

4. The hot path, as issue 11 measures it: one session of 2,000 messages each (ours with a sliding window
   100/20 and the tests' scripted agent), 31 rounds (5 with `--quick`) after one untimed, the contenders in
   turn within each round, medians:
   - warm window read: `session.context()` on an open store, against the peer's `get_items(limit=20)`;
   - first open after restart: a new `SessionStore` + `store.session(id)` + `session.context()`, against a
     new engine + `SQLAlchemySession(...)` + `get_items(limit=20)`. Each side's new engine compiles its SQL
     anew (SQLAlchemy's compiled cache belongs to an engine), as after a restart;
   - what the store adds to a run: `session.run(agent, prompt)` minus `agent.run(prompt)` on the same
     window with the same window capability and nothing stored, against the peer's
     `get_items(limit=20)` + `add_items(4 items)`. The peer runs with its defaults.
   Each target is printed as a ratio, met or MISSED: warm read <= 1.0 x, first open <= 1.5 x, the store's
   share of a run <= 0.5 x the peer's; and in 1., our `store_run` >= 3 x the peer's `add_items` at equal
   durability.

Sanity checks (assertions): every append run stores exactly its messages; our window is the summary
plus the 20-message tail; the peer returns every item it was given; the tree has its branches where they
were made and holds every message written. Timings are printed, never asserted.
"""

# The third-party imports follow the environment bootstrap, which must run first.
# ruff: noqa: E402

from __future__ import annotations

from _bench_env import AGENTS_SQLALCHEMY, OUR_DIST, PEERS, distribution, ensure_environment

HAVE_PEER = AGENTS_SQLALCHEMY not in ensure_environment([AGENTS_SQLALCHEMY])

import abc
import argparse
import asyncio
import importlib.metadata
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from _bench_db import analyze, postgres_server, server_version
from _bench_util import load_average, machine, quiet_gc, size_label
from _store_internals import load_window, new_summary, store_run
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from processors import SlidingWindow, SlidingWindowProcessor, count_tokens_approximately
from session_store import SessionStore
from testkit.postgres import drop_database, fresh_database
from testkit.scripted import ParallelToolAssistant, scripted_agent

if HAVE_PEER:
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
if TYPE_CHECKING:
    from agents.items import TResponseInputItem as PeerItem

PEER_DIST = distribution(PEERS[AGENTS_SQLALCHEMY])

BACKENDS = ('sqlite', 'postgresql')
DEFAULT_TURNS = 250
DEFAULT_SIZES = (100, 10_000, 100_000)
DEFAULT_REPEATS = 11
APPEND_REPEATS = 3
QUICK_TURNS = 8
QUICK_SIZES = (100, 1_000)
QUICK_REPEATS = 1
"""`--quick`: one repeat of every figure, append runs included."""
PEER_MISSING = 'not measured (PEERS UNAVAILABLE: see the first lines)'
"""What stands for the peer's figures when it could not be installed."""
TAIL = 20
"""Messages after the latest summary: the kept tail of a summarizing session, and the peer's `limit`."""
SUMMARY_EVERY = 80
"""Messages each summary of the chain covers (a trigger of 100 messages keeping 20)."""
BUILD_BATCH = 5_000
"""Messages (items) per transaction while filling an archive."""
TARGET_GROWTH = 2.0
"""The target, reported against, never asserted: ours at 100k archived messages costs at most this much
more than at 100."""
TREE = 100_000
"""3: messages in the branched session's tree, its active path and the branches off it."""
TREE_PATH = 10_000
"""3: messages on the active path, of the branched session and of the linear one alike."""
BRANCH_POINTS = 10
"""3: branch points the branched session's active path crosses."""
QUICK_TREE, QUICK_TREE_PATH, QUICK_BRANCH_POINTS = 1_000, 400, 3
TARGET_BRANCHED = 2.0
HOT_SIZE, HOT_TRIGGER, HOT_ROUNDS, QUICK_HOT_ROUNDS = 2_000, 100, 31, 5
"""4: the session's length, its sliding window's trigger (it keeps `TAIL`), and the rounds measured."""
TARGET_WARM_READ, TARGET_FIRST_OPEN, TARGET_ADDED = 1.0, 1.5, 0.5
"""4's targets, each as ours / the peer's."""
TARGET_APPEND = 3.0
"""1: our store_run's throughput at least this many times the peer's add_items, at equal durability."""
"""The target, reported against, never asserted: opening a session whose active path crosses the branch points
costs at most this much more than opening a linear one of the same length."""
SYSTEM_PROMPT = 'You are a careful support agent. Use the tools; never guess an order number.'
_FILLER = (
    'The customer asked about the status of an order placed last week and whether the refund for the '
    'damaged item was processed; the warehouse confirmed the shipment left on Tuesday and the invoice '
    'was reissued with the corrected address, so the balance on the account is now zero and nothing '
    'else is pending apart from the survey the customer may answer at their convenience later on. '
) * 2
SUMMARY_TEXT = ('Summary of the conversation so far: ' + _FILLER * 3)[:1_500]


@dataclass(frozen=True)
class Tree:
    """The branched session of 3: a tree of `size` messages whose active path of `path` messages crosses
    `branch_points` branch points."""

    size: int
    path: int
    branch_points: int

    @property
    def forks(self) -> list[int]:
        """Where each segment after the first leaves its parent: the path cut evenly, at turn boundaries."""
        return [self.path * i // (self.branch_points + 1) // 4 * 4 for i in range(1, self.branch_points + 1)]

    @property
    def beyond(self) -> int:
        """Messages each of the path's first segments holds past the next one's fork point: a branch off the path."""
        return (self.size - self.path) // self.branch_points // 4 * 4

    @property
    def stored(self) -> int:
        """Messages the tree holds: `size`, less what `beyond`'s rounding leaves out."""
        return self.path + self.branch_points * self.beyond

    def problem(self) -> str | None:
        """Why the tree can't be built as asked, if it can't."""
        if self.path % 4 or self.path < TAIL + 4:
            return f'the path must be a multiple of 4, at least {TAIL + 4}'
        if self.branch_points < 1 or self.path // (self.branch_points + 1) < 4:
            return 'there must be 1 to path / 4 - 1 branch points'
        if self.beyond < TAIL + 4:
            return f'the tree must hold at least {TAIL + 4} messages per branch point beyond the path'
        return None


@dataclass(frozen=True)
class Plan:
    """What a run measures, from the command line."""

    turns: int
    """Turns appended per append run."""
    sizes: Sequence[int]
    """Archived messages to open sessions on, ascending."""
    repeats: int
    """Timed repetitions of each opening figure."""
    append_repeats: int
    """Append runs, each on fresh databases, per append figure."""
    tree: Tree
    """The branched session of 3."""
    parts: Sequence[int]
    """Which of the parts 1, 2, 3, 4 to run."""
    rounds: int
    """4: rounds of the hot path."""


# ---------------------------------------------------------------------------------------------------
# The conversation, in both libraries' formats
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TurnText:
    """What one tool-using turn says, whichever library stores it."""

    question: str
    call_id: str
    arguments: str
    result: str
    answer: str


def turn_text(turn: int) -> TurnText:
    return TurnText(
        question=f'Question {turn}: {_FILLER[:120]}',
        call_id=f'call_{turn:07d}',
        arguments=f'{{"order": "A-{turn:07d}"}}',
        result=f'Result {turn}: {_FILLER[:400]}',
        answer=f'Answer {turn}: {_FILLER[:250]}',
    )


def our_turn(turn: int) -> list[ModelMessage]:
    """The turn as pydantic-ai messages; the conversation's first request opens with the system prompt."""
    text = turn_text(turn)
    opening = [SystemPromptPart(SYSTEM_PROMPT)] if turn == 0 else []
    return [
        ModelRequest(parts=[*opening, UserPromptPart(text.question)]),
        ModelResponse(parts=[ToolCallPart('lookup_order', text.arguments, tool_call_id=text.call_id)]),
        ModelRequest(parts=[ToolReturnPart('lookup_order', text.result, tool_call_id=text.call_id)]),
        ModelResponse(parts=[TextPart(text.answer)]),
    ]


def peer_turn(turn: int) -> list[PeerItem]:
    """The same turn as OpenAI Responses input items."""
    text = turn_text(turn)
    return [
        {'role': 'user', 'content': text.question},
        {
            'type': 'function_call',
            'id': f'fc_{turn:07d}',
            'call_id': text.call_id,
            'name': 'lookup_order',
            'arguments': text.arguments,
            'status': 'completed',
        },
        {'type': 'function_call_output', 'call_id': text.call_id, 'output': text.result},
        {
            'type': 'message',
            'id': f'msg_{turn:07d}',
            'role': 'assistant',
            'status': 'completed',
            'content': [{'type': 'output_text', 'text': text.answer, 'annotations': []}],
        },
    ]


def our_archive(size: int) -> list[ModelMessage]:
    return [message for turn in range(size // 4) for message in our_turn(turn)]


def peer_archive(size: int) -> list[PeerItem]:
    return [item for turn in range(size // 4) for item in peer_turn(turn)]


def token_counts(messages: Sequence[ModelMessage]) -> list[int]:
    return [count_tokens_approximately([message]) for message in messages]


# ---------------------------------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------------------------------

K = TypeVar('K', bound=Hashable)
Measure = Callable[[], Awaitable[float]]
"""One timed action: it returns the seconds it timed, its setup, teardown and checks left out."""


async def round_robin(measures: dict[K, Measure], repeats: int) -> dict[K, float]:
    """The median ms of each measure, taken in turns (after one untimed pass), so that load from other
    processes on the machine falls on every contender alike."""
    for measure in measures.values():
        await measure()
    times: dict[K, list[float]] = {name: [] for name in measures}
    for _ in range(repeats):
        for name, measure in measures.items():
            with quiet_gc():
                times[name].append(await measure())
    return {name: statistics.median(seconds) * 1_000 for name, seconds in times.items()}


class Databases(abc.ABC):
    """Fresh, empty databases of one backend, one per `url()` call; `close()` removes them all."""

    title: str
    """How the report names the backend."""

    sqlite: bool
    """Whether these are SQLite databases, where the peer is also measured with `synchronous=NORMAL`."""

    @abc.abstractmethod
    def url(self, name: str) -> str:
        """The async SQLAlchemy URL of a new empty database; `name` says what it is for."""

    @abc.abstractmethod
    def close(self) -> None:
        """Remove every database made."""


class SqliteFiles(Databases):
    """Database files in one temporary directory."""

    title = 'SQLite'
    sqlite = True

    def __init__(self) -> None:
        self._directory = tempfile.TemporaryDirectory(prefix='store-bench-')
        self._count = 0

    def url(self, name: str) -> str:
        self._count += 1
        return f'sqlite+aiosqlite:///{Path(self._directory.name) / f"{self._count:03d}-{name}.db"}'

    def close(self) -> None:
        self._directory.cleanup()


class PostgresDatabases(Databases):
    """Databases made with `testkit.postgres.fresh_database` on one server, dropped by `close()`."""

    title = 'PostgreSQL'
    sqlite = False

    def __init__(self, server: str) -> None:
        self._server = server
        self._urls: list[str] = []

    def url(self, name: str) -> str:
        url = fresh_database(self._server)
        self._urls.append(url)
        return url

    def close(self) -> None:
        for url in self._urls:
            drop_database(url)


def peer_engine(url: str, *, synchronous_normal: bool = False) -> AsyncEngine:
    """The peer's engine; on SQLite, with `synchronous=NORMAL` if asked (its default is FULL)."""
    engine = create_async_engine(url)
    if synchronous_normal:

        @event.listens_for(engine.sync_engine, 'connect')
        def _normal(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute('PRAGMA synchronous=NORMAL')
            cursor.close()

    return engine


# ---------------------------------------------------------------------------------------------------
# 1. Append throughput
# ---------------------------------------------------------------------------------------------------


def rate(items: int, seconds: float) -> float:
    return items / seconds


@dataclass(frozen=True)
class AgentRates:
    """Messages per second through `session.run`, and by the same agent on the same windows, nothing stored."""

    session: float
    alone: float


async def ours_through_agent(url: str, turns: int) -> AgentRates:
    """`session.run(agent, prompt)` per turn, the agent's own work included. Before each run, untimed, the
    session's window is read, and the agent alone runs on it with the same window capability (its result is
    dropped): the difference is what the session adds to a run."""
    processor = SlidingWindowProcessor(trigger=('messages', 100), keep=('messages', TAIL))
    capability = SlidingWindow(trigger=processor.trigger, keep=processor.keep)
    agent = scripted_agent(ParallelToolAssistant())
    in_session = alone = 0.0
    async with SessionStore(url, processor=processor) as store:
        session = await store.session('bench')
        with quiet_gc():
            for turn in range(turns):
                history = await session.context()
                start = time.perf_counter()
                await agent.run(f'Turn M{turn}', message_history=history, capabilities=[capability])
                middle = time.perf_counter()
                await session.run(agent, f'Turn M{turn}')
                alone += middle - start
                in_session += time.perf_counter() - middle
        stored = (await store.sessions())[0].message_count
    assert stored == 4 * turns, f'ours stored {stored} messages for {turns} turns'
    return AgentRates(session=rate(stored, in_session), alone=rate(stored, alone))


Step = Callable[[int], Awaitable[tuple[float, float]]]
"""Appends one turn; returns the seconds spent reading what a run starts from, then storing the turn."""


@asynccontextmanager
async def our_appender(url: str, turns: int) -> AsyncIterator[Step]:
    """`store_run` of each turn's 4 messages (token counts made beforehand), after the `load_window` a run
    starts with. The window slides as a session's would, keeping the last 20 messages."""
    runs = [(messages, token_counts(messages)) for messages in map(our_turn, range(turns))]
    async with SessionStore(url) as store:
        await store.session('raw')

        async def step(turn: int) -> tuple[float, float]:
            messages, tokens = runs[turn]
            start = time.perf_counter()
            loaded = await load_window(store, 'raw')
            loaded_at = time.perf_counter()
            await store_run(store, 'raw', loaded, messages, tokens, window_start=max(0, 4 * (turn + 1) - TAIL))
            return loaded_at - start, time.perf_counter() - loaded_at

        yield step
        stored = (await store.sessions())[0].message_count
    assert stored == 4 * turns, f'ours stored {stored} messages for {turns} turns'


@asynccontextmanager
async def peer_appender(url: str, turns: int, *, synchronous_normal: bool) -> AsyncIterator[Step]:
    """The peer's `add_items` of each turn's 4 items, after the `get_items()` its Runner starts with."""
    runs = [peer_turn(turn) for turn in range(turns)]
    engine = peer_engine(url, synchronous_normal=synchronous_normal)
    try:
        session = SQLAlchemySession('raw', engine=engine, create_tables=True)
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


# ---------------------------------------------------------------------------------------------------
# 2. Opening a session and building its window
# ---------------------------------------------------------------------------------------------------


def summary_cuts(size: int) -> list[int]:
    """Where each summary of the chain ends: every `SUMMARY_EVERY` messages, the last one `TAIL` from the end."""
    last = size - TAIL
    return [*range(SUMMARY_EVERY, last, SUMMARY_EVERY), last]


async def grow(
    store: SessionStore, session_id: str, messages: Sequence[ModelMessage], tokens: Sequence[int], end: int
) -> None:
    """Extend the session's active path to `end` messages (`messages[at]` at each position `at`), in batches of
    `BUILD_BATCH`, summarized as a session would be: the chain goes on from the path's last summary (where its
    window starts) with one at every `summary_cuts(end)` after it, each covering from the one before."""
    loaded = await load_window(store, session_id)
    covered = loaded.window_start
    cuts = [cut for cut in summary_cuts(end) if cut > covered]
    for start in range(loaded.message_count, end, BUILD_BATCH):
        stop = min(end, start + BUILD_BATCH)
        summaries = []
        for cut in (c for c in cuts if start < c <= stop):
            summaries.append(new_summary(covered, cut, f'{SUMMARY_TEXT} [{cut}]', len(SUMMARY_TEXT) // 4, 'bench'))
            covered = cut
        await store_run(
            store,
            session_id,
            loaded,
            messages[start:stop],
            tokens[start:stop],
            window_start=covered,
            summaries=summaries,
        )
        loaded = await load_window(store, session_id)


async def build_ours(url: str, size: int) -> None:
    """An archive of `size` messages with its summary chain, stored in batches of `BUILD_BATCH`."""
    messages = our_archive(size)
    async with SessionStore(url) as store:
        await store.session('archive')
        await grow(store, 'archive', messages, token_counts(messages), size)
        info = (await store.sessions())[0]
    assert (info.message_count, info.summary_count) == (size, len(summary_cuts(size))), info


async def build_peer(url: str, size: int) -> None:
    items = peer_archive(size)
    engine = peer_engine(url)
    try:
        session = SQLAlchemySession('archive', engine=engine, create_tables=True)
        for start in range(0, size, BUILD_BATCH):
            await session.add_items(items[start : start + BUILD_BATCH])
    finally:
        await engine.dispose()


def check_window(window: Sequence[ModelMessage], size: int) -> None:
    """Our window: the latest summary and the system prompt riding in the first of the last `TAIL` messages."""
    assert len(window) == TAIL, f'ours built a window of {len(window)} messages at {size}'
    first = window[0]
    assert isinstance(first, ModelRequest), first
    kinds = [type(part) for part in first.parts]
    assert kinds[:2] == [SystemPromptPart, CompactionPart], kinds
    summary = first.parts[1]
    assert isinstance(summary, CompactionPart) and (summary.content or '').endswith(f'[{size - TAIL}]'), summary


def check_items(items: Sequence[PeerItem], limit: int | None, size: int) -> None:
    expected = size if limit is None else min(size, limit)
    assert len(items) == expected, f'the peer returned {len(items)} of {expected} items at {size}'
    assert items[-1] == peer_turn(size // 4 - 1)[-1], items[-1]


def ours_first_open(
    url: str, size: int, session_id: str = 'archive', processor: SlidingWindowProcessor | None = None
) -> Measure:
    """A new `SessionStore` (engine, schema revision check), `store.session(id)`, `session.context()`; `size`
    is the length of the session's active path, whose window is checked when it has its summary chain."""

    async def measure() -> float:
        start = time.perf_counter()
        store = SessionStore(url, processor=processor)
        try:
            window = await (await store.session(session_id)).context()
            elapsed = time.perf_counter() - start
        finally:
            await store.close()
        if processor is None:
            check_window(window, size)
        else:  # a sliding window's, between its kept tail and its trigger
            assert TAIL <= len(window) <= HOT_TRIGGER, len(window)
        return elapsed

    return measure


def ours_warm_open(store: SessionStore, size: int, session_id: str = 'archive') -> Measure:
    async def measure() -> float:
        start = time.perf_counter()
        window = await (await store.session(session_id)).context()
        elapsed = time.perf_counter() - start
        check_window(window, size)
        return elapsed

    return measure


def peer_first_open(url: str, size: int, limit: int | None, session_id: str = 'archive') -> Measure:
    """A new engine, `SQLAlchemySession(id, engine=..., create_tables=True)`, `get_items(limit)`."""

    async def measure() -> float:
        start = time.perf_counter()
        engine = create_async_engine(url)
        try:
            items = await SQLAlchemySession(session_id, engine=engine, create_tables=True).get_items(limit)
            elapsed = time.perf_counter() - start
        finally:
            await engine.dispose()
        check_items(items, limit, size)
        return elapsed

    return measure


def peer_warm_open(session: SQLAlchemySession, size: int, limit: int | None) -> Measure:
    async def measure() -> float:
        start = time.perf_counter()
        items = await session.get_items(limit)
        elapsed = time.perf_counter() - start
        check_items(items, limit, size)
        return elapsed

    return measure


@dataclass(frozen=True)
class Opening:
    """Median ms to open a session and read what a run starts from, for one archive size."""

    ours_first: float
    ours_warm: float
    peer_first_all: float | None = None
    """The peer's figures are None when it is not installed."""
    peer_warm_all: float | None = None
    peer_first_tail: float | None = None
    peer_warm_tail: float | None = None

    def ours(self, first: bool) -> float:
        return self.ours_first if first else self.ours_warm

    def peer_all(self, first: bool) -> float | None:
        return self.peer_first_all if first else self.peer_warm_all

    def peer_tail(self, first: bool) -> float | None:
        return self.peer_first_tail if first else self.peer_warm_tail


async def opening_measures(stack: AsyncExitStack, databases: Databases, size: int) -> dict[str, Measure]:
    """Both archives of `size` messages (ours alone without the peer), built and analyzed, and the six ways
    of opening them."""
    ours_url = databases.url(f'ours-{size}')
    await build_ours(ours_url, size)
    store = await stack.enter_async_context(SessionStore(ours_url))
    await analyze(store.engine)
    ours = {'ours_first': ours_first_open(ours_url, size), 'ours_warm': ours_warm_open(store, size)}
    if not HAVE_PEER:
        return ours
    peer_url = databases.url(f'peer-{size}')
    await build_peer(peer_url, size)
    engine = create_async_engine(peer_url)
    stack.push_async_callback(engine.dispose)
    await analyze(engine)
    session = SQLAlchemySession('archive', engine=engine, create_tables=True)
    return {
        **ours,
        'peer_first_all': peer_first_open(peer_url, size, None),
        'peer_warm_all': peer_warm_open(session, size, None),
        'peer_first_tail': peer_first_open(peer_url, size, TAIL),
        'peer_warm_tail': peer_warm_open(session, size, TAIL),
    }


async def opening_benchmark(databases: Databases, sizes: Sequence[int], repeats: int) -> dict[int, Opening]:
    """Every size's archives are built first; then all sizes and contenders are timed in turns, so that the
    growth from the smallest archive to the largest is measured under the same load too."""
    async with AsyncExitStack() as stack:
        measures = {
            (size, name): measure
            for size in sizes
            for name, measure in (await opening_measures(stack, databases, size)).items()
        }
        medians = await round_robin(measures, repeats)
    return {size: Opening(**{name: ms for (at, name), ms in medians.items() if at == size}) for size in sizes}


# ---------------------------------------------------------------------------------------------------
# 3. Branched against linear
# ---------------------------------------------------------------------------------------------------


async def build_tree(url: str, tree: Tree) -> float:
    """Session 'branched', the tree, as `tree.branch_points` rewinds leave one, and session 'linear', one
    segment as long as the tree's active path; the seconds the tree took to build."""
    longest = tree.forks[-1] + tree.beyond
    messages = our_archive(max(longest, tree.path))
    tokens = token_counts(messages)
    async with SessionStore(url) as store:
        started = time.perf_counter()
        session = await store.session('branched')
        for fork in tree.forks:
            await grow(store, 'branched', messages, tokens, fork + tree.beyond)
            await session.rewind(fork)
        await grow(store, 'branched', messages, tokens, tree.path)
        built = time.perf_counter() - started
        branches = await session.branches()
        await store.session('linear')
        await grow(store, 'linear', messages, tokens, tree.path)
        counts = {info.session_id: info.message_count for info in await store.sessions()}
    assert counts == {'branched': tree.path, 'linear': tree.path}, counts
    assert [branch.forked_at for branch in branches] == [None, *tree.forks], branches
    assert [branch.active for branch in branches] == [False] * tree.branch_points + [True], branches
    held = sum(branch.message_count - (branch.forked_at or 0) for branch in branches)
    assert held == tree.stored, f'the tree holds {held} messages, not {tree.stored}'
    return built


@dataclass(frozen=True)
class BranchedOpening:
    """Median ms to open a session and build its window, branched and linear, and the seconds the tree took."""

    branched_first: float
    branched_warm: float
    linear_first: float
    linear_warm: float
    built: float

    def branched(self, first: bool) -> float:
        return self.branched_first if first else self.branched_warm

    def linear(self, first: bool) -> float:
        return self.linear_first if first else self.linear_warm


async def branched_benchmark(databases: Databases, tree: Tree, repeats: int) -> BranchedOpening:
    """Both sessions built in one database, then both opened, first and warm, in turns."""
    url = databases.url('tree')
    built = await build_tree(url, tree)
    async with SessionStore(url) as store:
        await analyze(store.engine)
        measures = {
            'branched_first': ours_first_open(url, tree.path, 'branched'),
            'branched_warm': ours_warm_open(store, tree.path, 'branched'),
            'linear_first': ours_first_open(url, tree.path, 'linear'),
            'linear_warm': ours_warm_open(store, tree.path, 'linear'),
        }
        medians = await round_robin(measures, repeats)
    return BranchedOpening(**medians, built=built)


# ---------------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------------


def versus(ours: float, peer: float, *, higher_is_better: bool) -> str:
    """How ours compares, as a factor: 'N x faster' or 'N x slower'."""
    factor = ours / peer if higher_is_better else peer / ours
    return f'{factor:.2f} x faster' if factor >= 1 else f'{1 / factor:.2f} x slower'


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return 'not installed'


def print_header(plan: Plan) -> None:
    names = (OUR_DIST, PEER_DIST, 'pydantic-ai-slim', 'SQLAlchemy', 'aiosqlite', 'asyncpg')
    print(f'{machine()}; ' + ', '.join(f'{name} {version(name)}' for name in names))
    print(f'append: {plan.turns} turns x 4 messages, median of {plan.append_repeats} fresh databases; ', end='')
    print(f'open: {", ".join(map(size_label, plan.sizes))} archived messages, median of {plan.repeats}; ', end='')
    tree = plan.tree
    print(f'branched: {tree.branch_points} branch points, {size_label(tree.path)} path, ', end='')
    print(f'{size_label(tree.stored)} tree; parts {", ".join(map(str, plan.parts))}')
    print(load_average('at start'))


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
    append_row(f'     ours {"load_window + " if reads else ""}store_run', ours)
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
        print()
        return
    print(
        f'append (store only) on {backend}: ours {ours.store:,.0f} items/s, peer {peer.store:,.0f} items/s '
        f'(add_items) -> ours/peer {ours.store / peer.store:.2f} x'
    )
    print(
        f'append (read + store) on {backend}: ours {ours.cycle:,.0f} items/s, peer {peer.cycle:,.0f} items/s '
        f'(get_items + add_items) -> ours/peer {ours.cycle / peer.cycle:.2f} x'
    )
    equal = results.peer_normal or peer  # on SQLite, the peer at our durability (synchronous=NORMAL)
    factor = ours.store / equal.store
    print(
        f"target on {backend}: store_run >= {TARGET_APPEND} x the peer's add_items at equal durability: "
        f'{factor:.2f} x, {"met" if factor >= TARGET_APPEND else "MISSED"}'
    )
    print()


def cell(ms: float | None) -> str:
    """A table cell of ms, or a dash for a peer that is not installed."""
    return f'{"-":>10}' if ms is None else f'{ms:10.2f}'


def print_opening_table(openings: dict[int, Opening], backend: str) -> None:
    print(f'2. Open a session + build its window on {backend}, median ms (ours: summary + 20-message tail)')
    print(f'   {"archived":>9} | {"ours":^21} | {"peer, get_items()":^21} | {"peer, get_items(20)":^21}'.rstrip())
    print(f'   {"":>9} |' + ' |'.join([f' {"first":>10} {"warm":>10}'] * 3))
    for size, o in openings.items():
        cells = (o.ours_first, o.ours_warm, o.peer_first_all, o.peer_warm_all, o.peer_first_tail, o.peer_warm_tail)
        print(
            f'   {size:>9,} |'
            + ' |'.join(f' {cell(a)} {cell(b)}' for a, b in zip(cells[::2], cells[1::2], strict=True))
        )
    print()


def print_opening_lines(openings: dict[int, Opening], backend: str, mode: str) -> None:
    """One line per archive size for `mode` ('first open' or 'warm'): ours against the peer, and our growth."""
    first = mode == 'first open'
    smallest = min(openings)
    base = openings[smallest].ours(first)
    for size, o in openings.items():
        ours, peer_all, peer_tail = o.ours(first), o.peer_all(first), o.peer_tail(first)
        growth = (
            f'; ours growth {size_label(smallest)} -> {size_label(size)}: {ours / base:.2f} x'
            if size != smallest
            else ''
        )
        if peer_all is None or peer_tail is None:
            head = f'open+window @{size_label(size)} ({mode}) on {backend}: ours {ours:.2f} ms'
            print(f'{head}, peer {PEER_MISSING}{growth}')
            continue
        print(
            f'open+window @{size_label(size)} ({mode}) on {backend}: ours {ours:.2f} ms, peer {peer_all:.2f} ms '
            f'(get_items all) -> {versus(ours, peer_all, higher_is_better=False)}; peer {peer_tail:.2f} ms '
            f'(get_items limit=20) -> {versus(ours, peer_tail, higher_is_better=False)}{growth}'
        )


def print_targets(openings: dict[int, Opening], backend: str) -> None:
    smallest, largest = min(openings), max(openings)
    if largest == smallest:
        return
    for mode in ('first open', 'warm'):
        factor = openings[largest].ours(mode == 'first open') / openings[smallest].ours(mode == 'first open')
        verdict = 'met' if factor <= TARGET_GROWTH else 'MISSED'
        print(
            f'target on {backend} ({mode}): ours @{size_label(largest)} <= {TARGET_GROWTH:g} x '
            f'ours @{size_label(smallest)}: {factor:.2f} x, {verdict}'
        )


def print_opening(openings: dict[int, Opening], backend: str) -> None:
    print_opening_table(openings, backend)
    for mode in ('first open', 'warm'):
        print_opening_lines(openings, backend, mode)
    print_targets(openings, backend)


def print_branched(opening: BranchedOpening, tree: Tree, backend: str) -> None:
    points = f'{tree.branch_points} branch points'
    print(
        f'3. Open a session + build its window on {backend}, ours alone, median ms: an active path of '
        f'{tree.path:,} messages'
    )
    print(
        f'   branched: crossing {points} in a tree of {tree.stored:,} archived messages (built in '
        f'{opening.built:.1f} s); linear: one segment, in the same database'
    )
    print(f'   {"":<9} {"first":>10} {"warm":>10}')
    print(f'   {"branched":<9} {cell(opening.branched_first)} {cell(opening.branched_warm)}')
    print(f'   {"linear":<9} {cell(opening.linear_first)} {cell(opening.linear_warm)}')
    print()
    for mode in ('first open', 'warm'):
        branched, linear = opening.branched(mode == 'first open'), opening.linear(mode == 'first open')
        print(
            f'open+window with {points} vs linear on {backend}: branched {branched:.2f} ms, linear {linear:.2f} ms '
            f'({mode}) -> {branched / linear:.2f} x'
        )
    for mode in ('first open', 'warm'):
        factor = opening.branched(mode == 'first open') / opening.linear(mode == 'first open')
        verdict = 'met' if factor <= TARGET_BRANCHED else 'MISSED'
        print(
            f'target on {backend} ({mode}): branched, {points} <= {TARGET_BRANCHED:g} x linear: '
            f'{factor:.2f} x, {verdict}'
        )
    print()


# ---------------------------------------------------------------------------------------------------
# 4. The hot path
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HotPath:
    """Median ms per round of 4's figures; the peer's are None when it is not installed."""

    ours_warm: float
    ours_first: float
    ours_added: float
    peer_warm: float | None = None
    peer_first: float | None = None
    peer_cycle: float | None = None


async def fill_hot(store: SessionStore, messages: Sequence[ModelMessage]) -> None:
    """The session 'hot' at its steady state: `messages` archived, the window its last `TAIL`."""
    await store.session('hot')
    loaded = await load_window(store, 'hot')
    await store_run(store, 'hot', loaded, messages, token_counts(messages), window_start=len(messages) - TAIL)


async def hot_path_benchmark(databases: Databases, rounds: int) -> HotPath:
    """4.'s rounds: each contender's figures taken in turn, on one session of `HOT_SIZE` messages each."""
    processor = SlidingWindowProcessor(trigger=('messages', HOT_TRIGGER), keep=('messages', TAIL))
    capability = SlidingWindow(trigger=processor.trigger, keep=processor.keep)
    agent = scripted_agent(ParallelToolAssistant())
    ours_url, peer_url = databases.url('hot-ours'), databases.url('hot-peer')
    times: dict[str, list[float]] = {name: [] for name in ('ours_warm', 'ours_first', 'ours_added')}
    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(SessionStore(ours_url, processor=processor))
        await fill_hot(store, our_archive(HOT_SIZE))
        session = await store.session('hot')
        peer: SQLAlchemySession | None = None
        if HAVE_PEER:
            times.update(peer_warm=[], peer_first=[], peer_cycle=[])
            engine = peer_engine(peer_url, synchronous_normal=databases.sqlite)
            stack.push_async_callback(engine.dispose)
            peer = SQLAlchemySession('hot', engine=engine, create_tables=True)
            await peer.add_items(peer_archive(HOT_SIZE))
        for turn in range(rounds + 1):  # the first round warms every path up, untimed
            timed: dict[str, float] = {}
            with quiet_gc():
                start = time.perf_counter()
                window = await session.context()
                timed['ours_warm'] = time.perf_counter() - start
                assert TAIL <= len(window) <= HOT_TRIGGER, len(window)
                start = time.perf_counter()
                await agent.run(f'Turn M{turn}', message_history=window, capabilities=[capability])
                middle = time.perf_counter()
                await session.run(agent, f'Turn M{turn}')
                timed['ours_added'] = (time.perf_counter() - middle) - (middle - start)
                timed['ours_first'] = await ours_first_open(ours_url, HOT_SIZE, 'hot', processor)()
                if peer is not None:
                    start = time.perf_counter()
                    items = await peer.get_items(TAIL)
                    timed['peer_warm'] = time.perf_counter() - start
                    start = time.perf_counter()
                    await peer.get_items(TAIL)
                    await peer.add_items(peer_turn(HOT_SIZE // 4 + turn))
                    timed['peer_cycle'] = time.perf_counter() - start
                    assert len(items) == TAIL, len(items)
                    timed['peer_first'] = await peer_first_open(peer_url, HOT_SIZE + 4 * (turn + 1), TAIL, 'hot')()
            if turn:
                for name, seconds in timed.items():
                    times[name].append(seconds)
    medians = {name: statistics.median(seconds) * 1_000 for name, seconds in times.items()}
    return HotPath(**medians)


def print_hot_path(hot: HotPath, rounds: int, backend: str) -> None:
    print(
        f'4. The hot path on {backend}: a {HOT_SIZE:,}-message session, sliding window {HOT_TRIGGER}/{TAIL}, the '
        f'scripted agent, {rounds} alternating rounds, median ms'
    )
    rows = [
        ('warm window read', 'session.context()', hot.ours_warm, f'get_items(limit={TAIL})', hot.peer_warm),
        (
            'first open after restart',
            'new store + session + context()',
            hot.ours_first,
            f'new engine + session + get_items(limit={TAIL})',
            hot.peer_first,
        ),
        (
            'what the store adds to a run',
            'session.run - agent.run',
            hot.ours_added,
            f'get_items(limit={TAIL}) + add_items(4)',
            hot.peer_cycle,
        ),
    ]
    for name, ours_is, ours, peer_is, peer in rows:
        print(f'   {name:<30} ours {ours:>7.2f}  ({ours_is})')
        print(f'   {"":<30} peer {cell(peer):>7}  ({peer_is})')
    print()
    targets = [
        ('warm window read', hot.ours_warm, hot.peer_warm, TARGET_WARM_READ, f"peer's get_items(limit={TAIL})"),
        ('first open after restart', hot.ours_first, hot.peer_first, TARGET_FIRST_OPEN, "peer's first open"),
        ('what the store adds to a run', hot.ours_added, hot.peer_cycle, TARGET_ADDED, "peer's read + add_items"),
    ]
    for name, ours, peer, target, against in targets:
        if peer is None:
            print(f'target on {backend}: {name} <= {target} x {against}: peer {PEER_MISSING}')
            continue
        verdict = 'met' if ours / peer <= target else 'MISSED'
        print(f'target on {backend}: {name} <= {target} x {against}: {ours / peer:.2f} x, {verdict}')
    print()


# ---------------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------------


async def describe(url: str, where: str) -> str:
    """The section title of a backend: its version and where its databases are."""
    engine = create_async_engine(url)
    try:
        return f'=== {await server_version(engine)}, {where}'
    finally:
        await engine.dispose()


async def run_backend(databases: Databases, title: str, plan: Plan) -> None:
    """The parts asked for on one backend's databases, removed at the end."""
    print(f'\n{title}\n')
    try:
        if 1 in plan.parts:
            appends = await append_benchmark(databases, plan.turns, plan.append_repeats)
            print_append(appends, plan.turns, databases.title)
        if 2 in plan.parts:
            print_opening(await opening_benchmark(databases, plan.sizes, plan.repeats), databases.title)
        if 3 in plan.parts:
            branched = await branched_benchmark(databases, plan.tree, plan.repeats)
            print_branched(branched, plan.tree, databases.title)
        if 4 in plan.parts:
            print_hot_path(await hot_path_benchmark(databases, plan.rounds), plan.rounds, databases.title)
    finally:
        databases.close()


async def run_sqlite(plan: Plan) -> None:
    files = SqliteFiles()
    title = await describe('sqlite+aiosqlite://', 'a file per library and run in a temporary directory')
    await run_backend(files, title, plan)


async def run_postgres(plan: Plan) -> None:
    """The same on PostgreSQL, or say why there is none."""
    server, why = postgres_server()
    if server is None:
        print(f'\n=== PostgreSQL figures skipped: {why}')
        return
    where = make_url(server)
    title = await describe(server, f'{where.host}:{where.port}, a fresh database per library and run')
    await run_backend(PostgresDatabases(server), title, plan)


async def run(plan: Plan, backends: Sequence[str]) -> None:
    started = time.perf_counter()
    print_header(plan)
    if 'sqlite' in backends:
        await run_sqlite(plan)
    if 'postgresql' in backends:
        await run_postgres(plan)
    print(f'\nTotal {time.perf_counter() - started:.0f} s; {load_average("at the end")}')


def parse_args() -> tuple[Plan, list[str]]:
    """The plan (`--quick` changes the defaults, flags given with it win) and the backends."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        '--quick',
        action='store_true',
        help=f'tiny sizes and one repeat of everything, done in seconds (turns {QUICK_TURNS}, sizes '
        f'{" ".join(map(str, QUICK_SIZES))}, repeats {QUICK_REPEATS}): a check that it runs, not a measurement',
    )
    parser.add_argument('--turns', type=int, help=f'turns appended per append run (default {DEFAULT_TURNS})')
    parser.add_argument(
        '--sizes', type=int, nargs='+', help=f'archived messages (default {" ".join(map(str, DEFAULT_SIZES))})'
    )
    parser.add_argument('--repeats', type=int, help=f'timed repetitions per figure (default {DEFAULT_REPEATS})')
    parser.add_argument('--tree', type=int, help=f'3: messages in the branched tree (default {TREE})')
    parser.add_argument('--tree-path', type=int, help=f'3: messages on its active path (default {TREE_PATH})')
    parser.add_argument('--branch-points', type=int, help=f'3: branch points on the path (default {BRANCH_POINTS})')
    parser.add_argument('--rounds', type=int, help=f'4: rounds of the hot path (default {HOT_ROUNDS})')
    parser.add_argument('--backends', nargs='+', choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument(
        '--parts',
        type=int,
        nargs='+',
        choices=(1, 2, 3, 4),
        default=[1, 2, 3, 4],
        help='which parts to run (default all)',
    )
    args = parser.parse_args()
    quick = args.quick

    def given(value: int | None, quick_default: int, default: int) -> int:
        return value if value is not None else quick_default if quick else default

    sizes = sorted(args.sizes or (QUICK_SIZES if quick else DEFAULT_SIZES))
    if any(size < TAIL + 4 or size % 4 for size in sizes):
        parser.error(f'sizes must be multiples of 4, at least {TAIL + 4}')
    tree = Tree(
        size=given(args.tree, QUICK_TREE, TREE),
        path=given(args.tree_path, QUICK_TREE_PATH, TREE_PATH),
        branch_points=given(args.branch_points, QUICK_BRANCH_POINTS, BRANCH_POINTS),
    )
    if (problem := tree.problem()) is not None:
        parser.error(f'--tree {tree.size} --tree-path {tree.path} --branch-points {tree.branch_points}: {problem}')
    plan = Plan(
        turns=given(args.turns, QUICK_TURNS, DEFAULT_TURNS),
        sizes=sizes,
        repeats=given(args.repeats, QUICK_REPEATS, DEFAULT_REPEATS),
        append_repeats=QUICK_REPEATS if quick else APPEND_REPEATS,
        tree=tree,
        parts=sorted(set(args.parts)),
        rounds=given(args.rounds, QUICK_HOT_ROUNDS, HOT_ROUNDS),
    )
    return plan, args.backends


if __name__ == '__main__':
    asyncio.run(run(*parse_args()))
