"""Each request's UI message id in `messages.ui_message_id`, and `requests_with_id` finding prompts by it in one lookup.

On SQLite and PostgreSQL: prompts a chat front end sends through pydantic-ai's `VercelAIAdapter` (submit, regenerate,
edit) and through `store.conversations` as the adapters hand them over (`with_ui_message_id`), prompts `Session.run`
stores (found by their entry ids), an encrypted store (no clear id in the table, found under every key, after a rekey
and an `encrypt`), forks and export/import, ids no column holds as they are, and the lookup's query plan.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, NamedTuple

import pytest
from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart
from pydantic_ai.ui.vercel_ai import VercelAIAdapter
from sqlalchemy import Connection, event, select, text
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.testclient import TestClient

from processors.cut_points import is_turn_start
from session_store import Encryption, SessionStore
from session_store._db.database import find_session
from session_store._history.prompts import _REQUESTS_WITH_ID, requests_with_id
from session_store._ui_ids import ui_message_id, with_ui_message_id
from session_store.rows import MessageRow
from testkit.scripted import ParallelToolAssistant, scripted_agent
from tests.test_encryption import keys
from tests.test_retention import database_text
from tests.test_ui_adapters import chat_agent, send, ui

StoreFactory = Callable[..., SessionStore]

PRIVATE = 'UIID-OKAPI-7731'
"""In every UI id the encrypted tests give: no byte of the database may hold it."""
FIRST = '(SELECT min(pk) FROM messages)'
BLIND = re.compile(r'[a-z2-7]{16}')
"""A blind hash as the column holds it: 80 bits in lowercase base32."""


class Hit(NamedTuple):
    """A request `requests_with_id` found, read back from the row it names."""

    segment_pk: int
    position: int
    prompt: str
    ui_id: str | None


async def found(store: SessionStore, session_id: str, message_id: str) -> list[Hit]:
    """What `requests_with_id` finds in the session for `message_id`, each hit's row opened and checked."""
    database = store._database
    async with database.read() as db:
        row = await find_session(db, session_id, None)
        hits = await requests_with_id(db, database.sealer, row.pk, message_id)
        vault = database.sealer.vault(session_id, row.pk)
        read: list[Hit] = []
        for segment_pk, position, entry_id in hits:
            stored = (
                await db.execute(
                    select(MessageRow.payload, MessageRow.entry_id, MessageRow.session_pk).where(
                        MessageRow.segment_pk == segment_pk, MessageRow.position == position
                    )
                )
            ).one()
            assert (stored.entry_id, stored.session_pk) == (entry_id, row.pk)
            message = vault.message(position, stored.payload)
            read.append(Hit(segment_pk, position, prompt_of(message), ui_message_id(message)))
    return read


def prompt_of(message: ModelMessage) -> str:
    assert is_turn_start(message), message
    return next(str(p.content) for p in message.parts if isinstance(p, UserPromptPart))


def stored_form(store: SessionStore, ui_id: str) -> str | None:
    """What the column holds for a prompt carrying `ui_id` in this store: the id, or its blind hash."""
    return store._database.sealer.ui_id_form(with_ui_message_id(ModelRequest.user_text_prompt('x'), ui_id))


async def column(store: SessionStore, session_id: str | None = None) -> list[tuple[str, str | None]]:
    """(kind, ui_message_id) of every message row, in primary-key order; of one session's if named."""
    query = 'SELECT kind, ui_message_id FROM messages'
    if session_id is not None:
        query += ' WHERE session_pk = (SELECT pk FROM sessions WHERE session_id = :id)'
    async with AsyncSession(store.engine) as db:
        return [(kind, ui_id) for kind, ui_id in await db.execute(text(f'{query} ORDER BY pk'), {'id': session_id})]


def chat_app(db_url: str, encryption: Encryption | None = None) -> Starlette:
    """`tests/test_ui_adapters.py`'s chat endpoint, on a store opened with `encryption`."""
    agent = chat_agent()
    stores: list[SessionStore] = []

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        stores.append(SessionStore(db_url, encryption=encryption))
        yield
        await stores[0].close()

    async def chat(request: Request) -> Response:
        return await VercelAIAdapter.dispatch_request(
            request, agent=agent, conversation_store=stores[0].conversations, conversation_scope='user-1'
        )

    return Starlette(routes=[Route('/chat', chat, methods=['POST'])], lifespan=lifespan)


