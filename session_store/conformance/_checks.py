"""The checks other than the semantics state machine: each an async function of a `Harness` that raises
`AssertionError` (or the backend's own error) when the backend breaks the contract it checks."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from statistics import median
from typing import Any, TypeVar

from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationRecord,
    ConversationStore,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ToolCallPart
from pydantic_ai.tools import DeferredToolRequests
from pydantic_ai.usage import RunUsage

from ._diff import difference
from ._harness import (
    Harness,
    append_turns,
    check_turns,
    loaded_conversation,
    messages_of,
    rewritten,
    snapshot,
    stored_everywhere,
)
from ._keeping import erasure, isolation, orphans
from ._messages import TURN_LENGTH, every_part_kind, faithful, turn

__all__ = ('CHECK_FUNCTIONS', 'REQUIREMENTS')

Check = Callable[[Harness], Coroutine[Any, Any, None]]
T = TypeVar('T')


# --- 2. revisions -------------------------------------------------------------------------------------------


async def _conflicts(call: Awaitable[object], landed: str) -> None:
    """`call` raises `ConversationConflict`; that it returned instead is the failure `landed` names."""
    try:
        await call
    except ConversationConflict:
        return
    raise AssertionError(landed)


async def revisions(h: Harness) -> None:
    """Two saves on one loaded revision, in sequence and at once: exactly one lands, the other raises
    `ConversationConflict`, and nothing of the loser is stored. A stale branch, a new conversation or a fork
    under a stored id conflict too."""
    async with h.stores(2) as (a, b):
        await a.save(Conversation(conversation_id='r', messages=turn('base')))
        # In sequence, through two stores (one, twice, for a backend that is not persistent).
        first, second = await loaded_conversation(a, 'r'), await loaded_conversation(b, 'r')
        first.messages.extend(turn('winner'))
        second.messages.extend(turn('loser'))
        await a.save(first)
        await _conflicts(
            b.save(second), 'a save on a revision another save replaced landed instead of raising a conflict'
        )
        assert await messages_of(a, 'r') == [*turn('base'), *turn('winner')]
        assert not [m for m in await stored_everywhere(b, 'r') if m in turn('loser')], 'the loser was stored'
        # A conversation made afresh (no revision) under an id the store has is a conflict too.
        await _conflicts(
            b.save(Conversation(conversation_id='r', messages=turn('fresh'))),
            'a new conversation saved over a stored one with its id landed',
        )
        assert await messages_of(a, 'r') == [*turn('base'), *turn('winner')]
        if 'trees' in h.capabilities.supported:
            await _conflicts(
                a.branch('r', at=TURN_LENGTH, expected_revision=second.revision),
                'a branch at a revision a save replaced moved the head',
            )
            assert await messages_of(a, 'r') == [*turn('base'), *turn('winner')]
        if 'fork' in h.capabilities.supported:
            await a.save(Conversation(conversation_id='other', messages=turn('other')))
            await _conflicts(b.fork('r', new_conversation_id='other'), 'a fork onto a stored conversation replaced it')
            assert await messages_of(a, 'other') == turn('other')
        # The primitives themselves, with a stale revision: `save`, `branch` and `delete` check the revision they
        # read before they write, which hides a write that ignores it whenever the writes come one after another.
        current, stale = await a.read_record('r'), second.revision
        assert current is not None and stale is not None
        await _conflicts(
            b.write_record(rewritten(current), expected_revision=stale),
            'write_record with a revision another save replaced landed instead of raising a conflict',
        )
        await _conflicts(
            b.write_record(ConversationRecord(conversation_id='r', head_id=None), expected_revision=None),
            'write_record of a new record (expected_revision=None) over a stored one landed',
        )
        await _conflicts(
            b.delete_record('r', expected_revision=stale),
            'delete_record with a revision another save replaced deleted the conversation',
        )
        assert await a.read_record('r') == current, 'a write_record or delete_record that conflicted changed it'
        # At once: both loaded at one revision, saved together, round after round.
        expected = [*turn('base'), *turn('winner')]
        for round_ in range(5):
            copies = [await loaded_conversation(store, 'r') for store in (a, b)]
            for n, copy in enumerate(copies):
                copy.messages.extend(turn(f'{round_}-{n}'))
            outcomes = await asyncio.gather(a.save(copies[0]), b.save(copies[1]), return_exceptions=True)
            landed = [n for n, outcome in enumerate(outcomes) if not isinstance(outcome, BaseException)]
            lost = [n for n, outcome in enumerate(outcomes) if isinstance(outcome, ConversationConflict)]
            assert len(landed) == 1 and len(lost) == 1, f'two saves on one revision at once gave {outcomes!r}'
            expected = [*expected, *turn(f'{round_}-{landed[0]}')]
            assert await messages_of(a, 'r') == expected
            loser = turn(f'{round_}-{lost[0]}')
            assert not [m for m in await stored_everywhere(a, 'r') if m in loser], 'the loser was stored'
        # Two first saves of one new conversation at once.
        outcomes = await asyncio.gather(
            a.save(Conversation(conversation_id='n', messages=turn('n0'))),
            b.save(Conversation(conversation_id='n', messages=turn('n1'))),
            return_exceptions=True,
        )
        landed = [n for n, outcome in enumerate(outcomes) if not isinstance(outcome, BaseException)]
        assert len(landed) == 1 and any(isinstance(o, ConversationConflict) for o in outcomes), outcomes
        assert await messages_of(a, 'n') == turn(f'n{landed[0]}')


# --- 3. concurrency -----------------------------------------------------------------------------------------

WRITERS = 8
TURNS_EACH = 3


def _labels(writer: int | str, turns: int = TURNS_EACH) -> list[str]:
    return [f'w{writer}-{k}' for k in range(turns)]


async def concurrency(h: Harness) -> None:
    """Tasks saving to one conversation, and each to its own, all at once: no turn lost, duplicated or
    interleaved, each writer's turns in its order."""
    async with h.stores(2) as stores:
        writers = [_labels(w) for w in range(WRITERS)]
        where = f'{WRITERS} tasks saving to one conversation at once'
        await _readable(
            asyncio.gather(*(append_turns(stores[w % 2], 'shared', labels) for w, labels in enumerate(writers))), where
        )
        shared = await _readable(messages_of(stores[0], 'shared'), where)
        check_turns('shared', shared or [], writers)
        where = f'{WRITERS} tasks saving each to its own conversation at once'
        await _readable(
            asyncio.gather(*(append_turns(stores[w % 2], f'own-{w}', labels) for w, labels in enumerate(writers))),
            where,
        )
        for w, labels in enumerate(writers):
            own = await _readable(messages_of(stores[1], f'own-{w}'), where)
            check_turns(f'own-{w}', own or [], [labels])
        listed = {record.conversation_id for record in await stores[0].list_conversations()}
        assert listed >= {'shared', *(f'own-{w}' for w in range(WRITERS))}, listed


