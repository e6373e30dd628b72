"""A backend under the suite: how to open a store of it, what it declares, and what it is found to support."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationStore

from ._messages import turn

__all__ = ('CHECKS', 'Capabilities', 'ConformanceBackend', 'Factory', 'conformance_backend', 'detect', 'opened')

CHECKS = (
    'semantics',
    'revisions',
    'orphans',
    'isolation',
    'erasure',
    'concurrency',
    'concurrency_processes',
    'atomicity',
    'atomicity_killed_process',
    'scopes',
    'durability',
    'bad_input',
    'cost',
)
"""The checks, in the order they are reported; each is a test named `test_<check>`."""

PROCESS_CHECKS = frozenset({'concurrency_processes', 'atomicity_killed_process'})
"""The checks that run the backend in child processes."""

OPTIONAL = frozenset({'trees', 'fork', 'limit'})
"""The parts of the protocol a backend may leave out (by raising `NotImplementedError`, or declaring so)."""

Factory = Callable[[Path], Any]
"""Opens a store over the data kept in a folder: returns a `ConversationStore`, an awaitable of one, an async
context manager entering one, or is an async generator function yielding one (what follows the `yield` closes it).
The folder is empty on a check's first call; a persistent backend's second call with the same folder opens a
second store over the same data."""


@dataclass(frozen=True)
class ConformanceBackend:
    """A `ConversationStore` backend the conformance suite runs against: its factory and what it declares.

    Made by `@conformance_backend(...)` on a factory at a test module's top level; with the plugin active
    (`-p session_store.conformance`) each check is collected as a test under the factory's name.
    """

    factory: Factory
    """Opens a store over a folder's data (see `Factory`)."""
    persistent: bool = False
    """Whether two stores opened over one folder share its data (durability, reopening, processes)."""
    divergences: Mapping[str, str] = field(default_factory=dict)
    """Known divergences, check name to reason: each runs as a strict xfail."""
    without: frozenset[str] = frozenset()
    """Optional capabilities (`trees`, `fork`, `limit`) declared unsupported; others are detected."""
    erases: bool = False
    """Whether `delete` erases the entries no remaining conversation reaches, so that no read finds them after
    (the protocol leaves it to the backend, which is to say what it does): the `erasure` check holds it to it."""
    marks: Sequence[Any] = ()
    """pytest marks for every check of this backend (a project's slow tier, say)."""
    process_marks: Sequence[Any] = ()
    """pytest marks for the checks that start processes."""
    examples: int = 20
    """Hypothesis examples of the semantics state machine."""
    steps: int = 20
    """Steps per example of the semantics state machine."""
    processes: int = 3
    """Child processes of the process-level checks."""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.divergences) - set(CHECKS))
        if unknown:
            raise ValueError(f'divergences names unknown checks {unknown}; the checks are {list(CHECKS)}.')
        if not all(isinstance(reason, str) and reason.strip() for reason in self.divergences.values()):
            raise ValueError('divergences must give each check a reason: a non-blank string saying why it diverges.')
        if not self.without <= OPTIONAL:
            raise ValueError(f'without names {sorted(self.without - OPTIONAL)}; it takes only {sorted(OPTIONAL)}.')


def conformance_backend(
    *,
    persistent: bool = False,
    divergences: Mapping[str, str] | None = None,
    without: Sequence[str] = (),
    erases: bool = False,
    marks: Sequence[Any] = (),
    process_marks: Sequence[Any] = (),
    examples: int = 20,
    steps: int = 20,
    processes: int = 3,
) -> Callable[[Factory], ConformanceBackend]:
    """Declare a factory as a backend for the conformance suite (see `ConformanceBackend` for each argument)."""

    def declare(factory: Factory) -> ConformanceBackend:
        return ConformanceBackend(
            factory,
            persistent=persistent,
            divergences=dict(divergences or {}),
            without=frozenset(without),
            erases=erases,
            marks=tuple(marks),
            process_marks=tuple(process_marks),
            examples=examples,
            steps=steps,
            processes=processes,
        )

    return declare


@asynccontextmanager
async def opened(factory: Factory, place: Path) -> AsyncIterator[ConversationStore]:
    """The store `factory` opens over `place`, closed (if the factory closes it) after the block."""
    place.mkdir(parents=True, exist_ok=True)
    if inspect.isasyncgenfunction(factory):
        made = factory(place)
        store = await made.__anext__()
        try:
            yield _checked(store)
        finally:
            async for _ in made:
                raise TypeError('A conformance factory that is an async generator must yield exactly one store.')
        return
    made = factory(place)
    if inspect.isawaitable(made):
        made = await made
    if hasattr(made, '__aenter__'):
        async with made as store:
            yield _checked(store)
        return
    yield _checked(made)


def _checked(store: object) -> ConversationStore:
    if not isinstance(store, ConversationStore):
        raise TypeError(f'A conformance factory must give a pydantic-ai ConversationStore; it gave {store!r}.')
    return store


def importable(module: str, name: str, backend: ConformanceBackend) -> str | None:
    """Why a child process could not open `backend` by importing `module` and taking `name`, or `None` if it can."""
    try:
        found = getattr(importlib.import_module(module), name)
    except Exception as error:  # any failure to import means no child process can open it
        return f'{module}:{name} cannot be imported ({error!r})'
    if found is not backend:
        return f'{module}:{name} is not this backend (declare it at the top level of its module)'
    return None


@dataclass(frozen=True)
class Capabilities:
    """What a backend supports of the protocol's optional parts."""

    supported: frozenset[str]
    reasons: Mapping[str, str]
    """Why each unsupported capability is missing."""


async def detect(backend: ConformanceBackend, place: Path) -> Capabilities:
    """Probe a fresh store for `trees`, `fork` and `limit`: a capability is missing when declared so or when
    using it raises `NotImplementedError`."""
    reasons = {name: 'declared unsupported (`without=`)' for name in backend.without}
    async with opened(backend.factory, place) as store:
        await store.save(Conversation(conversation_id='probe', messages=[*turn('one'), *turn('two')]))
        probes: dict[str, Callable[[], Any]] = {
            'limit': lambda: store.load('probe', limit=1),
            'trees': lambda: _branch(store),
            'fork': lambda: store.fork('probe', at=4, new_conversation_id='probe-fork'),
        }
        for name, probe in probes.items():
            if name in reasons:
                continue
            try:
                await probe()
            except NotImplementedError as error:
                reasons[name] = f'raises NotImplementedError ({error})'
    return Capabilities(frozenset(OPTIONAL - set(reasons)), reasons)


async def _branch(store: ConversationStore) -> None:
    loaded = await store.load('probe')
    revision = None if loaded is None else loaded.revision
    await store.branch('probe', at=4, expected_revision=revision)
