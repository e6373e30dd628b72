"""`chat`: talk to a model through a stored session, a line per agent run."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage

from processors import SummarizationProcessor

from .._codec import stored_form
from .._offline import resolve_model
from ..errors import StoreError
from ..session import Session
from ..store import SessionStore
from ._app import NAME, db_option, main, scope_option
from ._messages import render_messages, role
from ._render import compaction_line
from ._runtime import Settings, err, open_store, out, pass_settings, run
from ._summarizer import summarizer_options, summarizing
from .branching import branch_tree, rewind_session, switch_session

__all__ = ('chat',)

COMMANDS = '/rewind N, /regenerate, /compact [FOCUS], /branches, /switch N, /quit'
"""The slash commands `chat` takes between lines."""


@main.command()
@click.argument('session_id', metavar='ID', type=NAME)
@click.option(
    '--model',
    'model_name',
    metavar='MODEL',
    required=True,
    help="e.g. openai:gpt-4.1; 'test' runs offline, quoting each prompt.",
)
@scope_option
@click.option('--system', 'system_prompt', metavar='TEXT', help='System prompt for a new session.')
@summarizer_options
@db_option
@pass_settings
def chat(
    settings: Settings,
    session_id: str,
    model_name: str,
    scope: str | None,
    system_prompt: str | None,
    summarizer: str | None,
    trigger: int | None,
    keep: int | None,
) -> None:
    """Chat with a model through a stored session.

    Each line you type is one agent run, stored when it completes.

    Reads lines from stdin until end of input or /quit. The session is created if new, and resumed
    (from its stored window) if not. Provider models need their API key in the environment.

    Between lines: /rewind N makes the conversation its first N messages (the rest stays a branch),
    /regenerate answers the last prompt again (the old answer stays a branch), /branches shows the
    session's branches and /switch N continues another one.
    """
    run(settings, _chat(settings, session_id, model_name, scope, system_prompt, summarizer, trigger, keep))


def _read_line(interactive: bool) -> str | None:
    """The next line typed, stripped; `None` at end of input or /quit."""
    try:
        line = err.input('[bold cyan]you>[/] ') if interactive else sys.stdin.readline()
    except EOFError:
        return None
    if not line:  # end of input
        return None
    line = line.strip()
    return None if line in ('/quit', '/exit') else line


async def _chat(
    settings: Settings,
    session_id: str,
    model_name: str,
    scope: str | None,
    system_prompt: str | None,
    summarizer: str | None,
    trigger: int | None,
    keep: int | None,
) -> None:
    model = resolve_model(model_name)
    processor = summarizing(summarizer, trigger, keep)
    agent: Agent[None, str] = Agent(model, system_prompt=system_prompt or ())
    interactive = sys.stdin.isatty()
    async with open_store(settings, 'create', processor=processor) as store:
        new = await store.conversations.read_record(session_id) is None
        session = await store.session(session_id, scope=scope)
        try:
            # Only to number the replies as `history` does; reading the window never reads the archive.
            archived = (await store.window(session_id, scope=scope)).message_count
            if interactive:
                err.print(
                    f'Session {session_id!r} ({archived} messages archived) with {model_name}. '
                    f'Commands: {COMMANDS}; Ctrl-D also ends.'
                )
            while (line := _read_line(interactive)) is not None:
                if not line:
                    continue
                if line.startswith('/'):
                    archived = await _command(store, session, agent, line, archived)
                    continue
                result = await session.run(agent, line)
                archived += len(result.new_messages())
                _print_replies(result.new_messages(), archived)
        finally:
            # Opening made the session; a chat that stored nothing in it (its first run failed, or nothing was
            # typed) leaves no empty session behind.
            if new and not (await store.window(session_id, scope=scope)).message_count:
                await store.delete(session_id, scope=scope)


def _print_replies(new: Sequence[ModelMessage], archived: int) -> None:
    """A run's new messages but the user's own prompt, numbered as `history` numbers them; `archived` ends them."""
    start = archived - len(new)
    for position, message in enumerate(stored_form(new), start):
        if role(message) != 'user':
            for text in render_messages([message], [position]):
                out.print(text)


async def _command(store: SessionStore, session: Session, agent: Agent[None, str], line: str, archived: int) -> int:
    """Run one slash command; returns how many messages the active path holds after it.

    A command that can't be done (a bad position, an unknown branch) says why on stderr, and the chat goes on.
    """
    name, _, argument = line.partition(' ')
    argument = argument.strip()
    try:
        if name == '/rewind' and argument.isdigit():
            out.print(await rewind_session(session, int(argument)))
        elif name == '/switch' and argument.isdigit():
            out.print(await switch_session(session, int(argument)))
        elif name == '/branches' and not argument:
            out.print(branch_tree(session.session_id, await session.branches()), soft_wrap=False)
        elif name == '/compact':
            if not isinstance(session.processor, SummarizationProcessor):
                raise ValueError(
                    "/compact needs a summarizer: start the chat with --summarizer MODEL ('test' is offline)."
                )
            out.print(compaction_line(session.session_id, await session.compact(argument or None)), markup=False)
        elif name == '/regenerate' and not argument:
            result = await session.regenerate(agent)
            archived = (await store.window(session.session_id, scope=session.scope)).message_count
            _print_replies(result.new_messages(), archived)
            return archived
        else:
            err.print(f'Not a command: {line!r}. Commands: {COMMANDS}.', markup=False)
            return archived
    except (ValueError, StoreError) as error:
        err.print(f'Error: {error}', markup=False)
        return archived
    return (await store.window(session.session_id, scope=session.scope)).message_count
