"""What keeps private conversations private: where the server may listen, who may ask, and from which page.

- `check_bind`: a server listens on loopback unless a token is set.
- `Guard`, an ASGI middleware in front of every route:
  1. Without a token, the `Host` header must name this machine (loopback, or a host the app was told to
     trust), so a web page whose name was re-pointed at 127.0.0.1 (DNS rebinding) gets nothing.
  2. With a token, every request but the login form and the static files needs it: an
     `Authorization: Bearer <token>` header, or the cookie the login form sets. Else 401.
  3. A path this server was started without (`/api/chat` and `/rename/...` with no chat model) is 404, with the
     reason, whatever the request's origin: it changes nothing, so there is nothing to refuse.
  4. A request that changes state (any method but GET, HEAD, OPTIONS) must come from a page of this
     server: its `Origin` (or, failing that, its `Referer`) must name the same host and port. Else 403.
  5. Every answer carries a Content-Security-Policy that runs only this server's own script and styles,
     and is never cached.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
from collections.abc import Callable, Collection, Mapping
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ('COOKIE', 'Guard', 'check_bind', 'cookie_value', 'is_loopback', 'safe_next', 'token_matches')

COOKIE = 'session_store_auth'
"""The cookie the login form sets: a keyed digest of the token, never the token itself."""

SAFE_METHODS = frozenset({'GET', 'HEAD', 'OPTIONS'})

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS = [
    (b'content-security-policy', CSP.encode()),
    (b'x-content-type-options', b'nosniff'),
    (b'x-frame-options', b'DENY'),
    (b'referrer-policy', b'same-origin'),
]

_LOOPBACK_NAMES = frozenset({'localhost', 'localhost.localdomain', 'ip6-localhost'})


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or address, IPv6 with or without brackets) is this machine's loopback."""
    name = host.strip().lower().removeprefix('[').removesuffix(']')
    if name in _LOOPBACK_NAMES or name.endswith('.localhost'):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen beyond loopback without a token: anyone who reaches the port would read every session."""
    if not token and not is_loopback(host):
        raise ValueError(
            f'Refusing to listen on {host!r} without a token: anyone who can reach it would read every session. '
            'Set --token (or $SESSION_STORE_TOKEN), or listen on 127.0.0.1.'
        )


def cookie_value(token: str) -> str:
    """What the login cookie holds for `token`: a digest keyed by it, so the cookie never reveals the token."""
    return hmac.new(token.encode(), b'session-store web login', hashlib.sha256).hexdigest()


def token_matches(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode(), token.encode())


def safe_next(path: str | None) -> str:
    """A path on this server to go to after logging in; anything else (another site, a scheme) becomes `/`."""
    if not path or not path.startswith('/') or path.startswith('//') or '\\' in path:
        return '/'
    parts = urlsplit(path)
    return '/' if parts.scheme or parts.netloc else path


def _host_name(host_header: str) -> str:
    """The host name of a `Host` header, without its port."""
    if host_header.startswith('['):
        return host_header[1 : host_header.find(']')] if ']' in host_header else host_header
    return host_header.rsplit(':', 1)[0] if host_header.count(':') == 1 else host_header


class Guard:
    """The middleware in front of the app: host check, token, same-origin check and security headers.

    Args:
        app: The app it guards.
        token: The token every request must carry (`None`: no token, loopback only).
        trusted_hosts: `Host` names besides loopback that may reach a server without a token.
        login_page: Renders the login form (the path to return to, an error or `None`, the app's root path) for
            a browser that asked for a page without the token.
        not_served: Paths this app was started without, each with why, answered 404; one that ends in `/` stands
            for every path under it.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        trusted_hosts: Collection[str] = (),
        login_page: Callable[[str, str | None, str], str],
        not_served: Mapping[str, str] | None = None,
    ) -> None:
        self.app = app
        self.not_served = dict(not_served or {})
        self.token = token
        self.cookie = None if token is None else cookie_value(token)
        self.trusted_hosts = {host.lower() for host in trusted_hosts}
        self.login_page = login_page

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope['type'] != 'http':
            if scope['type'] == 'websocket':  # nothing here speaks websockets
                await send({'type': 'websocket.close', 'code': 1008})
                return
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        root: str = scope.get('root_path', '')
        path: str = scope['path'].removeprefix(root) if root else scope['path']
        refusal = self._refusal(scope, headers, path, root)

        async def send_with_headers(message: Message) -> None:
            if message['type'] == 'http.response.start':
                message['headers'] = [*message.get('headers', []), *_HEADERS]
                if not path.startswith('/static/'):
                    message['headers'].append((b'cache-control', b'no-store'))
            await send(message)

        if refusal is not None:
            status, body, content_type, extra = refusal
            await send_with_headers(
                {
                    'type': 'http.response.start',
                    'status': status,
                    'headers': [(b'content-type', content_type.encode()), *extra],
                }
            )
            await send_with_headers({'type': 'http.response.body', 'body': body.encode()})
            return
        await self.app(scope, receive, send_with_headers)

    def _refusal(
        self, scope: Scope, headers: Headers, path: str, root: str
    ) -> tuple[int, str, str, list[tuple[bytes, bytes]]] | None:
        """Why this request gets no answer from the app, as (status, body, content type, extra headers)."""
        host = headers.get('host', '')
        name = _host_name(host).lower()
        if self.token is None and not (is_loopback(name) or name in self.trusted_hosts):
            return 400, 'Invalid Host header: this server answers only on loopback.\n', 'text/plain; charset=utf-8', []
        public = path == '/login' or path.startswith('/static/')
        if self.token is not None and not public and not self._authorized(headers):
            return self._unauthorized(scope, headers, path, root)
        reason = self._not_served(path)
        if reason is not None:
            return 404, json.dumps({'error': reason}), 'application/json', []
        if scope['method'] not in SAFE_METHODS and not self._same_origin(headers, host):
            return (
                403,
                json.dumps({'error': 'Refused: a request that changes anything must come from a page of this server.'}),
                'application/json',
                [],
            )
        return None

    def _not_served(self, path: str) -> str | None:
        """Why `path` is one this app was started without, if it is."""
        if path in self.not_served:
            return self.not_served[path]
        return next(
            (why for served, why in self.not_served.items() if served.endswith('/') and path.startswith(served)), None
        )

    def _authorized(self, headers: Headers) -> bool:
        assert self.token is not None and self.cookie is not None
        scheme, _, given = headers.get('authorization', '').partition(' ')
        if scheme.lower() == 'bearer' and token_matches(given.strip(), self.token):
            return True
        for item in headers.get('cookie', '').split(';'):
            name, _, value = item.strip().partition('=')
            if name == COOKIE and hmac.compare_digest(value.encode(), self.cookie.encode()):
                return True
        return False

    def _unauthorized(
        self, scope: Scope, headers: Headers, path: str, root: str
    ) -> tuple[int, str, str, list[tuple[bytes, bytes]]]:
        challenge = [(b'www-authenticate', b'Bearer realm="session-store"')]
        wants_page = scope['method'] == 'GET' and 'text/html' in headers.get('accept', '')
        if wants_page and not path.startswith('/api/'):
            query = scope.get('query_string', b'').decode('latin-1')
            back = path + (f'?{query}' if query else '')
            return 401, self.login_page(back, None, root), 'text/html; charset=utf-8', challenge
        body = json.dumps({'error': 'This server needs its token: Authorization: Bearer <token>, or log in at /login.'})
        return 401, body, 'application/json', challenge

    @staticmethod
    def _same_origin(headers: Headers, host: str) -> bool:
        """Whether the request came from a page of this server: its Origin, else its Referer, names this host."""
        source = headers.get('origin') or headers.get('referer')  # an Origin of `null` (a sandboxed page) is refused
        if not source or not host:
            return False
        parts = urlsplit(source)
        return bool(parts.scheme in ('http', 'https') and parts.netloc.lower() == host.lower())
