"""Bad arguments at the public API: a `TypeError` or `ValueError` naming the parameter, before any I/O, and nothing
stored; never a driver's error from deep in a query (an `OverflowError`, a `DBAPIError`, a comparison's TypeError)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.models.test import TestModel

from session_store import SessionStore

StoreFactory = Callable[..., SessionStore]


async def test_bad_arguments_name_their_parameter_and_store_nothing(store_factory: StoreFactory) -> None:
    store = store_factory()
    session = await store.session('s')
    agent = Agent(TestModel())
    await session.run(agent, 'a fine prompt')
    stored = await store.history('s')

    with pytest.raises(ValueError, match='metadata'):
        await store.set_metadata('s', {'score': float('inf')})
    with pytest.raises(ValueError, match=r'limit must be between 0 and 9223372036854775807; got 10{19}'):
        await store.history('s', limit=10**19)
    with pytest.raises(ValueError, match='limit must be between 0 and'):
        await store.sessions(limit=10**19)
    with pytest.raises(ValueError, match='limit must be between 1 and'):
        await store.search('fine', limit=10**19)
    with pytest.raises(TypeError, match="offset must be an int; got '3'"):
        await store.history('s', offset='3')  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="offset must be an int; got '3'"):  # the session's door: the same check
        await session.history(offset='3')  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r'limit must be between 0 and 9223372036854775807; got 10{19}'):
        await session.history(limit=10**19)
    with pytest.raises(ValueError, match='offset must be between 0'):
        await store.sessions(offset=-5)
    with pytest.raises(TypeError, match="timeout must be a number of seconds, or None; got '5'"):
        await store.session('s', wait=True, timeout='5')  # type: ignore[arg-type]
    with pytest.raises(ValueError, match='timeout must be a positive, finite number'):
        await store.session('s', wait=True, timeout=float('nan'))

    # A lone surrogate can be held by no database: a session refuses it before the model is called, a search
    # before it queries, and pydantic-ai's own door at the save, storing nothing of the run.
    model = TestModel()
    with pytest.raises(ValueError, match=r"user_prompt holds a lone surrogate \('\\ud800' at index 4\)"):
        await session.run(Agent(model), 'bad \ud800 prompt')
    assert model.last_model_request_parameters is None, 'the model was called'
    with pytest.raises(ValueError, match='text holds a lone surrogate'):
        await store.search('\ud800')
    result = await agent.run('bad \ud800 prompt', conversation=Conversation(conversation_id='c'))
    with pytest.raises(ValueError, match=r'cannot be stored .*surrogates not allowed.*nothing of the run was stored'):
        await store.conversations.save(result)
    assert await store.conversations.load('c') is None
    assert await store.history('s') == stored


async def test_a_blank_id_or_scope_is_refused_everywhere(store_factory: StoreFactory) -> None:
    """An id of spaces reads as nothing in every listing: the store refuses it, as the command line does."""
    store = store_factory()
    for blank in ('  ', '\u3000'):
        with pytest.raises(ValueError, match='session_id must be 1 to 255 printable characters, not all blank'):
            await store.session(blank)
        with pytest.raises(ValueError, match='scope must be'):
            await store.session('fine', scope=blank)
        with pytest.raises(ValueError, match='new_session_id must be'):
            await store.fork('fine', at=0, new_session_id=blank)
        with pytest.raises(ValueError, match='session_id must be'):
            await store.conversations.load(blank)
    assert await store.sessions() == []  # nothing was made on the way
