"""benchmarks/scale.py's report: each contender's figures over its runs, the table of one pass, the lines that
compare ours with the peer, and the targets."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from _scale_job import Load
from _scale_runs import Outcome, Route, percentile
from _store_measuring import PEER_MISSING, print_limit, print_target

TARGET_THROUGHPUT = 2.0
"""Ours' turns/s at least this many times the peer's."""
TARGET_P99_MS = 5.0
"""Ours' p99 store overhead at most this, with `TARGET_SESSIONS` sessions at once."""
TARGET_SESSIONS = 100
TARGET_STORE_CPU = 0.6
"""Ours' store CPU per turn (the processes' CPU per turn less the agent alone's) at most this many times the peer's."""
NAMES = {
    'alone': 'agent alone, nothing stored',
    'ours': 'ours: session.run',
    'peer': 'peer: get_items(20) + add_items',
}


@dataclass(frozen=True)
class Figures:
    """A contender's figures over its runs in one pass: turns/s, ms and connections."""

    turns_per_second: float
    cpu_per_turn: float
    """The processes' CPU per timed turn (the server's not counted)."""
    turn_p50: float
    turn_p99: float
    store_p50: float
    store_p99: float
    read_p50: float
    write_p50: float
    lag_p99: float
    """The event loops' lateness waking a task, p99: the queueing inside every await of a turn."""
    peak_connections: int
    timed_connections: float

    @classmethod
    def of(cls, outcomes: Sequence[Outcome]) -> Figures:
        """Turns/s and CPU the median of the runs; percentiles over all their turns; the highest peak."""
        timings = [timing for outcome in outcomes for timing in outcome.timings]
        stores = [(read + write) * 1000 for _, read, write in timings]
        return cls(
            turns_per_second=statistics.median(outcome.turns_per_second for outcome in outcomes),
            cpu_per_turn=statistics.median(outcome.cpu_per_turn for outcome in outcomes) * 1000,
            turn_p50=percentile([wall * 1000 for wall, _, _ in timings], 0.5),
            turn_p99=percentile([wall * 1000 for wall, _, _ in timings], 0.99),
            store_p50=percentile(stores, 0.5),
            store_p99=percentile(stores, 0.99),
            read_p50=percentile([read * 1000 for _, read, _ in timings], 0.5),
            write_p50=percentile([write * 1000 for _, _, write in timings], 0.5),
            lag_p99=percentile([lag * 1000 for outcome in outcomes for lag in outcome.lags] or [0.0], 0.99),
            peak_connections=max(outcome.peak_connections for outcome in outcomes),
            timed_connections=statistics.median(outcome.timed_connections for outcome in outcomes),
        )


def print_table(figures: dict[str, Figures], route: Route, load: Load) -> None:
    print(
        f'   {"":<32} {"turns/s":>8} {"CPU/turn":>8} {"turn p50":>8} {"turn p99":>8} {"lag p99":>8} | '
        f'{"store p50":>9} {"store p99":>9} {"read p50":>8} {"write p50":>9} | server connections'
    )
    for contender, f in figures.items():
        stored = contender != 'alone'
        store = (
            f'{f.store_p50:>9.2f} {f.store_p99:>9.2f} {f.read_p50:>8.2f} {f.write_p50:>9.2f}'
            if stored
            else f'{"-":>9} {"-":>9} {"-":>8} {"-":>9}'
        )
        connections = (
            f'peak {f.peak_connections} of {route.bound(load)}, median {f.timed_connections:g} timed' if stored else '-'
        )
        print(
            f'   {NAMES[contender]:<32} {f.turns_per_second:>8.1f} {f.cpu_per_turn:>8.2f} {f.turn_p50:>8.1f} '
            f'{f.turn_p99:>8.1f} {f.lag_p99:>8.1f} | {store} | {connections}'
        )
    print("   (ms. CPU/turn: the processes' CPU over their timed turns, the server's not counted. lag: how late the")
    print("   event loop woke a task sleeping 10 ms, the queueing inside each await. store: the time in the store's")
    print('   calls, ours its load_window + store_run spans, the peer its get_items + add_items; read: load_window or')
    print('   get_items; write: store_run or add_items)')
    print()


