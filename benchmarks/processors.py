"""Per-model-request cost of our history processors against `summarization-pydantic-ai==0.1.11`.

Run it with one command from anywhere (the project venv is fine, so is a bare `python3`):

    python benchmarks/processors.py            # 1k, 10k and 100k messages, 20 requests each
    python benchmarks/processors.py --sizes 1000 10000 --rounds 10
    python benchmarks/processors.py --quick    # 1k and 4k messages, 1 request each: runs in seconds
    python benchmarks/processors.py --bounded-only   # only the bounded-time section (below)

`--quick` sets the defaults to sizes 1,000 and 4,000 and one timed request per size (the warm-up pass too);
flags given with it win. Its figures are noisy: it shows that both sides run and roughly how they compare.

The peer library is never a dependency of this project. When it isn't importable at the pinned
version, the script re-executes itself in the private venv `<repo>/.bench-venv` (gitignored), made or
brought up to date first with this project (editable) and every benchmark's peer: see `_bench_env.py`.
When that venv can't be made (no package index), the script says so on its first lines
(`PEERS UNAVAILABLE: ...`) and measures ours alone.

What is measured: the steady state of an agent run, where the processor runs once per model request
on a history that grew by two messages (the model's response and the next request) since the last
request. For each size N, both libraries get the same synthetic tool-using conversation. The
processor is warmed with one call on the first N+1 messages (lengths stay odd so every history ends
with a request, as it does when a model is called), as the run's previous request would have; then
timed call r = 1..R gets the first N+1+2r messages, as a fresh list. All R lists are sliced before
timing starts: copying a 100k-message list just before a call evicts the CPU caches, which would add
~50 us to a call whose own work takes ~20 us. The figure is the median wall time per call, with GC paused
while timing, after one untimed pass over every scenario so the interpreter is warm. Ours keeps an
incremental index per history, so a call should cost the new messages; the peer is stateless and
reprocesses the whole history on every call.

Scenarios, configured identically for both libraries, each with its own default approximate counter:

- summarization, not triggered: `SummarizationProcessor(model, trigger=('tokens', 10**12),
  keep=('messages', 20))`; the summarizer is a `FunctionModel` that must never be called.
- sliding window, message trigger:
  `SlidingWindowProcessor(trigger=('messages', 100), keep=('messages', 50))`.
- sliding window, token trigger:
  `SlidingWindowProcessor(trigger=('tokens', 50_000), keep=('tokens', 20_000))`.

Both libraries' outputs are sanity-checked along the way. Timings are printed, never asserted.

Then, ours alone: bounded time whatever the input, in time per message over real-shaped histories (tool call ids
repeated in every response, every part kind), cold and incremental, at the same sizes: see `_bounded_time.py`.
"""

# The third-party imports follow the environment bootstrap, which must run first.
# ruff: noqa: E402

from __future__ import annotations

from _bench_env import OUR_DIST, PEERS, SUMMARIZATION, distribution, ensure_environment, pin

HAVE_PEER = SUMMARIZATION not in ensure_environment([SUMMARIZATION])

import argparse
import asyncio
import importlib.metadata
import random
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Literal

import _bounded_time
from _bench_util import load_average, machine, quiet_gc, sentence, size_label
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

import processors as ours

if HAVE_PEER:
    import pydantic_ai_summarization as peer

PEER_DIST = distribution(PEERS[SUMMARIZATION])
PEER_VERSION = pin(PEERS[SUMMARIZATION])

Processor = Callable[[list[ModelMessage]], Awaitable[list[ModelMessage]]]

DEFAULT_SIZES = (1_000, 10_000, 100_000)
DEFAULT_ROUNDS = 20
QUICK_SIZES = (1_000, 4_000)
QUICK_ROUNDS = 1
MIN_PEER_ROUNDS = 5
TARGET_SPEEDUP = 20.0
"""The issue's targets, reported against, never asserted: ours at least this much faster at 10k ..."""
TARGET_GROWTH = 2.0
"""... and its cost growing at most this much from 1k to 100k messages."""
WARM_UP_SIZE = 500
PEER_BUDGET_SECONDS = 8.0
"""Time allowed for the peer's timed calls per (scenario, size); fewer rounds if it is slower."""

