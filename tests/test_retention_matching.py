"""The retention eval's reading rules, one by one: each normalized form of a value counts, a value counts only bound
to its item, and each question kind asks of a window what its docstring says (`_eval_match`, `_eval_checks`)."""

from __future__ import annotations

import pytest

from session_store._eval_checks import answer_right, question_held
from session_store._eval_match import Reading, holds
from session_store.evaluation import PlantedFact, fact_status, make_conversation

ITEMS = ('kettle', 'desk lamp', 'standing desk', 'export job')


def _fact(value: str, item: str = 'kettle', corrected: str | None = None) -> PlantedFact:
    return PlantedFact('x-1', 'x', item, value, 0, 'What?', 'topic', corrected, None if corrected is None else 5)


@pytest.mark.parametrize(
    ('value', 'written'),
    [
        ('ORD-83564', 'ord-83564'),  # case
        ('ORD-83564', 'ORD 83564'),  # punctuation
        ('ORD-83564', 'ORD83564'),
        ('ORD-83564', '(ORD\u201383564)'),  # an en dash
        ('TRK7782828', 'TRK-7782828'),
        ('api/service_12.py', 'API/service-12.py'),
        ('test_empty_input_54', 'test-empty-input-54'),
        ('46 Harbour Street', '46 Harbour St.'),  # abbreviations
        ('46 Harbour Street', '46 harbour st'),
        ('9 Elm Road', '9 Elm Rd'),
        ('12 Kings Avenue', '12 Kings Ave.'),
        ('3 Willow Court', '3 Willow Ct.'),
        ('7 Mill Lane', '7 Mill Ln'),
        ('1200 requests', '1,200 requests'),  # number formats
        ('4,200 requests', '4200 requests'),
        ('4200 requests', '4 200 requests'.replace(' ', '\u202f', 1)),
        ('4200 requests', '4200 req'),
    ],
)
def test_each_normalized_form_of_a_value_counts(value: str, written: str) -> None:
    assert holds(f'We said {written}, then more.', value)
    assert fact_status(_fact(value), f'The kettle: {written}. Something else.', 1, ITEMS) == 'kept'


@pytest.mark.parametrize(
    ('value', 'text'),
    [
        ('46 Mill Lane', '146 Mill Lane'),  # whole, never inside another
        ('ORD-8356', 'ORD-83564'),
        ('KX-89', 'KX-897'),
        ('1200 requests', '12,000 requests'),
    ],
)
def test_a_value_is_matched_whole(value: str, text: str) -> None:
    assert not holds(text, value)


def test_a_value_counts_only_in_a_sentence_that_names_its_item() -> None:
    def status(text: str) -> str:
        return fact_status(_fact('ORD-83564'), text, 1, ITEMS)

    assert status('ORD-83564.') == 'lost'  # a number alone
    assert status('The kettle is on file. Its order number is ORD-83564.') == 'lost'  # another sentence
    assert status('The kettle is on file\nORD-83564') == 'lost'  # another line
    assert status('ORD-83564 is the order number of the kettle.') == 'kept'  # the item after it
    assert status('Ship the KETTLE to 46 Harbour St. with order ORD-83564.') == 'kept'  # `St.` ends no sentence
    # No other item between: a list of items and then a list of values binds a value only to its neighbour.
    assert status('Orders: kettle, desk lamp: ORD-83564, ORD-11111.') == 'lost'
    assert status('Orders: desk lamp, kettle: ORD-83564, ORD-11111.') == 'kept'
    assert status('A kettle (ORD-83564) and a desk lamp (ORD-11111).') == 'kept'
    assert status('The desk lamp is ORD-11111 and the kettle is ORD-83564.') == 'kept'
    # An item's name is matched whole too: `desk` alone names no item, `standing desk` another one.
    lamp = _fact('ORD-83564', 'desk lamp')
    assert fact_status(lamp, 'The standing desk: ORD-83564.', 1, ITEMS) == 'lost'
    assert fact_status(lamp, 'The desk lamp: ORD-83564.', 1, ITEMS) == 'kept'


def test_the_current_value_reads_as_current_when_it_comes_last_or_the_old_one_is_marked() -> None:
    reading = Reading
    new, old = '9 Elm Road', '46 Mill Lane'
    assert reading(f'Kettle to {old}.\nKettle: moved, now {new}.', ITEMS).current_last('kettle', new, old)
    assert not reading(f'Kettle to {new}.\nKettle to {old}.', ITEMS).current_last('kettle', new, old)
    assert reading(f'Kettle to {new}.\nThe kettle was going to {old}.', ITEMS).current_last('kettle', new, old)
    assert reading(f'Kettle: {new} (previously {old}).', ITEMS).current_last('kettle', new, old)
    assert not reading(f'Kettle to {old}.', ITEMS).current_last('kettle', new, old)
    # A correction counts as stale, never kept, in a lookup.
    fact = _fact(old, corrected=new)
    assert fact_status(fact, f'Kettle to {old}.', 6, ITEMS) == 'stale'
    assert fact_status(fact, f'Kettle to {old}.', 4, ITEMS) == 'kept'
    assert fact_status(fact, f'Kettle to {old}. Kettle: {new} instead.', 6, ITEMS) == 'corrected'


@pytest.mark.parametrize('domain', ['support', 'coding'])
def test_each_question_kind_asks_what_it_says(domain: str) -> None:
    conversation = make_conversation(200, 1, domain)
    by_kind = {question.kind: question for question in reversed(conversation.questions)}
    turn = 199
    join, order, unanswerable = by_kind['join'], by_kind['order'], by_kind['unanswerable']

    def said(*facts: PlantedFact, at: int = turn) -> str:
        return '\n'.join(f'The {fact.item}: {fact.values_at(at)[0]}.' for fact in facts)

    first, second = (conversation.fact(fact_id) for fact_id in join.facts)
    assert question_held(conversation, join, Reading(said(first, second), conversation.items), turn)
    assert not question_held(conversation, join, Reading(said(second), conversation.items), turn)
    assert answer_right(conversation, join, second.values_at(turn)[0], turn)
    assert not answer_right(conversation, join, first.value, turn)

    (fact,) = (conversation.fact(fact_id) for fact_id in order.facts)
    assert fact.corrected_value is not None
    now = said(fact)
    before = f'The {fact.item}: {fact.value}.'
    assert question_held(conversation, order, Reading(f'{before}\n{now}', conversation.items), turn)
    assert not question_held(conversation, order, Reading(f'{now}\n{before}', conversation.items), turn)
    assert answer_right(conversation, order, fact.corrected_value, turn)
    assert not answer_right(conversation, order, f'{fact.corrected_value} or {fact.value}', turn)

    # Unanswerable: the window must not bind any value of the kind asked for to the item; an answer must name none.
    other = next(fact for fact in conversation.facts if fact.kind == unanswerable.topic)
    guess = f'The {unanswerable.item}: {other.value}.'
    assert question_held(conversation, unanswerable, Reading(said(other), conversation.items), turn)
    assert not question_held(conversation, unanswerable, Reading(guess, conversation.items), turn)
    assert answer_right(conversation, unanswerable, 'I do not know.', turn)
    assert not answer_right(conversation, unanswerable, other.value, turn)
