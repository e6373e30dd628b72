"""What each question of the retention eval needs of a window, and of an answer model's answer.

A window is read with `_eval_match.Reading`: a value counts only bound to its item, normalized.

- **lookup** (one per planted fact): `kept` when its value is bound in the window, `corrected` when its corrected
  value is, `stale` when only the value a correction replaced is, `lost` otherwise. Only the first two are in
  context. An answer must hold the current value.
- **join**: both facts' current values bound to their one item. An answer must hold the value asked for.
- **order**: the corrected value bound, and read as the current one (`Reading.current_last`). An answer must
  hold it, and not the replaced one.
- **unanswerable**: no value of the kind asked for (any fact's, of the whole conversation) is bound to the item,
  so the window gives no answer to make up. An answer must hold none of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from ._eval_match import Reading, holds
from ._eval_script import Conversation, PlantedFact, Question

__all__ = ('IN_CONTEXT', 'FactStatus', 'answer_right', 'fact_status', 'question_held')

FactStatus = Literal['kept', 'corrected', 'stale', 'lost']
"""Where a fact stands in a window: `kept` (its value is there, bound to its item), `corrected` (its corrected
value is), `stale` (only the value a correction replaced is), `lost` (neither). Only kept and corrected are in
context."""

IN_CONTEXT: tuple[FactStatus, ...] = ('kept', 'corrected')


def fact_status(fact: PlantedFact, window: str | Reading, turn: int, items: Iterable[str] = ()) -> FactStatus:
    """Where `fact` stands in a window (its text, or a `Reading` of it), sent on `turn`: a correction counts only
    once made, and only when its new value is there; the old value alone is `stale`. A value counts only bound to
    the fact's item, with none of `items` (the conversation's other items) named between them."""
    reading = window if isinstance(window, Reading) else Reading(window, {fact.item, *items})
    current, stale = fact.values_at(turn)
    if reading.bound(fact.item, current):
        return 'kept' if stale is None else 'corrected'
    return 'stale' if stale is not None and reading.bound(fact.item, stale) else 'lost'


def _values(conversation: Conversation, kind: str) -> list[str]:
    """Every value the conversation gives a fact of `kind`, corrected ones too."""
    return [
        value
        for fact in conversation.facts
        if fact.kind == kind
        for value in (fact.value, fact.corrected_value)
        if value is not None
    ]


def question_held(conversation: Conversation, question: Question, reading: Reading, turn: int) -> bool:
    """Whether the window `reading` reads holds what `question` needs, asked after `turn`."""
    facts = [conversation.fact(fact_id) for fact_id in question.facts]
    if question.kind == 'unanswerable':
        assert question.topic is not None
        return not any(reading.bound(question.item, value) for value in _values(conversation, question.topic))
    if question.kind == 'order':
        (fact,) = facts
        current, stale = fact.values_at(turn)
        assert stale is not None, 'an order question is asked once its fact is corrected'
        return reading.current_last(fact.item, current, stale)
    return all(reading.bound(fact.item, fact.values_at(turn)[0]) for fact in facts)


def answer_right(conversation: Conversation, question: Question | PlantedFact, answer: str, turn: int) -> bool:
    """Whether `answer`, an answer model's, answers `question` (a fact for its lookup) rightly after `turn`."""
    if isinstance(question, PlantedFact):
        return holds(answer, question.values_at(turn)[0])
    if question.kind == 'unanswerable':
        assert question.topic is not None
        return not any(holds(answer, value) for value in _values(conversation, question.topic))
    current, stale = conversation.fact(question.facts[-1]).values_at(turn)
    return holds(answer, current) and (question.kind != 'order' or stale is None or not holds(answer, stale))
