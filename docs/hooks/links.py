"""The site's mkdocs hook that links API names: a public name of `session_store` or `processors` written in
backticks in a page's prose (`SessionStore`, `Session.run`, `processors.SlidingWindow`) becomes a link to its
entry in the API reference, through mkdocs-autorefs, so no page has to spell the link out.

A name outside `__all__` that an API page gives an entry from its module (`processors.cut_points.safe_cut_points`)
is linked the same way, written alone or as that dotted path.

Code blocks, headings and text already inside a link are left as they are. Only names the reference shows are
linked (the packages' `__all__`, the entries the API pages give from a module, and the public members their
classes define), so `mkdocs build --strict`, which fails on an unknown cross-reference, never sees one from here.
"""

from __future__ import annotations

import functools
import importlib
import re
from pathlib import Path
from typing import Any

PACKAGES = ('session_store', 'processors')
"""The packages the API reference documents, each on a page of its own."""

API_PAGES = Path(__file__).parent.parent / 'api'
"""The API reference's pages, whose `::: ` lines name its entries."""

_CODE_SPAN = re.compile(r'`(?P<name>[A-Za-z_][\w.]*)`')
_LINK = re.compile(r'\[[^\]]*\](?:\([^)]*\)|\[[^\]]*\])')
"""An inline link, `[text](url)`, or a reference link, `[text][id]`: its text is left alone."""
_FENCE = re.compile(r'^\s*(```|~~~)')


@functools.cache
def identifiers() -> dict[str, str]:
    """Each name prose may write, with the identifier of its entry in the reference.

    `SessionStore` and `session_store.SessionStore` give `session_store.SessionStore`; `Session.run` gives
    `session_store.Session.run`.
    """
    found: dict[str, str] = {}
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            _add(found, name, f'{package}.{name}', getattr(module, name))
    for home, name in _module_entries():
        if name not in found:
            _add(found, name, f'{home}.{name}', getattr(importlib.import_module(home), name))
    return found


def _add(found: dict[str, str], name: str, identifier: str, value: object) -> None:
    """`name` and `identifier` (and each public member, when `value` is a class) as links to `identifier`."""
    found[name] = found[identifier] = identifier
    if isinstance(value, type):
        for member in _own_members(value):
            found[f'{name}.{member}'] = found[f'{identifier}.{member}'] = f'{identifier}.{member}'


def _module_entries() -> list[tuple[str, str]]:
    """Each entry the API pages give from a module of a package (`processors.cut_points.safe_cut_points`),
    as the module and the name."""
    entries: list[tuple[str, str]] = []
    for page in sorted(API_PAGES.glob('*.md')):
        for dotted in re.findall(r'^::: ([\w.]+)$', page.read_text(), flags=re.MULTILINE):
            home, _, name = dotted.rpartition('.')
            if home.partition('.')[0] in PACKAGES and '.' in home:
                entries.append((home, name))
    return entries


def _own_members(cls: type) -> list[str]:
    """The public members `cls` defines itself, as the reference lists them (inherited ones it does not)."""
    fields = getattr(cls, '__dataclass_fields__', {})
    return [name for name in [*vars(cls), *fields] if not name.startswith('_')]


def link_names(markdown: str) -> str:
    """The page with each backticked API name in its prose made a cross-reference to the API reference."""
    known = identifiers()
    out: list[str] = []
    fenced = False
    for line in markdown.splitlines(keepends=True):
        if _FENCE.match(line):
            fenced = not fenced
        if fenced or _FENCE.match(line) or line.startswith(('#', ':::', '<!--')):
            out.append(line)
            continue
        out.append(_link_spans(line, known))
    return ''.join(out)


def _link_spans(line: str, known: dict[str, str]) -> str:
    """`line` with its backticked known names linked, outside the links it already has."""
    pieces: list[str] = []
    start = 0
    for link in _LINK.finditer(line):
        pieces += [_link_outside(line[start : link.start()], known), link.group()]
        start = link.end()
    pieces.append(_link_outside(line[start:], known))
    return ''.join(pieces)


def _link_outside(text: str, known: dict[str, str]) -> str:
    def replace(span: re.Match[str]) -> str:
        identifier = known.get(span['name'])
        return span.group() if identifier is None else f'[{span.group()}][{identifier}]'

    return _CODE_SPAN.sub(replace, text)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """mkdocs' hook: runs on every page's Markdown before it is rendered."""
    return link_names(markdown)
