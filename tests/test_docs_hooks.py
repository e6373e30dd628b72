"""The site's build hooks (docs/hooks/) as functions, without building the site: tests/test_docs_site.py checks the
pages they make in a browser."""

from __future__ import annotations

import pytest

from docs.hooks.code_breaks import mark_code_breaks


@pytest.mark.parametrize(
    ('html', 'marked'),
    [
        ('<p><code>Session.run</code></p>', '<p><code>Session<wbr>.run</code></p>'),
        (
            '<td><code>store.session(id, wait=True)</code></td>',
            '<td><code>store<wbr>.session(<wbr>id, wait=<wbr>True)</code></td>',
        ),
        (
            '<code>usage_limits=run_limits(conversation)</code>',
            '<code>usage_limits=<wbr>run_limits(<wbr>conversation)</code>',
        ),
        ('<code>session_store/web/static/</code>', '<code>session_store/<wbr>web/<wbr>static/</code>'),
        # one word: no break at all
        ('<code>ConversationConflict</code>', '<code>ConversationConflict</code>'),
        # a leading dot, an ellipsis, an entity: no break inside them
        ('<code>./sessions.db</code>', '<code>./<wbr>sessions<wbr>.db</code>'),
        ('<code>run(...)</code>', '<code>run(...)</code>'),
        ('<code>a &amp;&amp; b&lt;c</code>', '<code>a &amp;&amp; b&lt;c</code>'),
    ],
)
def test_inline_code_gets_break_points_between_words_only(html: str, marked: str) -> None:
    assert mark_code_breaks(html) == marked


def test_tags_inside_code_are_left_whole_and_their_text_marked() -> None:
    html = '<code><a href="../api/x/#session_store.Session.run" title="a.b">Session.run</a></code>'
    assert mark_code_breaks(html) == (
        '<code><a href="../api/x/#session_store.Session.run" title="a.b">Session<wbr>.run</a></code>'
    )


def test_code_blocks_are_left_alone() -> None:
    """A block keeps its lines as written, scrolling sideways if it must; a signature wraps by the stylesheet."""
    html = '<pre><span></span><code>store.session(id, wait=True)\nx.y</code></pre><p><code>a.b</code></p>'
    assert mark_code_breaks(html) == (
        '<pre><span></span><code>store.session(id, wait=True)\nx.y</code></pre><p><code>a<wbr>.b</code></p>'
    )
