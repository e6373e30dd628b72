"""A processor's window state, for code that keeps it between runs (a store).

`WindowedProcessor.compaction_state()` gives a `CompactionState`, and `indexed()` gives the
`Lineage` the engine keeps for a history, which `remember()` takes back: a store hands them from one
run to the next instead of having the engine index the whole history again.
"""

from ._processor_base import CompactionState
from ._window_engine import Lineage

__all__ = ('CompactionState', 'Lineage')
