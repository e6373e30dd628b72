"""benchmarks/store.py part 3, branched against linear, ours alone (the peer has no branches): opening a
session whose active path crosses branch points in a large tree, against a linear session whose path has
the same length, in the same database. See store.py's docstring for the protocol."""

from __future__ import annotations

import time
from dataclasses import dataclass

from _bench_db import analyze
from _seeding import Archive
from _store_contenders import Databases, grow, ours_first_open, ours_warm_open, summarized
from _store_conversation import TAIL, our_archive, token_counts
from _store_measuring import cell, print_target, round_robin

from session_store import SessionStore

TREE = 100_000
"""Messages in the branched session's tree, its active path and the branches off it."""
TREE_PATH = 10_000
"""Messages on the active path, of the branched session and of the linear one alike."""
BRANCH_POINTS = 10
"""Branch points the branched session's active path crosses."""
QUICK_TREE, QUICK_TREE_PATH, QUICK_BRANCH_POINTS = 1_000, 400, 3
TARGET_BRANCHED = 2.0
"""The target, reported against, never asserted: opening a session whose active path crosses the branch points
costs at most this much more than opening a linear one of the same length."""


@dataclass(frozen=True)
class Tree:
    """The branched session: a tree of `size` messages whose active path of `path` messages crosses
    `branch_points` branch points."""

    size: int
    path: int
    branch_points: int

    @property
    def forks(self) -> list[int]:
        """Where each segment after the first leaves its parent: the path cut evenly, at turn boundaries."""
        return [self.path * i // (self.branch_points + 1) // 4 * 4 for i in range(1, self.branch_points + 1)]

    @property
    def beyond(self) -> int:
        """Messages each of the path's first segments holds past the next one's fork point: a branch off the path."""
        return (self.size - self.path) // self.branch_points // 4 * 4

    @property
    def stored(self) -> int:
        """Messages the tree holds: `size`, less what `beyond`'s rounding leaves out."""
        return self.path + self.branch_points * self.beyond

    def problem(self) -> str | None:
        """Why the tree can't be built as asked, if it can't."""
        if self.path % 4 or self.path < TAIL + 4:
            return f'the path must be a multiple of 4, at least {TAIL + 4}'
        if self.branch_points < 1 or self.path // (self.branch_points + 1) < 4:
            return 'there must be 1 to path / 4 - 1 branch points'
        if self.beyond < TAIL + 4:
            return f'the tree must hold at least {TAIL + 4} messages per branch point beyond the path'
        return None


async def build_tree(url: str, tree: Tree) -> float:
    """Session 'branched', the tree, as `tree.branch_points` rewinds leave one, and session 'linear', one
    segment as long as the tree's active path, each built in memory (`_seeding.Archive`, its `rewind` doing
    what `Session.rewind` does) and imported; the seconds the tree took to store."""
    longest = tree.forks[-1] + tree.beyond
    messages = our_archive(max(longest, tree.path))
    tokens = token_counts(messages)
    branched, linear = Archive('branched'), Archive('linear')
    for fork in tree.forks:
        grow(branched, messages, tokens, fork + tree.beyond)
        branched.rewind(fork)
    grow(branched, messages, tokens, tree.path)
    grow(linear, messages, tokens, tree.path)
    async with SessionStore(url) as store:
        started = time.perf_counter()
        await branched.store_in(store)
        built = time.perf_counter() - started
        await linear.store_in(store)
        branches = await (await store.session('branched')).branches()
        counts = {info.session_id: info.message_count for info in await store.sessions()}
    assert counts == {'branched': tree.path, 'linear': tree.path}, counts
    assert [branch.forked_at for branch in branches] == [None, *tree.forks], branches
    assert [branch.active for branch in branches] == [False] * tree.branch_points + [True], branches
    held = sum(branch.message_count - (branch.forked_at or 0) for branch in branches)
    assert held == tree.stored, f'the tree holds {held} messages, not {tree.stored}'
    return built


@dataclass(frozen=True)
class BranchedOpening:
    """Median ms to open a session and build its window, branched and linear, and the seconds the tree took."""

    branched_first: float
    branched_warm: float
    linear_first: float
    linear_warm: float
    built: float

    def branched(self, first: bool) -> float:
        return self.branched_first if first else self.branched_warm

    def linear(self, first: bool) -> float:
        return self.linear_first if first else self.linear_warm


async def branched_benchmark(databases: Databases, tree: Tree, repeats: int) -> BranchedOpening:
    """Both sessions built in one database, then both opened, first and warm, in turns."""
    url = databases.url('tree')
    built = await build_tree(url, tree)
    check = summarized(tree.path)
    async with SessionStore(url) as store:
        await analyze(store.engine)
        measures = {
            'branched_first': ours_first_open(url, check, 'branched'),
            'branched_warm': ours_warm_open(store, check, 'branched'),
            'linear_first': ours_first_open(url, check, 'linear'),
            'linear_warm': ours_warm_open(store, check, 'linear'),
        }
        medians = await round_robin(measures, repeats)
    return BranchedOpening(**medians, built=built)


def print_branched(opening: BranchedOpening, tree: Tree, backend: str) -> None:
    points = f'{tree.branch_points} branch points'
    print(
        f'3. Open a session + build its window on {backend}, ours alone, median ms: an active path of '
        f'{tree.path:,} messages'
    )
    print(
        f'   branched: crossing {points} in a tree of {tree.stored:,} archived messages (built in '
        f'{opening.built:.1f} s); linear: one segment, in the same database'
    )
    print(f'   {"":<9} {"first":>10} {"warm":>10}')
    print(f'   {"branched":<9} {cell(opening.branched_first)} {cell(opening.branched_warm)}')
    print(f'   {"linear":<9} {cell(opening.linear_first)} {cell(opening.linear_warm)}')
    print()
    for mode in ('first open', 'warm'):
        branched, linear = opening.branched(mode == 'first open'), opening.linear(mode == 'first open')
        print(
            f'open+window with {points} vs linear on {backend}: branched {branched:.2f} ms, linear {linear:.2f} ms '
            f'({mode}) -> {branched / linear:.2f} x'
        )
    for mode in ('first open', 'warm'):
        first = mode == 'first open'
        print_target(
            f'{backend} ({mode})',
            f'branched, {points}',
            TARGET_BRANCHED,
            'linear',
            opening.branched(first) / opening.linear(first),
            at_least=False,
        )
    print()