def chat(db_url: str, encryption: Encryption | None = None, prefix: str = '') -> None:
    """A front end's conversation `c1`: two prompts, a regenerate of the second answer, an edit of the first prompt."""
    u1, u2 = f'{prefix}u1', f'{prefix}u2'
    with TestClient(chat_app(db_url, encryption)) as client:
        a1 = send(client, {'trigger': 'submit-message', 'id': 'c1', 'messages': [ui(u1, 'user', 'hi')]})
        history = [ui(u1, 'user', 'hi'), ui(f'{prefix}a1', 'assistant', a1), ui(u2, 'user', 'more')]
        send(client, {'trigger': 'submit-message', 'id': 'c1', 'messages': history})
        send(client, {'trigger': 'regenerate-message', 'id': 'c1', 'messageId': f'{prefix}a2', 'messages': history})
        send(client, {'trigger': 'submit-message', 'id': 'c1', 'messages': [ui(u1, 'user', 'hi, edited')]})


CHAT_COLUMN = [
    ('request', 'u1'),
    ('response', None),
    ('request', 'u2'),
    ('response', None),
    ('request', 'u2'),  # the regenerate stores the prompt again on its branch
    ('response', None),
    ('request', 'u1'),  # the edit keeps the id of the message it replaces
    ('response', None),
]
"""What `chat` stores, in order: the UI id of each prompt, none for an answer."""


async def check_chat_found(store: SessionStore, prefix: str = '') -> None:
    """Every prompt of `chat`'s conversation found by its UI id, on its branch, newest first; no answer found."""
    edited, first = await found(store, 'c1', f'{prefix}u1')
    assert (edited.prompt, edited.position, first.prompt, first.position) == ('hi, edited', 0, 'hi', 0)
    assert edited.ui_id == first.ui_id == f'{prefix}u1' and edited.segment_pk != first.segment_pk
    regenerated, second = await found(store, 'c1', f'{prefix}u2')
    assert (regenerated.prompt, regenerated.position, second.prompt, second.position) == ('more', 2, 'more', 2)
    assert regenerated.segment_pk not in (second.segment_pk, edited.segment_pk)
    assert second.segment_pk == first.segment_pk  # the first line holds both prompts
    for unknown in (f'{prefix}a1', f'{prefix}a2', f'{prefix}u3', 'u1' if prefix else 'U1'):
        assert await found(store, 'c1', unknown) == [], unknown


async def test_ui_ids_a_chat_front_end_sends_are_stored_and_found_on_every_branch(
    db_url: str, store_factory: StoreFactory
) -> None:
    chat(db_url)
    store = store_factory()
    assert await column(store) == CHAT_COLUMN
    await check_chat_found(store)
    # The active path is the edited line; the lookup reached the branches the regenerate and the edit left.
    assert [prompt_of(m) for m in await store.history('c1') if is_turn_start(m)] == ['hi, edited']


async def say(store: SessionStore, conversation_id: str, ui_id: str, prompt: str, agent: Agent[None, str]) -> None:
    """One turn through `store.conversations` with a prompt carrying `ui_id`, as a UI adapter hands it over."""
    conversation = await store.conversations.load(conversation_id) or Conversation(conversation_id=conversation_id)
    conversation.messages.append(with_ui_message_id(ModelRequest.user_text_prompt(prompt), ui_id))
    await store.conversations.save(await agent.run(conversation=conversation))


