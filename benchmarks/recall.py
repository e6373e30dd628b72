"""Search latency over one session's archive: full-text (`match='words'`) against a LIKE scan (`match='phrase'`).

Run it with one command from the repo root (the project venv is fine, so is a bare `python3`: see `_bench_env.py`):

    python benchmarks/recall.py
    python benchmarks/recall.py --sizes 1000 10000 --repeats 5 --explain    # a quicker pass, with query plans
    python benchmarks/recall.py --backends postgresql                          # one backend
    python benchmarks/recall.py --quick       # 200 and 1,000 messages, one timed call each: in seconds

`--quick` sets the defaults to sizes 200 and 1,000 and one timed call per figure; flags given with it win.
Its figures are noisy; the sanity checks run in full.

What is measured: `SessionStore.search(text, session_id=..., scope=..., limit=8, match=...)`, the call the
recall tool `search_history` makes (8 is `Recall.max_hits`), on a session whose archive holds 1k, 10k and
100k messages, in a database that also holds three other sessions of the same size (4x the rows), as a shared
store does. `match='words'` is the full-text index (SQLite FTS5 with bm25, PostgreSQL tsvector + GIN with
ts_rank_cd), best match first; `match='phrase'` is a case-insensitive LIKE substring scan, newest first.
The figure is the median wall time of one call (query, fetch and decoding of the hits) over `--repeats`
calls, after two untimed warm-up calls, with GC paused while timing; the last column is LIKE / full-text.

Backends: SQLite in a temporary file, and PostgreSQL on a real server from `testkit/postgres.py` (the server
named by `$SESSION_STORE_TEST_PG_URL`, or a throwaway local cluster when PostgreSQL is installed; skipped,
saying why, when there is none), in a fresh database that is dropped at the end. PostgreSQL's statistics
are refreshed with ANALYZE after each fill, as autovacuum would; SQLite gets no ANALYZE, as nothing in the
store runs one.

The archives are synthetic support conversations in turns of four messages: a customer's request, a tool
call (order lookup, refund status, shipment tracking, returns), the tool's result and the assistant's
answer, with varying order numbers, products and wording. The sessions grow in place from one size to
the next, in batches saved through the public `store.conversations` (pydantic-ai's `ConversationStore`:
`load(id, limit=1)`, the batch added, `save`; the store counts each message's tokens), interleaved across
sessions so each session's rows are spread through the table. The queries:

- number: '73519', the digits of an order number (ORD-73519) that occurs once in the measured session,
  at position 3, once in another session, and nowhere else: a selective query.
- needle: 'ORD-73519', the whole order number. Full-text reduces it to the words `ord`, `73519` and
  keeps to messages with both (only when none has every word does it rank those with any).
- paraphrase: 'order number arrived', how a model recalls the needle without the number. Only the
  needle's message holds all three words (`number` nowhere else); as a substring it occurs nowhere, so
  the LIKE scan reads everything and finds nothing.
- common: 'refund', in over a third of the messages.

Sanity checks: every hit is from the measured session; the needle's message is the first hit of the
number and needle queries in both modes and of the paraphrase in full-text; each mode returns the expected
count (1 for the number, the needle and the full-text paraphrase, none by LIKE for the paraphrase, else the
limit); LIKE hits hold
the text and come newest first. A failed check prints SANITY CHECK FAILED with what came back (those
results are wrong, whatever their speed), the run goes on, and the exit status is 1. Timings are printed,
never asserted. `--explain` prints each query's plan (PostgreSQL: EXPLAIN ANALYZE) as the store ran it.
"""

# The third-party imports follow the environment bootstrap, which must run first.
# ruff: noqa: E402

from __future__ import annotations

from _bench_env import ensure_environment

ensure_environment()  # no peer: the repo root on sys.path (for `testkit.postgres`), and the project installed

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from _bench_db import analyze, postgres_server, server_version
from _bench_util import load_average, machine, quiet_gc
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from sqlalchemy import event
from sqlalchemy.engine import make_url

from session_store import SessionStore
from session_store.results import SearchHit
from testkit.postgres import drop_database, fresh_database

Match = Literal['words', 'phrase']

