"""The servers the README and the docs start each listen on a port of their own: a reader who follows them in
order (`session-store serve` after the demo, then the chat app of docs/chat-app.md, with the site previewed by
`mkdocs serve`) never meets "address already in use", and every local URL they give reaches the server it means.

Each command of every shell block is read (those marked not run included: they are the ones that start servers),
with the port it names, or its program's own default when it names none.
"""

from __future__ import annotations

import re
import shlex
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import click
import uvicorn
from mkdocs.config import load_config

from session_store.cli.serve import serve
from tests._markdown import DOCS, EXAMPLES, README, REPO, Block, docs_pages, markdown_blocks

LOCAL_URL = re.compile(r'https?://(?:127\.0\.0\.1|localhost):(?P<port>\d+)')

SERVE, UVICORN, MKDOCS = 'session-store serve', 'uvicorn', 'mkdocs serve'


@dataclass(frozen=True)
class Server:
    """A command that starts a server, with the port it listens on."""

    kind: str
    port: int
    where: str


def _default(command: click.Command, name: str) -> int:
    """The default of the command's option `name`."""
    (default,) = [p.default for p in command.params if p.name == name]
    assert isinstance(default, int)
    return default


def _mkdocs_port() -> int:
    """The port `mkdocs serve` listens on as the site's config sets it (`dev_addr`)."""
    return int(load_config(str(REPO / 'mkdocs.yml')).dev_addr.port)


def _option(words: list[str], *names: str) -> str | None:
    """The value of the first of `names` the command gives, as `--port 1` or `--port=1`."""
    for n, word in enumerate(words):
        for name in names:
            if word == name and n + 1 < len(words):
                return words[n + 1]
            if word.startswith(f'{name}='):
                return word.removeprefix(f'{name}=')
    return None


def commands(block: Block) -> list[tuple[int, list[str]]]:
    """Each command of a shell block as bash reads it (a line ending in a backslash, or in an open quote, goes on
    to the next), with its first line's number in the file: `shell_commands` reads only blocks that run, whose
    commands are one line of words each."""
    found: list[tuple[int, list[str]]] = []
    pending: list[str] = []
    for offset, line in enumerate(block.source.splitlines()):
        pending.append(line)
        text = '\n'.join(pending)
        if text.endswith('\\'):
            continue
        try:
            words = shlex.split(text.replace('\\\n', ' '), comments=True)
        except ValueError:  # a quote still open
            continue
        if words:
            found.append((block.line + offset - len(pending) + 1, words))
        pending = []
    assert not pending, f'{block.where}: a command never ends'
    return found


def server_of(words: list[str], where: str) -> Server | None:
    """The server the command `words` starts, if it starts one."""
    while words and re.fullmatch(r'[A-Z_][A-Z0-9_]*=.*', words[0]):  # `NAME=value uvicorn ...`
        words = words[1:]
    if words[:3] == ['python', '-m', 'uvicorn']:
        words = words[2:]
    if words[:1] == ['session-store'] and 'serve' in words:
        port = _option(words, '--port')
        return Server(SERVE, int(port) if port else _default(serve, 'port'), where)
    if words[:1] == ['uvicorn']:
        port = _option(words, '--port')
        return Server(UVICORN, int(port) if port else _default(uvicorn.main, 'port'), where)
    if words[:2] == ['mkdocs', 'serve']:
        address = _option(words, '-a', '--dev-addr')
        return Server(MKDOCS, int(address.rpartition(':')[2]) if address else _mkdocs_port(), where)
    return None


PAGES = [README, *docs_pages()]


def servers() -> list[Server]:
    """Every server the README and the docs start, and `mkdocs serve` as the README names it (in its prose)."""
    found = [Server(MKDOCS, _mkdocs_port(), 'mkdocs.yml (dev_addr)')]
    for page in PAGES:
        for block in markdown_blocks(page):
            if block.language == 'bash':
                for line, words in commands(block):
                    if server := server_of(words, f'{block.file} line {line}'):
                        found.append(server)
    return found


def test_the_docs_start_each_server() -> None:
    assert {server.kind for server in servers()} == {SERVE, UVICORN, MKDOCS}


def test_no_two_servers_share_a_port() -> None:
    kinds: dict[int, set[str]] = defaultdict(set)
    for server in servers():
        kinds[server.port].add(server.kind)
    shared = {port: sorted(kind) for port, kind in kinds.items() if len(kind) > 1}
    assert shared == {}, [f'{s.kind} on {s.port} at {s.where}' for s in servers() if s.port in shared]


def _local_urls(path: Path) -> list[int]:
    return [int(match['port']) for match in LOCAL_URL.finditer(path.read_text())]


def test_every_local_url_reaches_a_server_the_docs_start() -> None:
    ports = {server.port for server in servers()}
    files = [*PAGES, *EXAMPLES.glob('*.py')]
    wrong = [f'{path.relative_to(REPO)}: {port}' for path in files for port in _local_urls(path) if port not in ports]
    assert wrong == []


def test_the_chat_apps_urls_reach_the_chat_app() -> None:
    """docs/chat-app.md's curl reaches the app its page starts with uvicorn, not `session-store serve`."""
    (app,) = {server.port for server in servers() if server.kind == UVICORN}
    urls = _local_urls(DOCS / 'chat-app.md')
    assert urls and set(urls) == {app}
