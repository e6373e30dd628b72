"""The retention eval's figure, drawn from plain series: the share of planted facts each contender keeps, and
the facts its summary holds per 1,000 summary tokens, against turns.

matplotlib is an optional extra (`plot`), imported only when a figure is asked for, and drawn with its
Agg backend (no display needed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ('PLOT_EXTRA', 'Series', 'draw')

PLOT_EXTRA = "pip install 'pydantic-ai-session-store[plot]'"
"""What installs matplotlib for the figure."""


@dataclass(frozen=True)
class Series:
    """One contender's lines: after each compaction, the turn, the share of planted facts in context and (when
    recall was checked) in context or recallable, and the facts its summary held per 1,000 summary tokens (`None`
    where there was no summary)."""

    contender: str
    turns: Sequence[int]
    kept: Sequence[float]
    reach: Sequence[float] | None
    budget: Sequence[float | None] = ()


def draw(series: Sequence[Series], title: str, path: str | Path) -> Path:
    """Draw `series` as a PNG at `path`: on the left each contender's share in context (solid) and in context or
    recallable (dashed), on the right the facts its summary held per 1,000 summary tokens, against the turn.

    Raises:
        ImportError: matplotlib is not installed; the message says which extra installs it.
    """
    try:
        import matplotlib

        matplotlib.use('Agg')
        from matplotlib import pyplot
    except ImportError as error:
        raise ImportError(f'A retention plot needs matplotlib: {PLOT_EXTRA}.', name='matplotlib') from error

    figure, (axes, budget) = pyplot.subplots(1, 2, figsize=(11, 5), dpi=120, width_ratios=(3, 2))
    try:
        for index, line in enumerate(series):
            colour = f'C{index}'
            name = line.contender
            axes.plot(line.turns, line.kept, color=colour, marker='o', markersize=3, label=f'{name}: in context')
            if line.reach is not None:
                axes.plot(line.turns, line.reach, color=colour, linestyle='--', label=f'{name}: or recallable')
            shown = [(turn, value) for turn, value in zip(line.turns, line.budget, strict=False) if value is not None]
            if shown:
                budget.plot(*zip(*shown, strict=True), color=colour, marker='o', markersize=3)
        axes.set_xlabel('turn')
        axes.set_ylabel('share of planted facts')
        axes.set_ylim(0, 1.05)
        axes.set_title(title, fontsize=10)
        axes.grid(alpha=0.3)
        budget.set_xlabel('turn')
        budget.set_ylabel('facts in the summary per 1,000 summary tokens')
        budget.set_ylim(bottom=0)
        budget.set_title('budget (no line: no summary)', fontsize=10)
        budget.grid(alpha=0.3)
        # Below the axes, where it hides no line.
        figure.legend(fontsize=8, loc='lower center', ncol=2, frameon=False)
        figure.tight_layout(rect=(0, 0.14, 1, 1))
        target = Path(path)
        figure.savefig(target, format='png')
    finally:
        pyplot.close(figure)
    return target