@pytest.mark.slow_on_postgresql  # SQLite stays quick; the front-end test checks the PostgreSQL append quick
async def test_prompts_session_run_stores_are_found_by_their_entry_ids_and_nothing_else_is(
    store_factory: StoreFactory,
) -> None:
    store = store_factory()
    session = await store.session('mixed')
    agent = scripted_agent(ParallelToolAssistant())
    for turn in range(2):
        await session.run(agent, f'Turn M{turn}')
    await session.rewind(4)
    await session.run(agent, 'Turn M2')
    await say(store, 'mixed', 'ui-7', 'Turn M3 from a front end', agent)

    record = await store.conversations.read_record('mixed')
    assert record is not None and record.head_id is not None and len(record.branches) == 1
    lines = [await store.conversations.read_history(tip) for tip in (*record.branches, record.head_id)]
    seen = set()
    for line in lines:
        for position, entry in enumerate(line):
            if entry.id in seen:
                continue
            seen.add(entry.id)
            hits = await found(store, 'mixed', entry.id)
            if not is_turn_start(entry.message):  # answers, and requests holding only tool returns
                assert hits == [], (position, entry.message)
                continue
            assert [(h.position, h.prompt) for h in hits] == [(position, prompt_of(entry.message))]
    # Four messages a turn: the prompts of the first line, the rewound line's, and the front end's.
    prompts = {entry.id: prompt_of(entry.message) for line in lines for entry in line if is_turn_start(entry.message)}
    assert sorted(prompts.values()) == ['Turn M0', 'Turn M1', 'Turn M2', 'Turn M3 from a front end']
    # The front end's prompt is found by its UI id and by its entry id alike, once each.
    by_ui = await found(store, 'mixed', 'ui-7')
    assert [(h.position, h.prompt, h.ui_id) for h in by_ui] == [(8, 'Turn M3 from a front end', 'ui-7')]
    assert await found(store, 'mixed', lines[-1][8].id) == by_ui
    assert [ui_id for kind, ui_id in await column(store) if ui_id is not None] == ['ui-7']
    # Another session's prompts are not this one's.
    await (await store.session('other')).run(agent, 'Turn O0')
    assert await found(store, 'other', lines[0][0].id) == []
    assert await found(store, 'other', 'ui-7') == []


@pytest.mark.slow_on_postgresql  # SQLite stays quick; the front-end test checks the PostgreSQL append quick
async def test_an_encrypted_store_holds_no_clear_ui_id_and_finds_them_under_every_key(
    db_url: str, store_factory: StoreFactory
) -> None:
    chat(db_url, keys('k1'), prefix=PRIVATE)
    store = store_factory(encryption=keys('k1'))
    stored = await column(store)
    assert [kind for kind, _ in stored] == [kind for kind, _ in CHAT_COLUMN]
    hashes = [ui_id for _, ui_id in stored]
    assert all(BLIND.fullmatch(h) for h in hashes if h is not None)
    # One id, one hash (so a lookup needs one form per key); each prompt's row holds one, no answer's.
    assert [h is None for h in hashes] == [ui_id is None for _, ui_id in CHAT_COLUMN]
    assert hashes[0] == hashes[6] != hashes[2] == hashes[4]
    assert PRIVATE.encode() not in await database_text(store, db_url)
    await check_chat_found(store, PRIVATE)
    # Without the keys nothing matches: a blind hash can't be made, and none is stored clear.
    assert await found(store_factory(), 'c1', f'{PRIVATE}u1') == []

    # A row sealed before its id had a column (a database migrated to 0005 without keys) has it made on a rekey.
    async with store.engine.begin() as connection:
        await connection.execute(text(f'UPDATE messages SET ui_message_id = NULL WHERE pk = {FIRST}'))
    rotated = store_factory(encryption=keys('k2', 'k1'))
    result = await rotated.rekey(batch_size=3)
    assert result.messages == len(CHAT_COLUMN)
    rehashed = [ui_id for _, ui_id in await column(store)]
    assert [h is None for h in rehashed] == [h is None for h in hashes]
    assert not (set(rehashed) - {None}) & set(hashes), 'every hash made again under the new key'
    assert rehashed[0] == rehashed[6] != rehashed[2] == rehashed[4]
    await rotated.vacuum()
    assert PRIVATE.encode() not in await database_text(store, db_url)
    await check_chat_found(store_factory(encryption=keys('k2')), PRIVATE)
    # A store given only the old key finds none of them by UI id: they are under k2 now.
    assert await found(store_factory(encryption=keys('k1')), 'c1', f'{PRIVATE}u2') == []


