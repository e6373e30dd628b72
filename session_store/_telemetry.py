"""OpenTelemetry spans that show where a turn's time goes: opening a session, loading its window, storing a run, search.

Through the OpenTelemetry API pydantic-ai already depends on: with no SDK configured the spans are
no-ops. Each carries the session id as `gen_ai.conversation.id` (the attribute pydantic-ai's own
`invoke_agent` span uses, since a session's runs pass it as their `conversation_id`) and the backend.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace

__all__ = ('span',)

_tracer = trace.get_tracer('session_store')


@contextmanager
def span(name: str, backend: str, session_id: str | None = None, **attributes: Any) -> Iterator[trace.Span]:
    """A span `session_store.<name>`; `attributes` go in as `session_store.<key>`, and more can be set on it."""
    given: dict[str, Any] = {'db.system.name': backend}
    if session_id is not None:
        given['gen_ai.conversation.id'] = session_id
    given.update({f'session_store.{key}': value for key, value in attributes.items()})
    with _tracer.start_as_current_span(f'session_store.{name}', attributes=given) as current:
        yield current
