"""The benchmarks' environment: one interpreter that imports this project, its dependencies and every peer.

Each script in this folder starts with

    from _bench_env import SUMMARIZATION, ensure_environment
    ensure_environment([SUMMARIZATION])     # the peers this script imports; [] for none

before any third-party import. `ensure_environment` fixes `sys.path` (the repo root first, so `testkit` and
the `processors` package import from the checkout; this folder last, so `benchmarks/processors.py` can't
shadow `processors`). Then, if this interpreter lacks the project, one of the dependencies
`pyproject.toml` lists now, or one of the script's peers at its pin, it makes the private venv
`<repo>/.bench-venv` (gitignored), installs into it what that venv lacks of the project (editable) and
*every* peer in `PEERS`, so one venv serves all the scripts, and re-executes the script there.

When that venv can't be made (no package index reachable, say) but this interpreter has the project, the
script goes on without its peers: `ensure_environment` prints why, on lines starting `PEERS UNAVAILABLE:`,
and returns the peers it lacks, whose figures the script then leaves out.

The peers are never dependencies of this project. Only the standard library is used here: this runs
first, in whatever interpreter the script was started with (a bare `python3` is fine).

Run as a script (`python _bench_env.py MODULE ...`), it prints what the interpreter running it lacks for
those peers, one requirement a line: that is how a venv is probed.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
import tomllib
import venv
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCHMARKS = REPO / 'benchmarks'
BENCH_VENV = REPO / '.bench-venv'
OUR_DIST = 'pydantic-ai-session-store'
EDITABLE = f'-e {REPO}'
"""The requirement standing for this project and its dependencies, installed editable."""

SUMMARIZATION = 'pydantic_ai_summarization'
"""benchmarks/processors.py's peer."""
AGENTS_SQLALCHEMY = 'agents.extensions.memory.sqlalchemy_session'
"""benchmarks/store.py's peer: the OpenAI Agents SDK's `SQLAlchemySession`."""
PEERS: dict[str, str] = {
    SUMMARIZATION: 'summarization-pydantic-ai==0.1.11',
    AGENTS_SQLALCHEMY: 'openai-agents[sqlalchemy]',
}
"""Every peer the benchmarks use: the module a script imports -> its pip requirement."""

PEERS_UNAVAILABLE = 'PEERS UNAVAILABLE:'
"""How each line saying that a script runs without some of its peers, and why, starts."""
INSTALL_TIMEOUT = 900.0
"""Seconds the peers' installation may take before the script gives up on it and runs without them."""

_REEXEC_FLAG = 'BENCH_ENV_REEXEC'
_NAME = re.compile(r'\s*([A-Za-z0-9][A-Za-z0-9._-]*)')
_NETWORK_ERROR = re.compile(r"(?<=: )[^:'\"]*(Errno|refused|resolution|not known|timed out)[^'\"]*")
"""In pip's `WARNING: Retrying (...) after connection broken by '...: [Errno 111] Connection refused')'`."""


def fix_sys_path() -> None:
    """The repo root first on `sys.path`, this folder last (a script's own folder heads it otherwise)."""
    rest = [entry for entry in sys.path if Path(entry or '.').resolve() not in (REPO, BENCHMARKS)]
    sys.path[:] = [str(REPO), *rest, str(BENCHMARKS)]


def distribution(requirement: str) -> str:
    """The distribution a requirement names: `openai-agents` for `openai-agents[sqlalchemy]>=1`."""
    match = _NAME.match(requirement)
    if match is None:
        raise ValueError(f'not a requirement: {requirement!r}')
    return match.group(1)


def pin(requirement: str) -> str | None:
    """The version a requirement pins with `==`, if it does."""
    _, pinned, version = requirement.partition('==')
    return version.split(';')[0].strip() if pinned else None


