"""The store's own OpenTelemetry spans, timed: how a benchmark reads the time a run spends in the store's steps.

`session.run` wraps its read in a `session_store.load_window` span and its write in a `session_store.store_run`
span (`session_store/_telemetry.py`). `time_spans()` installs, once a process, a tracer provider that records
nothing but the seconds spent in those two spans, and starts counting them for the calling task (each task
counts in a context of its own, so sessions run at once are timed apart). With it installed, no other
OpenTelemetry SDK sees the process's spans: a benchmark's process only.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from opentelemetry import trace

__all__ = ('LOAD_WINDOW', 'STORE_RUN', 'time_spans')

LOAD_WINDOW, STORE_RUN = 'session_store.load_window', 'session_store.store_run'
"""The store's spans of a run: its read, and its write."""

_SPENT: ContextVar[dict[str, float] | None] = ContextVar('spent', default=None)
"""Seconds in each of the store's spans since the current task's `time_spans()`, by span name."""


class _SpanTimer(trace.Tracer):
    """Times the spans it is asked for into the current task's `_SPENT`, and records nothing else."""

    def start_span(self, name: str, *args: Any, **kwargs: Any) -> trace.Span:
        return trace.INVALID_SPAN

    @contextmanager
    def start_as_current_span(self, name: str, *args: Any, **kwargs: Any) -> Iterator[trace.Span]:
        spent = _SPENT.get()
        start = time.perf_counter()
        try:
            yield trace.INVALID_SPAN
        finally:
            if spent is not None and name in spent:
                spent[name] += time.perf_counter() - start


class _SpanTimers(trace.TracerProvider):
    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return _SpanTimer()


def time_spans() -> dict[str, float]:
    """Count the seconds the current task spends in `LOAD_WINDOW` and `STORE_RUN` from now on, into the dict
    returned (which fills in as the spans end)."""
    if not isinstance(trace.get_tracer_provider(), _SpanTimers):
        trace.set_tracer_provider(_SpanTimers())  # OpenTelemetry takes one provider a process: the first call's
    spent = {LOAD_WINDOW: 0.0, STORE_RUN: 0.0}
    _SPENT.set(spent)
    return spent
