"""`chat`: talk to a model through a stored session, a line per agent run."""

from __future__ import annotations

import sys

import click
from pydantic_ai import Agent
from pydantic_ai.messages import ModelRequest
from pydantic_ai.models import Model, infer_model
from pydantic_ai.models.test import TestModel

from processors import SummarizationProcessor, TiktokenCounter

from ._app import db_option, main, pass_settings, scope_option
from ._render import render_messages, role
from ._runtime import Settings, err, open_store, out, run

__all__ = ('chat', 'resolve_model')


def resolve_model(name: str) -> Model:
    """A pydantic-ai model by name; `test` is pydantic-ai's offline `TestModel`.

    Resolving builds the provider, so a missing provider package or API key fails here, before any input.
    """
    if name == 'test':
        return TestModel()
    return infer_model(name)


@main.command()
@click.argument('session_id', metavar='ID')
@click.option('--model', 'model_name', metavar='MODEL', required=True, help="e.g. openai:gpt-4.1; 'test' runs offline.")
@scope_option
@click.option('--system', 'system_prompt', metavar='TEXT', help='System prompt for a new session.')
@click.option(
    '--summarizer',
    metavar='MODEL',
    help='Summarize the conversation with this model past 60 messages (keeping the last 20); '
    'without it the window just slides.',
)
@db_option
@pass_settings
def chat(
    settings: Settings,
    session_id: str,
    model_name: str,
    scope: str | None,
    system_prompt: str | None,
    summarizer: str | None,
) -> None:
    """Chat with a model through a stored session.

    Each line you type is one agent run, stored when it completes.

    Reads lines from stdin until end of input or /quit. The session is created if new, and resumed
    (from its stored window) if not. Provider models need their API key in the environment.
    """
    run(settings, _chat(settings, session_id, model_name, scope, system_prompt, summarizer))


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
) -> None:
    model = resolve_model(model_name)
    processor = None
    if summarizer is not None:
        processor = SummarizationProcessor(
            resolve_model(summarizer), trigger=('messages', 60), keep=('messages', 20), token_counter=TiktokenCounter()
        )
    agent: Agent[None, str] = Agent(model, system_prompt=system_prompt or ())
    interactive = sys.stdin.isatty()
    async with open_store(settings, 'create', processor=processor) as store:
        session = await store.session(session_id, scope=scope)
        # Only to number the replies as `history` does; reading the window never reads the archive.
        archived = (await store.window(session_id, scope=scope)).message_count
        if interactive:
            err.print(f'Session {session_id!r} ({archived} messages archived) with {model_name}. /quit or Ctrl-D ends.')
        while (line := _read_line(interactive)) is not None:
            if not line:
                continue
            result = await session.run(agent, line)
            new = result.new_messages()
            replies = [m for m in new if not (isinstance(m, ModelRequest) and role(m) == 'user')]
            position = archived + len(new) - len(replies)
            for text in render_messages(replies, range(position, position + len(replies))):
                out.print(text)
            archived += len(new)
