"""A session's branches: `branches` shows its tree; `rewind`, `switch` and `fork` change it.

`branches` opens the store read-only, like the review commands; the others open it to write and
print one line saying what they did. `chat` runs the same steps as slash commands, through the
helpers here, so both say the same thing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click
from rich.text import Text
from rich.tree import Tree

from .._history.review import list_branches
from ..results import Branch
from ._app import MAX_COUNT, NAME, Bounded, db_option, json_option, main, scope_option
from ._render import echo_json, plural, print_suggestion, record_json
from ._runtime import Failure, Settings, open_store, out, pass_settings, review, run

if TYPE_CHECKING:  # `history` takes this module's --tip: its help and its run import no pydantic-ai
    from ..session import Session
    from ..store import SessionStore

__all__ = (
    'branch_tree',
    'branches',
    'chosen_branch',
    'fork',
    'rewind',
    'rewind_session',
    'stored_session',
    'switch',
    'switch_session',
    'tip_option',
)

ACTIVE = '●'
"""How the tree marks the active branch."""


def tip_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """`--tip TIP`: a branch by its tip, as `branches --json` gives it, for scripts (numbers are for people)."""
    return click.option('--tip', metavar='TIP', help='The branch by its tip (`branches --json`), instead of N.')(
        function
    )


def chosen_branch(number: int | None, tip: str | None) -> int | str | None:
    """The branch a command was given: its number, or its tip (`--tip`); `None` for neither."""
    if number is not None and tip is not None:
        raise Failure('Name the branch once: by its number or by --tip, not both.')
    return number if number is not None else tip


async def stored_session(store: SessionStore, session_id: str, scope: str | None) -> Session:
    """The stored session, never creating one: an unknown id fails as `history` does."""
    await store.history(session_id, scope=scope, limit=0)
    return await store.session(session_id, scope=scope)


def _label(branch: Branch) -> Text:
    where = 'from the start' if branch.forked_at is None else f'forks at {branch.forked_at}'
    preview = f'"{branch.preview}"' if branch.preview is not None else '(no user prompt)'
    return Text.assemble(
        (f'{ACTIVE} ' if branch.active else '  ', 'bold green'),
        (f'branch {branch.number}', 'bold'),
        (' (active)', 'bold green') if branch.active else '',
        f'  {plural(branch.message_count, "message")} · {where} · ',
        (f'{branch.updated_at.astimezone():%Y-%m-%d %H:%M}', 'dim'),
        ' · last prompt ',
        (preview, 'cyan'),
    )


def branch_tree(session_id: str, branches: Sequence[Branch]) -> Tree:
    """The branches as a tree, each under the one it forked from, oldest first, by number, the active one marked
    and named in the heading."""
    count = f'{len(branches)} branch{"" if len(branches) == 1 else "es"}'
    active = next((f'; branch {branch.number} is active ({ACTIVE})' for branch in branches if branch.active), '')
    tree = Tree(Text(f'Session {session_id!r}: {count}{active}'), guide_style='dim')
    nodes: dict[str, Tree] = {}
    for branch in branches:  # oldest first, so a branch's parent is already placed
        nodes[branch.tip] = nodes.get(branch.parent or '', tree).add(_label(branch))
    return tree


async def rewind_session(session: Session, position: int) -> str:
    """Rewind the session's active path to `position` messages; what happened, in a line."""
    name = session.session_id
    left = next(branch for branch in await session.branches() if branch.active)
    if position == left.message_count:
        return f'{name!r} holds {plural(position, "message")} on its active path already; nothing to rewind.'
    await session.rewind(position)
    dropped = left.message_count - position
    after = 'the message after them' if dropped == 1 else f'the {dropped:,} after them'
    if any(branch.tip == left.tip for branch in await session.branches()):
        return f'Rewound {name!r} to {plural(position, "message")}; {after} stay as branch {left.number}.'
    # The path left had no messages of its own (a rewind nothing ran from): its messages are on older branches.
    return f'Rewound {name!r} to {plural(position, "message")}; {after} stay on the branches they came from.'


