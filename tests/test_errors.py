"""One error hierarchy: everything the store raises for a reason of its own is a `StoreError`, exported by name."""

from __future__ import annotations

import inspect

from pydantic_ai.conversation_store import ConversationConflict

import session_store
from session_store import errors


def test_every_store_error_is_a_store_error_and_exported() -> None:
    classes = [value for _, value in inspect.getmembers(errors, inspect.isclass) if value.__module__ == errors.__name__]
    assert {c.__name__ for c in classes} == set(errors.__all__)
    for error in classes:
        assert issubclass(error, errors.StoreError), error
        assert getattr(session_store, error.__name__) is error
    # Code written against pydantic-ai's store, or treating a bad file as a bad value, catches them as before.
    assert issubclass(errors.SessionConflict, ConversationConflict)
    assert issubclass(errors.ExportError, ValueError)
    assert issubclass(errors.SessionNotFound, LookupError)


def test_errors_name_the_session_and_what_to_do() -> None:
    locked = errors.DatabaseLocked('s1', 8)
    assert "Session 's1'" in str(locked) and '8 tries' in str(locked) and 'nothing was written' in str(locked)
    failed = errors.SummarizerFailed('s1')
    assert "Session 's1'" in str(failed) and 'nothing was compacted or stored' in str(failed)
    conflict = errors.SessionConflict('s1')
    assert conflict.session_id == 's1' and 'nothing was stored' in str(conflict)
