"""Cost of a chat front end's request through `session_store.dispatch_chat` against pydantic-ai's stock door
(`VercelAIAdapter.dispatch_request(..., conversation_store=store.conversations)`), at 1k, 10k and 100k archived
messages, on SQLite and on PostgreSQL: a new turn, and an edit or a regenerate of a recent or an old one (issue 27).

Run it with one command from the repo root, in the project's venv (it needs the `web` extra's Starlette, and
httpx, which `.[dev]` includes):

    python benchmarks/chat.py
    python benchmarks/chat.py --sizes 1000 10000 --repeats 9 --backends sqlite
    python benchmarks/chat.py --quick        # 500 and 2,000 messages, 2 repeats: does it run, roughly how

`--quick` sets the defaults to sizes 500 and 2,000 and 2 repeats; flags given with it win. Its figures are noisy
and only show that every measure runs and roughly how they compare.

What is measured: one Vercel AI request (`useChat`'s body: the conversation id and the message sent) posted with
`httpx.AsyncClient(transport=httpx.ASGITransport(app=app))` to a Starlette app in this process, timed from the post
to the last byte of its streamed response (the adapter's parsing, the agent's run, the store's load and save, the
events encoded). The app has two endpoints on one store: `/ours` answers with `dispatch_chat(VercelAIAdapter,
request, agent=agent, store=store)`, `/stock` with `VercelAIAdapter.dispatch_request(request, agent=agent,
conversation_store=store.conversations, usage_limits=UsageLimits(request_limit=None))`. The agent runs on a
scripted `FunctionModel`, streamed as the adapters run it, answering each prompt with one tool call and, once the
tool has answered, a text: 4 new messages a turn, in `_store_conversation.turn_text`'s words.

The store: `SessionStore(url, processor=SummarizationProcessor(FunctionModel(summarizer), trigger=('messages',
40), keep=('messages', 20)))`, the summarizer scripted. Its conversation `chat` is seeded through the public API, far
faster than runs: built in memory as a `SessionExport` and stored with `store.import_` (`_seeding.py`, as
benchmarks/web.py's sessions): tool-using turns of 4 messages whose prompts carry UI message ids as the adapters
store them (each prompt made by pydantic-ai's `VercelAIAdapter.load_messages` from a front end's user message with
that id), with a summary chain (one summary every 80 messages, each extending the last) whose latest
covers all but the last 20 messages: the window as a compaction at the trigger leaves it. A SQLite file per size
in a temporary directory; a fresh database per size on the PostgreSQL server of `testkit/postgres.py` (the server
named by `$SESSION_STORE_TEST_PG_URL`, else a throwaway local cluster when PostgreSQL is installed; skipped,
saying why, when there is none), ANALYZEd once seeded, dropped at the end.

The measures, each one request on an archive of N messages:

- new turn: a new message (a UI id the conversation has never had), through `/ours` and through `/stock`.
- edit recent: the prompt 3 turns back sent again with a new text, inside the window; through both doors (the
  stock adapter replaces a turn it finds in the loaded window).
- edit old: the prompt about N/2 messages back sent again with a new text, through `/ours` (the stock door can't:
  the prompt is not in the window it loads, so it appends it as a new message, which the store refuses at save;
  an old regenerate, pydantic-ai's adapter refuses itself).
- regenerate old: the same old prompt sent again as it was, Vercel AI's `regenerate-message`, through `/ours`.

Every measure starts from the same archive: the active path N messages, the window 20 messages after the latest
summary (so no timed request compacts: a compaction costs both doors the same, in the store's load, and
benchmarks/conversations.py measures it), and leaves it so, untimed: after a new turn, the archive's last turn is
regenerated through `/ours` (the path is N messages again, the new turn a branch); after an edit or a regenerate,
the session switches back to the path it was sent on. Then a load, as a chat's next turn finds its window in
memory. So the active path never grows; what the timed requests and the restores stored stays stored, as
branches (printed per size at the end: 8 messages a new turn, itself and the last turn it replaced, and 4 a
resubmission).

The figure is the median over `--repeats` requests of each measure and size, taken in turns after one untimed
pass (`_store_measuring.round_robin`), so the load from other work on this shared machine falls on each alike. It
reports ms per request, ours/stock, each resubmission against ours' new turn at the same size, and the growth of
each from the smallest archive to the largest. Sanity checks (assertions, never timings): every response is a
200 with no error event and a saved conversation, the active path has the length it should after each request
(N + 4 after a new turn, the turn before the prompt + 4 after a resubmission), the model was sent the window
before the prompt with one summary and nothing from a later turn, and no request compacted.

Today a new turn's cost grows with the archive: the save looks the new prompt's UI id up on the active path
(`refuse_resent_prompt`, a scan, newest first, of its requests), and `dispatch_chat` looks it up once more first
(`SQLConversationStore.resubmitting`). An old turn's resubmission scans back to it. An indexed column lookup is to
replace both scans; the growth figures show what it changes.
"""

