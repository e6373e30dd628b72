"""The checks other than the semantics state machine: each an async function of a `Harness` that raises
`AssertionError` (or the backend's own error) when the backend breaks the contract it checks."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from statistics import median
from typing import Any, TypeVar

from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ToolCallPart
from pydantic_ai.tools import DeferredToolRequests
from pydantic_ai.usage import RunUsage

from ._diff import difference, shown
from ._harness import Harness, append_turns, check_turns, stored_everywhere
from ._messages import TURN_LENGTH, dumped, every_part_kind, faithful, turn

__all__ = ('CHECK_FUNCTIONS', 'REQUIREMENTS')

Check = Callable[[Harness], Coroutine[Any, Any, None]]
T = TypeVar('T')


async def _history(
    store: ConversationStore, conversation_id: str, scope: str | None = None
) -> list[ModelMessage] | None:
    loaded = await store.load(conversation_id, scope=scope)
    return None if loaded is None else loaded.messages


async def _loaded(store: ConversationStore, conversation_id: str) -> Conversation:
    loaded = await store.load(conversation_id)
    assert loaded is not None, f'{conversation_id!r} was saved and does not load'
    return loaded


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
        first, second = await _loaded(a, 'r'), await _loaded(b, 'r')
        first.messages.extend(turn('winner'))
        second.messages.extend(turn('loser'))
        await a.save(first)
        await _conflicts(
            b.save(second), 'a save on a revision another save replaced landed instead of raising a conflict'
        )
        assert await _history(a, 'r') == [*turn('base'), *turn('winner')]
        assert not [m for m in await stored_everywhere(b, 'r') if m in turn('loser')], 'the loser was stored'
        # A conversation made afresh (no revision) under an id the store has is a conflict too.
        await _conflicts(
            b.save(Conversation(conversation_id='r', messages=turn('fresh'))),
            'a new conversation saved over a stored one with its id landed',
        )
        assert await _history(a, 'r') == [*turn('base'), *turn('winner')]
        if 'trees' in h.capabilities.supported:
            await _conflicts(
                a.branch('r', at=TURN_LENGTH, expected_revision=second.revision),
                'a branch at a revision a save replaced moved the head',
            )
            assert await _history(a, 'r') == [*turn('base'), *turn('winner')]
        if 'fork' in h.capabilities.supported:
            await a.save(Conversation(conversation_id='other', messages=turn('other')))
            await _conflicts(b.fork('r', new_conversation_id='other'), 'a fork onto a stored conversation replaced it')
            assert await _history(a, 'other') == turn('other')
        # The primitives themselves, with a stale revision: `save`, `branch` and `delete` check the revision they
        # read before they write, which hides a write that ignores it whenever the writes come one after another.
        current, stale = await a.read_record('r'), second.revision
        assert current is not None and stale is not None
        await _conflicts(
            b.write_record(_rewritten(current), expected_revision=stale),
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
            copies = [await _loaded(store, 'r') for store in (a, b)]
            for n, copy in enumerate(copies):
                copy.messages.extend(turn(f'{round_}-{n}'))
            outcomes = await asyncio.gather(a.save(copies[0]), b.save(copies[1]), return_exceptions=True)
            landed = [n for n, outcome in enumerate(outcomes) if not isinstance(outcome, BaseException)]
            lost = [n for n, outcome in enumerate(outcomes) if isinstance(outcome, ConversationConflict)]
            assert len(landed) == 1 and len(lost) == 1, f'two saves on one revision at once gave {outcomes!r}'
            expected = [*expected, *turn(f'{round_}-{landed[0]}')]
            assert await _history(a, 'r') == expected
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
        assert await _history(a, 'n') == turn(f'n{landed[0]}')


def _rewritten(record: ConversationRecord) -> ConversationRecord:
    """`record` as a write that changes nothing but its revision would store it."""
    return dataclasses.replace(record, revision=str(uuid.uuid4()))


# --- 2b. orphans --------------------------------------------------------------------------------------------


def _chain(after: str | None, messages: Sequence[ModelMessage]) -> list[ConversationEntry]:
    """`messages` as the new entries a save appends after the entry `after`."""
    entries: list[ConversationEntry] = []
    for message in messages:
        entries.append(ConversationEntry(parent_id=entries[-1].id if entries else after, message=message))
    return entries


async def orphans(h: Harness) -> None:
    """A write that conflicts stores nothing: `write_record` with new entries and a revision another save
    replaced, with the revision of a conversation deleted since, or with none for a conversation the store has,
    raises `ConversationConflict`, and none of its entries is readable after (`read_entry`, `read_history`),
    nor any record changed. The entries' ids are the check's own, so it can ask for them: a `save` that loses
    makes this very write. (A write that lands instead is the `revisions` check's failure, not this one's.)"""
    async with h.stores(2) as (a, b):
        writes: list[tuple[str, str, ConversationRecord, list[ConversationEntry], str | None]] = []
        for n, what in enumerate(('on a revision another save replaced', 'on a conversation deleted since')):
            conversation_id = f'o{n}'
            await a.save(Conversation(conversation_id=conversation_id, messages=turn('base')))
            stale = await a.read_record(conversation_id)
            assert stale is not None
            if n == 0:
                await append_turns(a, conversation_id, ['winner'])
            else:
                await a.delete(conversation_id)
            entries = _chain(stale.head_id, turn(f'loser {n}'))
            record = dataclasses.replace(_rewritten(stale), head_id=entries[-1].id)
            writes.append((what, conversation_id, record, entries, stale.revision))
        await a.save(Conversation(conversation_id='o2', messages=turn('base')))
        entries = _chain(None, turn('loser 2'))
        record = ConversationRecord(conversation_id='o2', head_id=entries[-1].id)
        writes.append(('as new (expected_revision=None) over a stored conversation', 'o2', record, entries, None))
        before = await _snapshot(a)
        for what, conversation_id, record, entries, expected in writes:
            try:
                await b.write_record(record, new_entries=entries, expected_revision=expected)
            except ConversationConflict:
                pass
            else:
                continue  # it landed: the revisions check names that
            where = f'a write_record of {conversation_id!r} {what} raised a conflict'
            for reader in (a, b):
                for entry in entries:
                    await _gone(reader, entry.id, f'{where}, and its new entry {entry.id!r}')
                after = await _snapshot(reader)
                assert after == before, f'{where}, and the records changed: {difference(after, before, _AFTER)}'


_AFTER = ('after', 'before')


async def _gone(store: ConversationStore, entry_id: str, what: str) -> None:
    """No read finds the entry `entry_id`: `read_entry` raises `LookupError` (pydantic-ai's `load` takes that for
    an entry a concurrent delete released), and `read_history` of it raises it or finds nothing."""
    try:
        found: object = await store.read_entry(entry_id)
    except LookupError:
        pass
    except Exception as error:  # anything else is not how the protocol says an entry is missing
        raise AssertionError(f'{what}: read_entry raised {error!r}, not a LookupError') from error
    else:
        raise AssertionError(f'{what} is still stored: read_entry gives {shown(found)}')
    for limit in (None, 1):
        try:
            found = await store.read_history(entry_id, limit=limit)
        except LookupError:
            continue
        assert not found, f'{what} is still stored: read_history(limit={limit}) gives {shown(found)}'


# --- 2c. isolation ------------------------------------------------------------------------------------------

_TEXT_FIELDS = frozenset({'content', 'model_name', 'tool_name', 'instructions', 'title', 'transcript'})
"""The text fields `_tamper` changes: text a caller edits (not a kind or a state, which name the type)."""


def _tamper(value: object, seen: set[int] | None = None) -> None:
    """Change `value` in place wherever a caller could: text fields edited, counts raised, lists grown by their
    last item again, dicts given a key, through every dataclass, list and dict it holds (frozen ones aside)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, list):
        for item in list(value):
            _tamper(item, seen)
        if value:
            value.append(value[-1])
    elif isinstance(value, dict):
        for item in list(value.values()):
            _tamper(item, seen)
        value['tampered'] = 1
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        frozen = type(value).__dataclass_params__.frozen  # type: ignore[attr-defined]
        for field in dataclasses.fields(value):
            current = getattr(value, field.name)
            if frozen:
                pass
            elif isinstance(current, str) and field.name in _TEXT_FIELDS:
                setattr(value, field.name, f'{current} (changed)')
                continue
            elif isinstance(current, int) and not isinstance(current, bool):
                setattr(value, field.name, current + 1)
                continue
            _tamper(current, seen)


