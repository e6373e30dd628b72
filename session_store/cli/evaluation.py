"""`eval`: how much a summarizer keeps of a long conversation, measured on a seeded one with planted facts.

The eval itself (pydantic-ai agents, a store, matplotlib for `--plot`) is imported inside the command, so
`session-store --help` does not pay for it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich import box
from rich.table import Table

from ._app import Bounded, json_option, main
from ._runtime import Failure, Settings, err, out, pass_settings, run

if TYPE_CHECKING:
    from ..evaluation import Contender, ContenderResult, RetentionReport

__all__ = ('evaluate', 'report_tables')

MAX_TRIGGER = 10_000
"""The largest --trigger the eval takes: more than any generated conversation holds."""


def _prompt(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        return Path(path).read_text(encoding='utf-8')
    except OSError as error:
        raise Failure(f'Cannot read the prompt file {path}: {error.strerror or error}.') from None


def _contenders(
    summarizer: str,
    trigger: int,
    keep: int,
    prompt_file: str | None,
    vs: tuple[str | None, int | None, int | None, str | None],
) -> list[Contender]:
    """The contender the options describe, and the one to compare it with: the `--vs-*` options, each
    defaulting to the first's setting, or the sliding window with the same trigger and keep."""
    from ..evaluation import SLIDING_WINDOW, Contender

    def make(model: str, trigger: int, keep: int, prompt: str | None, which: str) -> Contender:
        if keep >= trigger:
            raise Failure(
                f'{which}keep ({keep}) must be less than {which}trigger ({trigger}): the window is compacted when '
                f'it reaches {which}trigger messages, down to the {which}keep newest.'
            )
        try:
            return Contender(model, trigger, keep, **({} if prompt is None else {'summary_prompt': prompt}))
        except ValueError as error:
            raise Failure(f'{which}prompt-file: {error}') from None

    prompt = _prompt(prompt_file)
    first = make(summarizer, trigger, keep, prompt, '--')
    vs_summarizer, vs_trigger, vs_keep, vs_prompt_file = vs
    if all(value is None for value in vs):
        return [first] if summarizer == SLIDING_WINDOW else [first, make(SLIDING_WINDOW, trigger, keep, None, '--')]
    second_prompt = _prompt(vs_prompt_file) if vs_prompt_file is not None else prompt
    second = make(
        vs_summarizer or summarizer,
        trigger if vs_trigger is None else vs_trigger,
        keep if vs_keep is None else vs_keep,
        second_prompt,
        '--vs-',
    )
    if second == first:
        raise Failure('The --vs-* options describe the same configuration as the first: change at least one.')
    return [first, second]


_count = Bounded(1, MAX_TRIGGER)


