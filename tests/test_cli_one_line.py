"""Where a command failed with a traceback, a wrong word or a wrong exit code, it now says what happened in one line.

A failed `chat` run leaves no empty session behind; `keygen` without the encryption extra and a PostgreSQL URL
without the driver say what to install (not "Model error"); `delete --scope` that matches nothing exits 1; the
command `history` suggests on an encrypted store carries `--key-file`. Through click's `CliRunner`.
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import socket
import sys
from importlib.machinery import ModuleSpec
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from pydantic_ai.exceptions import ModelAPIError
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

from session_store.cli import chat, main
from testkit.templates import NewDatabase
from tests._cli import fails, ok
from tests._demo import two_demo_turns

pytestmark = pytest.mark.usefixtures('wide_console')


def invoke(url: str, *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(main, ['--db', url, *args], input=stdin)


def session_ids(url: str) -> list[str]:
    return [info['session_id'] for info in json.loads(ok(invoke(url, 'sessions', '--json')))]


@pytest.fixture
def demo(new_database: NewDatabase) -> str:
    """`demo` (scope `demo`): two turns of the demo conversation (8 messages)."""
    return new_database(fill=two_demo_turns)


@pytest.mark.slow_on_postgresql
def test_a_failed_chat_run_leaves_no_empty_session_behind(demo: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ModelAPIError('remote', 'Connection error.')

    monkeypatch.setattr(chat, 'resolve_model', lambda name: FunctionModel(unreachable, model_name=name))
    fails(invoke(demo, 'chat', 'fresh', '--model', 'remote', stdin='hello\n'), 'Model error: Connection error.')
    assert session_ids(demo) == ['demo']
    # A session that held messages before keeps them when a run fails.
    fails(invoke(demo, 'chat', 'demo', '--model', 'remote', stdin='hello\n'), 'Model error: Connection error.')
    assert session_ids(demo) == ['demo']
    assert len(json.loads(ok(invoke(demo, 'history', 'demo', '--json')))['messages']) == 8


def test_keygen_without_the_encryption_extra_fails_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, 'cryptography', None)  # `import cryptography` fails, as when not installed
    fails(CliRunner().invoke(main, ['keygen']), "pip install 'pydantic-ai-session-store[encryption]'")


def test_a_postgresql_url_without_the_driver_is_not_called_a_model_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    found = importlib.util.find_spec

    def without_asyncpg(name: str, package: str | None = None) -> ModuleSpec | None:
        return None if name == 'asyncpg' else found(name, package)

    monkeypatch.setattr(importlib.util, 'find_spec', without_asyncpg)
    url = 'postgresql+asyncpg://someone@127.0.0.1:1/nowhere'
    for args in (['sessions'], ['history', 'demo'], ['migrate'], ['chat', 'c', '--model', 'test']):
        line = fails(invoke(url, *args), 'PostgreSQL needs the asyncpg driver, which is an extra')
        assert 'Model error' not in line, line


@pytest.mark.slow_on_postgresql
def test_delete_of_a_scope_nothing_is_saved_under_fails(demo: str) -> None:
    fails(invoke(demo, 'delete', '--scope', 'typo', '--yes'), "No session is saved under scope 'typo'", 'nothing was')
    assert session_ids(demo) == ['demo']


def test_the_history_footer_on_an_encrypted_store_names_the_key_file(demo: str, tmp_path: Path) -> None:
    keys = tmp_path / 'keys'
    keys.write_text(ok(CliRunner().invoke(main, ['keygen'])))
    ok(invoke(demo, 'encrypt', '--yes', '--key-file', str(keys)))
    page = ok(invoke(demo, 'history', 'demo', '--limit', '3', '--key-file', str(keys)))
    footer = next(line for line in page.splitlines() if line.startswith('… more: '))
    assert footer.startswith('… more: session-store history demo --offset 3 --limit 3') and '--key-file' in footer
    # The command it suggests runs as it is.
    words = shlex.split(footer.removeprefix('… more: '))[1:]
    if '--db' not in words:  # a URL with a password is left out: the environment names it
        words = ['--db', demo, *words]
    assert ok(CliRunner().invoke(main, words)).startswith('[3] ')


@pytest.mark.slow_on_postgresql
@pytest.mark.parametrize('command', ['encrypt', 'rekey'])
def test_sealing_clear_data_asks_first_and_a_no_seals_nothing(demo: str, tmp_path: Path, command: str) -> None:
    keys = tmp_path / 'keys'
    keys.write_text(ok(CliRunner().invoke(main, ['keygen'])))
    declined = invoke(demo, command, '--key-file', str(keys), stdin='n\n')
    assert declined.exit_code == 1 and 'Aborted' in declined.output, declined.output
    assert "under key 'k1'? From then on only the keys you gave read them" in declined.output
    assert 'Sealed' not in declined.output
    # Nothing was sealed: the store still reads without any key.
    assert 'ORDER-1000' in ok(invoke(demo, 'history', 'demo', '--limit', '1'))
    assert 'Sealed 8 messages' in ok(invoke(demo, command, '--key-file', str(keys), stdin='y\n'))
    fails(invoke(demo, 'history', 'demo'), "key 'k1'", '--key-file')


def test_sealing_progress_is_a_line_a_step_when_stderr_is_not_a_terminal(demo: str, tmp_path: Path) -> None:
    keys = tmp_path / 'keys'
    keys.write_text(ok(CliRunner().invoke(main, ['keygen'])))
    result = invoke(demo, 'encrypt', '--yes', '--batch', '3', '--key-file', str(keys))
    assert 'Sealed 8 messages' in ok(result)
    assert '\r' not in result.stderr
    steps = result.stderr.splitlines()
    assert len(steps) >= 3 and all(step.endswith(' sealed...') for step in steps), result.stderr
    assert steps[-1].startswith('8 messages, ')


def test_serve_on_a_busy_port_says_so_in_one_line_before_claiming_to_serve(demo: str) -> None:
    with socket.create_server(('127.0.0.1', 0)) as taken:
        port = taken.getsockname()[1]
        result = invoke(demo, 'serve', '--port', str(port))
    fails(result, f'Port {port} on 127.0.0.1 is in use: pass another --port')
    assert 'Serving' not in result.output


def test_serve_on_a_busy_port_opens_no_database(tmp_path: Path) -> None:
    # The port is bound before the store is opened: a port in use is the one line, whatever the database's state,
    # and no database file is left where there was none (with --chat too, which opens the store to write).
    missing = tmp_path / 'new.db'
    with socket.create_server(('127.0.0.1', 0)) as taken:
        port = taken.getsockname()[1]
        for chat in ([], ['--chat', 'test']):
            result = invoke(str(missing), 'serve', '--port', str(port), *chat)
            fails(result, f'Port {port} on 127.0.0.1 is in use')
    assert list(tmp_path.iterdir()) == []
