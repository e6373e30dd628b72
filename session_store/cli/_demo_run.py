"""The offline demo's run: half the conversation in this process, the rest in a new one, then what the store holds.

The second process is this same command (`session-store demo-resume`, hidden), which reopens the
store and carries on from the stored window and summary; it reports each turn and its totals as JSON
lines on stdout.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from itertools import accumulate, pairwise

import click
from pydantic_ai.messages import ModelResponse, ToolCallPart

from processors import TiktokenCounter

from ..exports import SessionExport
from ..results import StoredSummary
from ..store import SessionStore
from ._demo_script import DEMO_SCOPE, ScriptedAssistant, ScriptedSummarizer, demo_agent, demo_processor, prompt_for
from ._runtime import ENV_URL, Failure, Settings, open_store

__all__ = (
    'DemoOutcome',
    'DemoRun',
    'PartReport',
    'chain_continued',
    'choose_session',
    'emit_report',
    'emit_turn',
    'run_demo',
    'run_turns',
)


@dataclass
class PartReport:
    """What one process of the demo did."""

    pid: int
    first_turn: int
    end_turn: int
    requests: int
    tokens_sent: int
    """Tokens of every request the model was sent, counted (tiktoken) as the store counts messages."""
    peak_request_tokens: int
    summarizer_calls: int
    first_previous_summary: str | None
    """The previous summary the first summarizer call of this process extended, as its input held it."""
    seconds: float


async def run_turns(
    url: str, session_id: str, first: int, end: int, on_turn: Callable[[int], None] | None = None
) -> PartReport:
    """Open the store, run turns `first..end-1` of the demo conversation in `session_id`, and close it."""
    started = time.perf_counter()
    counter = TiktokenCounter()
    summarizer = ScriptedSummarizer()
    assistant = ScriptedAssistant(counter)
    agent = demo_agent(assistant)
    async with SessionStore(url, processor=demo_processor(summarizer, counter)) as store:
        session = await store.session(session_id, scope=DEMO_SCOPE)
        for turn in range(first, end):
            await session.run(agent, prompt_for(turn))
            if on_turn is not None:
                on_turn(turn)
    return PartReport(
        pid=os.getpid(),
        first_turn=first,
        end_turn=end,
        requests=assistant.requests,
        tokens_sent=assistant.tokens_sent,
        peak_request_tokens=assistant.peak_request_tokens,
        summarizer_calls=len(summarizer.inputs),
        first_previous_summary=summarizer.first_previous_summary,
        seconds=time.perf_counter() - started,
    )


@dataclass
class DemoOutcome:
    """What the demo left in the store, read back after both processes finished."""

    messages: int
    tool_calls: int
    tokens_archived: int
    """The stored token counts of every archived message, summed."""
    tokens_without_compaction: int
    """What the model would have been sent had every request carried the whole history before it."""
    chain: list[StoredSummary]

    @classmethod
    def from_export(cls, document: SessionExport, chain: list[StoredSummary]) -> DemoOutcome:
        """Read the outcome from the session's `SessionStore.export()` document and its summary chain."""
        tokens = document.tokens
        before = [0, *accumulate(tokens)]
        messages = document.messages
        responses = [position for position, message in enumerate(messages) if isinstance(message, ModelResponse)]
        return cls(
            messages=len(messages),
            tool_calls=sum(1 for p in responses for part in messages[p].parts if isinstance(part, ToolCallPart)),
            tokens_archived=sum(tokens),
            # The response at position p answered a request that, uncompacted, would have held messages [0, p).
            tokens_without_compaction=sum(before[p] for p in responses),
            chain=chain,
        )


def chain_continued(first: PartReport, second: PartReport, chain: list[StoredSummary]) -> bool | None:
    """Whether the second process's first summary extended the last one the first process stored.

    Its summarizer's input holds the summary it extends verbatim, so anything but that text means a
    summary was lost or started over. `None` when the second process made no summary to tell by.
    """
    if not second.summarizer_calls:
        return None
    links_ok = all(b.covers_from == a.covers_to for a, b in pairwise(chain))
    if not first.summarizer_calls:
        return links_ok and second.first_previous_summary is None
    return links_ok and second.first_previous_summary == chain[first.summarizer_calls - 1].text


