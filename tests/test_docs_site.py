"""The documentation site as built (`mkdocs build --strict`, once for the module) and read as HTML: the API
reference shows each class's constructor and no implementation, the prose links every public name to its entry,
pages warn in admonitions, every page has the light/dark toggle, and `mkdocs serve` watches the packages the
reference is made from. Then every page in Chromium at a phone's width and a laptop's: none scrolls sideways, no
line breaks an identifier mid-word, no copy button covers code, every table fits."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from mkdocs.config import load_config
from playwright.sync_api import sync_playwright

import processors
import session_store
from tests._markdown import DOCS, REPO, docs_pages
from tests._site import (
    BROKEN_WORDS,
    COVERED_CODE,
    SCROLLING_BLOCKS,
    SIDEWAYS,
    WIDE_TABLES,
    Element,
    build_site,
    content,
    page,
    served,
    url_of,
)
from tests.test_docs import CODE_COLUMNS
from tests.test_web_browser import CHROMIUM_FLAGS, chromium

pytestmark = pytest.mark.slow  # one site build, about ten seconds, which the module's tests share

PACKAGES = (session_store, processors)

PROSE_PAGES = sorted(str(path.relative_to(DOCS)) for path in docs_pages() if path.parent == DOCS)
"""The pages written as prose (the API reference's pages are its docstrings)."""

WARNINGS = {
    'sessions.md': 'Messages are shared',
    'conversations.md': 'Usage limits',
    'encryption-and-retention.md': 'Keep the keys',
    'web.md': 'Behind a proxy',
}
"""A page that warns, with the title of the warning admonition it warns in."""


@pytest.fixture(scope='module')
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_site(tmp_path_factory.mktemp('docs'))


def test_the_site_builds_with_no_warning(site: Path) -> None:
    assert (site / 'api' / 'session_store' / 'index.html').is_file()


def _in(element: Element, tags: set[str], cls: str | None = None) -> Element | None:
    """The nearest ancestor of `element` with one of `tags` (and class `cls`, if given)."""
    return next(
        (a for a in element.ancestors() if a.tag in tags and (cls is None or cls in a.classes)),
        None,
    )


@pytest.mark.parametrize('name', sorted(str(path.relative_to(DOCS)) for path in docs_pages()))
def test_every_code_block_on_the_site_fits_its_width(site: Path, name: str) -> None:
    """The pages' own blocks, and the docstrings' examples on the API reference's. A signature wraps instead
    (the site's stylesheet): a default can be a string longer than the block."""
    too_long = [
        line
        for code in content(page(site, name)).find_all('code')
        if code.parent is not None and code.parent.tag == 'pre' and not _in(code, {'div'}, 'doc-signature')
        for line in code.text().splitlines()
        if len(line) > CODE_COLUMNS
    ]
    assert too_long == []


def _signatures(root: Element) -> dict[str, str]:
    """Each documented object's id (`session_store.SessionStore`) with the signature shown under its heading."""
    found: dict[str, str] = {}
    current: str | None = None
    for element in content(root).iter():
        if 'doc-heading' in element.classes and element.attrs.get('id'):
            current = element.attrs['id']
        elif 'doc-signature' in element.classes and current is not None and current not in found:
            found[current] = ' '.join(element.text().split())
    return found


def _named_parameters(cls: type) -> list[str]:
    """The parameters of `cls`'s constructor, by name (none when it takes only `*args, **kwargs`), save those a
    base class of another package declares (pydantic-ai's capability fields `description`, `defer_loading`): the
    reference reads only this project's source, and pydantic-ai's reference documents those."""
    try:
        parameters = inspect.signature(cls).parameters.values()
    except ValueError:  # a class that keeps a builtin's constructor
        return []
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ours = {package.__name__ for package in PACKAGES}
    elsewhere = {
        name
        for base in cls.__mro__
        if base.__module__.partition('.')[0] not in ours
        for name in vars(base).get('__annotations__', {})
    }
    return [p.name for p in parameters if p.kind not in variadic and p.name not in elsewhere]


@pytest.mark.parametrize('package', PACKAGES, ids=lambda package: package.__name__)
def test_each_class_shows_its_constructor_signature(site: Path, package: ModuleType) -> None:
    name = package.__name__
    shown = _signatures(page(site, f'api/{name}.md'))
    classes = {export: getattr(package, export) for export in package.__all__}
    checked = {export: cls for export, cls in classes.items() if isinstance(cls, type) and _named_parameters(cls)}
    assert 'SessionStore' in checked or name != 'session_store'
    wrong = []
    for export, cls in checked.items():
        signature = shown.get(f'{name}.{export}', '')
        missing = [p for p in _named_parameters(cls) if not re.search(rf'\b{p}\b', signature)]
        if not signature.startswith(f'{export}(') or missing:
            wrong.append(f'{export}: shows {signature!r}, missing {missing}')
    assert wrong == []


@pytest.mark.parametrize('package', PACKAGES, ids=lambda package: package.__name__)
def test_no_signature_shows_an_implementation_or_a_private_name(site: Path, package: ModuleType) -> None:
    """An attribute is shown with its type, a parameter with its default: not the expression computing it in
    `__init__`, a dataclass `field(...)` call, or a private helper."""
    shown = _signatures(page(site, f'api/{package.__name__}.md'))
    assert f'{package.__name__}.{package.__all__[0]}' in shown
    wrong = {
        identifier: signature
        for identifier, signature in shown.items()
        if re.search(r'\bfield\(|\bif\b.*\belse\b|(?<![\w.])_[A-Za-z]\w*', signature)
    }
    assert wrong == {}


PUBLIC = {
    spelling: (package.__name__, f'{package.__name__}.{name}')
    for package in PACKAGES
    for name in package.__all__
    for spelling in (name, f'{package.__name__}.{name}')
}
"""Each public name, as prose may write it, with its package and the id of its entry in the reference."""


@pytest.mark.parametrize('name', PROSE_PAGES)
def test_every_public_name_in_the_prose_links_to_its_entry(site: Path, name: str) -> None:
    article = content(page(site, name))
    unlinked = []
    for code in article.find_all('code'):
        target = PUBLIC.get(code.text())
        if target is None or _in(code, {'pre', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6'}):
            continue
        package, identifier = target
        link = _in(code, {'a'})
        href = '' if link is None else link.attrs.get('href', '')
        if not re.search(rf'(^|/)api/{package}/#{re.escape(identifier)}$', href):
            unlinked.append(f'{code.text()} -> {href or "no link"}')
    assert unlinked == []


def test_a_page_with_public_names_has_links_to_check(site: Path) -> None:
    """The test above has something to find: the sessions page names `SessionStore`, linked."""
    links = content(page(site, 'sessions.md')).find_all('a')
    assert any(link.attrs.get('href', '').endswith('api/session_store/#session_store.SessionStore') for link in links)


@pytest.mark.parametrize(('name', 'title'), WARNINGS.items())
def test_a_page_that_warns_does_so_in_an_admonition(site: Path, name: str, title: str) -> None:
    warnings = [
        ' '.join(element.text().split())
        for element in content(page(site, name)).find_all('div', cls='admonition')
        if element.classes & {'warning', 'danger', 'caution'}
    ]
    assert any(text.startswith(title) for text in warnings), warnings


def _prose(element: Element) -> str:
    """The element's text without its code."""
    return ''.join(
        child if isinstance(child, str) else '' if child.tag in ('code', 'pre') else _prose(child)
        for child in element.children
    )


@pytest.mark.parametrize('name', PROSE_PAGES)
def test_the_prose_does_not_join_sentences_with_semicolons(site: Path, name: str) -> None:
    """A sentence ends where it ends: a semicolon outside parentheses joins two that should be two."""
    joined = []
    for element in content(page(site, name)).find_all():
        if element.tag in ('p', 'li', 'td'):
            text = _prose(element)
            while re.search(r'\([^()]*\)', text):
                text = re.sub(r'\([^()]*\)', '', text)
            if ';' in text:
                joined.append(' '.join(text.split())[:160])
    assert joined == []


@pytest.mark.parametrize('name', ['index.md', 'sessions.md', 'api/session_store.md'])
def test_every_page_has_the_light_and_dark_toggle(site: Path, name: str) -> None:
    forms = page(site, name).find_all('form')
    (palette,) = [form for form in forms if form.attrs.get('data-md-component') == 'palette']
    schemes = {field.attrs.get('data-md-color-scheme') for field in palette.find_all('input')}
    assert schemes == {'default', 'slate'}


def test_which_door_is_one_table_both_doors_link_to(site: Path) -> None:
    home = content(page(site, 'index.md'))
    elements = list(home.iter())
    sections = [n for n, element in enumerate(elements) if element.tag == 'h2']
    start = next(n for n in sections if elements[n].attrs.get('id') == 'which-door')
    end = next((n for n in sections if n > start), len(elements))
    (table,) = [element for element in elements[start:end] if element.tag == 'table']
    rows = [' '.join(row.text().split()) for row in table.find_all('tr')]
    for aspect in ('compaction inside a run', 'waiting writers', 'recall', 'UI adapters', "pydantic-ai's own"):
        assert any(row.startswith(aspect) for row in rows), (aspect, rows)
    for name in ('sessions.md', 'conversations.md'):
        hrefs = [link.attrs.get('href', '') for link in content(page(site, name)).find_all('a')]
        assert '../#which-door' in hrefs, name
    assert re.search(r'window of 4 and .* with 6', ' '.join(home.text().split()))


def test_mkdocs_serve_watches_the_packages_the_reference_is_made_from() -> None:
    """`mkdocs serve` rebuilds the API reference when a docstring changes, not only when a page does."""
    documented = {
        match for path in (DOCS / 'api').glob('*.md') for match in re.findall(r'^::: (\w+)\.', path.read_text(), re.M)
    }
    assert documented == {package.__name__ for package in PACKAGES}
    config = load_config(str(REPO / 'mkdocs.yml'))
    watched = {Path(path).resolve() for path in config.watch}
    assert {(REPO / package).resolve() for package in documented} <= watched


# In a browser: every page at a phone's width and a laptop's, in the system's Chromium (tests/test_web_browser.py)

PHONE, LAPTOP = 390, 1280
"""The widths the site is read at: a phone's (an iPhone's 390 CSS pixels) and a laptop's."""


@dataclass(frozen=True)
class Looked:
    """What a page shows at one width, as the scripts of tests/_site.py find it."""

    sideways: list[str]
    broken_words: list[str]
    covered_code: list[str]
    wide_tables: list[str]
    scrolling_commands: list[str]


@pytest.fixture(scope='module')
def look(site: Path) -> Iterator[Callable[[str, int], Looked]]:
    """Looks at a page (`docs/NAME`) at a width in Chromium, each once for the module."""
    executable = chromium()
    seen: dict[tuple[str, int], Looked] = {}
    with served(site) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        pages = {width: browser.new_page(viewport={'width': width, 'height': 844}) for width in (PHONE, LAPTOP)}

        def looked(name: str, width: int) -> Looked:
            if (name, width) not in seen:
                page = pages[width]
                page.goto(f'{base}/{url_of(name)}')
                page.wait_for_load_state('load')
                seen[name, width] = Looked(
                    sideways=page.evaluate(SIDEWAYS),
                    broken_words=page.evaluate(BROKEN_WORDS),
                    covered_code=page.evaluate(COVERED_CODE),
                    wide_tables=page.evaluate(WIDE_TABLES),
                    scrolling_commands=page.evaluate(SCROLLING_BLOCKS, 'bash'),
                )
            return seen[name, width]

        try:
            yield looked
        finally:
            browser.close()


ALL_PAGES = sorted(str(path.relative_to(DOCS)) for path in docs_pages())
AT_BOTH_WIDTHS = [pytest.param(name, width, id=f'{name}-{width}') for name in ALL_PAGES for width in (PHONE, LAPTOP)]


@pytest.mark.parametrize(('name', 'width'), AT_BOTH_WIDTHS)
def test_no_page_scrolls_sideways(look: Callable[[str, int], Looked], name: str, width: int) -> None:
    """Nothing of a page lies past the window's edge: a code block or a table too wide scrolls inside itself."""
    assert look(name, width).sideways == []


@pytest.mark.parametrize(('name', 'width'), AT_BOTH_WIDTHS)
def test_no_line_breaks_an_identifier_mid_word(look: Callable[[str, int], Looked], name: str, width: int) -> None:
    """An identifier in the prose or a table (`Session.run`, `ConversationConflict`) breaks, if it must, only after
    its punctuation (`store.` / `session(`), never as `Session.ru` / `n`."""
    assert look(name, width).broken_words == []


@pytest.mark.parametrize(('name', 'width'), AT_BOTH_WIDTHS)
def test_the_copy_button_covers_no_code(look: Callable[[str, int], Looked], name: str, width: int) -> None:
    """A block's copy button sits clear of its text: it once hid the set-up command's trailing backslash."""
    assert look(name, width).covered_code == []


@pytest.mark.parametrize(
    ('name', 'width'),
    [
        pytest.param(name, width, id=f'{name}-{width}')
        for name in ('index.md', 'api/session_store.md', 'api/processors.md')
        for width in (PHONE, LAPTOP)
    ],
)
def test_the_home_pages_and_the_references_tables_fit_the_page(
    look: Callable[[str, int], Looked], name: str, width: int
) -> None:
    """These read without scrolling a table sideways: the API reference's parameter tables once hid their
    Description column past a phone's edge (its sections are lists now), and "Which door" is the first table a
    reader meets. (A wider table elsewhere, a matrix of checks and backends, scrolls inside its own box.)"""
    assert look(name, width).wide_tables == []


@pytest.mark.parametrize('name', ['chat-app.md', 'web.md'])
def test_the_servers_commands_fit_a_phone(look: Callable[[str, int], Looked], name: str) -> None:
    """The pages that start a server show its commands whole at a phone's width, as a reader copies them: the chat
    app's run command once ended past the edge, `uvicorn` out of sight. (A longer block elsewhere scrolls inside
    itself: the home page's set-up command, the README's as written, scrolls its last few columns into view.)"""
    assert look(name, PHONE).scrolling_commands == []