@main.command('eval')
@click.option(
    '--summarizer',
    metavar='MODEL',
    default='test',
    show_default=True,
    help="The summarizer under test: a pydantic-ai model name, 'test' (offline, extractive) or 'window' "
    '(the sliding window: no summaries).',
)
@click.option(
    '--trigger', type=Bounded(2, MAX_TRIGGER), default=40, show_default=True, help='Compact at this many messages.'
)
@click.option('--keep', type=_count, default=12, show_default=True, help='Messages kept verbatim at each compaction.')
@click.option('--prompt-file', metavar='FILE', help='A summary prompt of your own, with {messages} in it.')
@click.option('--vs-summarizer', metavar='MODEL', help='Compare with this summarizer (default: the same one).')
@click.option('--vs-trigger', type=Bounded(2, MAX_TRIGGER), help='Compare with this trigger.')
@click.option('--vs-keep', type=_count, help='Compare with this keep.')
@click.option('--vs-prompt-file', metavar='FILE', help='Compare with this summary prompt.')
@click.option('--turns', type=_count, default=200, show_default=True, help='Customer turns.')
@click.option(
    '--seed', type=int, default=1, show_default=True, help='The conversation: the same seed, the same figures.'
)
@click.option(
    '--domain',
    type=click.Choice(['support', 'coding']),
    default='support',
    show_default=True,
    help="The conversation: a shop's support chat, or a coding assistant's session.",
)
@click.option(
    '--answer-model',
    metavar='MODEL',
    help='Also ask this model every planted fact after each compaction, and check its answer (billed requests).',
)
@click.option('--no-recall', is_flag=True, help='Do not try the recall tools on the facts out of context.')
@click.option('--plot', 'plot_path', metavar='FILE.png', help="Draw retention against turns (the 'plot' extra).")
@json_option
@pass_settings
def evaluate(
    settings: Settings,
    summarizer: str,
    trigger: int,
    keep: int,
    prompt_file: str | None,
    vs_summarizer: str | None,
    vs_trigger: int | None,
    vs_keep: int | None,
    vs_prompt_file: str | None,
    turns: int,
    seed: int,
    domain: str,
    answer_model: str | None,
    no_recall: bool,
    plot_path: str | None,
    as_json: bool,
) -> None:
    """Measure how much a summarizer keeps: a seeded conversation with planted facts (a support chat's order
    numbers, addresses, preferences and decisions, or a coding session's files, decisions, libraries and errors,
    some corrected, one kind only a tool returned) and questions, run through a session, checked after every
    compaction. A value counts only in a sentence that names its item.

    Without --vs-* options the summarizer is compared with the sliding window of the same trigger and keep.
    Runs offline with the 'test' summarizer; a provider model needs its API key in the environment.
    """
    contenders = _contenders(
        summarizer, trigger, keep, prompt_file, (vs_summarizer, vs_trigger, vs_keep, vs_prompt_file)
    )
    if plot_path is not None:
        try:
            import matplotlib  # noqa: F401  (only whether it is there: the figure is drawn once the eval ran)
        except ImportError:
            from .._eval_plot import PLOT_EXTRA

            raise Failure(f'--plot needs matplotlib: {PLOT_EXTRA}.') from None
    report = run(settings, _evaluate(contenders, turns, seed, domain, answer_model, not no_recall))
    if as_json:
        out.print_json(json.dumps(report.to_json()))
    else:
        for index, table in enumerate(report_tables(report)):
            if index:
                out.print()
            out.print(table)
    if plot_path is not None:
        from ..evaluation import plot_retention

        plot_retention(report, plot_path)
        err.print(f'Plot written to {plot_path}', markup=False)


