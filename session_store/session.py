"""`Session`: runs an agent through a stored conversation, storing each run whole or not at all."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pydantic
from pydantic_ai import Agent
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.capabilities import AbstractCapability, WrapperCapability
from pydantic_ai.messages import ModelMessage, ModelRequest
from pydantic_ai.result import StreamedRunResult
from pydantic_ai.run import AgentRun, AgentRunResult
from pydantic_ai.tools import DeferredToolRequests, RunContext
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import RunUsage

from processors import (
    ContextManagerCapability,
    SlidingWindowProcessor,
    SummarizationProcessor,
)
from processors.stored_conversations import unkept

from ._arguments import check_user_prompt
from ._history.branches import last_prompt_position, rewind, switch
from ._history.leases import Leases
from ._history.review import list_branches, read_history, read_summaries
from ._history.runs import Runs
from ._history.turns import Turn
from ._history.windows import WindowProcessor
from ._ids import new_token
from .errors import StoreError, SummarizerFailed
from .recall import Recall, recall_toolset
from .results import Branch, StoredSummary, SummaryChain

__all__ = ('Session',)

logger = logging.getLogger(__name__)

_DEFERRED = pydantic.TypeAdapter(DeferredToolRequests)
_RESERVED = ('message_history', 'conversation')


class Session:
    """A stored conversation an agent runs through.

    Each run starts from the stored window (pinned head, latest summary, kept tail), compresses
    what the model sees with the session's processor, and stores the run's new messages, their
    token counts and any summary made in one transaction. A run that raises stores nothing. Get one
    from `SessionStore.session()`.

    The processor may be a `ContextManagerCapability`: each run then goes through a copy of it (its
    budget, threshold, summarizer, tool-output truncation, `compact_conversation` tool and callbacks),
    which stands in for the agent's own context manager of the same `id`, and every summary it makes
    (the agent's `compact_conversation` call included) is stored with the run.
    """

    def __init__(
        self,
        runs: Runs,
        leases: Leases,
        session_id: str,
        *,
        scope: str | None,
        processor: WindowProcessor,
        wait: bool = False,
        timeout: float | None = 60.0,
        recall: Recall | None = None,
    ) -> None:
        if not isinstance(processor, SlidingWindowProcessor | SummarizationProcessor | ContextManagerCapability):
            raise TypeError(
                f'processor={processor!r}: a session compresses with a SlidingWindowProcessor, a '
                'SummarizationProcessor or a ContextManagerCapability (or their capabilities, such as Summarization).'
            )
        self._runs = runs
        self._leases = leases
        self._database = runs.database
        self.session_id = session_id
        self.scope = scope
        self.processor = processor
        self.wait = wait
        """Whether a run waits for one in progress instead of failing with `SessionConflict`."""
        self.timeout = timeout
        """How long a waiting run waits, in seconds."""
        self.recall = recall
        """The settings of the recall tools handed to the agent, if it gets them."""

    def __repr__(self) -> str:
        return f'Session({self.session_id!r}, scope={self.scope!r})'

    async def run(self, agent: Agent[Any, Any], user_prompt: Any = None, **kwargs: Any) -> AgentRunResult[Any]:
        """`agent.run(user_prompt, **kwargs)` through this session, stored whole or not at all.

        The run starts from the session's stored window (pinned head, latest summary, kept tail), and the session's
        processor compacts each model request as it is made. When the run ends, its new messages, their token
        counts and any summary made during it are stored in one transaction, and the window moves on. A run that
        raises stores nothing: the session is as it was. A summarizer that fails never fails the run: the request
        falls back to the sliding window, and the failure is logged. Whatever `agent.run` itself raises (a model's
        error, `UsageLimitExceeded`) comes through as it is, and other failures of the database are `StoreError`s
        saying what to do (`DatabaseLocked`, `StorageFull`, `ServerRefused`, `KeyUnavailable`).

        Args:
            agent: The agent to run. A `ContextManagerCapability` it carries must have the id of the session's
                own (open the session with the manager as its `processor`), whose summaries the session stores.
            user_prompt: The new prompt, as `Agent.run` takes it. `None` answers the request the session ends
                with, after a rewind to just before an answer.
            **kwargs: What else `Agent.run` takes (`deps`, `usage_limits`, `capabilities`, `toolsets`, ...), save
                `message_history` and `conversation`: the history is the store's.

        Returns:
            `agent.run`'s result. Its `new_messages()` are what was stored, and its `all_messages()` the window the
            run started from, then those.

        Raises:
            SessionConflict: Another writer stored a run on the session after this run read its window (a session
                opened with `wait=True` first waits, up to its `timeout`, for a run in progress to end). Nothing of
                this run was stored: run it again.
            SessionNotFound: The session was deleted since it was opened.
            StoreUnavailable: The database could not be reached, or the connection was lost during the run. The
                error says whether anything was stored: nothing (`stored` is False), or, lost as the write
                committed, not known until the session is next read (`stored` is None).
            TypeError: `message_history=` or `conversation=` was given.
            ValueError: The prompt holds text no database can store (a lone surrogate), a prompt was given to a
                session that ends with a request still to be answered, or the agent carries a
                `ContextManagerCapability` whose summaries the session could not store.
        """
        return await self._run(agent, user_prompt, kwargs)

    async def regenerate(self, agent: Agent[Any, Any], **kwargs: Any) -> AgentRunResult[Any]:
        """Answer the last user prompt again: the answer it had stays stored as a branch."""
        prompt_at = await last_prompt_position(self._database, self.session_id, self.scope)
        if prompt_at is None:
            raise ValueError(f'Session {self.session_id!r} has no user prompt to answer again.')
        return await self._run(agent, None, kwargs, rewind_to=prompt_at + 1)

    async def edit(self, agent: Agent[Any, Any], position: int, prompt: Any, **kwargs: Any) -> AgentRunResult[Any]:
        """Replace the user prompt at `position` with `prompt` and run from there; what followed stays a branch."""
        return await self._run(agent, prompt, kwargs, rewind_to=position)

    async def rewind(self, position: int) -> None:
        """Make the active path its first `position` messages; the rest stays stored as a branch.

        Raises:
            ValueError: `position` is outside the path, or would separate a tool call from its return.
            SessionConflict: Another writer changed the session meanwhile (`wait=True` queues instead).
        """
        async with self._hold():
            await rewind(self._database, self.session_id, self.scope, position)

    async def switch(self, tip: str | int) -> None:
        """Make the branch `tip` (a `Branch.tip` from `branches()`, or a `Branch.number`) the active path; the one
        left stays a branch."""
        async with self._hold():
            await switch(self._database, self.session_id, self.scope, tip)

    async def branches(self) -> list[Branch]:
        """The session's branches, oldest first: every path ever active, with which one is active now."""
        return await list_branches(self._database, self.session_id, self.scope)

    async def _run(
        self, agent: Agent[Any, Any], user_prompt: Any, kwargs: dict[str, Any], *, rewind_to: int | None = None
    ) -> AgentRunResult[Any]:
        async with self._turn(agent, kwargs, user_prompt, rewind_to=rewind_to) as run:
            return await agent.run(user_prompt, **self._agent_kwargs(run, kwargs))

    @asynccontextmanager
    async def run_stream(
        self, agent: Agent[Any, Any], user_prompt: Any = None, **kwargs: Any
    ) -> AsyncIterator[StreamedRunResult[Any, Any]]:
        """`agent.run_stream(...)` through this session; the run is stored once the stream completes."""
        # The run is stored when it ends; an abandoned stream has no whole run, and stores nothing.
        async with (
            self._turn(agent, kwargs, user_prompt) as run,
            agent.run_stream(user_prompt, **self._agent_kwargs(run, kwargs)) as stream,
        ):
            yield stream

    @asynccontextmanager
    async def iter(
        self, agent: Agent[Any, Any], user_prompt: Any = None, **kwargs: Any
    ) -> AsyncIterator[AgentRun[Any, Any]]:
        """`agent.iter(...)` through this session; the run is stored if it reaches its end."""
        async with (
            self._turn(agent, kwargs, user_prompt) as run,
            agent.iter(user_prompt, **self._agent_kwargs(run, kwargs)) as agent_run,
        ):
            yield agent_run

    async def context(self) -> list[ModelMessage]:
        """The stored window the next run starts from (before the new prompt): head, bridge and tail."""
        return (await self._runs.load_window(self.session_id, self.scope, self.processor)).messages

    async def history(
        self, *, offset: int = 0, limit: int | None = None, branch: str | int | None = None
    ) -> list[ModelMessage]:
        """The raw archive of the active path, or of `branch`'s; see `SessionStore.history`."""
        return await read_history(
            self._database, self.session_id, scope=self.scope, offset=offset, limit=limit, branch=branch
        )

    async def summaries(self) -> SummaryChain:
        """The summary chain; see `SessionStore.summaries`."""
        return await read_summaries(self._database, self.session_id, scope=self.scope)

    def recall_toolset(self, recall: Recall | None = None) -> FunctionToolset[Any]:
        """The recall tools over this session's archive (`search_history`, `read_history`), for an agent run outside
        the session, whose messages are not stored in it: a probe, or a helper agent looking something up.

        `recall` sets their budget: the session's own `recall` settings by default, else `Recall()`'s.
        """
        return recall_toolset(self._database, self.session_id, self.scope, recall or self.recall or Recall())

    @asynccontextmanager
    async def _turn(
        self, agent: Agent[Any, Any], kwargs: dict[str, Any], user_prompt: Any, *, rewind_to: int | None = None
    ) -> AsyncIterator[Turn]:
        """One run's hold on the session: the lease if it waits, a rewind if asked, and the window it starts from."""
        for name in _RESERVED:
            if name in kwargs:
                raise TypeError(f'Session runs take their history from the store; do not pass {name}=.')
        check_user_prompt(user_prompt)
        self._check_context_managers(agent, kwargs)
        async with self._hold():
            if rewind_to is not None:
                await rewind(self._database, self.session_id, self.scope, rewind_to)
            run = await self._start()
            if user_prompt is not None and run.loaded.messages and isinstance(run.loaded.messages[-1], ModelRequest):
                # pydantic-ai would merge the new prompt into that request, rewriting a stored message.
                raise ValueError(
                    f'Session {self.session_id!r} ends with a request still to be answered (a rewind to just before '
                    'an answer): run it with no prompt to answer it, or rewind to a turn boundary to send a new one.'
                )
            # Exempt by the session's id, which a load marks the messages it hands out with (the window kept in
            # memory hands this run the same objects), and by the id the run goes under, which the check reads.
            with unkept(self.session_id, kwargs.get('conversation_id') or self.session_id):
                yield run

    @asynccontextmanager
    async def _hold(self) -> AsyncIterator[None]:
        """The session's lease while a write goes on, if this session waits for others; else nothing."""
        if not self.wait:
            yield
            return
        owner = new_token()
        await self._leases.acquire(self.session_id, owner, timeout=self.timeout)
        heartbeat = asyncio.create_task(self._keep_lease(owner))
        try:
            yield
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
            try:
                await self._leases.release(self.session_id, owner)
            except StoreError as error:
                # Never in place of what the run itself raised or returned (a run stored is stored): this store's
                # next run on the session takes the lease over, and for others it lapses within LEASE_TTL.
                logger.warning('Session %r: its lease could not be released now (%s).', self.session_id, error)

    async def _keep_lease(self, owner: str) -> None:
        """Renew the lease while the run goes on; a renewal that fails (the server away a moment) is tried again at
        the next beat, never raised into the run: the run's own write checks the revision anyway."""
        while True:
            await asyncio.sleep(self._leases.ttl.total_seconds() / 3)
            try:
                await self._leases.renew(self.session_id, owner)
            except StoreError as error:
                logger.warning('Session %r: its lease could not be renewed (%s); trying again.', self.session_id, error)

    def _check_context_managers(self, agent: Agent[Any, Any], kwargs: dict[str, Any]) -> None:
        """Refuse a run in which a context manager other than the session's own copy would compact requests:
        the summaries it made could not be stored, and it would compact a window the session already shapes."""
        found: list[ContextManagerCapability] = []

        def note(capability: AbstractCapability[Any]) -> None:
            if isinstance(capability, ContextManagerCapability):
                found.append(capability)

        for passed in kwargs.get('capabilities', ()):
            if isinstance(passed, AbstractCapability):
                passed.apply(note)
        if found:
            raise ValueError(
                f"Session {self.session_id!r}: pass a ContextManagerCapability as the session's processor "
                f'(store.session({self.session_id!r}, processor=manager)), not in capabilities=, so that the '
                'summaries it makes are stored with the run.'
            )
        agent.root_capability.apply(note)
        ours = self.processor
        # pydantic-ai replaces an agent-level capability with the run-level one of the same id: the session's copy.
        strays = [c for c in found if not isinstance(ours, ContextManagerCapability) or c.id is None or c.id != ours.id]
        if not strays:
            return
        if isinstance(ours, ContextManagerCapability):
            raise ValueError(
                f"Session {self.session_id!r}: the agent's ContextManagerCapability (id={strays[0].id!r}) would "
                f"compact requests beside the session's (id={ours.id!r}); give both the same id (not None), and the "
                "session's stands in for the agent's in its runs."
            )
        raise ValueError(
            f'Session {self.session_id!r} compresses with a {type(ours).__name__}, but the agent carries a '
            'ContextManagerCapability, whose summaries the session could not store: open the session with it '
            f"(store.session({self.session_id!r}, processor=manager)), and it stands in for the agent's in "
            "the session's runs."
        )

    async def _start(self) -> Turn:
        return await Turn.start(self._runs, self.session_id, self.scope, self.processor)

    def _agent_kwargs(self, run: Turn, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The caller's arguments plus the stored history, the window capability, the store and the recall tools."""
        # The window capability goes last, so it shapes the request after the caller's own capabilities. It goes
        # wrapped in the one that stores the run: pydantic-ai hands every capability of a run its own copy of the
        # run context at every hook, so one capability where there were two is half the copies.
        extra: dict[str, Any] = {
            'message_history': run.loaded.messages,
            'capabilities': [*kwargs.get('capabilities', ()), _StoredWhenDone(run.capability, run=run)],
            'conversation_id': kwargs.get('conversation_id') or self.session_id,
        }
        if self.recall is not None:
            recall = recall_toolset(self._database, self.session_id, self.scope, self.recall)
            extra['toolsets'] = [*kwargs.get('toolsets', ()), recall]
        return {**kwargs, **extra}

    async def compact(
        self, focus: str | None = None, *, agent: AbstractAgent[Any, Any] | None = None
    ) -> StoredSummary | None:
        """Summarize the session now, whatever its triggers say: the next link of its summary chain.

        The summary extends the stored one with the messages the cut newly evicts (a pair-safe cut that
        keeps the processor's `keep`), puts `focus` first if given, and is stored, with the window moved
        past what it covers, under the same revision rules as a run. `None` when there is nothing to
        compact yet (a history shorter than what `keep` keeps).

        With `agent`, this is pydantic-ai's idle compaction, `agent.compact_history()`, run on the session's
        window: the agent's own compaction handler makes the summary (a provider's `NativeCompaction`, its
        `Summarization`, another library's), else the session's processor does, and either way it is stored as
        the chain's next link. Without, with a `ContextManagerCapability` as the processor, this is its
        `compact(messages, focus)`: its callbacks are called and its `compression_count` counts it.

        Raises:
            ValueError: Without `agent`, the session's processor is a sliding window, which makes no summaries.
            SummarizerFailed: The summarizer failed; nothing was stored, and the window is as it was.
            SessionConflict: Another writer changed the session meanwhile (`wait=True` queues instead).
        """
        if agent is None and isinstance(self.processor, SlidingWindowProcessor):
            raise ValueError(
                f'Session {self.session_id!r} compresses with a {type(self.processor).__name__}, which makes no '
                'summaries; open it with a SummarizationProcessor or a ContextManagerCapability to compact it, or '
                'pass an agent whose capabilities compact (session.compact(agent=agent)).'
            )
        async with self._hold():
            run = await self._start()
            if agent is not None:
                with unkept(self.session_id):
                    compacted = await agent.compact_history(
                        run.loaded.messages, focus=focus, conversation_id=self.session_id, capabilities=[run.capability]
                    )
                await run.take(compacted.compactions)
            elif isinstance(run.capability, ContextManagerCapability):
                await run.capability.compact(run.loaded.messages, focus)
            else:
                assert isinstance(run.capability, SummarizationProcessor)
                await run.capability.process(run.loaded.messages, focus, force=True)
            if run.failures:
                raise SummarizerFailed(self.session_id)
            if not run.summaries:
                return None
            loaded = run.loaded
            await run.store(loaded.messages, [], RunUsage(), loaded.deferred_tool_requests)
        return (await self.summaries())[-1]


@dataclass
class _StoredWhenDone(WrapperCapability[Any]):
    """The turn's window capability (`wrapped`), storing the session's run as it ends, inside the agent run: a
    failed store fails the run, and its span nests under pydantic-ai's `invoke_agent`. A run that raises, or a
    stream abandoned before its end, never gets here, and stores nothing."""

    run: Turn = field(kw_only=True)

    async def after_run(self, ctx: RunContext[Any], *, result: AgentRunResult[Any]) -> AgentRunResult[Any]:
        result = await super().after_run(ctx, result=result)
        output = result.output
        deferred = _DEFERRED.dump_python(output, mode='json') if isinstance(output, DeferredToolRequests) else None
        await self.run.store_run(result, deferred)
        return result

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None