NEVER = 10**12
"""A token trigger no history here reaches."""
SLIDING_KEEP_MESSAGES = 50
SLIDING_TRIGGER_MESSAGES = 100
TOKEN_TRIGGER = 50_000
TOKEN_KEEP = 20_000

# ---------------------------------------------------------------------------------------------------
# The synthetic conversation
# ---------------------------------------------------------------------------------------------------

_VOCABULARY = (
    'the order customer invoice shipment warehouse refund status account balance report quarter revenue '
    'latency deploy cluster region error timeout retry config schema table column index query result '
    'user request response summary estimate forecast budget ticket priority owner deadline review draft '
    'approve reject update create delete search filter sort page limit offset token session cache'
)
_WORDS = tuple(_VOCABULARY.split())
_TOOLS = ('search_orders', 'get_invoice', 'query_metrics', 'lookup_customer', 'list_tickets', 'run_sql')
_SYSTEM_PROMPT = (
    'You are an operations assistant for an e-commerce company. Use the tools to look up orders, '
    'invoices, customers, tickets and metrics; never guess an identifier; cite the tool results you '
    'relied on; ask before any destructive action; answer concisely.'
)


class _TextPool:
    """Sentences of realistic lengths, made up front so building 100k messages stays fast."""

    def __init__(self, rng: random.Random, size: int = 4_096) -> None:
        self._rng = rng
        self._texts = [sentence(rng, _WORDS, rng.randint(50, 400)) for _ in range(size)]

    def pick(self) -> str:
        return self._rng.choice(self._texts)


def _tool_round(rng: random.Random, texts: _TextPool, serial: int) -> tuple[ModelResponse, ModelRequest]:
    """A response with 1-3 parallel tool calls, and the request carrying their returns."""
    calls = [
        ToolCallPart(
            tool_name=rng.choice(_TOOLS),
            args={'query': texts.pick()[: rng.randint(20, 120)], 'limit': rng.choice((10, 25, 50))},
            tool_call_id=f'call_{serial:07d}_{i}',
        )
        for i in range(rng.randint(1, 3))
    ]
    returns = [
        ToolReturnPart(tool_name=call.tool_name, content=texts.pick(), tool_call_id=call.tool_call_id) for call in calls
    ]
    return ModelResponse(parts=calls), ModelRequest(parts=returns)


def _conversation(seed: int = 20_240_601) -> Iterator[ModelMessage]:
    """An endless tool-using conversation: a request opening with the system prompt, then turns of a user
    prompt, 0-3 tool rounds, and a text answer. Requests and responses alternate."""
    rng = random.Random(seed)
    texts = _TextPool(rng)
    serial = 0
    first = True
    while True:
        prompt = UserPromptPart(content=texts.pick())
        yield ModelRequest(parts=[SystemPromptPart(content=_SYSTEM_PROMPT), prompt] if first else [prompt])
        first = False
        for _ in range(rng.choice((0, 1, 1, 2, 2, 3))):
            serial += 1
            yield from _tool_round(rng, texts, serial)
        yield ModelResponse(parts=[TextPart(content=texts.pick())])


def build_history(length: int) -> list[ModelMessage]:
    return list(islice(_conversation(), length))


# ---------------------------------------------------------------------------------------------------
# Scenarios
# ---------------------------------------------------------------------------------------------------


