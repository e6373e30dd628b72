"""Each benchmark's `--quick` run: it exits 0 and prints its ratio lines, every figure in them a number.

The scripts run as the README says, `python benchmarks/<name>.py`, with this interpreter. The first run
in a checkout makes `.bench-venv` with the peers from the package index (about 45 s with a warm pip cache
on 2 cores; each `--quick` run then takes 10-40 s). When the index can't be reached, a script measures
ours alone and says why on lines starting `PEERS UNAVAILABLE:`: accepted here, provided it says so.

PostgreSQL figures are expected wherever a server is found; under CI (`$CI` set), where the other tests
require one, a benchmark that skipped PostgreSQL fails its test too.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
TIMEOUT = 1_200
"""Seconds a `--quick` run may take: ample for making `.bench-venv` (pip is given 900 s) plus the run."""
UNAVAILABLE = 'PEERS UNAVAILABLE:'
NOT_MEASURED = 'not measured (PEERS UNAVAILABLE: see the first lines)'
N = r'(\d[\d,]*(?:\.\d+)?)'
"""A number as the benchmarks print one: `1,234`, `0.17`, `46.4`."""


def number(text: str) -> float:
    value = float(text.replace(',', ''))
    assert value > 0, f'a figure of {text}'
    return value


def close(ratio: float, a: float, b: float) -> bool:
    """Whether a printed ratio is a / b, give or take the rounding of the printed figures.

    The tolerance is on the ratio's size: a difference of CPU times can come out negative on a noisy machine.
    """
    return abs(ratio - a / b) <= 0.05 * abs(a / b) + 0.02


def run_quick(name: str) -> str:
    """`python benchmarks/<name>.py --quick`: its output, after checking that it exited 0."""
    env = {key: value for key, value in os.environ.items() if key != 'BENCH_ENV_REEXEC'}
    result = subprocess.run(
        [sys.executable, str(REPO / 'benchmarks' / f'{name}.py'), '--quick'],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f'{name}.py --quick exited {result.returncode}:\n{output[-4_000:]}'
    return result.stdout


def has_peer(output: str, requirement: str) -> bool:
    """Whether the run measured its peer; if not, it must have said which peer is missing, and why."""
    explanation = [line for line in output.splitlines() if line.startswith(UNAVAILABLE)]
    if not explanation:
        return True
    assert requirement in explanation[0], explanation
    assert any('could not be installed' in line for line in explanation), explanation
    assert len(explanation) >= 3 and all(line.strip() != UNAVAILABLE for line in explanation), explanation
    return False


def backends(output: str, skipped: str) -> list[str]:
    """SQLite, and PostgreSQL unless the run said (in a line containing `skipped`) that it found no server."""
    if skipped in output:
        assert not os.environ.get('CI'), f'PostgreSQL is required under CI: {output}'
        return ['SQLite']
    return ['SQLite', 'PostgreSQL']


def test_store_quick() -> None:
    output = run_quick('store')
    peer = has_peer(output, 'openai-agents')
    for backend in backends(output, '=== PostgreSQL figures skipped'):
        for kind in ('store only', 'read + store'):
            head = rf'^append \({re.escape(kind)}\) on {backend}: ours {N} items/s, peer '
            if peer:
                match = re.search(head + rf'{N} items/s \([^)]*\) -> ours/peer {N} x$', output, re.MULTILINE)
                assert match, f'no {kind} ratio line on {backend}:\n{output}'
                ours, theirs, ratio = map(number, match.groups())
                assert close(ratio, ours, theirs), match.group(0)
            else:
                match = re.search(head + re.escape(NOT_MEASURED), output, re.MULTILINE)
                assert match, f'no {kind} line on {backend}:\n{output}'
                number(match.group(1))
        for size in ('100', '1k'):
            for mode in ('first open', 'warm'):
                head = rf'^open\+window @{size} \({mode}\) on {backend}: ours {N} ms, peer '
                if peer:
                    versus = r' -> ' + N + r' x (?:faster|slower)'
                    tail = rf'{N} ms \(get_items all\){versus}; peer {N} ms \(get_items limit=20\){versus}'
                    match = re.search(head + tail, output, re.MULTILINE)
                else:
                    match = re.search(head + re.escape(NOT_MEASURED), output, re.MULTILINE)
                assert match, f'no {mode} line @{size} on {backend}:\n{output}'
                for figure in match.groups():
                    number(figure)


def test_processors_quick() -> None:
    output = run_quick('processors')
    peer = has_peer(output, 'summarization-pydantic-ai==0.1.11')
    labels = ('summarization not triggered', 'sliding window (messages)', 'sliding window (tokens)')
    for label in labels:
        head = rf'^{re.escape(label)} @4k: ours {N} ms'
        if peer:
            match = re.search(head + rf' vs peer {N} ms = {N}x faster', output, re.MULTILINE)
            assert match, f'no ratio line for {label}:\n{output}'
            ours, theirs, speedup = map(number, match.groups())
            assert close(speedup, theirs, ours), match.group(0)
        else:
            match = re.search(head + re.escape(', peer ' + NOT_MEASURED), output, re.MULTILINE)
            assert match, f'no line for {label}:\n{output}'
            number(match.group(1))
        assert re.search(rf'^{re.escape(label)} @4k: .*; growth 1k->4k ours: {N}x', output, re.MULTILINE)
    for label in ('sliding window 100/50', 'summarization 100/20', 'sliding window 100/50, keep_head 3'):
        for mode in ('cold', 'incremental'):
            figures = rf'1k {N} us/msg, 4k {N} us/msg; growth 1k->4k {N}x per message'
            line = rf'^bounded time: {re.escape(label)}, {mode}: {figures} \(target growth <= 1\.2 x: (?:met|MISSED)\)$'
            match = re.search(line, output, re.MULTILINE)
            assert match, f'no bounded-time line for {label}, {mode}:\n{output}'
            low, high, growth = map(number, match.groups())
            assert close(growth, high, low), match.group(0)
    # Every window the bounded-time runs check is pair-safe by position and under the trigger.
    failed = [line for line in output.splitlines() if line.startswith('SANITY CHECK FAILED')]
    assert failed == [], '\n'.join(failed)


def test_recall_quick() -> None:
    output = run_quick('recall')
    assert 'SANITY CHECK FAILED' not in output, output
    row = re.compile(rf'^\s+{N}\s+(number|needle|paraphrase|common) .*? {N}\s+\d+\s+{N}\s+\d+\s+{N}x$', re.MULTILINE)
    rows = [match.groups() for match in row.finditer(output)]
    sections = len(backends(output, 'PostgreSQL figures skipped'))
    assert len(rows) == sections * 2 * 4, f'expected 4 queries x 2 sizes x {sections} backends:\n{output}'
    for size, _query, words, phrase, ratio in rows:
        assert number(size) in (200, 1_000)
        assert close(number(ratio), number(phrase), number(words)), (size, _query, words, phrase, ratio)


def test_web_quick() -> None:
    output = run_quick('web')
    figures = [
        ('session page (last page)', 'messages', '2k', '200'),
        ('session page (first page)', 'messages', '2k', '200'),
        ('session page (middle, by ?at=)', 'messages', '2k', '200'),
        ('session JSON (last page)', 'messages', '2k', '200'),
        ('context page', 'messages', '2k', '200'),
        ('sessions page (first page)', 'sessions', '200', '20'),
        ('sessions page (last page)', 'sessions', '200', '20'),
        ('sessions JSON (first page)', 'sessions', '200', '20'),
    ]
    for backend in backends(output, '=== PostgreSQL figures skipped'):
        for label, unit, large, small in figures:
            line = (
                rf'^{re.escape(label)} @{large} {unit} on {backend}: {N} ms \({N} bytes\); '
                rf'@{small}: {N} ms; growth {N}x$'
            )
            match = re.search(line, output, re.MULTILINE)
            assert match, f'no {label} line on {backend}:\n{output}'
            big, _size, little, growth = map(number, match.groups())
            assert close(growth, big, little), match.group(0)


def test_encryption_quick() -> None:
    output = run_quick('encryption')
    for backend in backends(output, '=== PostgreSQL figures skipped'):
        for label in ('append (load_window + store_run', 'first open @1,000', 'history @1,000', 'search words @1,000'):
            line = rf'^{re.escape(label)}.* on {backend}: plain {N} ms, encrypted {N} ms -> encrypted/plain {N} x$'
            match = re.search(line, output, re.MULTILINE)
            assert match, f'no {label} line on {backend}:\n{output}'
            plain, sealed, ratio = map(number, match.groups())
            assert close(ratio, sealed, plain), match.group(0)


def test_startup_quick() -> None:
    output = run_quick('startup')
    base = re.search(rf'^startup: python -c pass: wall {N} s, cpu {N} s$', output, re.MULTILINE)
    assert base, output
    for label in ('--help', 'history --help', 'sessions', 'history seeded', 'summaries seeded'):
        line = (
            rf'^startup: session-store {re.escape(label)}: wall {N} s, cpu {N} s -> {N} x python -c pass '
            r'\(target <= 1\.0 s: (?:met|MISSED)\)$'
        )
        match = re.search(line, output, re.MULTILINE)
        assert match, f'no {label} line:\n{output}'
        wall, _, ratio = map(number, match.groups())
        assert close(ratio, wall, number(base.group(1))), match.group(0)


def test_scale_quick() -> None:
    output = run_quick('scale')
    peer = has_peer(output, 'openai-agents')
    if '=== PostgreSQL figures skipped' in output:
        assert not os.environ.get('CI'), f'PostgreSQL is required under CI: {output}'
        return
    routes = ['direct'] + ([] if '=== PgBouncer figures skipped' in output else ['PgBouncer'])
    measured: list[bool] = []
    for route in routes:
        where = rf'PostgreSQL {route} @10 ms'
        head = rf'^scale on {where}: ours {N} turns/s at peak {N} server connections, peer '
        if peer:
            line = head + rf'{N} turns/s at peak {N} -> ours/peer {N} x; agent alone {N} turns/s'
            match = re.search(line, output, re.MULTILINE)
            assert match, f'no throughput line through {route}:\n{output}'
            ours, _peak, theirs, _their_peak, ratio, _alone = map(number, match.groups())
            assert close(ratio, ours, theirs), match.group(0)
            # Each less the agent alone's CPU: on a tiny load's noise a difference may come out negative.
            line = rf'^store CPU per turn on {where}: ours (-?{N}) ms, peer (-?{N}) ms -> ours/peer (?:n/a|(-?{N}) x)'
            match = re.search(line, output, re.MULTILINE)
            assert match, f'no store CPU line through {route}:\n{output}'
            ours_cpu, _, peer_cpu, _, shown, _ = match.groups()
            if float(peer_cpu) > 0:
                assert close(float(shown), float(ours_cpu), float(peer_cpu)), match.group(0)
            measured.append(float(peer_cpu) > 0)
        else:
            assert re.search(head + re.escape(NOT_MEASURED), output, re.MULTILINE), output
        match = re.search(rf'^store overhead on {where}: ours p50 {N} ms p99 {N} ms, peer ', output, re.MULTILINE)
        assert match, f'no store overhead line through {route}:\n{output}'
        p50, p99 = map(number, match.groups())
        assert p50 <= p99, match.group(0)
        match = re.search(rf'^server connections on {where}: ours peak {N} \(bound {N}\)', output, re.MULTILINE)
        assert match, f'no connections line through {route}:\n{output}'
        for figure in match.groups():
            number(figure)
        # A store CPU figure less the agent alone's may come out negative on a tiny load (see above).
        targets = re.findall(rf'^target on {where}: .*: (-?{N}) (?:ms )?(?:\(|x)', output, re.MULTILINE)
        expected = 2 + (2 + measured[-1] if peer else 0)  # the store CPU target needs the peer's CPU above the agent's
        assert len(targets) == expected, f'targets through {route}: {targets}\n{output}'


def test_conversations_quick() -> None:
    output = run_quick('conversations')
    peer = has_peer(output, 'openai-agents')
    for backend in backends(output, '=== PostgreSQL figures skipped'):
        for size in ('100', '1k'):
            head = rf'^conversation turn @{size} on {backend}: ours {N} ms \(load \+ save\), peer '
            if peer:
                peer_calls = re.escape('(get_items(20) + add_items(4))')
                match = re.search(head + rf'{N} ms {peer_calls} -> ours/peer {N} x$', output, re.MULTILINE)
                assert match, f'no turn line @{size} on {backend}:\n{output}'
                ours, theirs, ratio = map(number, match.groups())
                assert close(ratio, ours, theirs), match.group(0)
            else:
                match = re.search(head + re.escape(NOT_MEASURED), output, re.MULTILINE)
                assert match, f'no turn line @{size} on {backend}:\n{output}'
                number(match.group(1))
        match = re.search(rf'^conversation turn growth on {backend}: ours @100 -> @1k {N} x$', output, re.MULTILINE)
        assert match, f'no growth line on {backend}:\n{output}'
        number(match.group(1))


def test_chat_quick() -> None:
    output = run_quick('chat')
    for backend in backends(output, '=== PostgreSQL figures skipped'):
        figures: dict[tuple[str, str], float] = {}
        for size in ('500', '2k'):
            at = rf'@{size} on {backend}'
            line = rf'^chat new turn {at}: dispatch_chat {N} ms, stock {N} ms -> ours/stock {N} x$'
            match = re.search(line, output, re.MULTILINE)
            assert match, f'no new turn line @{size} on {backend}:\n{output}'
            new, stock, ratio = map(number, match.groups())
            assert close(ratio, new, stock), match.group(0)
            figures[size, 'new'], figures[size, 'stock'] = new, stock
            line = (
                rf'^chat edit recent turn {at}: dispatch_chat {N} ms, stock {N} ms -> ours/stock {N} x; '
                rf'vs a new turn {N} x$'
            )
            match = re.search(line, output, re.MULTILINE)
            assert match, f'no edit recent line @{size} on {backend}:\n{output}'
            recent, recent_stock, ratio, versus = map(number, match.groups())
            assert close(ratio, recent, recent_stock) and close(versus, recent, new), match.group(0)
            figures[size, 'edit recent'] = recent
            for name in ('edit old', 'regenerate old'):
                line = rf'^chat {name} turn {at}: dispatch_chat {N} ms -> vs a new turn {N} x$'
                match = re.search(line, output, re.MULTILINE)
                assert match, f'no {name} line @{size} on {backend}:\n{output}'
                ms, versus = map(number, match.groups())
                assert close(versus, ms, new), match.group(0)
                figures[size, name] = ms
        line = rf'^chat new turn growth on {backend}: @500 -> @2k dispatch_chat {N} x, stock {N} x \(per turn\)$'
        match = re.search(line, output, re.MULTILINE)
        assert match, f'no new turn growth line on {backend}:\n{output}'
        for growth, door in zip(map(number, match.groups()), ('new', 'stock'), strict=True):
            assert close(growth, figures['2k', door], figures['500', door]), match.group(0)
        line = (
            rf'^chat resubmission growth on {backend}: @500 -> @2k edit recent {N} x, edit old {N} x, '
            rf'regenerate old {N} x$'
        )
        match = re.search(line, output, re.MULTILINE)
        assert match, f'no resubmission growth line on {backend}:\n{output}'
        resubmissions = ('edit recent', 'edit old', 'regenerate old')
        for growth, name in zip(map(number, match.groups()), resubmissions, strict=True):
            assert close(growth, figures['2k', name], figures['500', name]), match.group(0)


def test_migration_quick() -> None:
    output = run_quick('migration')
    if '=== PostgreSQL figures skipped' in output:
        assert not os.environ.get('CI'), f'PostgreSQL is required under CI: {output}'
        return
    line = rf'^migration 0004 -> head of 20,000 messages on PostgreSQL: {N} s, longest write {N} ms \({N} writes\), '
    assert re.search(line + rf'with no migration {N} ms$', output, re.MULTILINE), output


def test_server_share_quick() -> None:
    output = run_quick('server_share')
    if '=== PostgreSQL figures skipped' in output:
        assert not os.environ.get('CI'), f'PostgreSQL is required under CI: {output}'
        return
    peer = has_peer(output, 'openai-agents')
    for what in ('door turn', 'Session.run'):
        share = rf'{N} statements, {N} shared blocks, {N} ms'
        line = rf'^{re.escape(what)} @1,000 on PostgreSQL: ours {share}'
        line += rf'; peer {share} -> shared blocks ours/peer {N} x$' if peer else '$'
        match = re.search(line, output, re.MULTILINE)
        assert match, f'no {what} line:\n{output}'
        if peer:
            ours, theirs, ratio = (number(match.group(i)) for i in (2, 5, 7))
            assert close(ratio, ours, theirs), match.group(0)
    sizes = rf'{N} \(table {N}, indexes {N}, TOAST {N}\)'
    line = rf'^bytes per stored message @1,000 on PostgreSQL: ours {sizes}' + (rf'; peer {sizes}$' if peer else '$')
    assert re.search(line, output, re.MULTILINE), output


def test_instructions_quick() -> None:
    import shutil

    if shutil.which('valgrind') is None:
        assert not os.environ.get('CI'), 'valgrind is required under CI (.ci/run installs it)'
        pytest.skip('valgrind is not installed')
    output = run_quick('instructions')
    peer = has_peer(output, 'openai-agents')
    spread = r'\(spread (\d+\.\d)%\)'
    for backend in backends(output, '=== PostgreSQL figures skipped'):
        whats = ('door turn', 'Session.run store part', 'first open')
        for what, size in [(what, size) for what in whats for size in ('100', '1,000')]:
            head = rf'^{re.escape(what)} @{size} on {backend}: ours {N} instructions {spread}, peer '
            tail = rf'{N} {spread} -> ours/peer {N} x$' if peer else re.escape(NOT_MEASURED) + '$'
            match = re.search(head + tail, output, re.MULTILINE)
            assert match, f'no {what} line @{size} on {backend}:\n{output}'
            ours = number(match.group(1))
            assert 1_000 < ours < 1e10, match.group(0)
            if peer:
                theirs, ratio = number(match.group(3)), number(match.group(5))
                assert close(ratio, ours, theirs), match.group(0)
            assert all(0 <= float(value) < 1_000 for value in match.groups()[1::2]), match.group(0)
        for what in ('door turn', 'Session.run store part'):
            line = rf"^   ours' {re.escape(what)} @1,000 in parts, each \(times a cycle of 5 turns\): .+ {N} \(x 5\)$"
            assert re.search(line, output, re.MULTILINE), f"no parts of ours' {what} on {backend}:\n{output}"
