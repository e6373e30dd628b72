"""Chat through stored sessions: `POST /api/chat`, pydantic-ai's `VercelAIAdapter` over `store.conversations`.

The endpoint takes what a Vercel AI SDK front end sends (`useChat`'s default `/api/chat`, body
`{trigger, id, messages, ...}` with the session id as `id`), so it is also a back end for any such front
end; the session page's own script sends the same. `dispatch_chat` runs it through the adapter: it loads the
stored conversation, runs the agent on the client's new turn, streams the answer as server-sent events and saves
the run before it ends. A `regenerate-message` trigger, or a resubmitted user message id (an edit), of any user
message, summarized or not, replaces that turn and keeps the replaced one as a branch; each run has its own
request budget.
"""

from __future__ import annotations

import json

from pydantic_ai import Agent
from pydantic_ai.models import Model
from pydantic_ai.ui.vercel_ai import VercelAIAdapter
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .._ids import check_id
from .._offline import resolve_model
from ..chat import dispatch_chat
from ..store import SessionStore

__all__ = ('chat_agent', 'chat_response')


def chat_agent(model: Model | str | Agent[None, str]) -> Agent[None, str]:
    """The agent chats run: the one given, or a plain agent on the model given."""
    if isinstance(model, Agent):
        return model
    return Agent(resolve_model(model))


async def chat_response(request: Request, store: SessionStore, agent: Agent[None, str], scope: str | None) -> Response:
    """Run one chat request through the adapter, confined to `scope`.

    With an app scope, the conversation is loaded and saved under it, so an id saved under another
    scope is not found (404) and a new id is created in it. Without one, an existing session keeps the
    scope it was saved with, and a new one has none.
    """
    try:
        body = json.loads(await request.body())
        session_id = check_id(body['id'])
    except (ValueError, KeyError, TypeError):
        return JSONResponse({'error': 'A chat request is a JSON object whose `id` is the session id.'}, status_code=400)
    record = await store.conversations.read_record(session_id)
    conversation_scope = scope if scope is not None or record is None else record.scope
    return await dispatch_chat(VercelAIAdapter, request, agent=agent, store=store, scope=conversation_scope)