class SummarizerSpy:
    """A `FunctionModel` summarizer that counts its calls; the benchmark's scenarios must not make any."""

    def __init__(self) -> None:
        self.calls = 0
        self.model = FunctionModel(self._summarize, model_name='summarizer-spy')

    def _summarize(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls += 1
        return ModelResponse(parts=[TextPart(content='A summary of the conversation so far.')])


@dataclass
class Pair:
    """One scenario's processors, one of each library, configured alike; no peer when it isn't installed."""

    ours: Processor
    peer: Processor | None
    ours_spy: SummarizerSpy | None = None
    peer_spy: SummarizerSpy | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    label: str
    """Short, for the summary lines."""
    bound: Literal['none', 'messages', 'tokens']
    """What a trimmed window must stay under: nothing (no trimming), the message or the token trigger."""
    make: Callable[[], Pair]


# The sizes are spelled out in each call so they type-check as each library's `ContextSize` literals.


def _summarization_not_triggered() -> Pair:
    ours_spy, peer_spy = SummarizerSpy(), SummarizerSpy()
    return Pair(
        ours=ours.SummarizationProcessor(ours_spy.model, trigger=('tokens', NEVER), keep=('messages', 20)),
        peer=peer.SummarizationProcessor(peer_spy.model, trigger=('tokens', NEVER), keep=('messages', 20))
        if HAVE_PEER
        else None,
        ours_spy=ours_spy,
        peer_spy=peer_spy,
    )


def _sliding_messages() -> Pair:
    return Pair(
        ours=ours.SlidingWindowProcessor(
            trigger=('messages', SLIDING_TRIGGER_MESSAGES), keep=('messages', SLIDING_KEEP_MESSAGES)
        ),
        peer=peer.SlidingWindowProcessor(
            trigger=('messages', SLIDING_TRIGGER_MESSAGES), keep=('messages', SLIDING_KEEP_MESSAGES)
        )
        if HAVE_PEER
        else None,
    )


def _sliding_tokens() -> Pair:
    return Pair(
        ours=ours.SlidingWindowProcessor(trigger=('tokens', TOKEN_TRIGGER), keep=('tokens', TOKEN_KEEP)),
        peer=peer.SlidingWindowProcessor(trigger=('tokens', TOKEN_TRIGGER), keep=('tokens', TOKEN_KEEP))
        if HAVE_PEER
        else None,
    )


SCENARIOS = (
    Scenario('summarization, not triggered', 'summarization not triggered', 'none', _summarization_not_triggered),
    Scenario('sliding window, messages 100/50', 'sliding window (messages)', 'messages', _sliding_messages),
    Scenario('sliding window, tokens 50k/20k', 'sliding window (tokens)', 'tokens', _sliding_tokens),
)

# ---------------------------------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------------------------------


@dataclass
class Calls:
    """One library's calls on one history: the warm-up call, then the timed calls' inputs and windows."""

    warm_seconds: float
    warm_window: list[ModelMessage]
    input_lengths: list[int]
    windows: list[list[ModelMessage]]
    seconds: list[float]


@dataclass(frozen=True)
class Timing:
    """What the report keeps of `Calls`: times and lengths, not the (large) windows."""

    seconds: list[float]
    window_lengths: list[int]
    input_lengths: list[int]

    @classmethod
    def of(cls, calls: Calls) -> Timing:
        return cls(calls.seconds, [len(window) for window in calls.windows], calls.input_lengths)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.seconds) * 1_000


async def _timed_call(processor: Processor, messages: list[ModelMessage]) -> tuple[float, list[ModelMessage]]:
    start = time.perf_counter()
    window = await processor(messages)
    return time.perf_counter() - start, window


async def measure(
    processor: Processor, history: list[ModelMessage], start: int, rounds: int, budget: float | None = None
) -> Calls:
    """Warm on `history[:start]`, then time `rounds` calls on histories grown by 2 messages each.

    With a `budget` (seconds), fewer rounds (but at least `MIN_PEER_ROUNDS`) if the warm-up call says
    they wouldn't fit. Only for the stateless peer, whose warm-up call costs what every call does.
    """
    warm_seconds, warm_window = await _timed_call(processor, history[:start])
    if budget is not None:
        rounds = min(rounds, max(MIN_PEER_ROUNDS, int(budget / max(warm_seconds, 1e-9))))
    input_lengths = [start + 2 * r for r in range(1, rounds + 1)]
    # All sliced before timing starts: copying a 100k-message list right before a call evicts the CPU
    # caches and adds ~50 us to a call that costs ~20 us, whatever the processor does.
    inputs = [history[:length] for length in input_lengths]
    windows: list[list[ModelMessage]] = []
    seconds: list[float] = []
    with quiet_gc():
        for messages in inputs:
            elapsed, window = await _timed_call(processor, messages)
            seconds.append(elapsed)
            windows.append(window)
    return Calls(warm_seconds, warm_window, input_lengths, windows, seconds)


