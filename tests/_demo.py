"""The demo conversation (`session_store.cli._demo_run`) as template fills: `new_database(fill=...)` copies a
database it was run into once for the whole run instead of running it again for every test."""

from __future__ import annotations

from session_store.cli._demo_run import run_turns


async def two_demo_turns(url: str) -> None:
    """`demo` (scope `demo`): two turns of the demo conversation (8 messages)."""
    await run_turns(url, 'demo', 0, 2)


async def twelve_demo_turns(url: str) -> None:
    """`demo` (scope `demo`): 12 turns of the demo conversation (48 messages, a summary)."""
    await run_turns(url, 'demo', 0, 12)


async def twenty_four_demo_turns(url: str) -> None:
    """`demo` (scope `demo`): 24 turns of the demo conversation (96 messages, two summaries)."""
    await run_turns(url, 'demo', 0, 24)
