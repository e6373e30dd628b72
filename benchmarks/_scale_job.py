"""What benchmarks/scale.py tells each of its processes (`_scale_worker.py`), and what they say back: the standard
library alone, so both sides import it before anything else."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

READY = 'ready'
"""A process's line once it is warm: it then waits for a line on its standard input to start its timed turns."""

Timing = tuple[float, float, float]
"""One turn's seconds: the whole turn, the store's read, the store's write."""


@dataclass(frozen=True)
class Job:
    """What one process runs."""

    contender: str
    url: str
    pooler: bool
    """The URL is a transaction pooler's (PgBouncer's)."""
    process: int
    sessions: int
    warmup: int
    """Untimed turns per session first."""
    turns: int
    """Timed turns per session."""
    delay: float
    """Seconds each model request waits."""
    pool_size: int
    max_overflow: int

    def session_ids(self) -> list[str]:
        return [f'p{self.process:02d}-s{index:03d}' for index in range(self.sessions)]


def job_argument(job: Job) -> str:
    """The job as the process's one argument."""
    return json.dumps(asdict(job))
