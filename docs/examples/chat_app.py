"""A chat back end for a Vercel AI SDK front end (`useChat`), kept in session-store:
one file, Starlette.

Every chat is stored whole (SQLite, or PostgreSQL), and a long one is summarized as it
goes. A user can edit or regenerate any of their messages however old, and each user
reaches only their own chats. Run it with the `web` extra (Starlette and uvicorn),
offline:

    CHAT_MODEL=test CHAT_SUMMARIZER=test \
        CHAT_TOKENS=alice-token=alice,bob-token=bob uvicorn chat_app:app --port 8001

(Port 8001: `session-store serve` takes uvicorn's default, 8000.)

Settings, read from the environment when the app starts:

    CHAT_DATABASE_URL  the store: sqlite+aiosqlite:///chats.db (the default),
                       or postgresql+asyncpg://...
    CHAT_MODEL         the agent's model: openai:gpt-4.1 (the default; it needs
                       OPENAI_API_KEY), any pydantic-ai model name, or test
                       (offline: it answers by quoting the prompt)
    CHAT_SUMMARIZER    the model that summarizes a long chat: openai:gpt-4.1-mini
                       (the default), or test (pydantic-ai's offline TestModel,
                       whose summaries are placeholders)
    CHAT_TOKENS        who may chat: token=user pairs, comma separated

POST /api/chat, with `Authorization: Bearer <token>`, takes the body `useChat` sends:

    {
      "trigger": "submit-message" | "regenerate-message",
      "id": "<chat id>",
      "messages": [<UIMessage>, ...],
      "messageId": "<message id>"
    }
    <UIMessage> = {
      "id": "<message id>",
      "role": "user" | "assistant",
      "parts": [{"type": "text", "text": "..."}]
    }

`messages` is the whole chat as the client holds it, or only its last message.
`messageId` is optional: with `regenerate-message`, it names the answer to replace
(what counts is the user message it answers, the last one sent).

It answers with the AI SDK's UI message stream: server-sent events
(`text/event-stream`), a `data: {...}` line per chunk (`start`, `text-start`,
`text-delta`s, `text-end`, ..., `data-conversation-saved` once the turn is stored,
`finish`), then `data: [DONE]`. A turn that fails, or that another request for the
chat stored first, ends with an `error` chunk, and nothing of it is stored.

- The new turn is the client's messages after its last answer. A user message whose
  id the chat already holds (`useChat`'s edit, `sendMessage({text, messageId})`), or a
  `regenerate-message`, replaces that turn however old. The model is sent the chat as
  it stood before it (its latest summary from before that message, and the messages
  since), and the turn replaced stays stored as a branch. Any other message is a new
  turn.
- A chat id nobody has starts a chat of this user's. One that another user's chat has
  is a 404, `{"detail": "Conversation not found."}`, as on GET.
- Each turn gets pydantic-ai's default usage limits (50 requests) to itself, however
  long the chat.

After a new chat's first answer, the app titles it with the first words of its first
message (at most 60 characters), but only if it has no title yet: one the user gave it
(through a rename of your front end, or `session-store serve`) is never replaced.

GET /api/chat/<chat id> answers `{"title": ..., "messages": [<UIMessage>, ...]}`: the
chat's title (`null` if none), and its messages with the ids its prompts were sent
with, what `useChat` starts from after a reload.

GET /api/chats answers `{"chats": [{"id": ..., "title": ..., "updated_at": ...}, ...]}`:
the user's chats, the latest first (the 100 latest), for a list to pick one from.

Every error the app answers itself is JSON in the shape Starlette and pydantic-ai's
adapter answer theirs: `{"detail": "..."}` (401 without a known token, 404 for a chat
out of reach).

The store opens at the first request, not when the app starts: uvicorn runs the app's
startup before it binds its port, so a port already taken fails before the database is
touched. A URL the store can't take fails at start; a database out of reach, at the
first request (a migration of an empty one happens then too).
"""

from __future__ import annotations

import hmac
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass

from pydantic_ai import Agent, AgentRunResult
from pydantic_ai.conversation_store import ConversationConflict
from pydantic_ai.messages import ModelResponse, UserPromptPart
from pydantic_ai.ui.vercel_ai import VercelAIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from processors import SummarizationProcessor
from session_store import SessionNotFound, SessionStore, dispatch_chat
from session_store.web import resolve_model

INSTRUCTIONS = 'You are a helpful assistant. Answer briefly.'
TITLE_LENGTH = 60


@dataclass(frozen=True)
class Chats:
    """What the app runs on, made when it starts: the store, the agent, who may chat."""

    store: SessionStore
    agent: Agent[None, str]
    users: dict[str, str]  # token -> user

    def user(self, request: Request) -> str | None:
        """The user whose token the request carries (`Authorization: Bearer <token>`).

        `None` when it carries none, or one nobody has.
        """
        scheme, _, token = request.headers.get('authorization', '').partition(' ')
        if scheme.lower() != 'bearer' or not token:
            return None
        for known, user in self.users.items():
            if hmac.compare_digest(token.encode(), known.encode()):
                return user
        return None


