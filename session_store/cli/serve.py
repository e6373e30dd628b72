"""`serve`: review the store's sessions in a browser (and chat through them with `--chat`)."""

from __future__ import annotations

import errno
import importlib.util
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import click

from ._app import NAME, Bounded, db_option, main
from ._runtime import Failure, Settings, err, open_store, pass_settings, run
from ._summarizer import summarizer_options, summarizing

if TYPE_CHECKING:  # the web extra and pydantic-ai are imported only when serving: `serve --help` needs neither
    from pydantic_ai.models import Model
    from starlette.applications import Starlette

    from processors import SummarizationProcessor

__all__ = ('serve', 'served_app')

ENV_TOKEN = 'SESSION_STORE_TOKEN'


@main.command()
@click.option(
    '--host', default='127.0.0.1', show_default=True, help='Address to listen on; other than loopback needs --token.'
)
@click.option('--port', type=Bounded(0, 65535), default=8000, show_default=True, help='Port to listen on.')
@click.option('--scope', metavar='SCOPE', type=NAME, help='Confine every page, API call and chat to this scope.')
@click.option(
    '--token',
    metavar='TOKEN',
    envvar=ENV_TOKEN,
    show_envvar=True,
    help='Require it on every request (Authorization: Bearer TOKEN, or a login form that sets a cookie).',
)
@click.option(
    '--chat', 'chat_model', metavar='MODEL', help="Chat through sessions with this model; 'test' runs offline."
)
@summarizer_options
@db_option
@pass_settings
def serve(
    settings: Settings,
    host: str,
    port: int,
    scope: str | None,
    token: str | None,
    chat_model: str | None,
    summarizer: str | None,
    trigger: int | None,
    keep: int | None,
) -> None:
    """Review sessions in a browser: conversations, summaries, windows, branches, search.

    Serves http://HOST:PORT/ until interrupted. Pages: the sessions (/), a session's conversation with each
    summary over the range it covers and where the model's window starts (/sessions/ID), the next
    request's window (/context/ID) and a search across sessions (/search?q=), all as JSON under /api/ too.

    Read-only unless --chat MODEL: then each session page gets a message box, answers stream in through
    pydantic-ai's VercelAIAdapter and are stored in the session (POST /api/chat takes any Vercel AI SDK
    front end too). With --summarizer MODEL as well, a chat's window is summarized past --trigger messages
    down to the --keep newest, each summary stored as the next link of the session's chain (the page shows
    it as a band). It listens on 127.0.0.1 only, unless --token is set.
    """
    try:
        from .. import web  # only now: every other command works without the web extra
    except ModuleNotFoundError as error:
        raise Failure(str(error)) from None
    if importlib.util.find_spec('uvicorn') is None:
        raise Failure(f'serve needs uvicorn (missing), part of the web extra: {web.WEB_EXTRA}')
    if chat_model is None and summarizer is not None:
        raise Failure('--summarizer needs --chat MODEL: summaries are made as the browser chat runs.')
    try:
        web.check_bind(host, token)
    except ValueError as error:
        raise Failure(str(error)) from None
    notes = [f'scope {scope!r}'] if scope else []
    notes += [f'chat with {chat_model}'] if chat_model else ['read-only']
    notes += [f'summarized by {summarizer}'] if summarizer else []
    notes += ['token required'] if token else []

    async def work() -> None:
        processor = summarizing(summarizer, trigger, keep)
        with _listen(host, port) as listening:
            async with served_app(
                settings, scope=scope, token=token, chat_model=chat_model, processor=processor
            ) as app:
                await _serve(settings, app, listening, notes)

    run(settings, work())


@asynccontextmanager
async def served_app(
    settings: Settings,
    *,
    scope: str | None,
    token: str | None,
    chat_model: Model | str | None,
    processor: SummarizationProcessor | None,
) -> AsyncIterator[Starlette]:
    """The app `serve` runs, on the store at `--db`: read-only without a chat model; with one (a pydantic-ai model,
    or a name as `--chat` takes it), summarizing the chats' windows with `processor` (through
    `store.conversations`, which the chat endpoint saves through)."""
    from .. import web

    model = None if chat_model is None else web.resolve_model(chat_model)
    async with open_store(settings, 'read' if model is None else 'write', processor=processor) as store:
        yield web.create_app(store, scope=scope, token=token, chat_model=model)


def _listen(host: str, port: int) -> socket.socket:
    """A socket listening on `host`:`port`, bound before anything says it serves; a port in use fails in one line."""
    try:
        return socket.create_server((host, port), family=socket.AF_INET6 if ':' in host else socket.AF_INET)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise Failure(
                f'Port {port} on {host} is in use: pass another --port (0 picks a free one), or stop what holds it.'
            ) from None
        raise Failure(f'Cannot listen on {host}:{port}: {error.strerror or error}.') from None


async def _serve(settings: Settings, app: Starlette, listening: socket.socket, notes: list[str]) -> None:
    import uvicorn

    host, port = listening.getsockname()[:2]
    server = uvicorn.Server(uvicorn.Config(app, log_level='warning', lifespan='off'))
    shown = f'[{host}]' if ':' in host else host
    err.print(
        f'Serving {settings.shown_url} at http://{shown}:{port}/ ({", ".join(notes)}). Ctrl-C stops it.',
        markup=False,
    )
    await server.serve(sockets=[listening])
