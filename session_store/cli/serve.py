"""`serve`: review the store's sessions in a browser (and chat through them with `--chat`)."""

from __future__ import annotations

import importlib.util

import click

from .._offline import resolve_model
from ._app import db_option, main, pass_settings
from ._runtime import Failure, Settings, err, open_store, run

__all__ = ('serve',)

ENV_TOKEN = 'SESSION_STORE_TOKEN'


@main.command()
@click.option(
    '--host', default='127.0.0.1', show_default=True, help='Address to listen on; other than loopback needs --token.'
)
@click.option('--port', type=click.IntRange(0, 65535), default=8000, show_default=True, help='Port to listen on.')
@click.option('--scope', metavar='SCOPE', help='Confine every page, API call and chat to this scope.')
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
@db_option
@pass_settings
def serve(
    settings: Settings, host: str, port: int, scope: str | None, token: str | None, chat_model: str | None
) -> None:
    """Review sessions in a browser: conversations, summaries, windows, branches, search.

    Serves http://HOST:PORT/ until interrupted. Pages: the sessions (/), a session's conversation with each
    summary over the range it covers and where the model's window starts (/sessions/ID), the next
    request's window (/context/ID) and a search across sessions (/search?q=), all as JSON under /api/ too.

    Read-only unless --chat MODEL: then each session page gets a message box, answers stream in through
    pydantic-ai's VercelAIAdapter and are stored in the session (POST /api/chat takes any Vercel AI SDK
    front end too). It listens on 127.0.0.1 only, unless --token is set.
    """
    try:
        from .. import web  # only now: every other command works without the web extra
    except ModuleNotFoundError as error:
        raise Failure(str(error)) from None
    if importlib.util.find_spec('uvicorn') is None:
        raise Failure(f'serve needs uvicorn (missing), part of the web extra: {web.WEB_EXTRA}')
    try:
        web.check_bind(host, token)
    except ValueError as error:
        raise Failure(str(error)) from None
    run(settings, _serve(settings, host, port, scope, token, chat_model))


async def _serve(
    settings: Settings, host: str, port: int, scope: str | None, token: str | None, chat_model: str | None
) -> None:
    import uvicorn

    from .. import web

    model = None if chat_model is None else resolve_model(chat_model)
    async with open_store(settings, 'read' if model is None else 'write') as store:
        app = web.create_app(store, scope=scope, token=token, chat_model=model)
        server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level='warning', lifespan='off'))
        shown = f'[{host}]' if ':' in host else host
        notes = [f'scope {scope!r}'] if scope else []
        notes += [f'chat with {chat_model}'] if chat_model else ['read-only']
        notes += ['token required'] if token else []
        err.print(
            f'Serving {settings.shown_url} at http://{shown}:{port}/ ({", ".join(notes)}). Ctrl-C stops it.',
            markup=False,
        )
        await server.serve()
