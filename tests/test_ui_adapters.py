"""pydantic-ai's `VercelAIAdapter` over `store.conversations`: submit, regenerate and edit, as a chat UI sends them.

The adapter only ever calls `save()`: a Regenerate or Edit button resubmits a stored user message, and
the save of the rewritten history is what must keep the replaced turns as a branch. The app runs
behind Starlette's test client with its own store, as a server would; the test reads what it stored
through a second store on the same database.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from itertools import count
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCalls, FunctionModel
from pydantic_ai.ui.vercel_ai import VercelAIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.testclient import TestClient

from session_store import SessionStore

StoreFactory = Callable[..., SessionStore]


def chat_agent() -> Agent[None, str]:
    """Answers each prompt with a numbered reply, so a regenerated answer differs from the one it replaces."""
    answers = count(1)

    def reply(messages: list[ModelMessage]) -> str:
        prompt = next(p.content for p in messages[-1].parts if isinstance(p, UserPromptPart))
        return f'answer {next(answers)} to {prompt}'

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(reply(messages))])

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        yield reply(messages)

    return Agent(FunctionModel(respond, stream_function=stream))


def chat_app(db_url: str) -> Starlette:
    agent = chat_agent()
    stores: list[SessionStore] = []

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        stores.append(SessionStore(db_url))
        yield
        await stores[0].close()

    async def chat(request: Request) -> Response:
        return await VercelAIAdapter.dispatch_request(
            request, agent=agent, conversation_store=stores[0].conversations, conversation_scope='user-1'
        )

    return Starlette(routes=[Route('/chat', chat, methods=['POST'])], lifespan=lifespan)


def send(client: TestClient, body: dict[str, Any]) -> str:
    """Post one chat request; the answer's text, after checking the stream saved the conversation."""
    response = client.post('/chat', json=body)
    assert response.status_code == 200, response.text
    chunks = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith('data: {')]
    assert not [c for c in chunks if c['type'] == 'error'], chunks
    assert any(c['type'] == 'data-conversation-saved' for c in chunks), chunks
    return ''.join(c['delta'] for c in chunks if c['type'] == 'text-delta')


def ui(message_id: str, role: str, text: str) -> dict[str, Any]:
    return {'id': message_id, 'role': role, 'parts': [{'type': 'text', 'text': text}]}


def conversation_text(messages: list[ModelMessage]) -> list[str]:
    """Each message's prompt or answer text, in order."""
    return [
        part.content
        for message in messages
        for part in message.parts
        if isinstance(part, UserPromptPart | TextPart) and isinstance(part.content, str)
    ]


async def test_submit_regenerate_and_edit_keep_replaced_turns_as_branches(
    db_url: str, store_factory: StoreFactory
) -> None:
    with TestClient(chat_app(db_url)) as client:
        a1 = send(client, {'trigger': 'submit-message', 'id': 'c1', 'messages': [ui('u1', 'user', 'hi')]})
        history = [ui('u1', 'user', 'hi'), ui('a1', 'assistant', a1), ui('u2', 'user', 'more')]
        a2 = send(client, {'trigger': 'submit-message', 'id': 'c1', 'messages': history})
        a3 = send(client, {'trigger': 'regenerate-message', 'id': 'c1', 'messageId': 'a2', 'messages': history})
        edited = send(client, {'trigger': 'submit-message', 'id': 'c1', 'messages': [ui('u1', 'user', 'hi, edited')]})
    assert [a1, a2, a3, edited] == ['answer 1 to hi', 'answer 2 to more', 'answer 3 to more', 'answer 4 to hi, edited']

    store = store_factory()
    # The active path is what the client shows after the edit.
    assert conversation_text(await store.history('c1', limit=None)) == ['hi, edited', edited]
    record = await store.conversations.read_record('c1')
    assert record is not None and record.scope == 'user-1'
    # The turns the regenerate and the edit replaced are kept as branches, oldest first.
    first, second = [await store.conversations.read_history(tip) for tip in record.branches]
    lines = [conversation_text([entry.message for entry in line]) for line in (first, second)]
    assert lines == [['hi', a1, 'more', a2], ['hi', a1, 'more', a3]]
    # The regenerated turn continues from the first answer, the very same stored entry.
    assert second[2].parent_id == first[1].id == second[1].id
    # Every message is stored once: 2 + 2 on the original line, 2 on the regenerated one, 2 after the edit.
    session = await store.session('c1', scope='user-1')
    branches = await session.branches()
    assert sorted((b.message_count, b.active) for b in branches) == [(2, True), (4, False), (4, False)]
    assert isinstance((await store.history('c1'))[0], ModelRequest)