SCOPE = 'acme-support'
TARGET = 'support-target'
OTHERS = ('support-other-1', 'support-other-2', 'support-other-3')
NEEDLE = 'ORD-73519'
NEEDLE_DIGITS = '73519'
NEEDLE_POSITION = 3
OTHER_NEEDLE_POSITION = 501
"""Where the needle also sits in the first other session: a hit there would be a leak across sessions."""
LIMIT = 8
BATCH = 5_000
WARMUP = 2
BACKENDS = ('sqlite', 'postgresql')
DEFAULT_SIZES = (1_000, 10_000, 100_000)
DEFAULT_REPEATS = 15
QUICK_SIZES = (200, 1_000)
QUICK_REPEATS = 1


@dataclass(frozen=True)
class Query:
    name: str
    text: str
    needle_first: tuple[Match, ...]
    """The modes whose first hit must be the needle's message."""
    hits: dict[Match, int]
    """How many hits each mode must return."""


QUERIES = (
    Query('number', NEEDLE_DIGITS, needle_first=('words', 'phrase'), hits={'words': 1, 'phrase': 1}),
    # Full-text keeps to messages with every word when some have them all: here, only the needle's.
    Query('needle', NEEDLE, needle_first=('words', 'phrase'), hits={'words': 1, 'phrase': 1}),
    Query('paraphrase', 'order number arrived', needle_first=('words',), hits={'words': 1, 'phrase': 0}),
    Query('common', 'refund', needle_first=(), hits={'words': LIMIT, 'phrase': LIMIT}),
)


# --- the conversations -------------------------------------------------------------------------

PRODUCTS = (
    'USB-C dock',
    'noise-cancelling headphones',
    'espresso machine',
    '27-inch monitor',
    'mechanical keyboard',
    'standing desk',
    'robot vacuum',
    'air fryer',
    'hiking backpack',
    'smart thermostat',
)
PROBLEMS = (
    'arrived with a cracked screen',
    'stopped working after two days',
    'is missing the power cable',
    'was the wrong colour',
    'never showed up',
    'makes a loud rattling noise',
    'arrived late and the box was crushed',
)
OPENERS = ('Hi,', 'Hello there,', 'Good morning,', 'Hey,', 'Hi again,', '')
CARRIERS = ('DHL', 'UPS', 'FedEx', 'Royal Mail')


def _code(rng: random.Random, prefix: str, digits: int) -> str:
    """A random reference like ORD-48213 that never contains the needle's digits."""
    while True:
        value = f'{prefix}{rng.randrange(10 ** (digits - 1), 10**digits)}'
        if NEEDLE_DIGITS not in value:
            return value


def _turn(rng: random.Random, serial: int) -> list[ModelMessage]:
    """One support exchange: request, tool call, tool result, answer. No text in it says 'number'."""
    order = _code(rng, 'ORD-', 5)
    product = rng.choice(PRODUCTS)
    problem = rng.choice(PROBLEMS)
    call_id = f'call_{serial}'
    kind = rng.randrange(4)
    if kind == 0:
        prompt = f'{rng.choice(OPENERS)} my {product} from order {order} {problem}. Can I get a refund?'
        tool, args = 'check_refund_status', {'order_id': order}
        result: dict[str, Any] = {'order_id': order, 'refund': rng.choice(['eligible', 'pending', 'issued'])}
        answer = (
            f'I am sorry about the {product}. Your order {order} qualifies for a full refund; it goes back to '
            f'your original payment method within {rng.randint(3, 10)} business days.'
        )
    elif kind == 1:
        carrier = rng.choice(CARRIERS)
        tracking = _code(rng, 'TRK', 9)
        prompt = f'{rng.choice(OPENERS)} where is my {product}? The order is {order} and tracking has not moved.'
        tool, args = 'track_shipment', {'tracking_id': tracking, 'carrier': carrier}
        result = {
            'tracking_id': tracking,
            'status': 'in transit',
            'last_scan': f'{carrier} hub, {rng.randint(1, 28)} May',
        }
        answer = f'Your {product} is with {carrier}, last scanned at their hub. It should reach you within two days.'
    elif kind == 2:
        prompt = f'{rng.choice(OPENERS)} I want to return the {product}; it {problem}. What are my options?'
        tool, args = 'list_returns', {'customer_id': _code(rng, 'C-', 4), 'product': product}
        result = {'returnable': True, 'window_days': 30, 'label': 'prepaid'}
        answer = (
            f'You can return the {product} within 30 days with a prepaid label. Once it reaches our warehouse, '
            'we issue the refund or send a replacement, whichever you prefer.'
        )
    else:
        prompt = f'{rng.choice(OPENERS)} can you check order {order}? I was charged twice for the {product}.'
        tool, args = 'lookup_order', {'order_id': order}
        result = {'order_id': order, 'charges': 2, 'amount': f'{rng.randint(20, 900)}.{rng.randint(0, 99):02d} EUR'}
        answer = (
            f'You are right: order {order} was charged twice. I have reversed the duplicate charge, '
            'and the refund shows on your statement in a few days.'
        )
    return [
        ModelRequest(parts=[UserPromptPart(prompt)]),
        ModelResponse(parts=[ToolCallPart(tool, args, call_id)]),
        ModelRequest(parts=[ToolReturnPart(tool, result, call_id)]),
        ModelResponse(parts=[TextPart(answer)]),
    ]