@pytest.mark.slow_on_postgresql  # SQLite stays quick; the front-end test checks the PostgreSQL append quick
async def test_encrypting_a_clear_store_hashes_its_ui_ids(db_url: str, store_factory: StoreFactory) -> None:
    chat(db_url, prefix=PRIVATE)
    clear = store_factory()
    assert [ui_id for _, ui_id in await column(clear)] == [u and PRIVATE + u for _, u in CHAT_COLUMN]
    sealed = store_factory(encryption=keys('k1'))
    await sealed.encrypt(batch_size=2)
    hashes = [ui_id for _, ui_id in await column(clear)]
    assert all(BLIND.fullmatch(h) for h in hashes if h is not None)
    assert [h is None for h in hashes] == [u is None for _, u in CHAT_COLUMN]
    await sealed.vacuum()
    assert PRIVATE.encode() not in await database_text(sealed, db_url)
    await check_chat_found(sealed, PRIVATE)


@pytest.mark.slow_on_postgresql  # SQLite stays quick; the front-end test checks the PostgreSQL append quick
@pytest.mark.parametrize('encrypted', [False, True], ids=['clear', 'sealed'])
async def test_a_fork_and_an_import_keep_ui_ids_findable(
    db_url: str, store_factory: StoreFactory, encrypted: bool
) -> None:
    encryption = keys('k1') if encrypted else None
    chat(db_url, encryption)
    store = store_factory(encryption=encryption)
    agent = scripted_agent(ParallelToolAssistant())
    await say(store, 'c1', 'u3', 'Turn T3', agent)  # on the active (edited) line, after 'hi, edited' and its answer
    source = [(h.position, h.prompt) for h in await found(store, 'c1', 'u3')]
    assert source == [(2, 'Turn T3')]

    fork = await store.fork('c1', at=6, new_session_id='forked', new_scope='user-1')
    assert [(kind, ui_id) for kind, ui_id in await column(store, 'forked')] == [
        ('request', stored_form(store, 'u1')),
        ('response', None),
        ('request', stored_form(store, 'u3')),
        ('response', None),
        ('request', None),  # tool returns
        ('response', None),
    ]
    assert [(h.position, h.prompt, h.ui_id) for h in await found(store, 'forked', 'u1')] == [(0, 'hi, edited', 'u1')]
    assert [(h.position, h.prompt) for h in await found(store, 'forked', 'u3')] == source
    assert await found(store, 'forked', 'u2') == []  # on the source's other branches only
    # The copies have entry ids of their own: the source's don't name them, the fork's do.
    copied = await fork.history()
    assert len(copied) == 6
    forked_record = await store.conversations.read_record('forked')
    assert forked_record is not None and forked_record.head_id is not None
    forked_line = await store.conversations.read_history(forked_record.head_id)
    assert [(h.position, h.prompt) for h in await found(store, 'forked', forked_line[2].id)] == source

    await store.import_(await store.export('c1'), session_id='imported')
    assert [ui_id for _, ui_id in await column(store, 'imported')] == [ui_id for _, ui_id in await column(store, 'c1')]
    for ui_id in ('u1', 'u2', 'u3'):
        original = await found(store, 'c1', ui_id)
        imported = await found(store, 'imported', ui_id)
        assert [h[1:] for h in imported] == [h[1:] for h in original]
        assert not {h.segment_pk for h in imported} & {h.segment_pk for h in original}


@pytest.mark.slow_on_postgresql  # SQLite stays quick; the front-end test checks the PostgreSQL append quick
@pytest.mark.parametrize('encrypted', [False, True], ids=['clear', 'sealed'])
async def test_ids_no_column_holds_as_they_are_are_saved_and_found(
    store_factory: StoreFactory, encrypted: bool
) -> None:
    store = store_factory(encryption=keys('k1') if encrypted else None)
    agent = scripted_agent(ParallelToolAssistant())
    long_id, nul_id = 'x' * 300, 'with\x00nul'
    await say(store, 'odd', long_id, 'Turn L', agent)
    await say(store, 'odd', nul_id, 'Turn N', agent)
    stored = [ui_id for _, ui_id in await column(store) if ui_id is not None]
    assert len(stored) == 2 and all(len(ui_id) <= 255 and '\x00' not in ui_id for ui_id in stored)
    assert [(h.prompt, h.ui_id) for h in await found(store, 'odd', long_id)] == [('Turn L', long_id)]
    assert [(h.prompt, h.ui_id) for h in await found(store, 'odd', nul_id)] == [('Turn N', nul_id)]
    # Ids a message can't hold, or that differ by their last character, find nothing.
    for unknown in ('x' * 299, 'x' * 301, 'with\x00nu', 'lone \ud800 surrogate', ''):
        assert await found(store, 'odd', unknown) == [], unknown