def print_results(figures: dict[str, Figures], failures: dict[str, str], route: Route, load: Load, where: str) -> None:
    """The lines comparing ours with the peer, then the targets; a contender that failed is said to have."""
    ours, peer, alone = figures.get('ours'), figures.get('peer'), figures.get('alone')
    missing = {name: f'FAILED ({why})' for name, why in failures.items()} | {'peer': PEER_MISSING}
    if ours is None:
        print(f'scale on {where}: ours {missing["ours"]}')
        for subject in ('turns/s', 'p99 store overhead', "ours' peak server connections", 'store CPU per turn'):
            print(f'target on {where}: {subject}: MISSED, ours failed')
        print()
        return
    ours_rate = f'ours {ours.turns_per_second:,.1f} turns/s at peak {ours.peak_connections} server connections'
    if peer is None:
        print(f'scale on {where}: {ours_rate}, peer {missing["peer"]}')
    else:
        print(
            f'scale on {where}: {ours_rate}, peer {peer.turns_per_second:,.1f} turns/s at peak '
            f'{peer.peak_connections} -> ours/peer {ours.turns_per_second / peer.turns_per_second:.2f} x'
            + (
                ''
                if alone is None
                else f'; agent alone {alone.turns_per_second:,.1f} turns/s (alone/peer '
                f'{alone.turns_per_second / peer.turns_per_second:.2f} x: what a store costing nothing would reach)'
            )
        )
    store_cpu = None  # ours / the peer's
    if alone is not None:
        ours_cpu = ours.cpu_per_turn - alone.cpu_per_turn
        added = f'ours {ours_cpu:.2f} ms, peer ' + (missing['peer'] if peer is None else '')
        if peer is not None:
            peer_cpu = peer.cpu_per_turn - alone.cpu_per_turn
            store_cpu = ours_cpu / peer_cpu if peer_cpu > 0 else None
            added += f'{peer_cpu:.2f} ms -> ours/peer ' + ('n/a' if store_cpu is None else f'{store_cpu:.2f} x')
        print(f"store CPU per turn on {where}: {added} (the processes' CPU per turn less the agent alone's)")
    peers = missing['peer'] if peer is None else f'p50 {peer.store_p50:.2f} ms p99 {peer.store_p99:.2f} ms'
    print(
        f'store overhead on {where}: ours p50 {ours.store_p50:.2f} ms p99 {ours.store_p99:.2f} ms, peer {peers}; '
        f'loop lag p99 ours {ours.lag_p99:.1f} ms' + ('' if alone is None else f', agent alone {alone.lag_p99:.1f} ms')
    )
    bound = route.bound(load)
    peers = missing['peer'] if peer is None else f'peak {peer.peak_connections} (bound {bound})'
    print(f'server connections on {where}: ours peak {ours.peak_connections} (bound {bound}), peer {peers}')
    print()
    if peer is None and 'peer' in failures:
        print(f"target on {where}: turns/s >= {TARGET_THROUGHPUT:g} x the peer's: not measured, the peer failed")
    else:
        print_target(
            where,
            'turns/s',
            TARGET_THROUGHPUT,
            "the peer's at equal durability",
            None if peer is None else ours.turns_per_second / peer.turns_per_second,
            at_least=True,
        )
    sessions = f'{load.concurrent} concurrent sessions' + (
        '' if load.concurrent == TARGET_SESSIONS else f'; the target is stated for {TARGET_SESSIONS}'
    )
    print_limit(where, f'p99 store overhead ({sessions})', ours.store_p99, TARGET_P99_MS, 'ms')
    print_limit(where, "ours' peak server connections (its pools' bound)", ours.peak_connections, bound, digits=0)
    if peer is not None:
        # The connection budget: one store opens at most one connection more than a plain SQLAlchemy app's engine.
        budget = peer.peak_connections + load.processes
        print_limit(
            where, "ours' peak server connections (the peer's + 1 a process)", ours.peak_connections, budget, digits=0
        )
        if store_cpu is None:
            print(f"target on {where}: store CPU per turn <= {TARGET_STORE_CPU:g} x the peer's: not measured")
        else:
            print_target(where, 'store CPU per turn', TARGET_STORE_CPU, "the peer's", store_cpu, at_least=False)
    print()