def _needle_turn(serial: int) -> list[ModelMessage]:
    """The turn whose answer (its fourth message) is the only one naming ORD-73519."""
    call_id = f'call_{serial}'
    return [
        ModelRequest(parts=[UserPromptPart('Hi, my parcel came yesterday but I lost the confirmation email.')]),
        ModelResponse(parts=[ToolCallPart('lookup_customer_orders', {'email': 'jane.doe@example.com'}, call_id)]),
        ModelRequest(parts=[ToolReturnPart('lookup_customer_orders', {'orders': 1, 'status': 'delivered'}, call_id)]),
        ModelResponse(
            parts=[TextPart(f'Found it: your order number is {NEEDLE}. It arrived on 3 May, signed for at reception.')]
        ),
    ]


def conversation(session_id: str, start: int, stop: int) -> Iterator[ModelMessage]:
    """Messages `start..stop` of a session's archive; the same messages each time they are asked for."""
    needle_at = {TARGET: NEEDLE_POSITION, OTHERS[0]: OTHER_NEEDLE_POSITION}.get(session_id)
    first_turn, last_turn = start // 4, (stop + 3) // 4
    for turn in range(first_turn, last_turn):
        rng = random.Random(f'{session_id}/{turn}')
        has_needle = needle_at is not None and turn == needle_at // 4
        messages = _needle_turn(turn) if has_needle else _turn(rng, turn)
        for offset, message in enumerate(messages):
            if start <= turn * 4 + offset < stop:
                yield message


async def create_sessions(store: SessionStore) -> list[str]:
    """The four empty sessions' ids."""
    for session_id in (TARGET, *OTHERS):
        await store.session(session_id, scope=SCOPE)
    return [TARGET, *OTHERS]


async def grow(store: SessionStore, sessions: Sequence[str], start: int, stop: int) -> None:
    """Append messages `start..stop` to every session, batch by batch, taking turns across sessions: each batch
    saved through pydantic-ai's `ConversationStore` API (`store.conversations`), on the conversation loaded
    with its last message only, so a save appends after it without the archive being read."""
    for batch_start in range(start, stop, BATCH):
        batch_stop = min(batch_start + BATCH, stop)
        for session_id in sessions:
            loaded = await store.conversations.load(session_id, limit=1, scope=SCOPE)
            assert loaded is not None, session_id
            loaded.messages.extend(conversation(session_id, batch_start, batch_stop))
            await store.conversations.save(loaded, scope=SCOPE)


# --- measuring ----------------------------------------------------------------------------------


@dataclass
class Timing:
    median_ms: float
    hits: list[SearchHit]


@dataclass
class Row:
    size: int
    query: Query
    timings: dict[Match, Timing] = field(default_factory=dict[Match, Timing])
    failed: list[str] = field(default_factory=list[str])


