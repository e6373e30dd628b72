"""The documentation site as a browser gets it: `mkdocs build --strict` into a folder, and each page's HTML read into
a small tree of elements with the standard library's `html.parser`, to find what a reader sees (a signature, a
link, an admonition) by tag, class and ancestry."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

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