def tokens(setting: str) -> dict[str, str]:
    """`CHAT_TOKENS` (`token=user,token=user`) as a dict of token to user."""
    pairs = [pair.strip().partition('=') for pair in setting.split(',') if pair.strip()]
    return {
        token.strip(): user.strip()
        for token, _, user in pairs
        if token.strip() and user.strip()
    }


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    """Make the store when the app starts, and close it when it stops.

    Making it reads no database: the first request opens it (checks the schema, and
    migrates an empty database), once uvicorn listens.
    """
    summarizer = SummarizationProcessor(
        # a cheap model is enough
        os.environ.get('CHAT_SUMMARIZER', 'openai:gpt-4.1-mini'),
        # once the window holds 40 messages, summarize the oldest
        trigger=('messages', 40),
        keep=('messages', 12),  # down to the 12 newest
    )
    url = os.environ.get('CHAT_DATABASE_URL', 'sqlite+aiosqlite:///chats.db')
    store = SessionStore(url, processor=summarizer)
    try:
        agent = Agent(
            resolve_model(os.environ.get('CHAT_MODEL', 'openai:gpt-4.1')),
            instructions=INSTRUCTIONS,
        )
        app.state.chats = Chats(store, agent, tokens(os.environ.get('CHAT_TOKENS', '')))
        yield
    finally:
        await store.close()


def unauthorized() -> Response:
    return JSONResponse(
        {'detail': 'Send your token as `Authorization: Bearer <token>`.'},
        status_code=401,
        headers={'WWW-Authenticate': 'Bearer'},
    )


def title_from(text: str) -> str | None:
    """A title from a chat's first message: its first words, at most `TITLE_LENGTH`
    characters. `None` for a message without any."""
    words = ' '.join(text.split())
    if len(words) <= TITLE_LENGTH:
        return words or None
    cut = words[: TITLE_LENGTH - 1]
    return (cut.rsplit(' ', 1)[0] if ' ' in cut else cut) + '…'


async def title_new_chat(
    store: SessionStore, user: str, result: AgentRunResult[str]
) -> None:
    """After a chat's first answer (stored by then), title it with its first message.

    `expected_title=None`: only while it has no title, so a title the user gave it
    meanwhile stays.
    """
    messages = result.all_messages()
    earlier = messages[: len(messages) - len(result.new_messages())]
    if any(isinstance(message, ModelResponse) for message in earlier):
        return  # the chat was answered before: this is not its first turn
    prompts = [
        part.content
        for message in messages
        for part in message.parts
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    ]
    title = title_from(prompts[0]) if prompts else None
    if title is None:
        return
    # A conflict: it has a title already (the user's, or this app's before an edit).
    with suppress(ConversationConflict):
        await store.conversations.update(
            result.conversation.conversation_id,
            title=title,
            scope=user,
            expected_title=None,
        )


async def chat(request: Request) -> Response:
    """POST /api/chat: one turn, streamed, and stored under the user's scope."""
    chats: Chats = request.app.state.chats
    user = chats.user(request)
    if user is None:
        return unauthorized()

    async def on_complete(result: AgentRunResult[str]) -> None:
        await title_new_chat(chats.store, user, result)

    return await dispatch_chat(
        VercelAIAdapter,
        request,
        agent=chats.agent,
        store=chats.store,
        scope=user,
        on_complete=on_complete,  # after the turn is stored, before the stream ends
    )


async def messages(request: Request) -> Response:
    """GET /api/chat/<chat id>: the chat's messages, as `useChat` holds them.

    Its active branch, every message (page a very long chat with `history`'s `offset`
    and `limit`).
    """
    chats: Chats = request.app.state.chats
    user = chats.user(request)
    if user is None:
        return unauthorized()
    chat_id = request.path_params['chat_id']
    try:
        history = await chats.store.history(chat_id, scope=user)
    except (SessionNotFound, ValueError):
        # nobody's, another user's, or no id a chat can have: the 404 a POST gets
        return JSONResponse({'detail': 'Conversation not found.'}, status_code=404)
    record = await chats.store.conversations.read_record(chat_id)
    dumped = VercelAIAdapter.dump_messages(history)
    return JSONResponse(
        {
            'title': None if record is None else record.title,
            'messages': [
                m.model_dump(mode='json', by_alias=True, exclude_none=True)
                for m in dumped
            ],
        }
    )


async def chat_list(request: Request) -> Response:
    """GET /api/chats: the user's chats, the latest first, each with its title."""
    chats: Chats = request.app.state.chats
    user = chats.user(request)
    if user is None:
        return unauthorized()
    # the 100 latest (`sessions` takes an `offset` to page on)
    listed = await chats.store.sessions(scope=user, limit=100)
    return JSONResponse(
        {
            'chats': [
                {
                    'id': info.session_id,
                    'title': info.title,
                    'updated_at': info.updated_at.isoformat(),
                }
                for info in listed
            ]
        }
    )


app = Starlette(
    routes=[
        Route('/api/chat', chat, methods=['POST']),
        Route('/api/chat/{chat_id}', messages, methods=['GET']),
        Route('/api/chats', chat_list, methods=['GET']),
    ],
    lifespan=lifespan,
)
