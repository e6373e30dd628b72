"""The documentation site's sources (`docs/`, built by mkdocs-material from `mkdocs.yml`): every page is in the
navigation, the API reference names every public name, the README's links reach pages that exist, every code line
fits the site's width, every code block of every page runs (`tests/_markdown.py` says how each kind is checked),
and each file of `docs/examples/` is shown whole on a page. tests/test_docs_site.py reads the built site."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import pytest

import processors
import session_store
from tests._markdown import (
    DOCS,
    EXAMPLES,
    README,
    REPO,
    Block,
    check_block_kinds,
    docs_pages,
    markdown_blocks,
    run_block,
    runnable,
)

BLOCKS = [block for page in docs_pages() for block in markdown_blocks(page)]

CODE_COLUMNS = 88
"""The widest code line the site shows whole: a page's code blocks at 1280 px (Material's content column)."""


def _navigation() -> list[str]:
    """The pages `mkdocs.yml`'s nav lists, relative to `docs/`."""
    return re.findall(r'^\s*-\s[^:\n]*:\s*(\S+\.md)\s*$', (REPO / 'mkdocs.yml').read_text(), flags=re.MULTILINE)


def test_every_page_is_in_the_navigation_and_every_entry_is_a_page() -> None:
    pages = {str(page.relative_to(DOCS)) for page in docs_pages()}
    listed = _navigation()
    assert len(listed) == len(set(listed))
    assert set(listed) == pages


@pytest.mark.parametrize('package', [session_store, processors], ids=lambda package: package.__name__)
def test_the_api_reference_names_every_public_name(package: ModuleType) -> None:
    name = package.__name__
    page = (DOCS / 'api' / f'{name}.md').read_text()
    documented = set(re.findall(rf'^::: {name}\.(\w+)$', page, flags=re.MULTILINE))
    assert documented == set(package.__all__)


def test_the_readme_links_only_to_pages_that_exist() -> None:
    links = re.findall(r'\]\((docs/[^)#\s]+)(?:#[^)]*)?\)', README.read_text())
    assert links, 'the README links to the documentation pages'
    missing = [link for link in links if not (REPO / link).is_file()]
    assert missing == []
    pages = {f'docs/{page.relative_to(DOCS)}' for page in docs_pages() if page.parent == DOCS}
    assert pages - {'docs/index.md'} <= set(links), 'the README links to every page'


def test_every_block_shows_its_output_and_says_what_it_needs() -> None:
    check_block_kinds(BLOCKS)
    assert {block.language for block in runnable(BLOCKS)} == {'python', 'bash'}


@pytest.mark.slow  # each block runs as its own program, or its commands each as a process
@pytest.mark.parametrize('block', runnable(BLOCKS), ids=[block.id for block in runnable(BLOCKS)])
def test_docs_block(block: Block, tmp_path: Path) -> None:
    run_block(block, tmp_path)


def test_every_code_line_fits_the_width_the_site_shows() -> None:
    """A longer line is cut off at the block's right edge, to be read by scrolling sideways."""
    too_long: list[str] = []
    for block in BLOCKS:
        where = f'{block.included.name}' if block.included else f'{block.file}'
        first = 1 if block.included else block.line
        code = block.included.read_text() if block.included else block.source
        too_long += [
            f'{where} line {first + number}: {len(line)} columns'
            for number, line in enumerate(code.splitlines())
            if len(line) > CODE_COLUMNS
        ]
    assert too_long == []


def test_every_example_file_is_shown_whole_on_a_page() -> None:
    """A file in docs/examples/ is there to be read on the site: some page shows it (its own test runs it)."""
    shown = {block.included for block in BLOCKS if block.included is not None}
    assert shown == set(EXAMPLES.glob('*.py'))
    assert shown, 'the chat app of docs/chat-app.md'


def test_the_home_page_gives_the_readmes_set_up_command() -> None:
    """The site's home page repeats the README's set-up command, which a test runs; the two must not drift."""
    (home,) = [block for block in markdown_blocks(DOCS / 'index.md') if block.language == 'bash']
    readme = next(block for block in markdown_blocks(README) if block.heading == 'Install')
    assert home.source == readme.source


def _section(text: str, heading: str) -> str:
    """The Markdown under `## heading`, up to the next `## `."""
    start = text.index(f'\n## {heading}\n')
    end = text.find('\n## ', start + 1)
    return text[start : len(text) if end < 0 else end]


def test_the_home_page_gives_the_readmes_quick_start() -> None:
    """The site's first runnable code is on its home page, before "Which door": the README's quick start as written
    (test_docs_block runs it, with its `#>` line), which "Which door" refers to. The site has no README to point
    at."""
    home = (DOCS / 'index.md').read_text()
    (quick,) = [block for block in markdown_blocks(DOCS / 'index.md') if block.language == 'python']
    readme = next(block for block in markdown_blocks(README) if block.heading == 'Quick start')
    assert quick.heading == 'Quick start' and quick.source == readme.source
    assert home.index('\n## Quick start\n') < home.index('\n## Which door\n')
    door = _section(home, 'Which door')
    assert 'README' not in door and '(#quick-start)' in door
