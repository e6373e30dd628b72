"""Random runs, rewinds, switches, forks and restarts against a simple in-memory model of a session's tree."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from processors import SummarizationProcessor
from session_store import Session, SessionStore
from testkit.scripted import MARKER, ParallelToolAssistant, scripted_agent
from tests._hypothesis import examples


def echoing_summarizer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A summary that names every turn it (and the summary it extends) folded in: leaks show up as markers."""
    prompt = messages[-1].parts[-1]
    assert isinstance(prompt, UserPromptPart) and isinstance(prompt.content, str)
    turns = sorted({marker.split('-')[0] for marker in MARKER.findall(prompt.content)}, key=lambda m: int(m[1:]))
    return ModelResponse(parts=[TextPart('Summary of ' + ' '.join(turns))])


def turns(text: str) -> set[str]:
    return {marker.split('-')[0] for marker in MARKER.findall(text)}


@dataclass
class Path_:
    """A branch in the model: its messages and where it left the path it was made from."""

    messages: list[ModelMessage]
    starts_at: int
    tip: str | None = None


@dataclass
class Tree:
    paths: list[Path_] = field(default_factory=list[Path_])
    active: int = 0

    def leave(self) -> None:
        """A path left before anything ran on it holds nothing of its own, and is dropped."""
        left = self.paths[self.active]
        if len(left.messages) == left.starts_at and len(self.paths) > 1:
            del self.paths[self.active]


class Branching(RuleBasedStateMachine):
    new_database: Callable[[], str]
    """Makes each example's new, empty database on the backend under test."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.url = self.new_database()
        self.tree = Tree([Path_([], 0)])
        self.turn = 0
        self.forks = 0
        self.store: SessionStore
        self.session: Session

    def run(self, work: Any) -> Any:
        return self.loop.run_until_complete(work)

    def open(self) -> None:
        processor = SummarizationProcessor(
            FunctionModel(echoing_summarizer), trigger=('messages', 12), keep=('messages', 4)
        )
        self.store = SessionStore(self.url, processor=processor)
        self.session = self.run(self.store.session('tree'))

    @initialize()
    def start(self) -> None:
        self.open()
        self.sync_tips()

    def teardown(self) -> None:
        self.run(self.store.close())
        self.loop.close()

    def sync_tips(self) -> None:
        """Learn the tip of the active branch, which only the store names."""
        active = [branch for branch in self.run(self.session.branches()) if branch.active]
        assert len(active) == 1
        self.tree.paths[self.tree.active].tip = active[0].tip

    @property
    def path(self) -> Path_:
        return self.tree.paths[self.tree.active]

    @precondition(lambda self: not self.awaits_answer())
    @rule(count=st.integers(1, 3))
    def converse(self, count: int) -> None:
        agent = scripted_agent(ParallelToolAssistant())
        for _ in range(count):
            self.turn += 1
            result = self.run(self.session.run(agent, f'Turn M{self.turn}'))
            self.path.messages += result.new_messages()

    def awaits_answer(self) -> bool:
        """Whether the active path ends with a request, as after a rewind to just before an answer."""
        return bool(self.path.messages) and isinstance(self.path.messages[-1], ModelRequest)

    @precondition(lambda self: self.awaits_answer())
    @rule()
    def answer(self) -> None:
        """Answer the request the path ends with: a run with no prompt (what `regenerate` does)."""
        with pytest.raises(ValueError, match='ends with a request still to be answered'):
            self.run(self.session.run(scripted_agent(ParallelToolAssistant()), 'Turn M0'))
        result = self.run(self.session.run(scripted_agent(ParallelToolAssistant())))
        self.path.messages += result.new_messages()

    @precondition(lambda self: len(self.path.messages) > 0)
    @rule(data=st.data())
    def rewind(self, data: st.DataObject) -> None:
        # Turn boundaries and just-before-an-answer points are pair-safe; both are multiples of 4 plus 0 or 3.
        length = len(self.path.messages)
        position = data.draw(st.sampled_from([p for p in range(length) if p % 4 in (0, 3)]))
        self.run(self.session.rewind(position))
        kept = self.path.messages[:position]
        self.tree.leave()
        self.tree.paths.append(Path_(list(kept), position))
        self.tree.active = len(self.tree.paths) - 1
        self.sync_tips()

    @precondition(lambda self: len(self.tree.paths) > 1)
    @rule(data=st.data())
    def switch(self, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from([i for i in range(len(self.tree.paths)) if i != self.tree.active]))
        tip = self.tree.paths[target].tip
        assert tip is not None
        self.run(self.session.switch(tip))
        chosen = self.tree.paths[target]
        self.tree.leave()
        self.tree.active = self.tree.paths.index(chosen)

    @rule()
    def restart(self) -> None:
        self.run(self.store.close())
        self.open()

    @precondition(lambda self: len(self.path.messages) >= 4)
    @rule(data=st.data())
    def fork(self, data: st.DataObject) -> None:
        at = data.draw(st.sampled_from(list(range(0, len(self.path.messages) + 1, 4))))
        self.forks += 1
        forked = self.run(self.store.fork('tree', at=at, new_session_id=f'fork-{self.forks}'))
        assert self.run(forked.history()) == self.path.messages[:at]
        window = self.run(forked.context())
        assert turns(str(window)) <= turns(str(self.path.messages[:at]))

    @invariant()
    def history_is_the_active_path(self) -> None:
        assert self.run(self.session.history()) == self.path.messages

    @invariant()
    def branches_are_the_model_paths(self) -> None:
        listed = self.run(self.session.branches())
        assert sorted((b.message_count, b.active) for b in listed) == sorted(
            (len(p.messages), i == self.tree.active) for i, p in enumerate(self.tree.paths)
        )

    @invariant()
    def the_window_holds_only_its_own_path(self) -> None:
        window = self.run(self.store.window('tree'))
        # The window this store kept from its last run is the one a store with nothing cached reads.
        fresh = SessionStore(self.url, processor=self.store.processor)
        read = self.run(fresh.window('tree'))
        self.run(fresh.close())
        assert (window.messages, window.positions) == (read.messages, read.positions)
        on_path = turns(str(self.path.messages))
        # The summary the window carries names every turn it folded in: none may come from another branch.
        assert turns(str(window.messages)) <= on_path
        for position, message in zip(window.positions, window.messages, strict=True):
            stored = self.path.messages[position]
            assert message.parts[-len(stored.parts) :] == stored.parts
        if self.path.messages:
            assert window.messages[-1] == self.path.messages[-1]
        chain = self.run(self.store.summaries('tree'))
        assert all(later.covers_from >= earlier.covers_to for earlier, later in pairwise(chain))
        assert all(summary.covers_to <= len(self.path.messages) for summary in chain)


@pytest.mark.slow_on_postgresql
def test_random_branching_agrees_with_the_model(new_database: Callable[[], str]) -> None:
    Branching.new_database = staticmethod(new_database)
    run_state_machine_as_test(
        Branching,
        settings=settings(
            max_examples=examples(6), stateful_step_count=12, deadline=None, suppress_health_check=list(HealthCheck)
        ),
    )


@pytest.mark.slow
def test_random_branching_agrees_with_the_model_at_length(new_database: Callable[[], str]) -> None:
    Branching.new_database = staticmethod(new_database)
    run_state_machine_as_test(
        Branching,
        settings=settings(
            max_examples=60, stateful_step_count=30, deadline=None, suppress_health_check=list(HealthCheck)
        ),
    )
