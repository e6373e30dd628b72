"""`compact`: summarize a session now, as its next summary, whatever its triggers say."""

from __future__ import annotations

import click

from ..results import StoredSummary
from ._app import NAME, db_option, main, scope_option
from ._render import compaction_line
from ._runtime import Settings, open_store, out, pass_settings, run
from ._summarizer import KEEP, keep_option, summarizer_processor

__all__ = ('compact',)


@main.command()
@click.argument('session_id', metavar='ID', type=NAME)
@click.option(
    '--summarizer',
    metavar='MODEL',
    required=True,
    help="The model that summarizes; 'test' summarizes offline, extractively.",
)
@click.option('--focus', metavar='TEXT', help='A topic the summary should put first.')
@keep_option(KEEP)
@scope_option
@db_option
@pass_settings
def compact(
    settings: Settings, session_id: str, summarizer: str, focus: str | None, keep: int, scope: str | None
) -> None:
    """Summarize a session now: the next link of its summary chain, the window moved past it.

    The summary extends the stored one with only what it newly folds in; the archive keeps every message.
    """
    out.print(
        compaction_line(session_id, run(settings, _compact(settings, session_id, summarizer, focus, keep, scope)))
    )


async def _compact(
    settings: Settings, session_id: str, summarizer: str, focus: str | None, keep: int, scope: str | None
) -> StoredSummary | None:
    processor = summarizer_processor(summarizer, trigger=None, keep=keep)
    async with open_store(settings, 'write', processor=processor) as store:
        await store.history(session_id, scope=scope, limit=0)  # refuse an unknown id rather than create it
        return await (await store.session(session_id, scope=scope)).compact(focus)