async def _held(store: ConversationStore) -> Any:
    """Everything the store holds, as every read finds it: `_snapshot`, and each conversation as it loads."""
    loads = []
    for record in await store.list_conversations():
        loaded = await _loaded(store, record.conversation_id)
        entries = await store.load_entries(record.conversation_id)
        loads.append(
            (
                loaded.conversation_id,
                dumped(loaded.messages),
                loaded.usage,
                loaded.deferred_tool_requests,
                loaded.revision,
                None if entries is None else [(e.id, e.parent_id, dumped([e.message])) for e in entries],
            )
        )
    return [await _snapshot(store), loads]


async def isolation(h: Harness) -> None:
    """What a store hands out and what it is handed are the caller's own: a conversation changed in place after
    its save or its load, and whatever a read or a change returned (records, entries, histories, a save's
    entries, a branch, a fork) changed in place, without a save, leaves every read as it was."""
    async with h.open() as store:
        # Every part kind in three messages, and a turn appended after: seven, fewer than a store with a
        # processor (a window of eight, say) compacts at, so no read changes what it holds.
        conversation = Conversation(
            conversation_id='i', messages=every_part_kind()[:3], usage=RunUsage(requests=2, input_tokens=7)
        )
        conversation.deferred_tool_requests = DeferredToolRequests(
            calls=[ToolCallPart('approve', {'amount': 5}, tool_call_id='call_9')]
        )
        saved = await store.save(conversation, scope='s')
        held = await _held(store)

        async def unchanged(changed: str) -> None:
            now = await _held(store)
            if now != held:
                raise AssertionError(
                    f'{changed} in place, without a save, and what the store holds changed: '
                    f'{difference(now, held, _AFTER)}'
                )

        _tamper(conversation)
        _tamper(saved)
        await unchanged('the conversation saved new, and the entries its save returned, were changed')
        _tamper(await store.load('i'))
        await unchanged('a loaded conversation was changed')
        appended = await _loaded(store, 'i')
        appended.messages.extend(turn('more'))
        saved = await store.save(appended)
        held = await _held(store)
        _tamper(appended)
        _tamper(saved)
        await unchanged('a conversation saved with a turn appended, and the entries its save returned, were changed')
        if 'limit' in h.capabilities.supported:
            _tamper(await store.load('i', limit=2))
            await unchanged('a conversation loaded with limit=2 was changed')
        _tamper(await store.load_entries('i'))
        await unchanged('the entries load_entries returned were changed')
        record = await store.read_record('i')
        assert record is not None
        _tamper(record)
        await unchanged('the record read_record returned was changed')
        _tamper(await store.read_records())
        _tamper(await store.list_conversations(scope='s'))
        await unchanged('the records read_records and list_conversations returned were changed')
        record = await store.read_record('i')
        assert record is not None and record.head_id is not None
        _tamper(await store.read_entry(record.head_id))
        _tamper(await store.read_history(record.head_id))
        _tamper(await store.read_history(record.head_id, limit=2))
        await unchanged('the entries read_entry and read_history returned were changed')
        # A record handed to `write_record` itself (a save builds its own, out of the caller's reach).
        written = _rewritten(record)
        await store.write_record(written, expected_revision=record.revision)
        held = await _held(store)
        _tamper(written)
        await unchanged('the record handed to write_record was changed after the write')
        if 'trees' in h.capabilities.supported:
            branched = await store.branch('i', at=2, expected_revision=written.revision)
            held = await _held(store)
            _tamper(branched)
            await unchanged('the conversation branch returned was changed')
        if 'fork' in h.capabilities.supported:
            forked = await store.fork('i', at=2, new_conversation_id='i-fork')
            held = await _held(store)
            _tamper(forked)
            await unchanged('the conversation fork returned was changed')


