"""A session's stored prompts found by the id a chat front end knows them by, in one indexed read.

A front end names each message it shows: by the UI message id it gave it (kept in the request's metadata by
pydantic-ai's UI adapters, and in `messages.ui_message_id`, see `Sealer.ui_id_form`), or, for a message it was
handed from the store without one, by its entry id. An edit or a regenerate of an old message, or a save that
resubmits one, names it so; `requests_with_id` finds where it is stored, on any branch, without decoding a path.
"""

from __future__ import annotations

from sqlalchemy import bindparam, desc, not_, null, or_, select, union_all
from sqlalchemy.ext.asyncio import AsyncSession

from processors.cut_points import is_turn_start

from .._db.sealing import Sealer
from ..rows import MessageRow, SessionRow

__all__ = ('requests_with_id',)

_ENTRY_ID_CHARACTERS = 64
"""The longest entry id (the column's width): a longer id is no entry's."""

_session_pk = MessageRow.session_pk == bindparam('session_pk')
_has_ui_id = MessageRow.ui_message_id.in_(bindparam('forms', expanding=True))
_REQUESTS_WITH_ID = union_all(
    # Found by UI id, on the (session_pk, ui_message_id) index: a row holds one only if it holds a user prompt.
    select(MessageRow.pk, MessageRow.segment_pk, MessageRow.position, MessageRow.entry_id, null(), null()).where(
        _session_pk, _has_ui_id
    ),
    # Found by entry id, on its unique index (unless found above): its payload, to check it holds a user prompt.
    select(
        MessageRow.pk,
        MessageRow.segment_pk,
        MessageRow.position,
        MessageRow.entry_id,
        MessageRow.payload,
        select(SessionRow.session_id).where(SessionRow.pk == bindparam('session_pk')).scalar_subquery(),
    ).where(
        MessageRow.entry_id == bindparam('entry_id'),
        _session_pk,
        MessageRow.kind == 'request',
        or_(MessageRow.ui_message_id.is_(None), not_(_has_ui_id)),
    ),
).order_by(desc(MessageRow.pk.key))
"""Two index lookups in one statement. Not one OR of both: SQLite and PostgreSQL both take the `session_pk` the two
sides share for the index condition and filter the session's every row by the rest."""


async def requests_with_id(
    db: AsyncSession, sealer: Sealer, session_pk: int, message_id: str
) -> list[tuple[int, int, str]]:
    """Where the session's requests a front end knows as `message_id` are stored: (segment_pk, position, entry_id)
    of each, on any branch, newest (highest primary key) first; `[]` if none.

    A request is known as `message_id` if it holds a user prompt and either carries `message_id` as its UI message
    id (stored clear or under any of the store's keys) or has it as its entry id. One statement: a lookup on the
    `(session_pk, ui_message_id)` index and one on the unique entry id, so O(log n) however long the session. Only
    a request found by its entry id alone is decoded, to check it holds a user prompt (a row sealed with a key the
    store wasn't given raises `KeyUnavailable`).
    """
    forms = sealer.ui_id_forms(message_id)
    if not forms:  # not valid Unicode: no stored message carries it, and no database can be asked for it
        return []
    entry_id = message_id if len(message_id) <= _ENTRY_ID_CHARACTERS and '\x00' not in message_id else None
    rows = await db.execute(_REQUESTS_WITH_ID, {'session_pk': session_pk, 'forms': forms, 'entry_id': entry_id})
    return [
        (segment_pk, position, entry)
        for _, segment_pk, position, entry, payload, session_id in rows
        if payload is None or is_turn_start(sealer.message(session_id, session_pk, position, payload))
    ]
