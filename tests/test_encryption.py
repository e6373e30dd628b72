"""Encryption at rest: nothing private in the database's bytes, all read back exactly, keys rotated and refused."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from pydantic_ai import Agent
from pydantic_ai.conversation_store import ConversationConflict
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from processors import SummarizationProcessor
from session_store import Encryption, KeyUnavailable, SessionStore, StoreError
from session_store._codec import dump_messages
from session_store.cli import main
from session_store.encryption import ENV_KEYS
from tests._cli import fails, ok
from tests._web import web_client
from tests.test_retention import database_text

StoreFactory = Callable[..., SessionStore]

MARKER = 'OKAPI-7731-PRIVATE'
"""Written into prompts, tool returns, summaries, metadata and deferred tool requests."""

K1 = Encryption.generate_key()
K2 = Encryption.generate_key()


def keys(*ids: str) -> Encryption:
    secrets = {'k1': K1, 'k2': K2}
    return Encryption(keys={key_id: secrets[key_id] for key_id in ids})


def assistant(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Each prompt: a lookup whose return carries the marker, then an answer; `approve ...` asks for approval."""
    last = messages[-1]
    prompt = next((p.content for p in last.parts if isinstance(p, UserPromptPart)), None)
    if isinstance(prompt, str) and prompt.startswith('approve'):
        return ModelResponse(parts=[ToolCallPart('transfer', {'memo': f'{prompt} {MARKER}'})])
    if isinstance(prompt, str):
        return ModelResponse(parts=[ToolCallPart('lookup', {'q': prompt.split()[1]})])
    answer = next(p.content for p in last.parts if isinstance(p, ToolReturnPart))
    return ModelResponse(parts=[TextPart(f'Answer: {answer}')])


def agent() -> Agent[None, Any]:
    made: Agent[None, Any] = Agent(FunctionModel(assistant), output_type=[str, DeferredToolRequests])

    @made.tool_plain
    def lookup(q: str) -> str:
        return f'record {q} for customer {MARKER}'

    @made.tool_plain(requires_approval=True)
    def transfer(memo: str) -> str:
        return 'sent'

    return made


def summarizer() -> SummarizationProcessor:
    def summarize(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(f'Summary of the talk with {MARKER}')])

    return SummarizationProcessor(FunctionModel(summarize), trigger=('messages', 10), keep=('messages', 4))


async def converse(store: SessionStore, session_id: str, turns: int, *, pause: bool = False) -> list[ModelMessage]:
    """Run `turns` prompts through a session (the last asking for approval when `pause`); every message made."""
    session = await store.session(session_id)
    made: list[ModelMessage] = []
    for turn in range(turns):
        result = await session.run(agent(), f'Turn T{turn} about {MARKER} and zebras')
        made += result.new_messages()
    if pause:
        result = await session.run(agent(), 'approve the refund')
        assert isinstance(result.output, DeferredToolRequests)
        made += result.new_messages()
    return made


async def raw_values(store: SessionStore, table: str, column: str) -> list[Any]:
    async with AsyncSession(store.engine) as db:
        return list((await db.execute(text(f'SELECT {column} FROM {table} ORDER BY pk'))).scalars())


async def test_a_sealed_store_holds_no_private_text_and_reads_it_all_back(
    db_url: str, store_factory: StoreFactory
) -> None:
    store = store_factory(processor=summarizer(), encryption=keys('k1'))
    made = await converse(store, 'alice', 8, pause=True)
    await store.set_metadata('alice', {'customer': MARKER, 'tier': 'gold'})

    # Nothing private anywhere: every table, the full-text index, the SQLite file with its WAL.
    raw = await database_text(store, db_url)
    assert MARKER.encode() not in raw and b'zebras' not in raw
    assert b'Summary of the talk' not in raw and b'gold' not in raw
    assert all(p.startswith('sealed:k1:') for p in await raw_values(store, 'messages', 'payload'))

    # ... and all of it back, exactly, through a store that never saw it written.
    fresh = store_factory(processor=summarizer(), encryption=keys('k1'))
    assert dump_messages(await fresh.history('alice')) == dump_messages(made)
    summaries = await fresh.summaries('alice')
    assert summaries and all(MARKER in summary.text for summary in summaries)
    [info] = await fresh.sessions()
    assert info.metadata == {'customer': MARKER, 'tier': 'gold'}
    record = await fresh.conversations.read_record('alice')
    assert record is not None and record.deferred_tool_requests is not None
    assert MARKER in record.deferred_tool_requests.approvals[0].args_as_dict()['memo']
    window = await fresh.window('alice')
    assert 'Summary of the talk' in str(window.messages[0])
    assert dump_messages(window.messages[-2:]) == dump_messages(made[-2:])

    # Search works on whole words through the blind index, and phrases are checked on the opened text.
    hits = await fresh.search('zebras T7', match='words')
    assert [(hit.session_id, hit.position) for hit in hits] == [('alice', made.index(_prompt(made, 'T7')))]
    assert 'Turn T7 about' in hits[0].text
    assert len(await fresh.search(f'about {MARKER}', match='phrase', limit=100)) == 8  # the prompts
    assert await fresh.search(f'{MARKER} about', match='phrase') == []
    assert await fresh.search('zebra', match='words') == []  # whole words only: no stemming


