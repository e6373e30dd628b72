"""The documentation site as a browser gets it: `mkdocs build --strict` into a folder, and each page's HTML read into
a small tree of elements with the standard library's `html.parser`, to find what a reader sees (a signature, a
link, an admonition) by tag, class and ancestry. For what only a browser's layout shows (a page wider than a
phone, a word broken across lines), the site served from a thread and the scripts a browser runs on a page."""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests._markdown import REPO

VOID = frozenset({'area', 'base', 'br', 'col', 'embed', 'hr', 'img', 'input', 'link', 'meta', 'source', 'wbr'})
"""The elements HTML never closes."""


@dataclass
class Element:
    """One element of a page: its tag, attributes, parent, and children (elements and text, in order)."""

    tag: str
    attrs: dict[str, str]
    parent: Element | None = None
    children: list[Element | str] = field(default_factory=list)

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get('class', '').split())

    def text(self) -> str:
        """All the text inside the element, as it reads."""
        return ''.join(child if isinstance(child, str) else child.text() for child in self.children)

    def iter(self) -> Iterator[Element]:
        """The element and every element inside it, in document order."""
        yield self
        for child in self.children:
            if isinstance(child, Element):
                yield from child.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None) -> list[Element]:
        return [
            element
            for element in self.iter()
            if (tag is None or element.tag == tag) and (cls is None or cls in element.classes)
        ]

    def ancestors(self) -> Iterator[Element]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element('document', {})
        self._open = self.root

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {name: value or '' for name, value in attrs}, self._open)
        self._open.children.append(element)
        if tag not in VOID:
            self._open = element

    def handle_endtag(self, tag: str) -> None:
        # Close up to the nearest open element of this tag (HTML lets some end tags be left out).
        for node in [self._open, *self._open.ancestors()]:
            if node.tag == tag and node.parent is not None:
                self._open = node.parent
                return

    def handle_data(self, data: str) -> None:
        self._open.children.append(data)


def parse(html: str) -> Element:
    """A page's HTML as a tree of elements."""
    builder = _TreeBuilder()
    builder.feed(html)
    builder.close()
    return builder.root


def build_site(folder: Path) -> Path:
    """Build the site with `mkdocs build --strict` into `folder/site`; the folder, after checking it built with no
    warning."""
    mkdocs = shutil.which('mkdocs', path=str(Path(sys.executable).parent))
    assert mkdocs is not None, 'mkdocs is in the docs extra, which dev installs'
    site = folder / 'site'
    done = subprocess.run(
        [mkdocs, 'build', '--strict', '--site-dir', str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        # PYTHONPATH: the docs hook imports the packages, which must be this checkout's
        env={
            'NO_MKDOCS_2_WARNING': '1',
            'PATH': str(Path(sys.executable).parent),
            'HOME': str(folder),
            'PYTHONPATH': str(REPO),
        },
    )
    assert done.returncode == 0, done.stderr
    return site


def page(site: Path, name: str) -> Element:
    """The built page of `docs/NAME` (`'sessions.md'`, `'api/processors.md'`, `'index.md'`)."""
    stem = name.removesuffix('.md')
    path = site / 'index.html' if stem == 'index' else site / stem / 'index.html'
    return parse(path.read_text())


def content(root: Element) -> Element:
    """The page's own content (Material's `<article>`), without the header, navigation and footer."""
    (article,) = root.find_all('article')
    return article


@contextmanager
def served(site: Path) -> Iterator[str]:
    """The built site served over HTTP on a free loopback port, from a thread of this process; its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = ThreadingHTTPServer(('127.0.0.1', 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f'http://127.0.0.1:{server.server_address[1]}'
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def url_of(name: str) -> str:
    """The path of `docs/NAME`'s built page under the site's root (`'chat-app.md'` -> `'chat-app/'`)."""
    stem = name.removesuffix('.md')
    return '' if stem == 'index' else f'{stem}/'


SIDEWAYS = """() => {
    const width = document.documentElement.clientWidth;
    const found = [];
    if (document.documentElement.scrollWidth > width) {
        found.push(`the page is ${document.documentElement.scrollWidth} px wide in a ${width} px window`);
    }
    const scrolls = (element) => {
        for (let node = element.parentElement; node && node !== document.body; node = node.parentElement) {
            if (['auto', 'scroll'].includes(getComputedStyle(node).overflowX)) return true;
        }
        return false;
    };
    for (const element of document.querySelectorAll('article *')) {
        const box = element.getBoundingClientRect();
        if (box.width === 0 || (box.right <= width + 0.5 && box.left >= -0.5) || scrolls(element)) continue;
        const text = (element.textContent || '').trim().replace(/\\s+/g, ' ').slice(0, 60);
        found.push(`<${element.tagName.toLowerCase()}> ${Math.round(box.left)}-${Math.round(box.right)} px: ${text}`);
    }
    return found;
}"""
"""What lies past the window's sides, where only scrolling the page sideways would show it (or nothing would): an
element of the page's content that overflows it outside any box that scrolls by itself (a code block, a table's
wrapper), and the page's own scroll width."""