async def search(store: SessionStore, query: Query, match: Match) -> list[SearchHit]:
    return await store.search(query.text, session_id=TARGET, scope=SCOPE, limit=LIMIT, match=match)


async def time_search(store: SessionStore, query: Query, match: Match, repeats: int) -> Timing:
    """The median wall time of one search call, after `WARMUP` untimed calls."""
    for _ in range(WARMUP):
        hits = await search(store, query, match)
    samples: list[float] = []
    with quiet_gc():
        for _ in range(repeats):
            began = time.perf_counter()
            hits = await search(store, query, match)
            samples.append((time.perf_counter() - began) * 1_000)
    return Timing(statistics.median(samples), hits)


def check(query: Query, match: Match, hits: Sequence[SearchHit]) -> list[str]:
    """The sanity checks of the module docstring: what failed, if anything."""
    positions = [hit.position for hit in hits]
    failed: list[str] = []
    if any(hit.session_id != TARGET or hit.scope != SCOPE for hit in hits):
        failed.append('a hit from another session')
    if match in query.needle_first and not (hits and positions[0] == NEEDLE_POSITION and NEEDLE in hits[0].text):
        failed.append(f'expected the needle (position {NEEDLE_POSITION}) first; got positions {positions}')
    if len(hits) != query.hits[match]:
        failed.append(f'{len(hits)} hits, expected {query.hits[match]}')
    if match == 'phrase' and any(query.text.lower() not in hit.text.lower() for hit in hits):
        failed.append(f'a LIKE hit without {query.text!r}')
    if match == 'phrase' and positions != sorted(positions, reverse=True):
        failed.append(f'LIKE hits not newest first: {positions}')
    return [f'{query.name} {query.text!r}, match={match!r}: {problem}' for problem in failed]


async def measure(store: SessionStore, size: int, repeats: int) -> list[Row]:
    rows: list[Row] = []
    for query in QUERIES:
        row = Row(size, query)
        for match in ('words', 'phrase'):
            timing = await time_search(store, query, match, repeats)
            row.timings[match] = timing
            row.failed += check(query, match, timing.hits)
        rows.append(row)
    return rows


# --- query plans --------------------------------------------------------------------------------


