"""Review stored sessions in a browser and chat through them: `create_app(store, ...)`, what `session-store serve` runs.

Server-rendered pages (Starlette and Jinja2 templates, autoescaped) with the same data as JSON under
`/api/...`; a few lines of the package's own JavaScript expand parts and stream chat answers. Every asset
ships in the package: no build step, no CDN, it works offline. It needs the `web` extra.

Modules: `_app` (the app and its routes), `_queries` (what each page shows, through the store's public
API, and the entry ids a page's Edit and Regenerate buttons resend), `_present` (messages as page views),
`_security` (loopback, token, same-origin, headers), `_chat` (the chat endpoint, `dispatch_chat` with
pydantic-ai's `VercelAIAdapter` over the store) and `_titles` (the rename form: what a title may be, and what a
stale rename is told).
"""

from __future__ import annotations

import importlib.util

WEB_EXTRA = 'pip install "pydantic-ai-session-store[web]"'
"""What installs what this package needs."""

_missing = [name for name in ('starlette', 'jinja2') if importlib.util.find_spec(name) is None]
if _missing:
    raise ModuleNotFoundError(
        f'session_store.web needs the web extra ({", ".join(_missing)} missing): {WEB_EXTRA}.', name=_missing[0]
    )

from .._offline import resolve_model  # noqa: E402
from ._app import MESSAGES_PER_PAGE, SESSIONS_PER_PAGE, create_app  # noqa: E402
from ._security import check_bind, is_loopback  # noqa: E402
from ._titles import MAX_TITLE  # noqa: E402

__all__ = (
    'MAX_TITLE',
    'MESSAGES_PER_PAGE',
    'SESSIONS_PER_PAGE',
    'WEB_EXTRA',
    'check_bind',
    'create_app',
    'is_loopback',
    'resolve_model',
)
