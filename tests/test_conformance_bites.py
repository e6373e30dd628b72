"""The conformance suite bites: each backend broken on purpose (`tests/_broken_stores.py`) fails the check named
for its defect and only that one, while the docs page's `DictConversationStore` they are made from passes. The
issue's four (revisions, concurrency, scopes, atomicity), and one each for the semantics and bad-input checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from docs.examples.dict_store import DictConversationStore
from session_store.conformance import conformance_backend, validate

from ._broken_stores import DropsEntries, DropsNul, ForgetsBranches, HalfWrites, IgnoresRevisions, LeaksScopes

CHECKS = ('semantics', 'revisions', 'concurrency', 'atomicity', 'scopes', 'bad_input')
"""The checks a store that is not persistent runs (durability and the process-level checks skip)."""


@pytest.mark.slow  # the whole suite once per store: 5 to 35 s each here
@pytest.mark.parametrize(
    ('store', 'defect'),
    [
        (DictConversationStore, None),
        (IgnoresRevisions, 'revisions'),
        (DropsEntries, 'concurrency'),
        (LeaksScopes, 'scopes'),
        (HalfWrites, 'atomicity'),
        (ForgetsBranches, 'semantics'),
        (DropsNul, 'bad_input'),
    ],
)
def test_a_broken_backend_fails_exactly_its_check(
    store: type[DictConversationStore], defect: str | None, tmp_path: Path
) -> None:
    # Enough examples that the state machine reaches a branch, a fork and a delete in every run, not most.
    backend = conformance_backend(examples=30)(lambda folder: store())
    outcomes = validate(backend, tmp_path, checks=CHECKS, report=lambda line: None)
    failed = {outcome.check: outcome.detail for outcome in outcomes if outcome.status == 'failed'}
    assert set(failed) == ({defect} if defect else set()), failed
    assert all(outcome.status == 'passed' for outcome in outcomes if outcome.check != defect)
