"""Chat front ends on a store: a UI adapter's request, with an edit or regenerate of any user message resolved
against the archive (`dispatch_chat`), and usage limits that count one run, not the whole conversation
(`run_limits`)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationRecord, ConversationStore
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.usage import UsageLimits

from ._ids import check_id
from ._ui_ids import prompt_ui_id

if TYPE_CHECKING:
    from pydantic_ai.agent import AbstractAgent
    from pydantic_ai.ui import UIAdapter
    from starlette.requests import Request
    from starlette.responses import Response

    from .store import SessionStore

__all__ = ('dispatch_chat', 'run_limits')


def run_limits(
    conversation: Conversation | ConversationRecord | None, limits: UsageLimits | None = None
) -> UsageLimits:
    """`limits` (pydantic-ai's defaults when `None`: 50 requests) for one run of a stored conversation.

    A run on `conversation=` adds to the usage the conversation carries, and pydantic-ai checks its usage limits
    against that total, so with the default limits a chat dies at its 51st request, whatever each run made. These
    limits count from the conversation's usage so far (requests, tool calls, input, output and total tokens): each
    run gets the budget `limits` gives. The cost limit and the per-request limit are left as they are.

    ```python
    conversation = await store.conversations.load(cid)
    conversation = conversation or Conversation(conversation_id=cid)
    limits = run_limits(conversation)
    result = await agent.run(prompt, conversation=conversation, usage_limits=limits)
    ```
    """
    limits = limits if limits is not None else UsageLimits()
    if conversation is None:
        return limits
    used = conversation.usage

    def after(limit: int | None, spent: int) -> int | None:
        return None if limit is None else spent + limit

    return replace(
        limits,
        request_limit=after(limits.request_limit, used.requests),
        tool_calls_limit=after(limits.tool_calls_limit, used.tool_calls),
        input_tokens_limit=after(limits.input_tokens_limit, used.input_tokens),
        output_tokens_limit=after(limits.output_tokens_limit, used.output_tokens),
        total_tokens_limit=after(limits.total_tokens_limit, used.total_tokens),
    )


async def dispatch_chat(
    adapter: type[UIAdapter[Any, Any, Any, Any, Any]],
    request: Request,
    *,
    agent: AbstractAgent[Any, Any],
    store: SessionStore,
    scope: str | None = None,
    usage_limits: UsageLimits | None = None,
    **kwargs: Any,
) -> Response:
    """Answer a chat front end's request (Vercel AI's `useChat`, AG-UI) with the conversation kept in `store`.

    What `adapter.dispatch_request(request, agent=agent, conversation_store=store.conversations,
    conversation_scope=scope, ...)` does, with two differences:

    - **Edit and regenerate anywhere.** A user message sent again under an id the conversation's active path
      already holds (an edit, a regenerate, by its UI message id or its entry id) runs from the conversation as
      it stood before that message, however old: the model is sent the window of that path, with its own latest
      summary, and the replaced turn stays a branch (`SQLConversationStore.resubmitting`). The stock adapter
      alone reaches only the loaded window, and cuts the summary away with the window's first prompt.
    - **A budget per run.** `usage_limits` (pydantic-ai's defaults when `None`) count from the conversation's
      usage so far (`run_limits`), so a long chat does not die at its 51st request.

    Other keyword arguments go to `dispatch_request` as they are.
    """
    conversations = store.conversations
    conversation_id, message_id = await _resent_message(adapter, request, agent)
    conversation_store: ConversationStore = conversations
    record = None
    if conversation_id is not None and _valid_id(conversation_id):
        record = await conversations.read_record(conversation_id)
        if record is not None and message_id is not None:
            resubmitted = await conversations.resubmitting(conversation_id, message_id, scope=scope)
            conversation_store = resubmitted if resubmitted is not None else conversations
    in_scope = record is not None and record.scope == scope
    return await adapter.dispatch_request(
        request,
        agent=agent,
        conversation_store=conversation_store,
        conversation_scope=scope,
        usage_limits=run_limits(record if in_scope else None, usage_limits),
        **kwargs,
    )


async def _resent_message(
    adapter: type[UIAdapter[Any, Any, Any, Any, Any]], request: Request, agent: AbstractAgent[Any, Any]
) -> tuple[str | None, str | None]:
    """The request's conversation id, and the UI message id of the user prompt opening its new turn (the client's
    messages after its last response), which may be one sent again; `None`s where the request has none."""
    try:
        peek = await adapter.from_request(request, agent=agent)
        messages: list[ModelMessage] = peek.messages
        conversation_id = peek.conversation_id
    except Exception:  # whatever the adapter refuses, its own dispatch refuses again, in its own words
        return None, None
    last_response = max((i for i, m in enumerate(messages) if isinstance(m, ModelResponse)), default=-1)
    turn = messages[last_response + 1 :]
    return conversation_id, prompt_ui_id(turn[0]) if turn else None


def _valid_id(conversation_id: str) -> bool:
    """Whether the store can hold a conversation under this id; one it can't is the adapter's to refuse."""
    try:
        check_id(conversation_id)
    except ValueError:
        return False
    return True