# ---------------------------------------------------------------------------------------------------
# Sanity checks (correctness, never timings)
# ---------------------------------------------------------------------------------------------------


def _check_windows(calls: Calls, history: list[ModelMessage], bridged: bool) -> None:
    """Every window is the history's tail (ours: after a bridge request), up to the request in flight."""
    for length, window in zip(calls.input_lengths, calls.windows, strict=True):
        tail = window[1:] if bridged and len(window) < length else window
        assert tail, 'an empty window'
        expected = history[length - len(tail) : length]
        assert all(a is b for a, b in zip(tail, expected, strict=True)), "the window is not the history's tail"


def _check_not_triggered(pair: Pair, ours_calls: Calls, peer_calls: Calls | None) -> None:
    assert pair.ours_spy is not None and pair.peer_spy is not None
    assert pair.ours_spy.calls == 0, f'our summarizer was called {pair.ours_spy.calls} times'
    assert pair.peer_spy.calls == 0, f"the peer's summarizer was called {pair.peer_spy.calls} times"
    for calls in (ours_calls, peer_calls) if peer_calls is not None else (ours_calls,):
        assert [len(w) for w in calls.windows] == calls.input_lengths, 'untriggered, the history passes whole'


def _starts_with_system_prompt(window: Sequence[ModelMessage]) -> bool:
    first = window[0]
    return isinstance(first, ModelRequest) and isinstance(first.parts[0], SystemPromptPart)


def _check_trimmed(scenario: Scenario, ours_calls: Calls, peer_calls: Calls | None) -> None:
    """Both trim to windows under the trigger, of comparable size; ours re-injects the system prompt."""
    counted = [(ours_calls, ours.count_tokens_approximately)]
    if peer_calls is not None:
        counted.append((peer_calls, peer.count_tokens_approximately))
    for calls, count in counted:
        for window in [calls.warm_window, *calls.windows]:
            if scenario.bound == 'messages':
                assert len(window) <= SLIDING_TRIGGER_MESSAGES, f'a window of {len(window)} messages'
            else:
                assert count(window) < TOKEN_TRIGGER, f'a window of {count(window)} tokens'
    assert all(_starts_with_system_prompt(w) for w in [ours_calls.warm_window, *ours_calls.windows])
    if peer_calls is None:
        return
    # On the warm-up call both cut the same fresh history. The peer walks back from `keep` to a safe cut;
    # ours walks forward, to a turn start if that keeps at least half, so it may keep somewhat less.
    ours_tail, peer_tail = len(ours_calls.warm_window) - 1, len(peer_calls.warm_window)
    assert peer_tail // 2 <= ours_tail <= peer_tail + 2, f'warm-up windows: ours {ours_tail}+1, peer {peer_tail}'


def check(
    scenario: Scenario, pair: Pair, ours_calls: Calls, peer_calls: Calls | None, history: list[ModelMessage]
) -> None:
    _check_windows(ours_calls, history, bridged=True)
    if peer_calls is not None:
        _check_windows(peer_calls, history, bridged=False)
    if scenario.bound == 'none':
        _check_not_triggered(pair, ours_calls, peer_calls)
    else:
        _check_trimmed(scenario, ours_calls, peer_calls)


# ---------------------------------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------------------------------


@dataclass
class Row:
    scenario: Scenario
    size: int
    ours: Timing
    peer: Timing | None
    """None when the peer is not installed."""

    @property
    def speedup(self) -> float | None:
        return None if self.peer is None else self.peer.median_ms / self.ours.median_ms


def _ms(value: float) -> str:
    return f'{value:.4f}' if value < 1 else f'{value:.2f}'


def _window_sizes(timing: Timing) -> str:
    """The range of window lengths the timed calls returned, or `whole` if nothing was trimmed."""
    lengths = timing.window_lengths
    if lengths == timing.input_lengths:
        return 'whole'
    return f'{min(lengths)}-{max(lengths)}'