# The third-party imports follow the environment bootstrap, which must run first.
# ruff: noqa: E402

from __future__ import annotations

from _bench_env import OUR_DIST, ensure_environment

ensure_environment()  # no peer: the repo root on sys.path (for `testkit.postgres`), and the project installed

import argparse
import asyncio
import importlib.metadata
import importlib.util
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack

if importlib.util.find_spec('starlette') is None or importlib.util.find_spec('httpx') is None:
    raise SystemExit('benchmarks/chat.py needs Starlette and httpx: pip install -e ".[dev]"')

import httpx
from _bench_db import analyze, describe, postgres_server
from _bench_util import load_average, machine, size_label
from _chat_door import (
    CHAT,
    RECENT,
    SUMMARY_EVERY,
    TRIGGER,
    WINDOW,
    Assistant,
    Chat,
    chat_app,
    old_turn,
    open_chat,
    seed,
)
from _store_contenders import Databases, PostgresDatabases, SqliteFiles
from _store_conversation import Summarizer
from _store_measuring import round_robin
from sqlalchemy.engine import make_url

from session_store import SessionStore

BACKENDS = ('sqlite', 'postgresql')
DEFAULT_SIZES = (1_000, 10_000, 100_000)
DEFAULT_REPEATS = 5
QUICK_SIZES = (500, 2_000)
QUICK_REPEATS = 2
MEASURES = (
    ('new turn', ('ours', 'stock')),
    ('edit recent', ('ours', 'stock')),
    ('edit old', ('ours',)),
    ('regenerate old', ('ours',)),
)
"""Each measure and the doors it runs through."""


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return 'not installed'


async def open_size(stack: AsyncExitStack, databases: Databases, size: int) -> tuple[Chat, float]:
    """The chat of `size` messages on a fresh database, seeded and analyzed, both doors on it; the seconds the
    seeding took."""
    assistant, summarizer = Assistant(), Summarizer()
    store = await stack.enter_async_context(
        SessionStore(databases.url(f'chat-{size}'), processor=summarizer.processor(TRIGGER, WINDOW))
    )
    began = time.perf_counter()
    await seed(store, size)
    seeded = time.perf_counter() - began
    await analyze(store.engine)
    transport = httpx.ASGITransport(app=chat_app(store, assistant.agent()))
    client = await stack.enter_async_context(httpx.AsyncClient(transport=transport, base_url='http://bench'))
    return await open_chat(store, client, assistant, summarizer, size), seeded


async def measure(databases: Databases, sizes: list[int], repeats: int) -> tuple[dict[tuple[int, str], float], str]:
    """Median ms of each size and measure (`'new turn (ours)'`, ...), taken in turns; what the archives stored."""
    async with AsyncExitStack() as stack:
        chats: dict[int, Chat] = {}
        seeding: list[str] = []
        for size in sizes:
            chats[size], seconds = await open_size(stack, databases, size)
            seeding.append(f'{size_label(size)} in {seconds:.1f} s')
        print(f'   seeded: {", ".join(seeding)}')
        medians = await round_robin(
            {(size, label): timed for size, chat in chats.items() for label, timed in chat.measures().items()},
            repeats,
        )
        stored = []
        for size, chat in chats.items():
            chat.check()
            branches = await chat.session.branches()
            held = sum(b.message_count - (b.forked_at or 0) for b in branches)
            stored.append(f'@{size_label(size)} {held - size:,} in {len(branches) - 1} branches')
        requests = ', '.join(f'@{size_label(size)} {chat.requests}' for size, chat in chats.items())
    return medians, f'stored off the active path by the end: {", ".join(stored)}; requests made: {requests}'