@dataclass
class DemoRun:
    """Both processes' reports and what they left in the store."""

    session_id: str
    first: PartReport
    second: PartReport
    outcome: DemoOutcome
    seconds: float

    @property
    def continued(self) -> bool | None:
        """See `chain_continued`."""
        return chain_continued(self.first, self.second, self.outcome.chain)


async def choose_session(settings: Settings, wanted: str | None, fresh: bool) -> str:
    """The session the demo writes: `wanted` or the first free of demo, demo-2, ...; with `fresh`, emptied first."""
    async with open_store(settings, 'create') as store:
        taken = {info.session_id for info in await store.sessions()}
        if fresh:
            session_id = wanted or 'demo'
            if session_id in taken:
                await store.delete(session_id)
            return session_id
        if wanted is not None:
            if wanted in taken:
                raise Failure(f'Session {wanted!r} already exists; pass --fresh to replace it, or pick another id.')
            return wanted
        number = 1
        while (session_id := 'demo' if number == 1 else f'demo-{number}') in taken:
            number += 1
        return session_id


def emit_turn(turn: int) -> None:
    """The second process's progress: a JSON line per finished turn."""
    click.echo(json.dumps({'turn': turn}))
    sys.stdout.flush()


def emit_report(report: PartReport) -> None:
    """The second process's last line: its report."""
    click.echo(json.dumps({'report': asdict(report)}))


async def _resume_in_new_process(
    settings: Settings, session_id: str, first: int, end: int, on_turn: Callable[[int], None]
) -> PartReport:
    """Run turns `first..end-1` in a new OS process, following its progress through the JSON lines it prints."""
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, '-m', 'session_store.cli', 'demo-resume', session_id, '--from', str(first), '--to', str(end)),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        # The URL goes by environment, not argv, where any user could read its password in the process list.
        env={**os.environ, ENV_URL: settings.url},
    )
    assert process.stdout is not None and process.stderr is not None
    errors = asyncio.create_task(process.stderr.read())
    report: PartReport | None = None
    async for raw in process.stdout:
        event = json.loads(raw)
        if 'turn' in event:
            on_turn(process.pid)
        elif 'report' in event:
            report = PartReport(**event['report'])
    code = await process.wait()
    said = (await errors).decode(errors='replace').strip().splitlines()
    if code != 0 or report is None:
        # Its own error line says why, so the user still reads one line.
        why = f': {said[-1].removeprefix("Error: ")}' if said else '.'
        raise Failure(
            f'The demo process that resumed the session (pid {process.pid}) failed with exit code {code}{why}'
        )
    return report


async def _read_outcome(settings: Settings, session_id: str) -> DemoOutcome:
    # Opened as the writer it just was, not read-only: SQLite then tidies away its WAL files on closing.
    async with open_store(settings, 'write') as store:
        document = await store.export(session_id, scope=DEMO_SCOPE)
        chain = await store.summaries(session_id, scope=DEMO_SCOPE)
    return DemoOutcome.from_export(document, chain)


async def run_demo(
    settings: Settings,
    session_id: str,
    turns: int,
    *,
    on_turn: Callable[[int], None],
    on_restart: Callable[[], None],
) -> DemoRun:
    """Run the first half of `turns` here and the rest in a new process, then read back what they stored.

    `on_turn(pid)` follows each finished turn; `on_restart()` comes between the two processes.
    """
    started = time.perf_counter()
    half = turns // 2
    pid = os.getpid()
    first = await run_turns(settings.url, session_id, 0, half, on_turn=lambda _turn: on_turn(pid))
    on_restart()
    second = await _resume_in_new_process(settings, session_id, half, turns, on_turn)
    outcome = await _read_outcome(settings, session_id)
    return DemoRun(session_id, first, second, outcome, time.perf_counter() - started)
