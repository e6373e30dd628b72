"""The conformance suite bites: each backend broken on purpose (`tests/_broken_stores.py`) fails the check named
for its defect and only that one, with a failure of a bounded size, while the docs page's `DictConversationStore`
they are made from passes. The issue's four (revisions, concurrency, scopes, atomicity), one each for the
semantics and bad-input checks, and those of issue 51: a store that ignores revisions declared without `fork`, a
conflicting write's entries left stored, objects shared with the caller, a delete declared erasing that does not
erase (or erases the active path only), and a cancelled save that leaves a record no entry answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from docs.examples.dict_store import DictConversationStore
from session_store.conformance import conformance_backend, validate

from ._broken_stores import (
    DropsEntries,
    DropsNul,
    ForgetsBranches,
    HalfWrites,
    IgnoresRevisions,
    IgnoresRevisionsWithoutFork,
    KeepsBranches,
    KeepsEntries,
    KeepsLosersEntries,
    LeaksScopes,
    RecordFirst,
    SharesMessages,
)

CHECKS = (
    'semantics',
    'revisions',
    'orphans',
    'isolation',
    'erasure',
    'concurrency',
    'atomicity',
    'scopes',
    'bad_input',
)
"""The checks a store that is not persistent runs (durability and the process-level checks skip)."""

FAILURE = 6000
"""The most characters a failure's detail may hold: where it differs and a short diff, not whole histories."""


@pytest.mark.slow  # the whole suite once per store: 5 to 35 s each here
@pytest.mark.parametrize(
    ('store', 'defect'),
    [
        (DictConversationStore, None),
        (IgnoresRevisions, 'revisions'),
        (IgnoresRevisionsWithoutFork, 'revisions'),
        (KeepsLosersEntries, 'orphans'),
        (SharesMessages, 'isolation'),
        (KeepsEntries, 'erasure'),
        (KeepsBranches, 'erasure'),
        (DropsEntries, 'concurrency'),
        (LeaksScopes, 'scopes'),
        (HalfWrites, 'atomicity'),
        (RecordFirst, 'atomicity'),
        (ForgetsBranches, 'semantics'),
        (DropsNul, 'bad_input'),
    ],
)
def test_a_broken_backend_fails_exactly_its_check(
    store: type[DictConversationStore], defect: str | None, tmp_path: Path
) -> None:
    erases: bool = getattr(store, 'erases', False)
    # Enough examples that the state machine reaches a branch, a fork and a delete in every run, not most.
    declare = conformance_backend(examples=30, without=getattr(store, 'without', ()), erases=erases)
    outcomes = validate(declare(lambda folder: store()), tmp_path, checks=CHECKS, report=lambda line: None)
    failed = {outcome.check: outcome.detail for outcome in outcomes if outcome.status == 'failed'}
    assert set(failed) == ({defect} if defect else set()), failed
    # The erasure check runs only on a store declared as erasing; every other check runs on each.
    ran = {outcome.check for outcome in outcomes if outcome.status != 'skipped'}
    assert ran == set(CHECKS) - (set() if erases else {'erasure'}), outcomes
    for detail in failed.values():
        assert len(detail) <= FAILURE, detail[:FAILURE]
        # A check names what the backend did wrong: never a bare error from reading what it left.
        assert detail.startswith('AssertionError'), detail
