"""A session's title on its page: the rename form's state, what it may hold, and what a stale rename is told.

The form posts the title the page was rendered with as `expected_title` (left out when the page showed none), so
the store writes the new title only if nobody renamed the session since (`ConversationStore.update`'s own check),
and a rename made meanwhile in another tab or client is never overwritten unseen.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

__all__ = ('MAX_TITLE', 'RenameForm', 'checked_title', 'conflict_message')

MAX_TITLE = 200
"""The most characters a title given in the browser may have: a line a list can show, not a paragraph."""


@dataclass(frozen=True)
class RenameForm:
    """What the session page's rename form holds."""

    value: str
    """The title in the box: the one shown, or what was typed when the rename was refused."""
    expected: str | None
    """The title the form says the page showed (`expected_title`); `None`: none."""
    error: str | None = None
    """Why the last rename was refused, if it was."""

    @classmethod
    def showing(cls, title: str | None) -> RenameForm:
        """The form on a page that shows `title`."""
        return cls(value=title or '', expected=title)


def checked_title(typed: str) -> str | None:
    """The title to store for what the form sent: trimmed, `None` (no title) when blank.

    Raises:
        ValueError: It is longer than `MAX_TITLE` characters, or more than one line (a control character).
    """
    title = typed.strip()
    if not title:
        return None
    if len(title) > MAX_TITLE:
        raise ValueError(f'A title is at most {MAX_TITLE} characters; this one has {len(title)}.')
    if any(unicodedata.category(character) == 'Cc' for character in title):
        raise ValueError('A title is one line of text: no line breaks, tabs or other control characters.')
    return title


def conflict_message(shown: str | None, current: str | None) -> str:
    """What a rename is told when the session's title was no longer the one its page showed."""
    was = f'(as “{shown}”)' if shown is not None else '(untitled)'
    if current is None:
        happened = f'its title was removed since the page was shown {was}'
    else:
        happened = f'this session was renamed to “{current}” since the page was shown {was}'
    return f'Not renamed: {happened}. Save again to replace the title it has now.'