def _prompt(messages: list[ModelMessage], turn: str) -> ModelMessage:
    return next(m for m in messages if isinstance(m, ModelRequest) and f'Turn {turn} ' in str(m.parts[0]))


async def test_a_wrong_or_missing_key_is_a_clear_error_never_an_empty_history(store_factory: StoreFactory) -> None:
    store = store_factory(processor=summarizer(), encryption=keys('k1'))
    await converse(store, 'alice', 6)
    await store.set_metadata('alice', {'customer': MARKER})

    wrong = store_factory(encryption=Encryption(keys={'k1': Encryption.generate_key()}))
    with pytest.raises(
        KeyUnavailable, match=r"Session 'alice': the message at position 0 does not decrypt with key 'k1'"
    ):
        await wrong.history('alice')
    missing = store_factory()
    for read in (
        missing.history('alice'),
        missing.summaries('alice'),
        missing.window('alice'),
        missing.export('alice'),
        missing.sessions(),
    ):
        with pytest.raises(
            KeyUnavailable, match=r"Session 'alice': .* key 'k1', and this store was given no keys"
        ) as raised:
            await read
        assert raised.value.session_id == 'alice' and raised.value.key_id == 'k1'
    other = store_factory(encryption=keys('k2'))
    with pytest.raises(KeyUnavailable, match="only keys 'k2'"):
        await other.history('alice')
    with pytest.raises(KeyUnavailable):  # a run fails rather than starting from an empty window
        await (await missing.session('alice')).run(agent(), 'Turn T9 about nothing')
    # A fork would copy what the store can't read: refused too, and nothing is made.
    with pytest.raises(KeyUnavailable):
        await missing.fork('alice', at=4, new_session_id='copy')
    await converse(store, 'bob', 2)  # no summary and no metadata: a whole-path fork reads nothing before copying
    with pytest.raises(KeyUnavailable, match="the message at position 0 is encrypted with key 'k1'"):
        await missing.fork('bob', at=8, new_session_id='copy')
    assert sorted(info.session_id for info in await store.sessions()) == ['alice', 'bob']


@pytest.mark.slow_on_postgresql
async def test_rotation_seals_everything_under_the_new_key_so_the_old_one_can_go(
    db_url: str, store_factory: StoreFactory
) -> None:
    old = store_factory(processor=summarizer(), encryption=keys('k1'))
    made = await converse(old, 'alice', 6, pause=True)
    await old.set_metadata('alice', {'customer': MARKER})

    rotated = store_factory(processor=summarizer(), encryption=keys('k2', 'k1'))
    made += await converse(rotated, 'bob', 2)
    payloads = await raw_values(rotated, 'messages', 'payload')
    assert {p.split(':')[1] for p in payloads} == {'k1', 'k2'}  # new writes under k2, old rows still k1
    assert dump_messages(await rotated.history('alice')) == dump_messages(made[: len(made) - 8])

    tallies: list[int] = []
    done = await rotated.rekey(batch_size=7, on_batch=lambda tally: tallies.append(tally.messages))
    assert tallies == sorted(tallies) and len(tallies) > 3
    assert done.messages == len(made) - 8 and done.summaries > 0 and done.sessions == 1
    assert done.clear == 0 and set(done.by_key) == {'k2'} and done.sealed_clear == 0  # all under k1 before
    assert {p.split(':')[1] for p in await raw_values(rotated, 'messages', 'payload')} == {'k2'}
    assert (await rotated.rekey()).messages == 0  # nothing left to do

    only_new = store_factory(processor=summarizer(), encryption=keys('k2'))
    assert dump_messages(await only_new.history('alice')) + dump_messages(await only_new.history('bob')) != b''
    assert dump_messages(await only_new.history('alice')) == dump_messages(made[: len(made) - 8])
    assert all(MARKER in summary.text for summary in await only_new.summaries('alice'))
    assert {info.session_id: info.metadata for info in await only_new.sessions()} == {
        'alice': {'customer': MARKER},
        'bob': {},
    }
    assert len(await only_new.search('zebras', match='words', session_id='alice')) == 6  # the blind index moved too
    await only_new.vacuum()
    assert MARKER.encode() not in await database_text(only_new, db_url)


