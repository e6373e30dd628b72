"""Server time of the web app's pages: a session page of a 100,000-message session, the sessions page with 10,000.

Run it with one command from the repo root, in the project's venv (it needs the `web` extra, which `.[dev]`
includes):

    python benchmarks/web.py
    python benchmarks/web.py --quick        # 2,000 messages and 200 sessions, 3 timed requests a figure: seconds
    python benchmarks/web.py --backends sqlite --breakdown

What is measured: `session_store.web.create_app(store)` answering one GET, called in-process as its ASGI server
would call it (the request in, every byte of the response out, HTML rendered), without a network or an HTTP
parser. The figure is the median over `--repeats` requests, after two untimed ones, with GC paused while
timing. Each figure is taken at a small and a large size, and the growth between them is printed: pages that
read a bounded slice of the archive cost about the same at both.

- session page: one session whose archive grows from 1,000 to 100,000 messages (tool-using support turns of
  four messages, a summary every 2,000 messages, as a summarizing session keeps them), shown 100 messages a
  page: the last page (what `/sessions/ID` opens on), the first page (with its summary band), a page in the
  middle reached by `?at=` (as a search hit links), the same data as JSON, and the context page.
- sessions page: the store holds 100, then 10,000 sessions of 4 messages each: the first page of 50 (`/`),
  the last page (`/?offset=...`), and the JSON of the first.

`--breakdown` prints, at the large size, what the session page's reads through the store's public API cost
one by one, and what is left for rendering.

Backends: SQLite in a temporary file, and PostgreSQL on a real server from `testkit/postgres.py` (the server
named by `$SESSION_STORE_TEST_PG_URL`, or a throwaway local cluster when PostgreSQL is installed; skipped,
saying why, when there is none), in a fresh database that is dropped at the end. The archives are stored
through the public API, far faster than runs: each session built in memory as a `SessionExport` and handed
to `store.import_` (`_seeding.py`; the long session grows by export, more messages and summaries, and import
again in its place).
"""

# The third-party imports follow the environment bootstrap, which must run first.
# ruff: noqa: E402

from __future__ import annotations

from _bench_env import ensure_environment

ensure_environment()  # no peer: the repo root on sys.path (for `testkit.postgres`), and the project installed

import argparse
import asyncio
import importlib.util
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any
from urllib.parse import unquote

from _bench_db import analyze, postgres_server, server_version
from _bench_util import load_average, machine, quiet_gc, size_label
from _seeding import Archive
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from sqlalchemy.engine import make_url

from session_store import SessionStore
from testkit.postgres import drop_database, fresh_database

if importlib.util.find_spec('starlette') is None or importlib.util.find_spec('jinja2') is None:
    raise SystemExit('benchmarks/web.py needs the web extra: pip install -e ".[web]" (or ".[dev]")')

from session_store.web import create_app

BACKENDS = ('sqlite', 'postgresql')
LONG = 'long-session'
SCOPE = 'bench'
BATCH = 5_000
SUMMARY_EVERY = 2_000
TAIL = 40
WARMUP = 2
DEFAULT = {'messages': (1_000, 100_000), 'sessions': (100, 10_000), 'repeats': 20}
QUICK = {'messages': (200, 2_000), 'sessions': (20, 200), 'repeats': 3}


# --- the archive ---------------------------------------------------------------------------------


def turn(serial: int) -> list[ModelMessage]:
    """One support exchange: a question, a tool call, its result, and the answer."""
    order = f'ORD-{10_000 + serial % 90_000}'
    call = f'call_{serial}'
    return [
        ModelRequest(parts=[UserPromptPart(f'Hi, where is my order {order}? It should have arrived by now.')]),
        ModelResponse(parts=[ToolCallPart('track_shipment', {'order_id': order, 'carrier': 'DHL'}, call)]),
        ModelRequest(parts=[ToolReturnPart('track_shipment', {'order_id': order, 'status': 'in transit'}, call)]),
        ModelResponse(parts=[TextPart(f'Your order {order} is in transit with DHL and arrives within two days.')]),
    ]


