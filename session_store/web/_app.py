"""`create_app`: the Starlette app that serves a store's sessions as pages and as JSON, and chats through them.

Pages: `/` (sessions), `/sessions/{id}` (a session's conversation), `/context/{id}` (the next request's
window), `/search?q=` and `/export/{id}` (a download); the same data as JSON under `/api/...`; with a
chat model (the app writes only then), `POST /api/chat` and `POST /rename/{id}` (the session page's rename form).
Ids are percent-encoded in paths, so any session id works, `/` included.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any, Literal
from urllib.parse import parse_qs, quote

from jinja2 import Environment, PackageLoader, StrictUndefined
from pydantic_ai import Agent
from pydantic_ai.conversation_store import ConversationConflict
from pydantic_ai.exceptions import UserError
from pydantic_ai.models import Model
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .._ids import check_id
from ..errors import SessionNotFound
from ..store import SessionStore
from ._chat import chat_agent, chat_response
from ._queries import (
    SearchPage,
    SessionPage,
    SessionsPage,
    UnknownBranch,
    context_page,
    search_page,
    session_page,
    session_scope,
    sessions_page,
    visible_record,
)
from ._security import COOKIE, Guard, cookie_value, safe_next, token_matches
from ._titles import MAX_TITLE, RenameForm, checked_title, conflict_message

__all__ = ('MESSAGES_PER_PAGE', 'SESSIONS_PER_PAGE', 'create_app')

MESSAGES_PER_PAGE = 100
"""Messages a session page shows at once: a 100,000-message session opens as fast as a short one."""
SESSIONS_PER_PAGE = 50
MAX_PAGE = 500
"""The most `limit=` may ask for, on any page or API call."""
MAX_POSITION = 1_000_000_000
"""The most `offset=` and `at=` may ask for: past any session's length, inside every backend's integers."""
SEARCH_HITS = 50


def _sid(session_id: str) -> str:
    """A session id as one path segment: every character that could end or change a path is percent-encoded."""
    return quote(session_id, safe='')


def _time(value: datetime | str | None) -> str:
    if value is None:
        return ''
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    return (
        moment.strftime('%Y-%m-%d %H:%M UTC') if moment.utcoffset() is not None else moment.strftime('%Y-%m-%d %H:%M')
    )


def _templates() -> Environment:
    environment = Environment(
        loader=PackageLoader('session_store.web', 'templates'),
        autoescape=True,  # every value is escaped: message content is untrusted text
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters['sid'] = _sid
    environment.filters['num'] = lambda value: f'{value:,}'
    environment.filters['time'] = _time
    return environment


class _BadRequest(Exception):
    pass


def _number(request: Request, name: str, default: int | None, low: int = 0, high: int = MAX_POSITION) -> int | None:
    """The query parameter `name` as a whole number from `low` to `high`; `default` when it is absent or empty."""
    raw = request.query_params.get(name)
    if raw is None or raw == '':
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _BadRequest(f'{name} must be a whole number; got {raw!r}.') from None
    if not low <= value <= high:
        raise _BadRequest(f'{name} must be from {low:,} to {high:,}; got {value}.')
    return value


class _Web:
    """The app's settings and its request handlers."""

    def __init__(self, store: SessionStore, scope: str | None, token: str | None, agent: Agent[None, str] | None):
        self.store = store
        self.scope = scope
        self.token = token
        self.agent = agent
        self.templates = _templates()

    # --- rendering

    def page(self, request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = self.templates.get_template(template).render(
            root=request.scope.get('root_path', ''),
            app_scope=self.scope,
            chat=self.agent is not None,
            logged_in=self.token is not None,
            query=context.pop('query', ''),
            max_title=MAX_TITLE,
            **context,
        )
        return HTMLResponse(html, status_code=status)

    def login_html(self, back: str, error: str | None, root: str = '') -> str:
        return self.templates.get_template('login.html').render(
            root=root, app_scope=self.scope, chat=False, logged_in=False, query='', next=safe_next(back), error=error
        )

    def not_found(self, request: Request, message: str) -> Response:
        if request.url.path.startswith(f'{request.scope.get("root_path", "")}/api/'):
            return JSONResponse({'error': message}, status_code=404)
        return self.page(request, 'error.html', 404, title='Not found', message=message)

    def bad_request(self, request: Request, message: str) -> Response:
        if request.url.path.startswith(f'{request.scope.get("root_path", "")}/api/'):
            return JSONResponse({'error': message}, status_code=400)
        return self.page(request, 'error.html', 400, title='Bad request', message=message)

    # --- pages

    async def index(self, request: Request) -> Response:
        jump = request.query_params.get('session', '').strip()
        if jump:
            return RedirectResponse(f'{request.scope.get("root_path", "")}/sessions/{_sid(jump)}', status_code=303)
        listing = await self._sessions(request)
        return self.page(request, 'sessions.html', listing=listing, asked_scope=request.query_params.get('scope', ''))

    async def session(self, request: Request, status: int = 200, form: RenameForm | None = None) -> Response:
        shown = await self._session(request)
        form = form if form is not None else RenameForm.showing(shown.title)
        return self.page(
            request, 'session.html', status, title=shown.title or shown.session_id, page=shown, rename=form
        )

    async def context(self, request: Request) -> Response:
        window = await context_page(self.store, request.path_params['session_id'], scope=self.scope)
        return self.page(request, 'context.html', title=f'{window.session_id}: context', page=window)

    async def search(self, request: Request) -> Response:
        found = await self._search(request)
        return self.page(request, 'search.html', title='Search', query=found.query, found=found)

    async def export(self, request: Request) -> Response:
        session_id = request.path_params['session_id']
        scope = await session_scope(self.store, session_id, self.scope)
        document = await self.store.export(session_id, scope=scope)
        body = ''.join(f'{line}\n' for line in document.to_json_lines())
        # A header is latin-1: `filename` holds an ASCII stand-in, and `filename*` (RFC 6266) the id itself.
        ascii_name = ''.join(c if c.isascii() and (c.isalnum() or c in '-_.') else '_' for c in session_id)[:100]
        disposition = f'attachment; filename="{ascii_name}.jsonl"; filename*=UTF-8\'\'{_sid(session_id)}.jsonl'
        return Response(body, media_type='application/x-ndjson', headers={'content-disposition': disposition})

    # --- writes (only with chat: the app writes nothing else)

    async def rename(self, request: Request) -> Response:
        """`POST /rename/{id}`, the session page's rename form: `title` (blank removes it) and, if the page showed
        one, `expected_title`. The store writes it only if the title is still the one the page showed; else the
        page again (409), with the title it has now and what was typed, to save again."""
        session_id = request.path_params['session_id']
        form = parse_qs((await request.body()).decode('utf-8', 'replace'), keep_blank_values=True)
        typed, expected = form.get('title', [None])[0], form.get('expected_title', [None])[0]
        record = await visible_record(self.store, session_id, self.scope)
        if typed is None:
            return await self.session(request, 400, RenameForm('', expected, 'The rename form sends a title.'))
        try:
            title = checked_title(typed)
        except ValueError as error:
            return await self.session(request, 400, RenameForm(typed, expected, str(error)))
        try:
            await self.store.conversations.update(session_id, title=title, scope=record.scope, expected_title=expected)
        except ConversationConflict:
            current = (await visible_record(self.store, session_id, self.scope)).title
            return await self.session(request, 409, RenameForm(typed, current, conflict_message(expected, current)))
        except UserError:  # gone since it was read
            raise SessionNotFound(session_id, self.scope) from None
        return RedirectResponse(f'{request.scope.get("root_path", "")}/sessions/{_sid(session_id)}', status_code=303)

    # --- JSON

    async def api_sessions(self, request: Request) -> Response:
        return JSONResponse((await self._sessions(request)).json())

    async def api_session(self, request: Request) -> Response:
        return JSONResponse((await self._session(request)).json())

    async def api_context(self, request: Request) -> Response:
        window = await context_page(self.store, request.path_params['session_id'], scope=self.scope)
        return JSONResponse(window.json())

    async def api_search(self, request: Request) -> Response:
        return JSONResponse((await self._search(request)).json())

    async def api_chat(self, request: Request) -> Response:
        assert self.agent is not None
        return await chat_response(request, self.store, self.agent, self.scope)

    # --- login

    async def login(self, request: Request) -> Response:
        root = request.scope.get('root_path', '')
        if self.token is None:
            return RedirectResponse(f'{root}/', status_code=303)
        if request.method == 'GET':
            return HTMLResponse(self.login_html(request.query_params.get('next', '/'), None, root))
        form = parse_qs((await request.body()).decode('utf-8', 'replace'))
        given, back = form.get('token', [''])[0], form.get('next', ['/'])[0]
        if not token_matches(given, self.token):
            return HTMLResponse(self.login_html(back, 'That is not the token.', root), status_code=401)
        response = RedirectResponse(f'{root}{safe_next(back)}', status_code=303)
        response.set_cookie(
            COOKIE,
            cookie_value(self.token),
            path=f'{root}/',
            httponly=True,
            samesite='strict',
            secure=request.url.scheme == 'https',
        )
        return response

    async def logout(self, request: Request) -> Response:
        root = request.scope.get('root_path', '')
        response = RedirectResponse(f'{root}/login', status_code=303)
        response.delete_cookie(COOKIE, path=f'{root}/')
        return response

    # --- shared reads

    async def _sessions(self, request: Request) -> SessionsPage:
        asked = request.query_params.get('scope') or None
        if asked is not None:
            try:
                check_id(asked, 'scope')
            except ValueError as error:
                raise _BadRequest(str(error)) from None
        return await sessions_page(
            self.store,
            scope=self.scope,
            asked_scope=asked,
            offset=_number(request, 'offset', 0) or 0,
            limit=_number(request, 'limit', SESSIONS_PER_PAGE, 1, MAX_PAGE) or SESSIONS_PER_PAGE,
        )

    async def _session(self, request: Request) -> SessionPage:
        return await session_page(
            self.store,
            request.path_params['session_id'],
            scope=self.scope,
            offset=_number(request, 'offset', None),
            limit=_number(request, 'limit', MESSAGES_PER_PAGE, 1, MAX_PAGE) or MESSAGES_PER_PAGE,
            branch=request.query_params.get('branch') or None,
            at=_number(request, 'at', None),
        )

    async def _search(self, request: Request) -> SearchPage:
        match: Literal['phrase', 'words'] = 'words' if request.query_params.get('match') == 'words' else 'phrase'
        return await search_page(
            self.store,
            request.query_params.get('q', ''),
            scope=self.scope,
            match=match,
            limit=_number(request, 'limit', SEARCH_HITS, 1, MAX_PAGE) or SEARCH_HITS,
        )


_CHAT_NOT_ENABLED = 'chat is not enabled: start with --chat MODEL (create_app(chat_model=...) in code)'
"""Why `POST /api/chat` is 404 on a server started without a chat model, whatever the request's origin."""
_RENAME_NOT_ENABLED = 'renaming is not enabled: start with --chat MODEL (create_app(chat_model=...) in code)'
"""Why `POST /rename/{id}` is 404 on a server started without a chat model: it is read-only then."""


def create_app(
    store: SessionStore,
    *,
    scope: str | None = None,
    token: str | None = None,
    chat_model: Model | Agent[None, str] | str | None = None,
    trusted_hosts: Collection[str] = (),
) -> Starlette:
    """The ASGI app that serves `store`'s sessions in a browser, for `session-store serve` or your own server.

    Args:
        store: The store to serve; the app neither opens nor closes it. Without `chat_model` nothing is
            written, so a read-only store (`SessionStore(url, read_only=True)`) serves every page.
        scope: Confine every page, API call and chat to the sessions saved under this scope.
        token: Require it on every request: an `Authorization: Bearer <token>` header, or the cookie the
            `/login` form sets. Without a token the app answers only requests addressed to loopback
            (`Host: 127.0.0.1`, `localhost`, `[::1]`) or to `trusted_hosts`.
        chat_model: Enable chat (`POST /api/chat` and a message box on each session page): a pydantic-ai
            model, a model name (`'test'` is the offline `echo_model`, which quotes the prompt), or an agent to run.
            It also enables the one other write, renaming a session (the session page's rename form).
        trusted_hosts: More `Host` names to answer without a token, when you serve it behind a proxy.
    """
    if scope is not None:
        check_id(scope, 'scope')
    if token is not None and not token.strip():
        raise ValueError('The token must not be empty.')
    web = _Web(store, scope, token, None if chat_model is None else chat_agent(chat_model))

    async def session_not_found(request: Request, error: Exception) -> Response:
        assert isinstance(error, SessionNotFound)
        return web.not_found(request, f'No session {error.session_id!r}.')

    async def unknown_branch(request: Request, error: Exception) -> Response:
        return web.not_found(request, str(error))

    async def bad_request(request: Request, error: Exception) -> Response:
        return web.bad_request(request, str(error))

    async def http_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        if error.status_code == 404:
            return web.not_found(request, 'There is no such page.')
        return Response(error.detail, status_code=error.status_code, headers=error.headers)

    routes = [
        Route('/', web.index),
        Route('/sessions/{session_id:path}', web.session),
        Route('/context/{session_id:path}', web.context),
        Route('/export/{session_id:path}', web.export),
        Route('/search', web.search),
        Route('/login', web.login, methods=['GET', 'POST']),
        Route('/logout', web.logout, methods=['POST']),
        Route('/api/sessions', web.api_sessions),
        Route('/api/sessions/{session_id:path}', web.api_session),
        Route('/api/context/{session_id:path}', web.api_context),
        Route('/api/search', web.api_search),
        Mount('/static', StaticFiles(packages=[('session_store.web', 'static')]), name='static'),
    ]
    if web.agent is not None:
        routes.append(Route('/api/chat', web.api_chat, methods=['POST']))
        routes.append(Route('/rename/{session_id:path}', web.rename, methods=['POST']))
    return Starlette(
        routes=routes,
        middleware=[
            Middleware(
                Guard,
                token=token,
                trusted_hosts=trusted_hosts,
                login_page=web.login_html,
                not_served={}
                if web.agent is not None
                else {'/api/chat': _CHAT_NOT_ENABLED, '/rename/': _RENAME_NOT_ENABLED},
            )
        ],
        exception_handlers={
            SessionNotFound: session_not_found,
            UnknownBranch: unknown_branch,
            _BadRequest: bad_request,
            HTTPException: http_error,
        },
    )
