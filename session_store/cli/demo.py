"""`demo`: the offline demo, start here; and `demo-resume`, the hidden command its second process runs."""

from __future__ import annotations

import os

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from ._app import NAME, Bounded, db_option, main
from ._demo_run import DemoRun, choose_session, emit_report, emit_turn, run_demo, run_turns
from ._demo_script import DEMO_SCOPE, order_for
from ._runtime import Failure, Settings, err, out, pass_settings, run

__all__ = ('demo', 'demo_resume')


@main.command()
@click.option('--turns', type=Bounded(2, 10_000), default=120, show_default=True, help='Customer turns to run.')
@click.option(
    '--session',
    'session_id',
    metavar='ID',
    type=NAME,
    help="The session to create (default: 'demo', or 'demo-2', 'demo-3', ... when taken).",
)
@click.option('--fresh', is_flag=True, help='Delete the demo session first (only it) and start it over.')
@db_option
@pass_settings
def demo(settings: Settings, turns: int, session_id: str | None, fresh: bool) -> None:
    """Run the offline demo: start here.

    A scripted support agent (pydantic-ai FunctionModel, no provider key) answers --turns customer
    messages with parallel tool calls; a scripted summarizer compacts the conversation once the window
    reaches 40 messages, keeping the last 12. Half way, this process stops and a new process reopens the
    store and carries on from the stored window and summary. Finally it prints messages archived,
    summaries made, tokens sent to the model against tokens archived, and the commands to look further.

    It writes to --db (./sessions.db by default) under scope 'demo'. Run it again for another session
    (demo-2, ...), or pass --fresh to replace 'demo'.
    """
    finished = run(settings, _demo_with_progress(settings, turns, session_id, fresh))
    _print_report(settings, finished)


@main.command('demo-resume', hidden=True)
@click.argument('session_id')
@click.option('--from', 'first', type=int, required=True)
@click.option('--to', 'end', type=int, required=True)
@pass_settings
def demo_resume(settings: Settings, session_id: str, first: int, end: int) -> None:
    """The demo's second process: runs turns FROM..TO-1, printing a JSON line per turn, then its report."""
    emit_report(run(settings, run_turns(settings.url, session_id, first, end, emit_turn)))


async def _demo_with_progress(settings: Settings, turns: int, wanted: str | None, fresh: bool) -> DemoRun:
    """The demo, with a progress bar on stderr that follows the turns across both processes."""
    session_id = await choose_session(settings, wanted, fresh)
    half = turns // 2
    err.print(
        f'Demo session {session_id!r} in {settings.shown_url}: {turns} customer turns, '
        f'restarting in a new process after turn {half}.'
    )
    with Progress(
        TextColumn('{task.description}'),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn('turns'),
        TimeElapsedColumn(),
        console=err,
    ) as progress:
        task = progress.add_task(f'process 1 (pid {os.getpid()})', total=turns)
        processes: dict[int, int] = {}

        def on_turn(pid: int) -> None:
            number = processes.setdefault(pid, len(processes) + 1)
            progress.update(task, description=f'process {number} (pid {pid})', advance=1)

        def on_restart() -> None:
            progress.console.print(
                f'Process 1 stopped after turn {half} and closed the store; a new process reopens it and resumes.'
            )

        return await run_demo(settings, session_id, turns, on_turn=on_turn, on_restart=on_restart)


def _print_report(settings: Settings, finished: DemoRun) -> None:
    session_id, first, second, outcome = finished.session_id, finished.first, finished.second, finished.outcome
    chain = outcome.chain
    out.print(f'\nDemo finished in {finished.seconds:.1f} s: session {session_id!r} (scope {DEMO_SCOPE!r}).\n')
    processes = Table.grid(padding=(0, 2))
    for number, report in enumerate((first, second), start=1):
        processes.add_row(
            f'  process {number}',
            f'pid {report.pid}',
            f'turns {report.first_turn + 1}-{report.end_turn}',
            f'{report.summarizer_calls} summar{"y" if report.summarizer_calls == 1 else "ies"}',
            f'{report.seconds:.1f} s',
        )
    out.print(processes)
    out.print()
    sent = first.tokens_sent + second.tokens_sent
    requests = first.requests + second.requests
    peak = max(first.peak_request_tokens, second.peak_request_tokens)
    covered = f'covering messages {chain[0].covers_from}-{chain[-1].covers_to - 1}' if chain else 'none yet'
    facts = Table.grid(padding=(0, 2))
    facts.add_column(no_wrap=True)
    facts.add_column(justify='right')
    facts.add_column()
    facts.add_row(
        '  messages archived', f'{outcome.messages:,}', f'all of them, with {outcome.tool_calls:,} tool calls'
    )
    facts.add_row('  summaries made', f'{len(chain):,}', f'one chain, {covered}')
    facts.add_row('  tokens archived', f'{outcome.tokens_archived:,}', 'each stored message counted once')
    facts.add_row('  tokens sent to the model (counted)', f'{sent:,}', f'{requests:,} requests, the largest {peak:,}')
    ratio = outcome.tokens_without_compaction / max(sent, 1)
    facts.add_row('  without compaction', f'{outcome.tokens_without_compaction:,}', f'{ratio:.1f}x the tokens sent')
    out.print(facts)
    out.print(
        Text(
            '  (tiktoken counts of what was sent, not the usage a provider reports, which `sessions` shows as '
            'provider tokens; "without compaction" is every request re-sending the whole history before it)',
            style='dim',
        ),
        soft_wrap=False,
    )
    out.print()
    continued = finished.continued
    if continued:
        resumed = chain[first.summarizer_calls]
        out.print(
            Text(
                f'✓ The summary chain continued across the restart: summary #{resumed.number}, the first one '
                f'process 2 made, extended #{resumed.number - 1}, which process 1 stored. No summary was lost '
                'or made again.',
                style='green',
            ),
            soft_wrap=False,
        )
    elif continued is None:
        out.print('(No summary was made after the restart: run more --turns to see the chain continue.)')
    else:
        raise Failure(f'The summary chain of {session_id!r} did not continue across the restart; this is a bug.')
    _print_next_commands(settings, session_id)


def _print_next_commands(settings: Settings, session_id: str) -> None:
    out.print('\nLook further:')
    commands = [
        (settings.command('history', session_id, '--limit', '20'), 'the archive, a line per message part'),
        (settings.command('summaries', session_id), 'the summary chain, with the range each covers'),
        (settings.command('context', session_id), 'the window the next request would send'),
        (settings.command('search', order_for(6)), 'every message mentioning that order'),
        (settings.command('sessions', '--scope', DEMO_SCOPE), 'all demo sessions'),
    ]
    width = max(len(command) for command, _ in commands)
    for command, what in commands:
        # Never wrapped (soft wrap), so each command can be copied whole whatever the terminal's width.
        out.print(Text.assemble('  ', (command.ljust(width), 'bold'), (f'  # {what}', 'dim')))
    if settings.env_note:
        out.print(Text(f'  {settings.env_note}', style='dim'))
