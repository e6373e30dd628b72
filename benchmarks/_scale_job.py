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
class Load:
    """The load every contender is put under."""

    processes: int
    sessions: int
    """Sessions per process, all running at once."""
    warmup: int
    """Untimed turns per session first."""
    turns: int
    """Timed turns per session."""
    delay: float
    """Seconds each model request waits."""
    pool_size: int
    max_overflow: int

    @property
    def concurrent(self) -> int:
        return self.processes * self.sessions

    def jobs(self, contender: str, url: str, pooler: bool) -> list[Job]:
        return [Job(contender, url, pooler, process, self) for process in range(self.processes)]


@dataclass(frozen=True)
class Job:
    """What one process runs: its share of the load."""

    contender: str
    url: str
    pooler: bool
    """The URL is a transaction pooler's (PgBouncer's)."""
    process: int
    load: Load

    def session_ids(self) -> list[str]:
        return [f'p{self.process:02d}-s{index:03d}' for index in range(self.load.sessions)]


def job_argument(job: Job) -> str:
    """The job as the process's one argument."""
    return json.dumps(asdict(job))


def job_of(argument: str) -> Job:
    """The job `job_argument` wrote."""
    fields = json.loads(argument)
    return Job(**{**fields, 'load': Load(**fields['load'])})
