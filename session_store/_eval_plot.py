"""The retention eval's figure: the share of planted facts each contender keeps in context, against turns.

matplotlib is an optional extra (`plot`), imported only when a figure is asked for, and drawn with its
Agg backend (no display needed).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .evaluation import RetentionReport

__all__ = ('PLOT_EXTRA', 'plot_retention')

PLOT_EXTRA = "pip install 'pydantic-ai-session-store[plot]'"
"""What installs matplotlib for the figure."""


def plot_retention(report: RetentionReport, path: str | Path) -> Path:
    """Draw `report` as a PNG at `path`: per contender, the share of planted facts in context after each
    compaction (solid) and the share in context or recallable (dashed), against the turn.

    Raises:
        ImportError: matplotlib is not installed; the message says which extra installs it.
    """
    try:
        import matplotlib

        matplotlib.use('Agg')
        from matplotlib import pyplot
    except ImportError as error:
        raise ImportError(f'A retention plot needs matplotlib: {PLOT_EXTRA}.', name='matplotlib') from error

    figure, axes = pyplot.subplots(figsize=(8, 5), dpi=120)
    try:
        for index, result in enumerate(report.results):
            colour = f'C{index}'
            turns = [checkpoint.turn for checkpoint in result.checkpoints]
            kept = [c.in_context() / c.planted() if c.planted() else 0.0 for c in result.checkpoints]
            reach = [
                (c.in_context() + c.recallable()) / c.planted() if c.planted() else 0.0 for c in result.checkpoints
            ]
            axes.plot(turns, kept, color=colour, marker='o', markersize=3, label=f'{result.contender}: in context')
            if report.recall:
                axes.plot(turns, reach, color=colour, linestyle='--', label=f'{result.contender}: or recallable')
        axes.set_xlabel('turn')
        axes.set_ylabel('share of planted facts')
        axes.set_ylim(0, 1.05)
        axes.set_title(f'Retention after each compaction (seed {report.seed}, {report.turns} turns)')
        axes.grid(alpha=0.3)
        # Below the axes, where it hides no line.
        axes.legend(fontsize=8, loc='upper center', bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
        figure.tight_layout()
        target = Path(path)
        figure.savefig(target, format='png')
    finally:
        pyplot.close(figure)
    return target
