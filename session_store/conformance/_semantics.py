"""Check 1: random sequences of operations on the backend and on pydantic-ai's `InMemoryConversationStore` side
by side (a hypothesis state machine), agreeing after each on records, heads, entries, trees and errors.

It checks what one writer sees: every save is from a fresh load and every fork is to a new id, so revisions
never go stale here (that is the `revisions` check), and the reading and changing methods are called without a
scope (isolation is the `scopes` check), while conversations are saved under scopes and listed by them. Entry ids
are each store's own, so paths are compared by their messages, and an id drawn from one store's path is matched
to the same position in the other's. Each example uses ids and scopes of its own, so one store serves them all.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict, ConversationStore, InMemoryConversationStore
from pydantic_ai.exceptions import UserError
from pydantic_ai.usage import RunUsage

from ._diff import difference
from ._harness import Harness
from ._messages import dumped, turn

__all__ = ('semantics',)

_pick = st.integers(min_value=0, max_value=1_000)

Operation = Callable[[ConversationStore], Awaitable[Any]]


class _Machine(RuleBasedStateMachine):
    """The state machine; `run` makes a subclass bound to one open store and event loop."""

    store: ConversationStore
    loop: asyncio.AbstractEventLoop
    capabilities: frozenset[str]
    examples: itertools.count[int]

    def __init__(self) -> None:
        super().__init__()
        self.reference = InMemoryConversationStore()
        prefix = f'x{next(self.examples)}-'
        self.ids = [f'{prefix}a', f'{prefix}b']
        self.scopes = [None, f'{prefix}s', f'{prefix}t']
        self.prefix = prefix
        self.turns = 0
        self.log: list[str] = []
        self.deleted: set[str] = set()
        """The conversations a `delete` was applied to."""

    def _do(self, what: str, operation: Operation) -> None:
        """Apply `operation` to both stores; both must do it, or both refuse it the same way."""
        self.log.append(what)
        outcomes = [self.loop.run_until_complete(_outcome(operation, store)) for store in (self.store, self.reference)]
        assert outcomes[0] == outcomes[1], f'{what}: the backend {outcomes[0]}, the reference {outcomes[1]}'

    def _facts(self, pick: int) -> tuple[str, int, list[str]]:
        """A conversation id by `pick`, its length and its branch tips, as the reference holds them."""
        conversation_id = self.ids[pick % len(self.ids)]
        loaded = self.loop.run_until_complete(self.reference.load(conversation_id))
        record = self.loop.run_until_complete(self.reference.read_record(conversation_id))
        return conversation_id, 0 if loaded is None else len(loaded.messages), [] if record is None else record.branches

    def _fresh(self) -> list[Any]:
        self.turns += 1
        return turn(f'{self.prefix}{self.turns}')

    @rule(pick=_pick, scope=_pick, turns=st.integers(min_value=1, max_value=2))
    def append(self, pick: int, scope: int, turns: int) -> None:
        conversation_id, _, _ = self._facts(pick)
        fresh = [message for _ in range(turns) for message in self._fresh()]
        usage = RunUsage(requests=self.turns)
        chosen = self.scopes[scope % len(self.scopes)]

        async def append(store: ConversationStore) -> None:
            loaded = await store.load(conversation_id)
            conversation = loaded or Conversation(conversation_id=conversation_id)
            conversation.messages.extend(fresh)
            conversation.usage = usage
            await store.save(conversation, scope=chosen if loaded is None else None)

        self._do(f'append {conversation_id} scope={chosen} turns={turns}', append)

    @rule(pick=_pick, cut=_pick, tail=st.booleans())
    def rewrite(self, pick: int, cut: int, tail: bool) -> None:
        """A save of a history that leaves the stored one (an edit, a regenerate, a truncation)."""
        if 'trees' not in self.capabilities:
            return
        conversation_id, length, _ = self._facts(pick)
        keep = cut % (length + 1)
        fresh = self._fresh() if tail else []

        async def rewrite(store: ConversationStore) -> None:
            loaded = await store.load(conversation_id)
            if loaded is None:
                return
            messages = [*loaded.messages[:keep], *fresh]
            await store.save(Conversation(conversation_id=conversation_id, messages=messages, revision=loaded.revision))

        self._do(f'rewrite {conversation_id} keep={keep} tail={tail}', rewrite)

    @rule(pick=_pick, limit=_pick)
    def append_to_window(self, pick: int, limit: int) -> None:
        """A run on a window (`load(limit=)`) appends to the whole stored conversation."""
        if 'limit' not in self.capabilities:
            return
        conversation_id, length, _ = self._facts(pick)
        window = limit % (length + 2)
        fresh = self._fresh()

        async def append(store: ConversationStore) -> None:
            loaded = await store.load(conversation_id, limit=window)
            if loaded is not None:
                loaded.messages.extend(fresh)
                await store.save(loaded)

        self._do(f'append to {conversation_id} loaded with limit={window}', append)

    @rule(pick=_pick, cut=_pick)
    def branch_at(self, pick: int, cut: int) -> None:
        if 'trees' not in self.capabilities:
            return
        conversation_id, length, _ = self._facts(pick)
        at = cut % (length + 2)  # one past the end: refused by both

        async def branch(store: ConversationStore) -> None:
            loaded = await store.load(conversation_id)
            await store.branch(conversation_id, at=at, expected_revision=None if loaded is None else loaded.revision)

        self._do(f'branch {conversation_id} at={at}', branch)

    @rule(pick=_pick, which=_pick, depth=st.integers(min_value=0, max_value=3))
    def branch_from(self, pick: int, which: int, depth: int) -> None:
        if 'trees' not in self.capabilities:
            return
        conversation_id, _, tips = self._facts(pick)
        if not tips:
            return
        index = which % len(tips)

        async def branch(store: ConversationStore) -> None:
            loaded = await store.load(conversation_id)
            record = await store.read_record(conversation_id)
            assert loaded is not None and record is not None
            line = await store.read_history(record.branches[index])
            entry = line[max(0, len(line) - 1 - depth)]
            await store.branch(conversation_id, from_entry=entry.id, expected_revision=loaded.revision)

        self._do(f'branch {conversation_id} from branch {index} depth={depth}', branch)

    @rule(pick=_pick, cut=_pick, scope=_pick)
    def fork(self, pick: int, cut: int, scope: int) -> None:
        if 'fork' not in self.capabilities:
            return
        conversation_id, length, _ = self._facts(pick)
        at = cut % (length + 2)
        chosen = self.scopes[scope % len(self.scopes)]
        new_id = f'{self.prefix}f{self.turns}-{len(self.log)}'  # onto a stored id is the `revisions` check's
        at_or_none = None if at == length else at

        async def fork(store: ConversationStore) -> None:
            await store.fork(conversation_id, at=at_or_none, new_conversation_id=new_id, scope=chosen)

        self._do(f'fork {conversation_id} at={at_or_none} to {new_id} scope={chosen}', fork)
        self.ids.append(new_id)

    @rule(pick=_pick)
    def delete(self, pick: int) -> None:
        conversation_id, _, _ = self._facts(pick)

        async def delete(store: ConversationStore) -> None:
            await store.delete(conversation_id)

        self._do(f'delete {conversation_id}', delete)
        self.deleted.add(conversation_id)

    @invariant()
    def agree(self) -> None:
        mine, theirs = (self.loop.run_until_complete(self._view(store)) for store in (self.store, self.reference))
        if mine != theirs:
            # Checked after every operation, so the first to differ is the last one applied.
            last, earlier = (self.log[-1], self.log[:-1]) if self.log else ('nothing', [])
            raise AssertionError(
                f'after {last} (operation {len(self.log)} of this example; those before it: {earlier}), the '
                f'backend and the reference hold different things: {difference(mine, theirs)}'
            )

    async def _view(self, store: ConversationStore) -> dict[str, Any]:
        """What the store holds of this example, without its own entry ids, by what and conversation."""
        listed = [
            r.conversation_id for r in await store.list_conversations() if r.conversation_id.startswith(self.prefix)
        ]
        view: dict[str, Any] = {'listed': listed}
        for scope in self.scopes[1:]:
            by_scope = [r.conversation_id for r in await store.list_conversations(scope=scope)]
            view[f'listed under {scope}'] = (by_scope, len(await store.list_conversations(scope=scope, limit=1)))
        for conversation_id in self.ids:
            record = await store.read_record(conversation_id)
            if record is None:
                view[conversation_id] = {'record': None, 'loads': await store.load(conversation_id)}
                continue
            loaded = await store.load(conversation_id)
            entries = await store.load_entries(conversation_id)
            assert loaded is not None and entries is not None
            chain = all(later.parent_id == earlier.id for earlier, later in itertools.pairwise(entries))
            paths = [[e.message for e in await store.read_history(tip)] for tip in record.branches]
            # Where a fork was made is read only while the conversation it was forked from was never deleted: whether a
            # delete erases the entries no remaining history reaches is the backend's choice, and a backend whose forks
            # copy their history leaves none of the source's reached by the fork.
            forked_at = (
                None
                if record.forked_at is None or record.forked_from in self.deleted
                else [e.message for e in await store.read_history(record.forked_at)]
            )
            windows: list[Any] = []
            if 'limit' in self.capabilities:
                for limit in (0, 1, 3):
                    window = await store.load(conversation_id, limit=limit)
                    head = await store.read_history(record.head_id, limit=limit)
                    windows.append(
                        (None if window is None else dumped(window.messages), dumped([e.message for e in head]))
                    )
            view[conversation_id] = {
                'messages': dumped(loaded.messages),
                "the first entry's parent": entries[0].parent_id if entries else None,
                'entries chained': chain,
                'usage': loaded.usage,
                'scope': record.scope,
                'branches': [dumped(path) for path in paths],
                'forked from': record.forked_from,
                'forked at': None if forked_at is None else dumped(forked_at),
                'windows (load, read_history) at limit 0, 1, 3': windows,
                'no head': record.head_id is None,
            }
        return view


async def _outcome(operation: Operation, store: ConversationStore) -> str:
    try:
        await operation(store)
    except ConversationConflict:
        return 'raised ConversationConflict'
    except UserError:
        return 'refused it (UserError)'
    return 'did it'


def semantics(h: Harness) -> None:
    """Run the state machine against one store of the backend (synchronous: hypothesis drives it)."""
    loop = asyncio.new_event_loop()
    opened = h.open()
    try:
        store = loop.run_until_complete(opened.__aenter__())
        try:
            machine = type(
                'Semantics',
                (_Machine,),
                {
                    'store': store,
                    'loop': loop,
                    'capabilities': h.capabilities.supported,
                    'examples': itertools.count(),
                },
            )
            run_state_machine_as_test(
                machine,
                settings=settings(
                    max_examples=h.backend.examples,
                    stateful_step_count=h.backend.steps,
                    deadline=None,
                    database=None,
                    # No shrinking: it replays a failure for up to five minutes; the failure's message lists the
                    # operations that led to it.
                    phases=[Phase.explicit, Phase.generate],
                    suppress_health_check=list(HealthCheck),
                ),
            )
        finally:
            loop.run_until_complete(opened.__aexit__(None, None, None))
    finally:
        loop.close()