_COLUMNS = (
    ('scenario', '<32'),
    ('N', '>5'),
    ('ours ms/req', '>11'),
    ('peer ms/req', '>11'),
    ('speedup', '>8'),
    ('ours growth', '>11'),
    ('R ours/peer', '>11'),
    ('window ours/peer', '>17'),
)


def _line(cells: Sequence[str]) -> str:
    return '  '.join(f'{cell:{spec}}' for cell, (_, spec) in zip(cells, _COLUMNS, strict=True))


def print_table(rows: list[Row]) -> None:
    smallest = min(row.size for row in rows)
    base = {row.scenario.name: row.ours.median_ms for row in rows if row.size == smallest}
    header = _line([name for name, _ in _COLUMNS])
    print(header)
    print('-' * len(header))
    for row in rows:
        growth = row.ours.median_ms / base[row.scenario.name]
        cells = [
            row.scenario.name,
            size_label(row.size),
            _ms(row.ours.median_ms),
            '-' if row.peer is None else _ms(row.peer.median_ms),
            '-' if row.speedup is None else f'{row.speedup:.1f}x',
            f'{growth:.2f}x',
            f'{len(row.ours.seconds)}/{"-" if row.peer is None else len(row.peer.seconds)}',
            f'{_window_sizes(row.ours)}/{"-" if row.peer is None else _window_sizes(row.peer)}',
        ]
        print(_line(cells))
    print(
        f'ms/req: median per call; speedup: peer/ours; ours growth: ours ms/req over ours at {size_label(smallest)}; '
        'R: timed calls; window: messages returned.'
    )


def _verdict(met: bool) -> str:
    return 'met' if met else 'NOT met'


