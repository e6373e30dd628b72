"""The site's mkdocs hook that lets inline code break between words only: in each `<code>` outside a code block, a
`<wbr>` (a place the line may break, nothing when it doesn't) after a path's slash or an opening bracket, comma,
equals sign, bar, colon, at sign or plus sign, and before a dotted name's dot, wherever a word follows. The
stylesheet then stops the browser from breaking code anywhere else, so a narrow column shows `store.` and
`session(id,` on one line and `wait=True)` on the next, never `Session.ru` and `n`; a single word too wide for its
column widens the column (a table too wide for the page scrolls inside its own box).

Code blocks (`<pre>`) are left as they are: they keep their lines, and scroll sideways inside themselves.
"""

from __future__ import annotations

import re
from typing import Any

_BLOCK = re.compile(r'<pre\b.*?</pre>', re.DOTALL)
_CODE = re.compile(r'(<code\b[^>]*>)(.*?)(</code>)', re.DOTALL)
_TAG_OR_TEXT = re.compile(r'(<[^>]*>)|([^<]+)')
_BREAK = re.compile(r'(?<=[/(\[{,=|:@+])(?=\w)|(?<=\w)(?=\.\w)')
"""Where a line may break inside code: after a separator, or before a dot, with a word on the far side."""


def mark_code_breaks(html: str) -> str:
    """The page's HTML with break points in its inline code (see the module's doc)."""
    pieces: list[str] = []
    start = 0
    for block in _BLOCK.finditer(html):
        pieces += [_CODE.sub(_mark_code, html[start : block.start()]), block.group()]
        start = block.end()
    pieces.append(_CODE.sub(_mark_code, html[start:]))
    return ''.join(pieces)


def _mark_code(code: re.Match[str]) -> str:
    opening, inside, closing = code.groups()
    marked = ''.join(piece[1] if piece[1] else _BREAK.sub('<wbr>', piece[2]) for piece in _TAG_OR_TEXT.finditer(inside))
    return f'{opening}{marked}{closing}'


def on_page_content(html: str, **kwargs: Any) -> str:
    """mkdocs' hook: runs on every page's HTML once its Markdown is rendered."""
    return mark_code_breaks(html)