async def concurrency_processes(h: Harness) -> None:
    """Processes saving to one conversation, and each to its own, all at once: the same as `concurrency`."""
    count = h.backend.processes
    await _made(h)
    children = [_child(h, 'append', f'p{p}', str(TURNS_EACH)) for p in range(count)]
    for child in children:
        _wait(child)
    async with h.open() as store:
        check_turns('shared', await messages_of(store, 'shared') or [], [_labels(f'p{p}') for p in range(count)])
        for p in range(count):
            check_turns(f'own-p{p}', await messages_of(store, f'own-p{p}') or [], [_labels(f'p{p}')])


async def _made(h: Harness) -> None:
    """Open the backend once here before any child does, so that its data (a file, a database) is made by this
    process and only opened by the children: children making it at once could each make their own."""
    async with h.open():
        pass


def _child(h: Harness, job: str, *args: str) -> subprocess.Popen[str]:
    assert h.child is not None
    environment = {**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path)}
    return subprocess.Popen(
        [sys.executable, '-m', 'session_store.conformance._child', h.child, str(h.place / 'data'), job, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )


def _wait(child: subprocess.Popen[str]) -> None:
    _out, err = child.communicate(timeout=300)
    assert child.returncode == 0, f'a child process failed ({child.returncode}):\n{err[-4000:]}'


# --- 4. atomicity -------------------------------------------------------------------------------------------

SETTLE = 20
"""Event-loop turns a cancelled save is given to settle before the check reads what it left."""


async def atomicity(h: Harness) -> None:
    """A save cancelled at each point it suspends (one event-loop turn later each time) leaves the conversation
    as it was or as saved, never part of it; one that returned left it as saved; the store goes on working."""
    async with h.stores(2) as (store, other):
        steps, trial = 0, 0
        completed_in_time = 0
        while completed_in_time < 3 and steps < 20_000:
            conversation_id = f'a{trial}'
            fresh = trial % 3 == 2  # a conversation's first save, as well as later ones
            before: list[ModelMessage] | None = None
            if fresh:
                conversation = Conversation(conversation_id=conversation_id)
            else:
                await store.save(Conversation(conversation_id=conversation_id, messages=turn(f'{trial} before')))
                conversation = await loaded_conversation(store, conversation_id)
                before = list(conversation.messages)
            conversation.messages.extend([*turn(f'{trial} new'), *turn(f'{trial} more')])
            after = list(conversation.messages)
            task = asyncio.ensure_future(store.save(conversation))
            for _ in range(steps):
                await asyncio.sleep(0)
            if task.done():
                completed_in_time += 1
            task.cancel()
            try:
                await task
                returned = True
            except asyncio.CancelledError:
                returned = False
            for _ in range(SETTLE):
                await asyncio.sleep(0)
            for reader in (store, other):
                where = f'a save of {conversation_id!r} cancelled after {steps} event-loop turns'
                now = await _readable(messages_of(reader, conversation_id), where)
                if now not in (before, after):
                    raise AssertionError(
                        f'{where} left {len(now or [])} messages, neither the {len(before or [])} before it nor the '
                        f'{len(after)} saved: {difference(now or [], after, ("stored", "saved"))}'
                    )
                assert not returned or now == after, f'{where} returned, and the conversation is not as saved'
                stored = await _readable(stored_everywhere(reader, conversation_id), where)
                assert len(stored) == len(now or []), (
                    f'{where} left {len(stored) - len(now or [])} messages outside its history'
                )
            # The store still works on it: a fresh load and save of one more turn lands whole.
            await append_turns(other, conversation_id, [f'{trial} then'])
            assert await messages_of(store, conversation_id) == [*(now or []), *turn(f'{trial} then')]
            trial += 1
            steps = steps + 1 if steps < 30 else int(steps * 1.25)


async def _readable(read: Awaitable[T], where: str) -> T:
    """What `read` gives; an entry it finds missing (a `LookupError`, such as a dict's bare `KeyError`) is the
    check's failure, saying which save left the conversation so."""
    try:
        return await read
    except LookupError as error:
        raise AssertionError(
            f'{where} left a conversation that does not read: an entry its record reaches is missing '
            f'({type(error).__name__}: {error})'
        ) from error


async def atomicity_killed_process(h: Harness) -> None:
    """A process killed (SIGKILL) while it saves leaves the conversation with whole turns only: every turn it
    reported saved, and at most the one it was saving."""
    await _made(h)
    for round_, delay in enumerate((0.05, 0.2, 0.5)):
        child = _child(h, 'until_killed')
        assert child.stdout is not None
        # Wait for the child to save a first turn, then kill it after a delay, mid-save most likely.
        line = child.stdout.readline()
        assert line.strip(), (
            f'the child process stopped before saving ({child.wait()}): {child.stderr and child.stderr.read()}'
        )
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate(timeout=60)
        lines = [line, *out.splitlines()]
        saved = [int(text) for text in lines if text.strip()]
        async with h.open() as store:
            history = await _readable(messages_of(store, 'killed'), f'round {round_}: the kill') or []
            whole, rest = divmod(len(history), TURN_LENGTH)
            assert rest == 0, f'round {round_}: the kill left {len(history)} messages, not whole turns'
            check_turns('killed', history, [[f'k{n}' for n in range(whole)]])
            assert saved[-1] <= whole <= saved[-1] + 1, f'round {round_}: {whole} turns stored, {saved[-1]} reported'
            await append_turns(store, 'killed', [f'k{whole}'])  # and it goes on from there


# --- 5. scopes ----------------------------------------------------------------------------------------------


async def scopes(h: Harness) -> None:
    """A conversation saved under one scope is never loaded, listed, branched, forked, saved or deleted under
    another; under its own, it is."""
    async with h.open() as store:
        await store.save(Conversation(conversation_id='s', messages=[*turn('one'), *turn('two')]), scope='alice')
        own = await loaded_conversation(store, 's')
        record = await store.read_record('s')
        assert record is not None and record.scope == 'alice', record

        assert await store.load('s', scope='bob') is None, 'loaded under another scope'
        assert await store.load_entries('s', scope='bob') is None, 'its entries loaded under another scope'
        assert 's' not in [r.conversation_id for r in await store.list_conversations(scope='bob')], 'listed under bob'
        if 'trees' in h.capabilities.supported:
            await _refused(lambda: store.branch('s', at=0, expected_revision=own.revision, scope='bob'), 'branched')
        if 'fork' in h.capabilities.supported:
            await _refused(lambda: store.fork('s', new_conversation_id='s-bob', source_scope='bob'), 'forked')
            assert await store.read_record('s-bob') is None, 'a refused fork was stored'
        await store.delete('s', scope='bob')
        assert await store.read_record('s') == record, 'deleted (or changed) by a delete under another scope'
        stolen = await loaded_conversation(store, 's')
        stolen.messages.extend(turn('bob'))
        await _conflicts(store.save(stolen, scope='bob'), 'saved under another scope than the one it was saved with')
        assert await messages_of(store, 's') == own.messages

        assert await messages_of(store, 's', scope='alice') == own.messages
        assert 's' in [r.conversation_id for r in await store.list_conversations(scope='alice')]
        if 'fork' in h.capabilities.supported:
            fork = await store.fork('s', new_conversation_id='s-carol', source_scope='alice', scope='carol')
            assert fork.messages == own.messages
            assert await store.load('s-carol', scope='alice') is None, 'a fork to carol loaded under alice'
            assert [r.conversation_id for r in await store.list_conversations(scope='carol')] == ['s-carol']
        if 'trees' in h.capabilities.supported:
            branched = await store.branch('s', at=TURN_LENGTH, expected_revision=own.revision, scope='alice')
            assert branched.messages == turn('one')
        await store.delete('s', scope='alice')
        assert await store.load('s') is None, 'a delete under its own scope left it'


async def _refused(call: Callable[[], Awaitable[Any]], what: str) -> None:
    try:
        await call()
    except UserError:
        return
    raise AssertionError(f'{what} under another scope instead of being refused as not in the store')


# --- 6. durability ------------------------------------------------------------------------------------------


async def durability(h: Harness) -> None:
    """A second store over the same data sees exactly what the first saved: records (revision, usage, scope,
    branches, fork origin, deferred calls), entries and their ids, histories, order; while the first is open,
    after it closed, and after the second writes."""
    deferred = DeferredToolRequests(calls=[ToolCallPart('approve', {'amount': 5}, tool_call_id='call_9')])
    async with h.open() as first:
        conversation = Conversation(
            conversation_id='d1', messages=[*turn('one'), *turn('two')], usage=RunUsage(requests=2, input_tokens=7)
        )
        conversation.deferred_tool_requests = deferred
        await first.save(conversation, scope='s')
        await first.save(Conversation(conversation_id='d2', messages=every_part_kind()))
        if 'trees' in h.capabilities.supported:
            loaded = await loaded_conversation(first, 'd2')
            await first.branch('d2', at=2, expected_revision=loaded.revision)
        if 'fork' in h.capabilities.supported:
            await first.fork('d1', at=TURN_LENGTH, new_conversation_id='d3', scope='t')
        seen = await snapshot(first)
        async with h.open() as second:
            assert await snapshot(second) == seen, 'a second store open beside the first sees something else'
    async with h.open() as third:
        assert await snapshot(third) == seen, 'a store opened after the first closed sees something else'
        await append_turns(third, 'd1', ['three'])
        seen = await snapshot(third)
    async with h.open() as fourth:
        assert await snapshot(fourth) == seen, 'a store reopened after a save sees something else'


# --- 7. bad input -------------------------------------------------------------------------------------------

HOSTILE_IDS = (
    '',
    ' ',
    '\t\n',
    'x' * 100_000,
    'nul\x00id',
    'lone\ud800surrogate',
    'new\nline',
    "'; drop table x; --",
    '../../etc/passwd',
    'ünïcødé-ид-💬',
    '%s%n{0}',
)
HUGE = 5_000_000


async def bad_input(h: Harness) -> None:
    """Hostile ids and scopes, huge messages, text no UTF-8 codec takes, and every part kind: each a clear error
    (a `UserError` or `ValueError`) that stores nothing, or a round trip faithful to every field."""
    async with h.open() as store:
        listed = await store.list_conversations()
        for hostile in HOSTILE_IDS:
            shown = repr(hostile[:40])
            saved = await _clear_or_stored(
                store,
                store.save(Conversation(conversation_id=hostile, messages=turn('id'))),
                f'a save under the id {shown}',
                listed,
            )
            if saved:
                assert await messages_of(store, hostile) == turn('id'), f'the id {shown} does not round-trip'
                assert hostile in [r.conversation_id for r in await store.list_conversations()]
                await store.delete(hostile)
                assert await store.read_record(hostile) is None
            saved = await _clear_or_stored(
                store,
                store.save(Conversation(conversation_id='scoped', messages=turn('s')), scope=hostile),
                f'a save under the scope {shown}',
                listed,
            )
            if saved:
                assert await messages_of(store, 'scoped', scope=hostile) == turn('s'), (
                    f'the scope {shown} does not round-trip'
                )
                await store.delete('scoped')
        bodies = {
            'a huge message': turn('huge', padding=HUGE),
            'NUL characters': turn('nul\x00inside'),
            'a lone surrogate': turn('lone\ud800surrogate'),
            'every part kind': every_part_kind(),
        }
        for n, (what, messages) in enumerate(bodies.items()):
            conversation_id = f'body-{n}'
            saved = await _clear_or_stored(
                store,
                store.save(Conversation(conversation_id=conversation_id, messages=messages)),
                what,
                listed,
            )
            if saved:
                got = await messages_of(store, conversation_id)
                assert got is not None and faithful(got, messages), f'{what} does not round-trip'
                if h.backend.persistent:
                    async with h.open() as second:
                        got = await messages_of(second, conversation_id)
                    assert got is not None and faithful(got, messages), f'{what} does not round-trip when reopened'
                await store.delete(conversation_id)


async def _clear_or_stored(store: ConversationStore, save: Awaitable[Any], what: str, listed: Any) -> bool:
    """Whether `save` stored; a refusal must be a clear error that left the store as it was."""
    try:
        await save
        return True
    except (UserError, ValueError) as error:
        assert str(error).strip(), f'{what} was refused with an empty message'
    after = await store.list_conversations()
    assert after == listed, f'{what} was refused, and the store changed: {after}'
    return False


# --- 8. cost ------------------------------------------------------------------------------------------------

SIZES = (100, 10_000)
REPEATS = 5


async def cost(h: Harness) -> None:
    """Load and save time at 100 and 10,000 stored messages: reported, never failed."""
    figures: dict[int, tuple[float, float, float]] = {}
    async with h.open() as store:
        for size in SIZES:
            conversation_id = f'cost-{size}'
            conversation = Conversation(conversation_id=conversation_id)
            for start in range(0, size, 1000):  # whole turns, a thousand messages a save
                conversation.messages.extend(
                    m for k in range(start, min(size, start + 1000), TURN_LENGTH) for m in turn(str(k))
                )
                await store.save(conversation)
            loads, windows, saves = [], [], []
            for k in range(REPEATS):
                began = time.perf_counter()
                loaded = await loaded_conversation(store, conversation_id)
                loads.append(time.perf_counter() - began)
                began = time.perf_counter()
                await store.load(conversation_id, limit=20)
                windows.append(time.perf_counter() - began)
                loaded.messages.extend(turn(f'more {k}'))
                began = time.perf_counter()
                await store.save(loaded)
                saves.append(time.perf_counter() - began)
            figures[size] = (median(loads), median(windows), median(saves))
    small, large = figures[SIZES[0]], figures[SIZES[1]]
    for what, n in (('load', 0), ('load(limit=20)', 1), ('save of a turn', 2)):
        h.report(
            f'{what}: {small[n] * 1000:.2f} ms at {SIZES[0]} messages, {large[n] * 1000:.2f} ms at {SIZES[1]}'
            f' ({large[n] / small[n]:.1f}x)'
        )


CHECK_FUNCTIONS: dict[str, Check] = {
    'revisions': revisions,
    'orphans': orphans,
    'isolation': isolation,
    'erasure': erasure,
    'concurrency': concurrency,
    'concurrency_processes': concurrency_processes,
    'atomicity': atomicity,
    'atomicity_killed_process': atomicity_killed_process,
    'scopes': scopes,
    'durability': durability,
    'bad_input': bad_input,
    'cost': cost,
}

REQUIREMENTS: dict[str, frozenset[str]] = {
    'concurrency_processes': frozenset({'persistent', 'processes'}),
    'atomicity_killed_process': frozenset({'persistent', 'processes'}),
    'durability': frozenset({'persistent'}),
    'erasure': frozenset({'erases'}),
}
"""What a check needs beyond the base protocol; it is skipped, saying why, on a backend without it."""