async def _evaluate(
    contenders: list[Contender], turns: int, seed: int, domain: str, answer_model: str | None, recall: bool
) -> RetentionReport:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..evaluation import evaluate_retention

    with Progress(
        TextColumn('{task.description}'),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as progress:
        tasks = {contender.name: progress.add_task(contender.name, total=turns) for contender in contenders}

        def advance(name: str, done: int, total: int) -> None:
            progress.update(tasks[name], completed=done)

        return await evaluate_retention(
            contenders,
            turns=turns,
            seed=seed,
            domain=domain,
            recall=recall,
            answer_model=answer_model,
            on_turn=advance,
        )


def _share(part: int, whole: int) -> str:
    return f'{100 * part / whole:.0f}%' if whole else '-'


def _ratio(part: int, whole: int) -> str:
    return f'{part}/{whole}' if whole else '-'


_HEADS = {'lookup': 'lookup', 'join': 'join', 'order': 'order', 'unanswerable': 'no answer'}
"""The question kinds as the tables head them."""


def _by_compaction(report: RetentionReport, result: ContenderResult) -> Table:
    from ..evaluation import QUESTION_KINDS

    table = _table(f'{result.contender}:\nquestions the window held after each compaction (held / asked)')
    for name in ('#', 'turn', *_HEADS.values(), 'stale', 'lost'):
        table.add_column(name, justify='right')
    if report.recall:
        table.add_column('recallable', justify='right')
    table.add_column('summary', justify='right')
    table.add_column('per 1k', justify='right')
    if report.answered:
        table.add_column('answered', justify='right')
    for c in result.checkpoints:
        row = [str(c.compaction), str(c.turn)]
        row += [_ratio(c.held(kind), c.asked(kind)) for kind in QUESTION_KINDS]
        row += [str(c.count('stale')), str(c.count('lost'))]
        row += [str(c.recallable())] if report.recall else []
        row += [f'{c.summary_tokens:,}', f'{1000 * c.in_summary / c.summary_tokens:.1f}' if c.summary_tokens else '-']
        if report.answered:
            asked = sum(c.asked(kind) for kind in QUESTION_KINDS)
            row.append(f'{sum(c.answered_right(kind) for kind in QUESTION_KINDS)}/{asked}')
        table.add_row(*row)
    return table


def _by_kind(report: RetentionReport, result: ContenderResult) -> Table:
    table = _table(f'{result.contender}:\nevery lookup of a planted fact, by kind')
    for name in ('kind', 'checks', 'kept', 'corrected', 'stale', 'lost', 'in context'):
        table.add_column(name, justify='left' if name == 'kind' else 'right')
    if report.recall:
        table.add_column('recallable', justify='right')
    if report.answered:
        table.add_column('answered', justify='right')
    for kind in (*report.fact_kinds, None):
        checks = [
            check for checkpoint in result.checkpoints for check in checkpoint.checks if kind in (None, check.kind)
        ]
        held = sum(check.in_context for check in checks)
        row = [kind or 'all', str(len(checks))]
        row += [
            str(sum(check.status == status for check in checks)) for status in ('kept', 'corrected', 'stale', 'lost')
        ]
        row.append(_share(held, len(checks)))
        row += [str(sum(bool(check.recallable) for check in checks))] if report.recall else []
        row += [_share(sum(bool(check.answered) for check in checks), len(checks))] if report.answered else []
        table.add_row(*row)
    return table


def _comparison(report: RetentionReport) -> Table:
    """The contenders side by side, a column each: what they kept over every checkpoint, and what it cost."""
    from ..evaluation import QUESTION_KINDS, Checkpoint, QuestionKind

    table = _table(
        f'{report.domain.capitalize()}, seed {report.seed}, {report.turns} turns, {len(report.facts)} facts, '
        f'{len(report.questions)} other questions:\nside by side'
    )
    table.add_column('', no_wrap=True)
    for result in report.results:
        table.add_column(result.contender, justify='right')

    def held(kind: QuestionKind) -> Callable[[ContenderResult], str]:
        return lambda r: _share(r.total(lambda c: c.held(kind)), r.total(lambda c: c.asked(kind)))

    def answered(kind: QuestionKind) -> Callable[[ContenderResult], str]:
        return lambda r: _share(r.total(lambda c: c.answered_right(kind)), r.total(lambda c: c.asked(kind)))

    rows: list[tuple[str, Callable[[ContenderResult], str]]] = [
        ('compactions', lambda r: str(len(r.checkpoints))),
        *((f'{_HEADS[kind]}: held', held(kind)) for kind in QUESTION_KINDS),
    ]
    if report.recall:
        rows.append(
            (
                'lookup held or recallable',
                lambda r: _share(
                    r.total(Checkpoint.in_context) + r.total(Checkpoint.recallable), r.total(Checkpoint.planted)
                ),
            )
        )
    if report.answered:
        rows += [(f'{_HEADS[kind]}: answered', answered(kind)) for kind in QUESTION_KINDS]
    rows += [
        ('summaries', lambda r: str(r.summaries)),
        ('summarizer read, tokens', lambda r: f'{r.summarizer_input_tokens:,}'),
        ('summarizer wrote, tokens', lambda r: f'{r.summarizer_output_tokens:,}'),
        ('last summary, tokens', lambda r: f'{r.last_summary_tokens:,}'),
        ('facts per 1k summary tokens', lambda r: '-' if r.per_thousand is None else f'{r.per_thousand:.1f}'),
    ]
    for name, cell in rows:
        table.add_row(name, *(cell(result) for result in report.results))
    return table


def _table(title: str) -> Table:
    """A table as `eval` prints them: a title above, a rule under the header, one space between columns (so 80
    columns hold the widest). A contender's tables name it on a line of its own above what they show, so that
    the title fits those columns too (it is printed unwrapped, as all of `eval`'s output)."""
    return Table(title=title, title_justify='left', box=box.SIMPLE_HEAD, padding=0, show_edge=False)


def report_tables(report: RetentionReport) -> list[Table]:
    """The tables `eval` prints: per contender, by compaction and by fact kind; then the contenders side by side."""
    tables = []
    for result in report.results:
        tables += [_by_compaction(report, result), _by_kind(report, result)]
    return [*tables, _comparison(report)]