def _installed(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _importable(module: str) -> bool:
    """Whether `module` can be found; finding a submodule imports its parent packages."""
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False


def project_ready() -> bool:
    """Whether this project is installed with every dependency that `pyproject.toml` lists now (an
    editable install made before a dependency was added lacks it)."""
    with (REPO / 'pyproject.toml').open('rb') as file:
        dependencies: list[str] = tomllib.load(file)['project']['dependencies']
    return all(_installed(dist) is not None for dist in [OUR_DIST, *map(distribution, dependencies)])


def peer_ready(module: str) -> bool:
    """Whether a peer imports, at its pinned version if `PEERS` pins one."""
    requirement = PEERS[module]
    version = pin(requirement)
    if not _importable(module):
        return False
    return version is None or _installed(distribution(requirement)) == version


def missing(peers: Iterable[str]) -> list[str]:
    """What this interpreter lacks: `EDITABLE` for the project, then the requirements of absent peers."""
    lacking = [] if project_ready() else [EDITABLE]
    return lacking + [PEERS[module] for module in peers if not peer_ready(module)]


def _venv_python() -> Path:
    return BENCH_VENV / ('Scripts/python.exe' if os.name == 'nt' else 'bin/python')


def _venv_missing(python: Path) -> list[str]:
    """What the bench venv lacks of the project and every peer, asked of its own interpreter."""
    # Run outside the repo, so the project must come from the installed package, not the cwd.
    probe = subprocess.run(
        [str(python), str(Path(__file__).resolve()), *PEERS],
        cwd=BENCH_VENV,
        capture_output=True,
        text=True,
        check=True,
    )
    return probe.stdout.splitlines()


class BenchVenvError(Exception):
    """The bench venv could not be made or brought up to date; the message says why."""


def _install(python: Path, requirements: list[str]) -> None:
    print(f'Installing {" ".join(requirements)} into {BENCH_VENV} ...', flush=True)
    arguments = [word for requirement in requirements for word in requirement.split(' ', 1)]
    command = [str(python), '-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', *arguments]
    try:
        subprocess.run(command, check=True, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
    except subprocess.TimeoutExpired as error:
        raise BenchVenvError(f'pip install took longer than {INSTALL_TIMEOUT:.0f} s') from error
    except subprocess.CalledProcessError as error:
        raise BenchVenvError(f'pip install failed (exit {error.returncode}): {_pip_failure(error.stderr)}') from error


def _pip_failure(stderr: str) -> str:
    """The gist of pip's error output: its last ERROR lines, and the network error if it retried any."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    gist = ' '.join(([line for line in lines if line.startswith('ERROR')] or lines)[-2:])
    retried = [_NETWORK_ERROR.search(line) for line in lines if line.startswith('WARNING: Retrying')]
    causes = [match.group(0) for match in retried if match is not None]
    return f'{gist} (the package index is unreachable: {causes[-1]})' if causes else gist


def _prepare_venv(python: Path) -> None:
    """Make the bench venv if it is missing, and install what it lacks."""
    try:
        if not python.exists():
            print(f'Creating {BENCH_VENV} for the benchmarks ...', flush=True)
            venv.EnvBuilder(with_pip=True).create(BENCH_VENV)
        requirements = _venv_missing(python)
    except (OSError, subprocess.CalledProcessError) as error:
        raise BenchVenvError(f'could not make {BENCH_VENV}: {error}') from error
    if requirements:
        _install(python, requirements)


def _without_peers(peers: list[str], lacking: list[str], why: BenchVenvError) -> list[str]:
    """Say why the peers are missing and which they are; the peers (modules) to do without. If this
    interpreter lacks the project itself, nothing can run: exit, saying why."""
    if EDITABLE in lacking:
        raise SystemExit(
            f'{PEERS_UNAVAILABLE} cannot run: {sys.prefix} lacks this project ({OUR_DIST}, or one of its '
            f'dependencies) and {why}. Run the script with the project installed (e.g. from its .venv).'
        )
    absent = [module for module in peers if not peer_ready(module)]
    requirements = ', '.join(PEERS[module] for module in absent)
    print(f'{PEERS_UNAVAILABLE} {requirements}: not in {sys.prefix}, and could not be installed into {BENCH_VENV}:')
    print(f'{PEERS_UNAVAILABLE} {why}.')
    print(f'{PEERS_UNAVAILABLE} measuring ours only: every figure and ratio against those peers is left out.')
    print(flush=True)
    return absent


def ensure_environment(peers: Iterable[str] = ()) -> list[str]:
    """Fix `sys.path`; continue if this interpreter has the project and `peers` (modules, keys of
    `PEERS`), else bring the bench venv up to date and re-execute the running script in it.

    Returns the peers the script must do without: none, unless the bench venv could not be made, in
    which case this printed why (lines starting `PEERS UNAVAILABLE:`) and the script runs here, ours only.
    """
    fix_sys_path()
    peers = list(peers)
    lacking = missing(peers)
    if not lacking:
        return []
    if os.environ.get(_REEXEC_FLAG):
        raise SystemExit(f'{", ".join(lacking)}: still not importable in {sys.prefix}.')
    python = _venv_python()
    try:
        _prepare_venv(python)
    except BenchVenvError as error:
        return _without_peers(peers, lacking, error)
    script = Path(sys.modules['__main__'].__file__ or sys.argv[0]).resolve()
    os.environ[_REEXEC_FLAG] = '1'
    os.execv(str(python), [str(python), str(script), *sys.argv[1:]])


if __name__ == '__main__':
    for requirement in missing(sys.argv[1:]):
        print(requirement)