def print_backend(medians: dict[tuple[int, str], float], sizes: list[int], backend: str, repeats: int) -> None:
    print(
        f'Chat requests on {backend}: ms per request (Vercel AI, in-process ASGI, the whole streamed response), the '
        f'median of {repeats}'
    )
    print(
        f'   {"archived":>9} | {"new turn":>8} {"stock":>8} {"ours/stock":>10} | {"edit recent":>11} {"stock":>8} | '
        f'{"edit old":>8} | {"regen. old":>10}'
    )
    for size in sizes:
        new, stock = medians[size, 'new turn (ours)'], medians[size, 'new turn (stock)']
        recent, recent_stock = medians[size, 'edit recent (ours)'], medians[size, 'edit recent (stock)']
        old, regenerated = medians[size, 'edit old (ours)'], medians[size, 'regenerate old (ours)']
        print(
            f'   {size:>9,} | {new:>8.2f} {stock:>8.2f} {new / stock:>8.2f} x | {recent:>11.2f} {recent_stock:>8.2f} | '
            f'{old:>8.2f} | {regenerated:>10.2f}'
        )
    print('   (ours: dispatch_chat; stock: VercelAIAdapter.dispatch_request, conversation_store=store.conversations)')
    print()
    for size in sizes:
        at = f'@{size_label(size)} on {backend}'
        new, stock = medians[size, 'new turn (ours)'], medians[size, 'new turn (stock)']
        print(f'chat new turn {at}: dispatch_chat {new:.2f} ms, stock {stock:.2f} ms -> ours/stock {new / stock:.2f} x')
        recent, recent_stock = medians[size, 'edit recent (ours)'], medians[size, 'edit recent (stock)']
        print(
            f'chat edit recent turn {at}: dispatch_chat {recent:.2f} ms, stock {recent_stock:.2f} ms -> ours/stock '
            f'{recent / recent_stock:.2f} x; vs a new turn {recent / new:.2f} x'
        )
        for label, name in (('edit old', 'edit old turn'), ('regenerate old', 'regenerate old turn')):
            ms = medians[size, f'{label} (ours)']
            print(f'chat {name} {at}: dispatch_chat {ms:.2f} ms -> vs a new turn {ms / new:.2f} x')
    smallest, largest = sizes[0], sizes[-1]

    def growth(label: str) -> float:
        return medians[largest, label] / medians[smallest, label]

    span = f'@{size_label(smallest)} -> @{size_label(largest)}'
    print(
        f'chat new turn growth on {backend}: {span} dispatch_chat {growth("new turn (ours)"):.2f} x, '
        f'stock {growth("new turn (stock)"):.2f} x (per turn)'
    )
    print(
        f'chat resubmission growth on {backend}: {span} edit recent {growth("edit recent (ours)"):.2f} x, '
        f'edit old {growth("edit old (ours)"):.2f} x, regenerate old {growth("regenerate old (ours)"):.2f} x'
    )
    print()


async def run_backend(databases: Databases, title: str, sizes: list[int], repeats: int) -> None:
    print(f'\n{title}\n')
    try:
        medians, stored = await measure(databases, sizes, repeats)
        print_backend(medians, sizes, databases.title, repeats)
        print(f'   {stored}')
        print(load_average(f'after {databases.title}'))
    finally:
        databases.close()


async def run(sizes: list[int], repeats: int, backends: Sequence[str]) -> None:
    started = time.perf_counter()
    names = (OUR_DIST, 'pydantic-ai-slim', 'starlette', 'httpx', 'SQLAlchemy', 'aiosqlite', 'asyncpg')
    print(f'{machine()}; ' + ', '.join(f'{name} {version(name)}' for name in names))
    old = ', '.join(f'{size_label(size)}: turn {old_turn(size)} (message {4 * old_turn(size):,})' for size in sizes)
    print(
        f'archives of {CHAT!r}: {", ".join(map(size_label, sizes))} messages, a summary every {SUMMARY_EVERY}, the '
        f'window {WINDOW} messages (trigger {TRIGGER}); {repeats} timed requests a measure; the recent turn '
        f'{RECENT} back, the old one {old}'
    )
    print(load_average('at start'))
    if 'sqlite' in backends:
        where = 'a file per size in a temporary directory'
        await run_backend(SqliteFiles(), await describe('sqlite+aiosqlite://', where), sizes, repeats)
    if 'postgresql' in backends:
        server, why = postgres_server()
        if server is None:
            print(f'\n=== PostgreSQL figures skipped: {why}')
        else:
            at = make_url(server)
            title = await describe(server, f'{at.host}:{at.port}, a fresh database per size')
            await run_backend(PostgresDatabases(server), title, sizes, repeats)
    print(f'\nTotal {time.perf_counter() - started:.0f} s; {load_average("at the end")}')


def parse_args() -> tuple[list[int], int, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        '--quick',
        action='store_true',
        help=f'sizes {" ".join(map(str, QUICK_SIZES))}, {QUICK_REPEATS} repeats: a check that it runs, not a measure',
    )
    parser.add_argument(
        '--sizes', type=int, nargs='+', help=f'archived messages (default {" ".join(map(str, DEFAULT_SIZES))})'
    )
    parser.add_argument('--repeats', type=int, help=f'timed requests per measure and size (default {DEFAULT_REPEATS})')
    parser.add_argument('--backends', nargs='+', choices=BACKENDS, default=list(BACKENDS))
    args = parser.parse_args()
    sizes = sorted(set(args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES)))
    least = 2 * (WINDOW + SUMMARY_EVERY)
    if any(size < least or size % 4 for size in sizes):
        parser.error(f'sizes must be multiples of 4, at least {least}')
    repeats = args.repeats if args.repeats is not None else QUICK_REPEATS if args.quick else DEFAULT_REPEATS
    if repeats < 1:
        parser.error('repeats must be at least 1')
    return sizes, repeats, args.backends


if __name__ == '__main__':
    asyncio.run(run(*parse_args()))