class StatementLog:
    """The SQL and parameters of the statements the store sends, for explaining them afterwards."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.statements: list[tuple[str, Any]] = []
        self.recording = False
        event.listen(store.engine.sync_engine, 'before_cursor_execute', self._record)

    def _record(self, _conn: Any, _cursor: Any, statement: str, parameters: Any, *_rest: Any) -> None:
        if self.recording:
            self.statements.append((statement, parameters))

    async def search_statement(self, query: Query, match: Match) -> tuple[str, Any]:
        """The SELECT that `store.search` runs for `query` in `match` mode."""
        self.statements.clear()
        self.recording = True
        try:
            await search(self.store, query, match)
        finally:
            self.recording = False
        return next((s, p) for s, p in self.statements if s.lstrip().upper().startswith('SELECT'))

    async def explain(self, query: Query, match: Match) -> str:
        statement, parameters = await self.search_statement(query, match)
        if self.store.engine.dialect.name == 'sqlite':
            prefix = 'EXPLAIN QUERY PLAN '
        else:
            prefix = 'EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) '
        async with self.store.engine.connect() as conn:
            result = await conn.exec_driver_sql(prefix + statement, parameters)
            plan: list[tuple[Any, ...]] = [tuple(row) for row in result]
        if self.store.engine.dialect.name == 'sqlite':
            return '\n'.join(f'{row[0]:>3} {row[1]:>3}  {row[3]}' for row in plan)
        return '\n'.join(str(row[0]) for row in plan)


async def print_plans(log: StatementLog, size: int) -> None:
    for query in QUERIES:
        for match in ('words', 'phrase'):
            print(f'\n  plan at {size:,} messages, {query.name} {query.text!r}, match={match!r}:')
            for line in (await log.explain(query, match)).splitlines():
                print(f'    {line}')


# --- running ------------------------------------------------------------------------------------


def print_header(title: str) -> None:
    print(f'\n{title}')
    print(
        f'  {"archive":>9}  {"query":<34} {"full-text ms":>12} {"hits":>5}  {"LIKE ms":>9} {"hits":>5}'
        f'  {"LIKE/full-text":>14}'
    )


def print_row(row: Row) -> None:
    words, phrase = row.timings['words'], row.timings['phrase']
    label = f'{row.query.name} {row.query.text!r}'
    print(
        f'  {row.size:>9,}  {label:<34} {words.median_ms:>12.2f} {len(words.hits):>5}  {phrase.median_ms:>9.2f}'
        f' {len(phrase.hits):>5}  {phrase.median_ms / words.median_ms:>13.2f}x'
    )


async def run_backend(name: str, url: str, sizes: Sequence[int], repeats: int, explain: bool) -> int:
    """Fill and measure one database, size by size, growing the same sessions; the count of failed checks."""
    store = SessionStore(url)
    failures = 0
    try:
        log = StatementLog(store)
        sessions = await create_sessions(store)
        title = f'{await server_version(store.engine)} ({name}): 4 sessions of N messages, search in one, limit {LIMIT}'
        print(f'{title}, median of {repeats}')
        filled = 0
        for size in sizes:
            began = time.perf_counter()
            await grow(store, sessions, filled, size)
            await analyze(store.engine)
            filled = size
            print(f'  filled to {size:,} messages a session ({4 * size:,} rows) in {time.perf_counter() - began:.1f} s')
            rows = await measure(store, size, repeats)
            print_header(f'  {size:,} messages:')
            for row in rows:
                print_row(row)
            for row in rows:
                for problem in row.failed:
                    print(f'  SANITY CHECK FAILED at {size:,} messages: {problem}')
                failures += len(row.failed)
            if explain:
                await print_plans(log, size)
    finally:
        await store.close()
    return failures


async def run_sqlite(sizes: Sequence[int], repeats: int, explain: bool) -> int:
    with tempfile.TemporaryDirectory(prefix='recall-bench-') as folder:
        return await run_backend('temp file', f'sqlite+aiosqlite:///{folder}/recall.db', sizes, repeats, explain)


def run_postgres(sizes: Sequence[int], repeats: int, explain: bool) -> int:
    """Measure PostgreSQL in a fresh database, dropped afterwards; say why when there is no server."""
    server, why = postgres_server()
    if server is None:
        print(f'\nPostgreSQL figures skipped: {why}')
        return 0
    database = fresh_database(server)
    where = make_url(database)
    print()
    try:
        name = f'{where.host}:{where.port}, fresh database'
        return asyncio.run(run_backend(name, database, sizes, repeats, explain))
    finally:
        drop_database(database)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        '--quick',
        action='store_true',
        help=f'tiny sizes ({" ".join(map(str, QUICK_SIZES))}) and {QUICK_REPEATS} timed call per figure, done in '
        'seconds: a check that it runs, not a measurement',
    )
    parser.add_argument(
        '--sizes', type=int, nargs='+', help=f'messages a session (default {" ".join(map(str, DEFAULT_SIZES))})'
    )
    parser.add_argument(
        '--repeats', type=int, help=f'timed calls per figure, the median is shown (default {DEFAULT_REPEATS})'
    )
    parser.add_argument('--explain', action='store_true', help='print each query plan at every size')
    parser.add_argument('--backends', nargs='+', choices=BACKENDS, default=list(BACKENDS))
    args = parser.parse_args(argv)
    sizes = sorted(set(args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES)))
    repeats = args.repeats if args.repeats is not None else QUICK_REPEATS if args.quick else DEFAULT_REPEATS
    print(f'{machine()}; {load_average("at start")}')
    began = time.perf_counter()
    failures = 0
    if 'sqlite' in args.backends:
        failures += asyncio.run(run_sqlite(sizes, repeats, args.explain))
    if 'postgresql' in args.backends:
        failures += run_postgres(sizes, repeats, args.explain)
    print(f'\ntotal {time.perf_counter() - began:.0f} s; {load_average("at the end")}')
    if failures:
        print(f'{failures} sanity checks failed (see SANITY CHECK FAILED above): those results are wrong, not slow.')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