FILLER = """
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :rows)
INSERT INTO messages (session_pk, segment_pk, position, entry_id, run_id, kind, payload, text, tokens, created_at,
                      ui_message_id)
SELECT session_pk, segment_pk, 1000 + i, 'filler-' || i, run_id, kind, payload, text, tokens, created_at,
       CASE WHEN i % 4 = 0 THEN 'filler-' || i END
FROM messages, n WHERE messages.pk = (SELECT min(pk) FROM messages)
"""
"""Copies of the store's first message at positions 1001.. of its segment, ids `filler-<n>`."""


@pytest.mark.slow_on_postgresql  # SQLite stays quick; the front-end test checks the PostgreSQL append quick
async def test_the_lookup_is_one_select_on_indexes(store_factory: StoreFactory) -> None:
    store = store_factory(encryption=keys('k1', 'k2'))
    agent = scripted_agent(ParallelToolAssistant())
    for turn in range(3):
        await say(store, 'plan', f'ui-{turn}', f'Turn P{turn}', agent)
    # A long session, with the planner's statistics: 8,000 copies of its first message, a quarter with UI ids.
    async with store.engine.begin() as connection:
        await connection.execute(text(FILLER), {'rows': 8_000})
        await connection.execute(text('ANALYZE'))
    database = store._database
    statements: list[str] = []

    def seen(conn: Connection, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    async with database.read() as db:
        row = await find_session(db, 'plan', None)
        record = await store.conversations.read_record('plan')
        assert record is not None and record.head_id is not None
        entry_id = (await store.conversations.read_history(record.head_id))[4].id
        listened = (await db.connection()).sync_connection
        assert listened is not None
        event.listen(listened, 'before_cursor_execute', seen)
        by_ui = await requests_with_id(db, database.sealer, row.pk, 'ui-1')
        by_entry = await requests_with_id(db, database.sealer, row.pk, entry_id)
        event.remove(listened, 'before_cursor_execute', seen)
        assert len(statements) == 2 and all(s.lstrip().startswith('SELECT') for s in statements)
        assert by_ui == by_entry == [(by_ui[0][0], 4, entry_id)]
        assert await requests_with_id(db, database.sealer, row.pk, 'ui-2') != by_ui

        # The plan: each side of the OR on an index, never a scan of the table.
        bound = _REQUESTS_WITH_ID.params(
            session_pk=row.pk, forms=database.sealer.ui_id_forms('ui-1'), entry_id=entry_id
        ).compile(dialect=store.engine.dialect, compile_kwargs={'literal_binds': True})
        if store.engine.dialect.name == 'sqlite':
            plan = ' | '.join(str(r[-1]) for r in await db.execute(text(f'EXPLAIN QUERY PLAN {bound}')))
            assert 'USING INDEX ix_messages_ui_id (session_pk=? AND ui_message_id=?)' in plan, plan
            assert re.search(r'USING INDEX sqlite_autoindex_messages_\d \(entry_id=\?\)', plan), plan
            assert 'SCAN messages' not in plan, plan
        else:
            plan = ' | '.join(r[0] for r in await db.execute(text(f'EXPLAIN {bound}')))
            assert re.search(r'Index Cond: \(\(session_pk = \d+\) AND \(\(ui_message_id\)::text = ANY', plan), plan
            assert 'messages_entry_id_key' in plan and 'Index Cond: ((entry_id)::text =' in plan, plan
            assert 'Seq Scan on messages' not in plan, plan