async def switch_session(session: Session, branch: int | str) -> str:
    """Make the branch `branch` (its number, or its tip as a string) the session's active path; what happened, in
    a line."""
    name = session.session_id
    known = await session.branches()
    target = next((b for b in known if (b.number if isinstance(branch, int) else b.tip) == branch), None)
    if target is None:
        numbers = 'branch 1 only' if len(known) == 1 else f'branches 1 to {len(known)}'
        asked = f'branch {branch}' if isinstance(branch, int) else f'branch with tip {branch!r}'
        raise ValueError(f'Session {name!r} has no {asked}; it has {numbers} (see `branches`).')
    if target.active:
        return f'Branch {target.number} is the active path of {name!r} already; nothing changed.'
    await session.switch(target.tip)
    where = '' if target.forked_at is None else f', forked at {target.forked_at}'
    return f'Switched {name!r} to branch {target.number}: {plural(target.message_count, "message")}{where}.'


@main.command()
@click.argument('session_id', metavar='ID', type=NAME)
@scope_option
@json_option
@db_option
@pass_settings
def branches(settings: Settings, session_id: str, scope: str | None, as_json: bool) -> None:
    """Show a session's branches as a tree, the active one marked.

    Each branch is a path through the session: rewinding, regenerating or editing keeps the path left
    as a branch. For each: its number (1, 2, 3 in the order they were made, for `switch` and
    `history --branch`), its message count, where it forks from the branch above it, its last update
    and the start of its last user prompt. --json adds each one's tip, an opaque id for scripts
    (`switch --tip`, `history --tip`).
    """
    found = run(settings, review(settings, lambda database: list_branches(database, session_id, scope)))
    if as_json:
        echo_json([record_json(branch) for branch in found])
        return
    out.print(branch_tree(session_id, found), soft_wrap=False)
    if len(found) > 1:
        words = ['--scope', scope] if scope else []
        show = settings.command('history', session_id, '--branch', 'N', *words)
        activate = settings.command('switch', session_id, 'N', *words)
        print_suggestion(settings, f'\nRead one: {show}\nMake it active: {activate}')


@main.command()
@click.argument('session_id', metavar='ID', type=NAME)
@click.argument('position', type=Bounded(0, MAX_COUNT))
@scope_option
@db_option
@pass_settings
def rewind(settings: Settings, session_id: str, position: int, scope: str | None) -> None:
    """Make a session's active path its first POSITION messages.

    The messages after them are not deleted: they stay as a branch (see `branches`), which `switch`
    makes active again. POSITION must not separate a tool call from its return.
    """

    async def work() -> str:
        async with open_store(settings, 'write') as store:
            return await rewind_session(await stored_session(store, session_id, scope), position)

    out.print(run(settings, work()))


@main.command()
@click.argument('session_id', metavar='ID', type=NAME)
@click.argument('number', metavar='N', type=Bounded(1, MAX_COUNT), required=False)
@tip_option
@scope_option
@db_option
@pass_settings
def switch(settings: Settings, session_id: str, number: int | None, tip: str | None, scope: str | None) -> None:
    """Make branch N a session's active path.

    N is the branch's number as `branches` shows it; a script may name it by --tip instead. The
    path left stays a branch; the next run continues the one switched to, from its own window and
    summaries.
    """
    branch = chosen_branch(number, tip)
    if branch is None:
        raise Failure('Say which branch: its number N, as `branches` shows it, or --tip TIP.')

    async def work() -> str:
        async with open_store(settings, 'write') as store:
            return await switch_session(await stored_session(store, session_id, scope), branch)

    out.print(run(settings, work()))


@main.command()
@click.argument('session_id', metavar='ID', type=NAME)
@click.option(
    '--at',
    'at',
    type=Bounded(0, MAX_COUNT),
    required=True,
    metavar='N',
    help='Copy the first N messages of the active path.',
)
@click.option(
    '--to', 'new_session_id', type=NAME, required=True, metavar='NEW', help='The new session id (must be free).'
)
@scope_option
@db_option
@pass_settings
def fork(settings: Settings, session_id: str, at: int, new_session_id: str, scope: str | None) -> None:
    """Copy the first N messages of a session's active path into a new session.

    The new session gets copies of the messages and of the summaries over them, so its first run
    resumes from a stored summary; it keeps the source's scope. The source is left as it was.
    """

    async def work() -> str | None:
        async with open_store(settings, 'write') as store:
            return (await store.fork(session_id, at=at, new_session_id=new_session_id, scope=scope)).scope

    new_scope = run(settings, work())
    under = f' (scope {new_scope!r})' if new_scope is not None else ''
    out.print(f'Forked {session_id!r} at {plural(at, "message")} into {new_session_id!r}{under}.')