def print_summary(rows: list[Row]) -> None:
    """One line per scenario, against the targets: >= 20x the peer at 10k, ours growing <= 2x over the sizes."""
    sizes = sorted({row.size for row in rows})
    at = 10_000 if 10_000 in sizes else sizes[len(sizes) // 2]
    for scenario in SCENARIOS:
        by_size = {row.size: row for row in rows if row.scenario is scenario}
        mid, low, high = by_size[at], by_size[sizes[0]], by_size[sizes[-1]]
        growth = high.ours.median_ms / low.ours.median_ms
        growth_text = (
            f'growth {size_label(sizes[0])}->{size_label(sizes[-1])} ours: {growth:.2f}x '
            f'(target <= {TARGET_GROWTH:.0f}x: {_verdict(growth <= TARGET_GROWTH)})'
        )
        if mid.peer is None or mid.speedup is None:
            print(
                f'{scenario.label} @{size_label(at)}: ours {_ms(mid.ours.median_ms)} ms, peer not measured '
                f'(PEERS UNAVAILABLE: see the first lines); {growth_text}'
            )
            continue
        print(
            f'{scenario.label} @{size_label(at)}: ours {_ms(mid.ours.median_ms)} ms vs peer '
            f'{_ms(mid.peer.median_ms)} ms = {mid.speedup:.1f}x faster '
            f'(target >= {TARGET_SPEEDUP:.0f}x: {_verdict(mid.speedup >= TARGET_SPEEDUP)}); {growth_text}'
        )


def print_versions() -> None:
    print(f'{machine()}; pydantic-ai-slim {importlib.metadata.version("pydantic-ai-slim")}')
    print(f'ours: {OUR_DIST} {importlib.metadata.version(OUR_DIST)} ({Path(ours.__file__).parent})')
    if HAVE_PEER:
        print(f'peer: {PEER_DIST} {importlib.metadata.version(PEER_DIST)} ({Path(peer.__file__).parent})')
    else:
        print(f'peer: {PEER_DIST} not installed')


# ---------------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------------


async def warm_interpreter(history: list[ModelMessage], rounds: int) -> None:
    """One untimed pass over every scenario, so the first timed one doesn't pay for cold code paths."""
    for scenario in SCENARIOS:
        pair = scenario.make()
        for processor in (pair.ours, pair.peer):
            if processor is not None:
                await measure(processor, history, WARM_UP_SIZE + 1, rounds)


async def bench(sizes: Sequence[int], rounds: int, warm_up_rounds: int) -> list[Row]:
    started = time.perf_counter()
    history = build_history(max(max(sizes), WARM_UP_SIZE) + 1 + 2 * max(rounds, warm_up_rounds))
    print(f'Built a history of {len(history):,} messages in {time.perf_counter() - started:.1f}s.\n', flush=True)
    await warm_interpreter(history, warm_up_rounds)
    rows: list[Row] = []
    for scenario in SCENARIOS:
        for size in sizes:
            start = size + 1  # odd: the history ends with a request, as when the model is called
            pair = scenario.make()
            ours_calls = await measure(pair.ours, history, start, rounds)
            peer_calls = None
            if pair.peer is not None:
                peer_calls = await measure(pair.peer, history, start, rounds, PEER_BUDGET_SECONDS)
            check(scenario, pair, ours_calls, peer_calls, history)
            row = Row(scenario, size, Timing.of(ours_calls), None if peer_calls is None else Timing.of(peer_calls))
            rows.append(row)
            print_progress(row, ours_calls, peer_calls)
    # Small results only: on exit, asyncio.run (3.11) restores the SIGINT handler, and `signal` formats the
    # repr of the old one, a partial holding the main task, result included: 100k-message windows take minutes.
    return rows


def print_progress(row: Row, ours_calls: Calls, peer_calls: Calls | None) -> None:
    """One line as each (scenario, size) is done: the medians, and the warm-up call that indexes the history."""
    head = f'  {row.scenario.name} @ {size_label(row.size)}: ours {_ms(row.ours.median_ms)} ms'
    ours_warm = f'ours {_ms(ours_calls.warm_seconds * 1_000)} ms'
    if row.peer is None or peer_calls is None:
        print(
            f'{head} per request, peer not measured; warm-up call (ours indexes the history): {ours_warm}, '
            f'window ours {len(ours_calls.warm_window)}',
            flush=True,
        )
        return
    print(
        f'{head}, peer {_ms(row.peer.median_ms)} ms per request; warm-up call (ours indexes the history): '
        f'{ours_warm}, peer {_ms(peer_calls.warm_seconds * 1_000)} ms, '
        f'windows ours {len(ours_calls.warm_window)}, peer {len(peer_calls.warm_window)}',
        flush=True,
    )


def parse_args() -> argparse.Namespace:
    """The arguments; `--quick` changes the defaults of `--sizes` and `--rounds` (flags given with it win)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        '--quick',
        action='store_true',
        help=f'tiny sizes ({" ".join(map(str, QUICK_SIZES))}) and {QUICK_ROUNDS} request each, done in seconds: '
        'a check that it runs, not a measurement',
    )
    parser.add_argument(
        '--sizes', type=int, nargs='+', help=f'history sizes (default {" ".join(map(str, DEFAULT_SIZES))})'
    )
    parser.add_argument('--rounds', type=int, help=f'timed requests per size (default {DEFAULT_ROUNDS})')
    parser.add_argument('--bounded-only', action='store_true', help='only the bounded-time section, ours alone')
    args = parser.parse_args()
    args.sizes = sorted(args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES))
    if args.rounds is None:
        args.rounds = QUICK_ROUNDS if args.quick else DEFAULT_ROUNDS
    return args


def main() -> None:
    args = parse_args()
    print_versions()
    print(load_average('at start'))
    if HAVE_PEER and importlib.metadata.version(PEER_DIST) != PEER_VERSION:
        raise SystemExit(f'expected {PEER_DIST}=={PEER_VERSION}, found {importlib.metadata.version(PEER_DIST)}')
    started = time.perf_counter()
    if not args.bounded_only:
        rows = asyncio.run(bench(args.sizes, args.rounds, QUICK_ROUNDS if args.quick else DEFAULT_ROUNDS))
        print()
        print_table(rows)
        print()
        print_summary(rows)
    _bounded_time.run(args.sizes, quick=args.quick)
    print(f'\nTotal {time.perf_counter() - started:.0f}s; {load_average("at the end")}.')


if __name__ == '__main__':
    main()