def archive(start: int, stop: int) -> list[ModelMessage]:
    return [message for serial in range(start // 4, (stop + 3) // 4) for message in turn(serial)][: stop - start]


def tokens(messages: Sequence[ModelMessage]) -> list[int]:
    return [10 + len(repr(message.parts)) // 4 for message in messages]


async def grow_long(store: SessionStore, end: int) -> None:
    """Extend the long session to `end` messages, with a summary every `SUMMARY_EVERY` messages (counted in
    batches of `BATCH`, as the archive grew before) and one more so that its window keeps only the last `TAIL`,
    as a summarizing session keeps them."""
    long = await Archive.of(store, LONG, SCOPE)
    for start in range(long.length, end, BATCH):
        stop = min(end, start + BATCH)
        covered = long.window_start
        cuts = list(range(covered + SUMMARY_EVERY, stop - TAIL, SUMMARY_EVERY))
        if stop == end and stop - TAIL > max([covered, *cuts]):
            cuts.append(stop - TAIL)  # the window keeps only the last TAIL messages
        messages = archive(start, stop)
        long.append(messages, tokens(messages))
        for cut in cuts:
            text = f'Summary up to message {cut}: the customer asked about their orders; all were found in transit.'
            long.summarize(cut, text, len(text) // 4, 'bench-summarizer')
    await long.store_in(store)


async def grow_sessions(store: SessionStore, have: int, want: int) -> None:
    """Add sessions of 4 messages each until the store holds `want` of them (the long one included)."""
    messages = archive(0, 4)
    counts = tokens(messages)
    for number in range(have, want):
        session = Archive(f'session-{number:05d}', SCOPE)
        session.append(messages, counts)
        await store.import_(session.document())


# --- requests ------------------------------------------------------------------------------------


async def get(app: Any, target: str) -> int:
    """One GET, as an ASGI server hands it to the app; the response's size in bytes, after checking it is a 200."""
    path, _, query = target.partition('?')
    scope = {
        'type': 'http',
        'asgi': {'version': '3.0', 'spec_version': '2.3'},
        'http_version': '1.1',
        'method': 'GET',
        'scheme': 'http',
        'path': unquote(path),
        'raw_path': path.encode(),
        'query_string': query.encode(),
        'root_path': '',
        'headers': [(b'host', b'127.0.0.1:8000'), (b'accept', b'text/html')],
        'client': ('127.0.0.1', 50_000),
        'server': ('127.0.0.1', 8_000),
        'state': {},
    }
    status = 0
    size = 0

    async def receive() -> dict[str, Any]:
        return {'type': 'http.request', 'body': b'', 'more_body': False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, size
        if message['type'] == 'http.response.start':
            status = message['status']
        elif message['type'] == 'http.response.body':
            size += len(message.get('body', b''))

    await app(scope, receive, send)
    if status != 200:
        raise AssertionError(f'GET {target} answered {status}')
    return size


async def median_ms(call: Callable[[], Awaitable[Any]], repeats: int) -> float:
    for _ in range(WARMUP):
        await call()
    samples = []
    with quiet_gc():
        for _ in range(repeats):
            began = time.perf_counter()
            await call()
            samples.append((time.perf_counter() - began) * 1_000)
    return statistics.median(samples)


def session_targets(size: int) -> list[tuple[str, str]]:
    return [
        ('session page (last page)', f'/sessions/{LONG}'),
        ('session page (first page)', f'/sessions/{LONG}?offset=0'),
        ('session page (middle, by ?at=)', f'/sessions/{LONG}?at={size // 2}'),
        ('session JSON (last page)', f'/api/sessions/{LONG}'),
        ('context page', f'/context/{LONG}'),
    ]


def sessions_targets(count: int) -> list[tuple[str, str]]:
    return [
        ('sessions page (first page)', '/'),
        ('sessions page (last page)', f'/?offset={max(0, count - 50)}'),
        ('sessions JSON (first page)', '/api/sessions'),
    ]


async def measure(app: Any, targets: list[tuple[str, str]], repeats: int) -> dict[str, tuple[float, int]]:
    found: dict[str, tuple[float, int]] = {}
    for label, target in targets:
        size = await get(app, target)
        found[label] = (await median_ms(partial(get, app, target), repeats), size)
    return found


async def breakdown(store: SessionStore, repeats: int) -> None:
    """What the session page's reads cost one by one (the page makes them in this order), at the large size."""
    info = await store.window(LONG)
    offset = max(0, info.message_count - 100)
    session = await store.session(LONG, scope=SCOPE)
    steps: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ('conversations.read_record', lambda: store.conversations.read_record(LONG)),
        ('window', lambda: store.window(LONG, scope=SCOPE)),
        ('session (open)', lambda: store.session(LONG, scope=SCOPE)),
        ('branches', session.branches),
        ('summaries', lambda: store.summaries(LONG, scope=SCOPE)),
        ('history (100)', lambda: store.history(LONG, scope=SCOPE, offset=offset, limit=100)),
    ]
    total = 0.0
    for label, step in steps:
        ms = await median_ms(step, repeats)
        total += ms
        print(f'    {label:<28} {ms:8.2f} ms')
    print(f'    {"reads in all":<28} {total:8.2f} ms')


# --- running -------------------------------------------------------------------------------------


async def run_backend(name: str, url: str, settings: dict[str, Any], repeats: int, show_breakdown: bool) -> None:
    small_messages, large_messages = settings['messages']
    small_sessions, large_sessions = settings['sessions']
    store = SessionStore(url)
    try:
        app = create_app(store)
        await store.session(LONG, scope=SCOPE)
        backend = 'SQLite' if store.engine.dialect.name == 'sqlite' else 'PostgreSQL'
        print(f'{await server_version(store.engine)} ({name}), median of {repeats} requests')
        results: dict[str, dict[str, tuple[float, int]]] = {}
        for messages, sessions in ((small_messages, small_sessions), (large_messages, large_sessions)):
            began = time.perf_counter()
            await grow_long(store, messages)
            have = len(await store.sessions())
            await grow_sessions(store, have - 1, sessions - 1)
            await analyze(store.engine)
            print(
                f'  filled: {messages:,} messages in {LONG!r}, {sessions:,} sessions, '
                f'in {time.perf_counter() - began:.1f} s'
            )
            results[f'm{messages}'] = await measure(app, session_targets(messages), repeats)
            results[f's{sessions}'] = await measure(app, sessions_targets(sessions), repeats)
        for kind, small, large, targets in (
            ('m', small_messages, large_messages, session_targets(large_messages)),
            ('s', small_sessions, large_sessions, sessions_targets(large_sessions)),
        ):
            unit = 'messages' if kind == 'm' else 'sessions'
            for label, _ in targets:
                big_ms, big_bytes = results[f'{kind}{large}'][label]
                small_ms, _ = results[f'{kind}{small}'][label]
                print(
                    f'{label} @{size_label(large)} {unit} on {backend}: {big_ms:.2f} ms ({big_bytes:,} bytes); '
                    f'@{size_label(small)}: {small_ms:.2f} ms; growth {big_ms / small_ms:.2f}x'
                )
        if show_breakdown:
            print(f"  the session page's reads @{size_label(large_messages)} messages on {backend}:")
            await breakdown(store, repeats)
    finally:
        await store.close()


async def run_sqlite(settings: dict[str, Any], repeats: int, show_breakdown: bool) -> None:
    with tempfile.TemporaryDirectory(prefix='web-bench-') as folder:
        await run_backend('temp file', f'sqlite+aiosqlite:///{folder}/web.db', settings, repeats, show_breakdown)


def run_postgres(settings: dict[str, Any], repeats: int, show_breakdown: bool) -> None:
    server, why = postgres_server()
    if server is None:
        print(f'\n=== PostgreSQL figures skipped: {why}')
        return
    database = fresh_database(server)
    where = make_url(database)
    print()
    try:
        name = f'{where.host}:{where.port}, fresh database'
        asyncio.run(run_backend(name, database, settings, repeats, show_breakdown))
    finally:
        drop_database(database)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument('--quick', action='store_true', help='small sizes and 3 requests a figure: seconds')
    parser.add_argument('--repeats', type=int, help='timed requests a figure; the median is shown')
    parser.add_argument('--breakdown', action='store_true', help="time the session page's store reads one by one")
    parser.add_argument('--backends', nargs='+', choices=BACKENDS, default=list(BACKENDS))
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else DEFAULT
    repeats = args.repeats or settings['repeats']
    print(f'{machine()}; {load_average("at start")}')
    began = time.perf_counter()
    if 'sqlite' in args.backends:
        asyncio.run(run_sqlite(settings, repeats, args.breakdown))
    if 'postgresql' in args.backends:
        run_postgres(settings, repeats, args.breakdown)
    print(f'\ntotal {time.perf_counter() - began:.0f} s; {load_average("at the end")}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
