"""What the web app's tests share: a store with every kind of part (hostile text included), and a client on it.

The app runs behind Starlette's test client, on the client's own event loop, with its own store on the
test's database, as a server would: the store that filled the database is not shared with it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import count
from typing import Any

import pytest
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from starlette.testclient import TestClient

from processors import SummarizationProcessor
from session_store import Encryption, SessionStore
from session_store._offline import echo_model
from session_store.web import create_app
from testkit.postgres import PostgresUnavailable, require_postgres
from testkit.scripted import ParallelToolAssistant, scripted_agent
from testkit.templates import Templates

HOSTILE = {
    'instructions': '<script>alert("instructions")</script>',
    'prompt': '<img src=x onerror=alert("prompt")>',
    'thinking': '<script>alert("thinking")</script>',
    'call': '<script>alert("call")</script>',
    'retry': '<img src=x onerror=alert("retry")>',
    'return': '</pre><script>alert("return")</script>',
    'answer': '</div><script>alert("answer")</script><img src=x onerror=alert("answer")>',
    'summary': '<img src=x onerror=alert("summary")>',
    'session': '<img src=x onerror=alert("id")>',
}
"""Text that would run script if a page put it into HTML unescaped; each kind of part carries one."""

LONG_RESULT = {'order_id': 'ORDER-1042', 'lines': [{'sku': f'SKU-{i}', 'qty': i} for i in range(30)]}
"""A tool return long enough to start collapsed."""


def hostile_summarizer() -> FunctionModel:
    calls = count(1)

    def summarize(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(f'Summary {next(calls)}: orders discussed. {HOSTILE["summary"]}')])

    return FunctionModel(summarize)


def hostile_agent() -> Agent[None, str]:
    """Thinks, calls `lookup` with hostile arguments, is told to retry once, then answers with hostile text."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if any(isinstance(part, UserPromptPart) for part in last.parts):
            return ModelResponse(
                parts=[
                    ThinkingPart(HOSTILE['thinking']),
                    ToolCallPart('lookup', {'q': HOSTILE['call']}, tool_call_id='c1'),
                ]
            )
        if any(isinstance(part, RetryPromptPart) or getattr(part, 'outcome', '') == 'retried' for part in last.parts):
            return ModelResponse(parts=[ToolCallPart('lookup', {'q': 'ORDER-1042'}, tool_call_id='c2')])
        assert any(isinstance(part, ToolReturnPart) for part in last.parts), last
        return ModelResponse(parts=[TextPart(HOSTILE['answer'])])

    agent = Agent(FunctionModel(respond), instructions=HOSTILE['instructions'])

    @agent.tool_plain
    def lookup(q: str) -> Any:
        if q != 'ORDER-1042':
            raise ModelRetry(HOSTILE['retry'])
        return {**LONG_RESULT, 'note': HOSTILE['return']}

    return agent


async def populate(db_url: str) -> None:
    """Sessions of three scopes:

    - `alpha` (scope `user-1`): 12 scripted tool turns, summarized past 20 messages keeping 6 (so
      several summaries and a window that starts late), then one turn of the hostile agent.
    - `beta` (scope `user-2`): 2 scripted turns.
    - the hostile id `HOSTILE['session']` (no scope): 1 scripted turn.
    """
    processor = SummarizationProcessor(hostile_summarizer(), trigger=('messages', 20), keep=('messages', 6))
    async with SessionStore(db_url, processor=processor) as store:
        alpha = await store.session('alpha', scope='user-1')
        agent = scripted_agent(ParallelToolAssistant())
        for turn in range(12):
            await alpha.run(agent, f'Turn M{turn} about ORDER-{1000 + turn}')
        await alpha.run(hostile_agent(), HOSTILE['prompt'])
        beta = await store.session('beta', scope='user-2')
        for turn in range(2):
            await beta.run(scripted_agent(ParallelToolAssistant()), f'Turn M{turn} for beta')
        odd = await store.session(HOSTILE['session'])
        await odd.run(scripted_agent(ParallelToolAssistant()), 'Turn M0 for the odd one')


async def session_ids(url: str) -> list[str]:
    """Every session id the database at `url` holds, newest first."""
    async with SessionStore(url) as store:
        return [info.session_id for info in await store.sessions()]


def filled_database(backend: str, tmp_path_factory: pytest.TempPathFactory, templates: Templates) -> Iterator[str]:
    """A new database on `backend` (`sqlite` or `postgresql`), `populate`d, for a module's tests that only read.

    A copy of the run's template that `populate` filled once, as the repo's `new_database(fill=populate)` makes;
    like it, without a PostgreSQL server its cases skip, except under CI.
    """
    if backend == 'sqlite':
        path = tmp_path_factory.mktemp('web') / 'sessions.db'
        templates.sqlite_copy(path, populate)
        yield f'sqlite+aiosqlite:///{path}'
        return
    try:
        url = templates.postgresql_copy(require_postgres(), populate)
    except PostgresUnavailable as error:
        pytest.skip(str(error))
    try:
        yield url
    finally:
        templates.drop_later(url)


ECHO = echo_model(delay=0)
"""`--chat test`'s offline model without its pause between streamed words: these tests check what is streamed
and stored, not its pace (the pause put seconds of sleep into the quick tier)."""


@contextmanager
def web_client(
    db_url: str, *, read_only: bool = False, encryption: Encryption | None = None, **options: Any
) -> Iterator[TestClient]:
    """A test client on `create_app(store, **options)`, with a store of its own opened on its event loop.

    It addresses the app as `http://127.0.0.1`, as a browser on this machine would.
    """
    store = SessionStore(db_url, read_only=read_only, encryption=encryption)
    app = create_app(store, **options)
    with TestClient(app, base_url='http://127.0.0.1') as client:
        try:
            yield client
        finally:
            assert client.portal is not None  # the client's event loop, which the store's connections belong to
            client.portal.call(store.close)


def sse_chunks(body: str) -> list[dict[str, Any]]:
    """The JSON chunks of a Vercel AI stream (`data: {...}` lines)."""
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith('data: {')]


def ui_message(message_id: str, text: str, role: str = 'user') -> dict[str, Any]:
    return {'id': message_id, 'role': role, 'parts': [{'type': 'text', 'text': text}]}


SAME_ORIGIN = {'Origin': 'http://127.0.0.1'}
"""What a browser sends with a POST from one of the app's own pages."""