# --- 2d. erasure --------------------------------------------------------------------------------------------


async def _reached(store: ConversationStore) -> set[str]:
    """The ids of every entry a stored conversation's history or branches reach."""
    reached: set[str] = set()
    for record in await store.read_records():
        for tip in [record.head_id, *record.branches]:
            reached.update(entry.id for entry in await store.read_history(tip))
    return reached


async def erasure(h: Harness) -> None:
    """A delete erases, as the backend declares (`erases=True`): every entry of the deleted conversation's
    history and of the branches it left that no remaining conversation reaches is gone for every read
    (`read_entry`, `read_history`, `load`, `load_entries`, `read_record`, `read_records`), through this store and
    a second one over the same data; the conversations left, a fork of it among them, read as before."""
    async with h.stores(2) as (store, other):
        await store.save(Conversation(conversation_id='e', messages=[*turn('one'), *turn('two')]))
        if 'trees' in h.capabilities.supported:
            loaded = await _loaded(store, 'e')
            await store.branch('e', at=TURN_LENGTH, expected_revision=loaded.revision)
            await append_turns(store, 'e', ['three'])
        if 'fork' in h.capabilities.supported:
            await store.fork('e', at=TURN_LENGTH, new_conversation_id='e-fork')
        await store.save(Conversation(conversation_id='kept', messages=turn('kept')))
        record = await store.read_record('e')
        assert record is not None
        entries = {entry.id for tip in [record.head_id, *record.branches] for entry in await store.read_history(tip)}
        left = {r.conversation_id: await _history(store, r.conversation_id) for r in await store.read_records()}
        del left['e']
        await store.delete('e')
        for reader in (store, other):
            assert await reader.read_record('e') is None, 'a deleted conversation still has its record'
            assert await reader.load('e') is None, 'a deleted conversation still loads'
            assert await reader.load_entries('e') is None, 'a deleted conversation still loads its entries'
            assert 'e' not in {r.conversation_id for r in await reader.read_records()}, 'it is still listed'
            for entry_id in sorted(entries - await _reached(reader)):
                await _gone(reader, entry_id, f"the deleted conversation's entry {entry_id!r}")
            for conversation_id, history in left.items():
                assert await _history(reader, conversation_id) == history, f'{conversation_id!r} changed'


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
        shared = await _readable(_history(stores[0], 'shared'), where)
        check_turns('shared', shared or [], writers)
        where = f'{WRITERS} tasks saving each to its own conversation at once'
        await _readable(
            asyncio.gather(*(append_turns(stores[w % 2], f'own-{w}', labels) for w, labels in enumerate(writers))),
            where,
        )
        for w, labels in enumerate(writers):
            own = await _readable(_history(stores[1], f'own-{w}'), where)
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
        check_turns('shared', await _history(store, 'shared') or [], [_labels(f'p{p}') for p in range(count)])
        for p in range(count):
            check_turns(f'own-p{p}', await _history(store, f'own-p{p}') or [], [_labels(f'p{p}')])


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
                conversation = await _loaded(store, conversation_id)
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
                now = await _readable(_history(reader, conversation_id), where)
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
            assert await _history(store, conversation_id) == [*(now or []), *turn(f'{trial} then')]
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
            history = await _readable(_history(store, 'killed'), f'round {round_}: the kill') or []
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
        own = await _loaded(store, 's')
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
        stolen = await _loaded(store, 's')
        stolen.messages.extend(turn('bob'))
        await _conflicts(store.save(stolen, scope='bob'), 'saved under another scope than the one it was saved with')
        assert await _history(store, 's') == own.messages

        assert await _history(store, 's', scope='alice') == own.messages
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
            loaded = await _loaded(first, 'd2')
            await first.branch('d2', at=2, expected_revision=loaded.revision)
        if 'fork' in h.capabilities.supported:
            await first.fork('d1', at=TURN_LENGTH, new_conversation_id='d3', scope='t')
        seen = await _snapshot(first)
        async with h.open() as second:
            assert await _snapshot(second) == seen, 'a second store open beside the first sees something else'
    async with h.open() as third:
        assert await _snapshot(third) == seen, 'a store opened after the first closed sees something else'
        await append_turns(third, 'd1', ['three'])
        seen = await _snapshot(third)
    async with h.open() as fourth:
        assert await _snapshot(fourth) == seen, 'a store reopened after a save sees something else'


async def _snapshot(store: ConversationStore) -> Any:
    records = await store.list_conversations()
    seen: list[Any] = []
    for record in records:
        paths = [await store.read_history(tip) for tip in [record.head_id, *record.branches]]
        seen.append((record, [[(e.id, e.parent_id, e.kind, dumped([e.message])) for e in path] for path in paths]))
    return seen


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
                assert await _history(store, hostile) == turn('id'), f'the id {shown} does not round-trip'
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
                assert await _history(store, 'scoped', scope=hostile) == turn('s'), (
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
                got = await _history(store, conversation_id)
                assert got is not None and faithful(got, messages), f'{what} does not round-trip'
                if h.backend.persistent:
                    async with h.open() as second:
                        got = await _history(second, conversation_id)
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
                loaded = await _loaded(store, conversation_id)
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
