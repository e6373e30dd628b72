"""The quick tier's hypothesis budget: the `quick` profile, which `tests/conftest.py` loads when a run leaves the slow
tier out, and `examples`, the share of a property test's budget a run gives it.

The property tests and state machines of the quick tier took a tenth of its time. In the quick tier each runs a
third of the examples it runs in the whole suite, so every module's properties still run on every quick run while
the whole suite (`pytest -q`, what CI runs) keeps each test's full budget, and the slow tier's longer runs besides.
"""

from __future__ import annotations

import re

from hypothesis import settings

__all__ = ['QUICK', 'examples', 'leaves_out_the_slow_tier']

QUICK = 'quick'
"""The profile of a quick-tier run: a third of hypothesis' own default budget (100 examples)."""

settings.register_profile(QUICK, max_examples=settings.get_profile('default').max_examples // 3)


def leaves_out_the_slow_tier(markexpr: str) -> bool:
    """Whether a run's `-m` expression leaves the `slow` marker's tests out (`not slow`, `not slow and ...`)."""
    return re.search(r'\bnot\s+slow\b', markexpr) is not None


def examples(whole: int) -> int:
    """A property test's hypothesis examples in this run: `whole` in the whole suite, scaled as the loaded profile
    scales hypothesis' default budget (a third in the quick tier), at least one."""
    loaded, default = settings().max_examples, settings.get_profile('default').max_examples
    return max(1, whole * loaded // default)