BROKEN_WORDS = """() => {
    const word = /[A-Za-z0-9_]/;
    const found = [];
    const range = document.createRange();
    for (const code of document.querySelectorAll('article code')) {
        if (code.closest('pre') || code.getClientRects().length < 2) continue;  // a block, or on one line
        let before = null;  // the character before, with the top of its line
        const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            for (let i = 0; i < node.data.length; i++) {
                const character = node.data[i];
                range.setStart(node, i);
                range.setEnd(node, i + 1);
                const box = range.getClientRects()[0];
                if (/\\s/.test(character) || !box || box.width === 0) {
                    if (before) before = {character: ' ', top: before.top};
                    continue;
                }
                const newLine = before && box.top > before.top + box.height / 2;
                if (newLine && word.test(before.character) && word.test(character)) {
                    const text = code.textContent;
                    const at = text.length - (node.data.length - i);
                    found.push(`${text.slice(0, at)}|${text.slice(at)}`);
                }
                before = {character, top: box.top};
            }
        }
    }
    return found;
}"""
"""Each inline code span (an identifier, a call) that a line break cuts between two characters of one word, as
`Session.ru|n`: the span, with `|` where its line breaks."""

COVERED_CODE = """() => {
    const found = [];
    const range = document.createRange();
    for (const block of document.querySelectorAll('article pre')) {
        const button = block.querySelector('.md-code__button, .md-clipboard');
        const code = block.querySelector(':scope > code');
        if (!button || !code || button.getClientRects().length === 0) continue;
        const over = button.getBoundingClientRect();
        const shown = code.getBoundingClientRect();
        const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            if (!node.data.trim()) continue;
            range.selectNodeContents(node);
            for (const box of range.getClientRects()) {
                const left = Math.max(box.left, shown.left), right = Math.min(box.right, shown.right);
                if (right > over.left && left < over.right && box.bottom > over.top && box.top < over.bottom) {
                    found.push(`${node.data.trim().slice(0, 40)} (in: ${code.textContent.slice(0, 40)})`);
                }
            }
        }
    }
    return found;
}"""
"""The code a block's copy button lies over: text of the block (as it shows, scrolled to its start) under the
button's box."""

SCROLLING_BLOCKS = """(language) => [...document.querySelectorAll(`article div.language-${language} pre > code`)]
    .filter(code => code.scrollWidth > code.clientWidth)
    .map(code => code.textContent.split('\\n').reduce((a, b) => (b.length > a.length ? b : a)))"""
"""The widest line of each code block in `language` that is wider than its box, so scrolls sideways."""

WIDE_TABLES = """() => [...document.querySelectorAll('article table')]
    .filter(table => table.getBoundingClientRect().width > document.querySelector('article').clientWidth + 0.5)
    .map(table => (table.querySelector('tr') || table).textContent.trim().replace(/\\s+/g, ' ').slice(0, 60))"""
"""Each table wider than the page's content, which the reader must scroll sideways to read: its first row."""