REKEY_AND_DIE = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from session_store import Encryption, SessionStore

    batches = 0

    async def main() -> None:
        store = SessionStore(sys.argv[1], encryption=Encryption.parse(os.environ['KEYS']))

        def tally(done) -> None:
            global batches
            batches += 1
            if batches == int(sys.argv[2]):
                os.kill(os.getpid(), signal.SIGKILL)  # mid-pass, between two committed batches

        await getattr(store, sys.argv[3])(batch_size=5, on_batch=tally)

    asyncio.run(main())
    """
)


def die_mid_pass(db_url: str, encryption: str, after: int, what: str) -> None:
    done = subprocess.run(
        [sys.executable, '-c', REKEY_AND_DIE, db_url, str(after), what],
        env={**os.environ, 'KEYS': encryption},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -9, done.stderr


@pytest.mark.slow  # a process SIGKILLs itself mid-pass
async def test_rekey_killed_halfway_then_run_again_loses_nothing(db_url: str, store_factory: StoreFactory) -> None:
    old = store_factory(processor=summarizer(), encryption=keys('k1'))
    made = await converse(old, 'alice', 8)
    await old.set_metadata('alice', {'customer': MARKER})

    die_mid_pass(db_url, f'k2={K2},k1={K1}', after=3, what='rekey')

    both = store_factory(processor=summarizer(), encryption=keys('k2', 'k1'))
    payloads = await raw_values(both, 'messages', 'payload')
    assert [p.split(':')[1] for p in payloads] == ['k2'] * 15 + ['k1'] * (len(made) - 15)  # 3 batches of 5 done
    assert dump_messages(await both.history('alice')) == dump_messages(made)  # a half-rotated store reads whole

    done = await both.rekey(batch_size=5)
    assert done.messages == len(made) - 15 and set(done.by_key) == {'k2'} and done.clear == 0
    only_new = store_factory(processor=summarizer(), encryption=keys('k2'))
    assert dump_messages(await only_new.history('alice')) == dump_messages(made)
    assert (await only_new.sessions())[0].metadata == {'customer': MARKER}
    assert all(MARKER in summary.text for summary in await only_new.summaries('alice'))


@pytest.mark.slow  # a process SIGKILLs itself mid-pass
async def test_a_clear_store_is_encrypted_in_place_and_reads_correctly_while_mixed(
    db_url: str, store_factory: StoreFactory
) -> None:
    clear = store_factory(processor=summarizer())
    made = await converse(clear, 'alice', 8, pause=True)
    await clear.set_metadata('alice', {'customer': MARKER})
    assert MARKER.encode() in await database_text(clear, db_url)  # the check at the end can fail

    die_mid_pass(db_url, f'k1={K1}', after=2, what='encrypt')

    mixed = store_factory(processor=summarizer(), encryption=keys('k1'))
    kinds = [p.startswith('sealed:') for p in await raw_values(mixed, 'messages', 'payload')]
    assert kinds == [True] * 10 + [False] * (len(made) - 10)
    assert dump_messages(await mixed.history('alice')) == dump_messages(made)
    # Search finds both halves: clear rows by their words, sealed ones by their blind words.
    assert len(await mixed.search('zebras', match='words', limit=100)) == 8
    assert len(await mixed.search('about OKAPI', match='phrase', limit=100)) == 8
    with pytest.raises(KeyUnavailable):  # a store without the key sees the sealed half as an error, not a gap
        await store_factory().history('alice')

    done = await mixed.encrypt(batch_size=5)
    assert done.clear == 0 and set(done.by_key) == {'k1'} and done.sessions == 1
    # What the finishing pass sealed had been stored clear: the half the killed pass left (and the session's row).
    assert done.sealed_clear >= done.messages + done.summaries + done.sessions > 0  # a session row holds two
    await mixed.vacuum()
    raw = await database_text(mixed, db_url)
    assert MARKER.encode() not in raw and b'zebras' not in raw
    fresh = store_factory(processor=summarizer(), encryption=keys('k1'))
    assert dump_messages(await fresh.history('alice')) == dump_messages(made)
    record = await fresh.conversations.read_record('alice')
    assert record is not None and record.deferred_tool_requests is not None
    assert (await fresh.sessions())[0].metadata == {'customer': MARKER}
    window = await fresh.window('alice')
    assert dump_messages(window.messages[-2:]) == dump_messages(made[-2:])


@pytest.mark.slow_on_postgresql
async def test_forks_exports_and_conversations_keep_each_session_under_its_own_key(
    db_url: str, store_factory: StoreFactory
) -> None:
    store = store_factory(processor=summarizer(), encryption=keys('k1'))
    made = await converse(store, 'alice', 6)
    await store.set_metadata('alice', {'customer': MARKER})
    fork = await store.fork('alice', at=12, new_session_id='alice-fork')
    assert dump_messages(await store.history('alice-fork')) == dump_messages(made[:12])
    assert (await store.sessions(limit=1))[0].metadata == {'customer': MARKER}
    result = await fork.run(agent(), 'Turn T7 about forks')
    assert result.output == f'Answer: record T7 for customer {MARKER}'

    document = await store.export('alice')
    assert MARKER in ''.join(document.to_json_lines())  # an export is the user's own copy: in the clear
    await store.import_(document, session_id='alice-copy')
    assert dump_messages(await store.history('alice-copy')) == dump_messages(made)
    await store.conversations.fork('alice', new_conversation_id='alice-conv')
    assert dump_messages(await store.history('alice-conv')) == dump_messages(made)
    assert MARKER.encode() not in await database_text(store, db_url)

    # Each session has its own key: a ciphertext moved into another session doesn't open there.
    async with AsyncSession(store.engine) as db, db.begin():
        await db.execute(
            text(
                'UPDATE messages SET payload = (SELECT m.payload FROM messages m JOIN sessions s '
                "ON s.pk = m.session_pk WHERE s.session_id = 'alice' AND m.position = 1) "
                "WHERE position = 1 AND session_pk = (SELECT pk FROM sessions WHERE session_id = 'alice-copy')"
            )
        )
    with pytest.raises(KeyUnavailable, match="'alice-copy': the message at position 1 does not decrypt with key 'k1'"):
        await store.history('alice-copy')
    assert dump_messages(await store.history('alice')) == dump_messages(made)


def test_keys_are_checked_when_given_and_never_shown() -> None:
    secret = Encryption.generate_key()
    encryption = Encryption(keys={'k2': secret, 'k1': os.urandom(32)})
    assert encryption.current == 'k2' and list(encryption.keys) == ['k2', 'k1']
    assert secret not in repr(encryption) and repr(encryption) == "Encryption(keys=['k2', 'k1'])"
    assert Encryption.parse(f'# rotated in May\nk2={secret}\nk1 = {K1}') == Encryption(keys={'k2': secret, 'k1': K1})
    for bad, complaint in (
        ({}, 'at least one key'),
        ({'k:1': secret}, "key id 'k:1' must be"),
        ({'k1': 'c2hvcnQ'}, "secret of key 'k1' must be 32 bytes"),  # base64 of 5 bytes
        ({'k1': b'x' * 16}, 'got 16'),
        ({'k1': 'not base64 at all!!' * 3}, 'not urlsafe base64'),
    ):
        with pytest.raises(ValueError, match=complaint):
            Encryption(keys=bad)
    for written in (secret, f'k2={secret},{K1}'):
        with pytest.raises(ValueError, match=r'\$SESSION_STORE_KEYS: key \d is not written as ID=SECRET') as raised:
            Encryption.parse(written, source='$SESSION_STORE_KEYS')
        assert secret not in str(raised.value) and K1 not in str(raised.value)
    with pytest.raises(ValueError, match="key id 'k1' is listed twice"):
        Encryption.parse(f'k1={K1},k1={K2}')
    with pytest.raises(TypeError, match='encryption must be an Encryption'):
        SessionStore('sqlite+aiosqlite:///unused.db', encryption={'k1': K1})  # type: ignore[arg-type]


async def test_rekey_needs_keys_and_metadata_must_be_json(store_factory: StoreFactory) -> None:
    store = store_factory()
    with pytest.raises(StoreError, match='needs keys'):
        await store.rekey()
    await store.session('alice')
    with pytest.raises(ValueError, match='metadata must be a dict of JSON values'):
        await store.set_metadata('alice', {'when': object()})
    await store.set_metadata('alice', {'tier': 'gold'})
    assert (await store.sessions())[0].metadata == {'tier': 'gold'}


@pytest.mark.slow_on_postgresql
def test_the_commands_take_keys_from_a_file_or_the_environment(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_KEYS, raising=False)

    def invoke(*args: str, keys: str | None = None) -> Result:
        return CliRunner().invoke(main, ['--db', db_url, *args], env={ENV_KEYS: keys} if keys else None)

    async def write() -> None:
        async with SessionStore(db_url) as clear:
            await converse(clear, 'alice', 3)

    asyncio.run(write())
    generated = ok(invoke('keygen', 'k1')).strip()
    assert generated.startswith('k1=') and Encryption.parse(generated).current == 'k1'
    key_file = tmp_path / 'keys'
    key_file.write_text(f'# newest first\n{generated}\n')

    fails(invoke('rekey'), 'rekey needs the keys', '--key-file')
    said = ok(invoke('encrypt', '--batch', '4', '--yes', '--key-file', str(key_file)))
    assert 'Sealed 12 messages, 0 summaries and 0 sessions' in said and "12 under 'k1'" in said
    assert MARKER in ok(invoke('history', 'alice', '--key-file', str(key_file)))
    assert MARKER in ok(invoke('history', 'alice', keys=generated))
    fails(invoke('history', 'alice'), "Session 'alice'", "key 'k1'", 'no keys', '--key-file')

    rotated = f'k2={Encryption.generate_key()},{generated}'
    said = ok(invoke('rekey', '--yes', keys=rotated))
    assert "12 under 'k2'" in said and "No row needs 'k1' any more" in said
    assert MARKER in ok(invoke('history', 'alice', keys=rotated.split(',')[0]))
    fails(invoke('history', 'alice', keys=generated), "key 'k2'", "only keys 'k1'")
    fails(invoke('history', 'alice', '--key-file', str(tmp_path / 'missing')), 'cannot be read')
    fails(invoke('history', 'alice', keys='k1'), f'${ENV_KEYS}: key 1 is not written as ID=SECRET')


def test_the_listings_refuse_a_sealed_store_without_its_key_before_printing(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `sessions`, `summaries` and `history` read rows without a `SessionStore`: a value they can't open still fails
    # the whole read, in one line, before any of it is printed, as the store's own reads do.
    async def write() -> None:
        async with SessionStore(db_url, processor=summarizer(), encryption=keys('k1')) as sealed:
            await converse(sealed, 'alice', 8)
            await sealed.set_metadata('alice', {'tier': 'gold'})
            assert await sealed.summaries('alice')

    asyncio.run(write())
    monkeypatch.delenv(ENV_KEYS, raising=False)
    for command in (['summaries', 'alice'], ['sessions'], ['history', 'alice']):
        done = CliRunner().invoke(main, ['--db', db_url, *command])
        fails(done, "Session 'alice'", "key 'k1'", 'no keys')
        assert done.stdout == '', done.stdout


@pytest.mark.slow_on_postgresql
def test_a_search_without_the_key_or_with_a_wrong_one_says_so(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The blind index holds words under the key that sealed them: without it, or under another secret, no term
    # matches. Issue 47: search printed "No archived message contains ..." and exited 0.
    async def write() -> None:
        async with SessionStore(db_url, encryption=keys('k1')) as sealed:
            await converse(sealed, 'alice', 3)

    asyncio.run(write())
    monkeypatch.delenv(ENV_KEYS, raising=False)
    right, wrong = f'k1={K1}', f'k1={Encryption.generate_key()}'

    def search(*args: str, keys: str | None = None) -> Result:
        return CliRunner().invoke(main, ['--db', db_url, 'search', *args], env={ENV_KEYS: keys} if keys else None)

    assert '3 messages containing' in ok(search('zebras', keys=right))
    for args in (['zebras'], ['zebras', '--json'], ['zebras', '--session', 'alice'], ['nothing-like-it']):
        fails(search(*args), "Session 'alice'", "key 'k1'", 'no keys', '--key-file')
        fails(search(*args, keys=wrong), "Session 'alice'", "does not decrypt with key 'k1'")

    async def library() -> None:
        for given in (None, Encryption(keys={'k1': Encryption.generate_key()}), keys('k2')):
            async with SessionStore(db_url, read_only=True, encryption=given) as store:
                for match in ('phrase', 'words'):
                    with pytest.raises(KeyUnavailable, match="Session 'alice'"):
                        await store.search('zebras', match=match)

    asyncio.run(library())
    with web_client(db_url, read_only=True) as client:
        assert 'key &#39;k1&#39;' in client.get('/search?q=zebras').text
        assert "key 'k1'" in client.get('/api/search?q=zebras').json()['error']


async def test_recall_finds_old_details_through_the_blind_index(store_factory: StoreFactory) -> None:
    store = store_factory(processor=summarizer(), encryption=keys('k1'))
    await converse(store, 'alice', 8)
    found: list[str] = []

    def recalling(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1].parts[-1]
        if isinstance(last, ToolReturnPart):
            found.append(str(last.content))
            return ModelResponse(parts=[TextPart('done')])
        return ModelResponse(parts=[ToolCallPart('search_history', {'query': 'record T2', 'limit': 1})])

    session = await store.session('alice', recall=True)
    await session.run(Agent(FunctionModel(recalling)), 'What did the record of T2 say?')
    [answer] = found
    assert f'record T2 for customer {MARKER}' in answer  # found by its words, read back opened


@pytest.mark.slow_on_postgresql
def test_the_web_pages_read_an_encrypted_store_given_its_keys(db_url: str) -> None:
    async def write() -> None:
        async with SessionStore(db_url, processor=summarizer(), encryption=keys('k1')) as store:
            await converse(store, 'alice', 3)

    asyncio.run(write())
    with web_client(db_url, read_only=True, encryption=keys('k1')) as client:
        page = client.get('/sessions/alice').text
        found = client.get('/search?q=zebras+T1&match=words').text
    assert f'record T2 for customer {MARKER}' in page
    assert 'href="/sessions/alice?at=4#m4"' in found


async def test_titles_are_sealed_read_back_and_resealed_with_their_keys(
    db_url: str, store_factory: StoreFactory
) -> None:
    store = store_factory(encryption=keys('k1'))
    await converse(store, 'alice', 1)
    await store.conversations.update('alice', title=f'Refund for {MARKER}', metadata={'customer': MARKER})
    assert MARKER.encode() not in await database_text(store, db_url)
    assert [title[:10] for title in await raw_values(store, 'sessions', 'title')] == ['sealed:k1:']
    # An expected title is checked against the sealed one, in the write.
    titled = await store.conversations.update(
        'alice', title=f'Refunded {MARKER}', expected_title=f'Refund for {MARKER}'
    )
    assert titled.title == f'Refunded {MARKER}'
    with pytest.raises(ConversationConflict, match='is titled'):
        await store.conversations.update('alice', title='Mine', expected_title=None)
    # A store without the key says so, never lists the session untitled.
    with pytest.raises(KeyUnavailable, match="'alice': its"):
        await store_factory().sessions()

    rotated = store_factory(encryption=keys('k2', 'k1'))
    done = await rotated.rekey()
    assert done.sessions == 1 and set(done.by_key) == {'k2'}
    assert [title[:10] for title in await raw_values(rotated, 'sessions', 'title')] == ['sealed:k2:']
    only_new = store_factory(encryption=keys('k2'))
    record = await only_new.conversations.read_record('alice')
    assert record is not None and (record.title, record.metadata) == (f'Refunded {MARKER}', {'customer': MARKER})
    assert [info.title for info in await only_new.sessions()] == [f'Refunded {MARKER}']

    # A clear store's titles are sealed by encrypt().
    clear = store_factory()
    await converse(clear, 'bob', 1)
    await clear.conversations.update('bob', title='Zebra crossing')
    assert b'Zebra crossing' in await database_text(clear, db_url)
    await only_new.encrypt()
    await only_new.vacuum()
    assert b'Zebra crossing' not in await database_text(only_new, db_url)
    assert {info.session_id: info.title for info in await only_new.sessions()} == {
        'alice': f'Refunded {MARKER}',
        'bob': 'Zebra crossing',
    }
