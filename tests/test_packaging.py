"""The shape of what ships: two import roots with `py.typed`, migrations inside `session_store`, no import cycles,
and lower bounds only, which CI installs and tests as they are declared."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from session_store._db.schema import SCHEMA_REVISION, head_revision, migrations_dir

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ('processors', 'session_store')


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix('').parts
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """Every module of `modules` that `path` imports, anywhere in it (in functions and `TYPE_CHECKING` too)."""
    name = _module_name(path)
    package = name if path.name == '__init__.py' else name.rpartition('.')[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                anchor = package.rsplit('.', node.level - 1)[0] if node.level > 1 else package
                base = f'{anchor}.{base}' if base else anchor
            # `from . import x` imports the submodule x; `from .a import b` imports a (and b, if a submodule).
            submodules = [f'{base}.{alias.name}' for alias in node.names if f'{base}.{alias.name}' in modules]
            targets = submodules if len(submodules) == len(node.names) else [base, *submodules]
        else:
            continue
        found.update(target for target in targets if target in modules and target != name)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import cycle of `graph` (each node's imports), as the trail that closes it."""
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                cycles.append([*trail[trail.index(target) :], target])
            elif target not in state:
                visit(target, [*trail, target])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    return cycles


@pytest.mark.parametrize('package', PACKAGES)
def test_no_import_cycles_within_a_package(package: str) -> None:
    files = {_module_name(path): path for path in (REPO / package).rglob('*.py')}
    graph = {name: _imports(path, set(files)) for name, path in files.items()}
    assert graph, f'no modules found under {package}'
    assert _cycles(graph) == []


def test_no_import_cycles_between_a_packages_parts() -> None:
    """Each sub-package of `session_store` taken whole, beside its top-level modules: no two parts import each other,
    however many modules apart (the storage layers and the export format once did)."""
    files = {_module_name(path): path for path in (REPO / 'session_store').rglob('*.py')}

    def part(name: str) -> str:
        inner = name.split('.')
        return '.'.join(inner[:2]) if (REPO / 'session_store' / inner[1]).is_dir() else name

    graph: dict[str, set[str]] = {part(name): set() for name in files if name != 'session_store'}
    for name, path in files.items():
        if name != 'session_store':
            graph[part(name)] |= {part(target) for target in _imports(path, set(files)) if target != 'session_store'}
    for name, imported in graph.items():
        imported.discard(name)
    assert 'session_store._history' in graph and 'session_store.exports' in graph
    assert _cycles(graph) == []


_LAYERS = {
    'session_store._db': set(),
    'session_store._history': {'session_store._db'},
    'session_store._upkeep': {'session_store._db'},
}
"""Each private sub-package of `session_store`, and the others it may import: the storage layer's layers."""


def test_the_storage_layers_import_one_way() -> None:
    files = {_module_name(path): path for path in (REPO / 'session_store').rglob('*.py')}
    crossings = {
        f'{name} imports {target}'
        for layer, allowed in _LAYERS.items()
        for name, path in files.items()
        if name.startswith(layer)
        for target in _imports(path, set(files))
        if any(target.startswith(other) for other in _LAYERS if other != layer and other not in allowed)
    }
    assert crossings == set()


def test_no_module_is_over_600_lines() -> None:
    long = {
        str(path.relative_to(REPO)): count
        for package in PACKAGES
        for path in (REPO / package).rglob('*.py')
        if (count := len(path.read_text().splitlines())) > 600
    }
    assert long == {}


def test_the_migrations_are_found_as_package_resources() -> None:
    found = migrations_dir()
    assert (found / 'env.py').is_file() and (found / 'script.py.mako').is_file()
    assert head_revision() == sorted(p.name for p in (found / 'versions').glob('0*.py'))[-1][:4]


@pytest.mark.slow
def test_alembic_upgrade_head_works_from_a_checkout(tmp_path: Path) -> None:
    url = f'sqlite+aiosqlite:///{tmp_path / "checkout.db"}'
    environment = {**os.environ, 'SESSION_STORE_URL': url}
    done = subprocess.run(
        [sys.executable, '-m', 'alembic', 'upgrade', 'head'],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    current = subprocess.run(
        [sys.executable, '-m', 'alembic', 'current'], cwd=REPO, env=environment, capture_output=True, text=True
    )
    assert f'{head_revision()} (head)' in current.stdout


@pytest.fixture(scope='module')
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from this checkout."""
    out = tmp_path_factory.mktemp('wheel')
    subprocess.run(
        [sys.executable, '-m', 'pip', 'wheel', '--quiet', '--no-deps', '--wheel-dir', str(out), str(REPO)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (built,) = out.glob('*.whl')
    return built


@pytest.mark.slow
def test_the_wheel_holds_two_typed_import_roots_and_the_migrations(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split('/')[0] for name in names if '.dist-info/' not in name} == set(PACKAGES)
    assert {'processors/py.typed', 'session_store/py.typed'} <= set(names)
    versions = sorted(name for name in names if name.startswith('session_store/migrations/versions/0'))
    assert [Path(name).name[:4] for name in versions] == sorted(
        p.name[:4] for p in (REPO / 'migrations/versions').glob('0*.py')
    )
    assert 'session_store/migrations/env.py' in names
    # The web app's templates and static files ship inside session_store.web: it works with no network.
    web = REPO / 'session_store' / 'web'
    shipped = {str(path.relative_to(REPO)) for path in web.rglob('*') if path.parent.name in ('templates', 'static')}
    assert shipped and {'session_store/web/static/app.js', 'session_store/web/templates/session.html'} <= shipped
    assert shipped <= set(names), shipped - set(names)


@pytest.mark.slow
def test_a_fresh_venv_with_the_wheel_runs_the_demo_and_names_the_postgresql_extra(wheel: Path, tmp_path: Path) -> None:
    home = tmp_path / 'venv'
    venv.create(home, with_pip=True)
    python = home / 'bin' / 'python'
    subprocess.run([python, '-m', 'pip', 'install', '--quiet', str(wheel)], check=True, timeout=900)
    empty = tmp_path / 'empty'
    empty.mkdir()
    environment = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'SESSION_STORE_URL')}
    demo = subprocess.run(
        [home / 'bin' / 'session-store', 'demo', '--turns', '8'],
        cwd=empty,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert demo.returncode == 0, demo.stderr
    assert 'messages archived' in demo.stdout and (empty / 'sessions.db').is_file()
    # The PostgreSQL driver is the `postgresql` extra, which this venv lacks: the error names it.
    probe = subprocess.run(
        [python, '-c', "from session_store import SessionStore; SessionStore('postgresql://u@localhost/db')"],
        cwd=empty,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert probe.returncode == 1
    assert 'pip install "pydantic-ai-session-store[postgresql]"' in probe.stderr
    # So is the web app's: `serve` says which extra to install, in one line.
    serve = subprocess.run(
        [home / 'bin' / 'session-store', 'serve'],
        cwd=empty,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert serve.returncode == 1 and serve.stderr.count('\n') == 1, serve.stderr
    assert 'pip install "pydantic-ai-session-store[web]"' in serve.stderr


def test_the_schema_revision_an_open_expects_is_the_migrations_head() -> None:
    """Opens compare the database's revision with `SCHEMA_REVISION` before reading any migration script."""
    assert head_revision() == SCHEMA_REVISION


def _declared_lower_bounds() -> dict[str, dict[str, Version]]:
    """pyproject's requirements by group (`dependencies`, then each extra): each name and its `>=` bound.

    The wheel declares lower bounds only, so that is all a requirement may say; the project's own extras
    (`pydantic-ai-session-store[web]` in `dev`) are left out.
    """
    project = tomllib.loads((REPO / 'pyproject.toml').read_text())['project']
    groups = {'dependencies': project['dependencies'], **project['optional-dependencies']}
    bounds: dict[str, dict[str, Version]] = {}
    for group, lines in groups.items():
        bounds[group] = {}
        for line in lines:
            requirement = Requirement(line)
            if canonicalize_name(requirement.name) == canonicalize_name(project['name']):
                continue
            specifiers = list(requirement.specifier)
            assert [s.operator for s in specifiers] == ['>='], f'{line}: a lower bound (>=) and nothing else'
            bounds[group][canonicalize_name(requirement.name)] = Version(specifiers[0].version)
    return bounds


def _lowest_pins() -> dict[str, Version]:
    """`.ci/lowest.txt`: the `name==version` constraints that .ci/lowest installs the project with."""
    pins: dict[str, Version] = {}
    for line in (REPO / '.ci' / 'lowest.txt').read_text().splitlines():
        if line.strip() and not line.lstrip().startswith('#'):
            requirement = Requirement(line)
            specifiers = list(requirement.specifier)
            assert [s.operator for s in specifiers] == ['=='], f'{line}: one pin (==) and nothing else'
            name = canonicalize_name(requirement.name)
            assert name not in pins, f'{name} is pinned twice'
            pins[name] = Version(specifiers[0].version)
    return pins


def test_the_lowest_versions_ci_installs_are_the_declared_lower_bounds() -> None:
    """CI's run on the lowest versions proves the bounds only while its pins are those bounds: they can't drift."""
    bounds = _declared_lower_bounds()
    pins = _lowest_pins()
    # Every direct dependency of the package and of its user-facing extras is pinned, at its bound.
    shipped = {name: bound for group, found in bounds.items() if group != 'dev' for name, bound in found.items()}
    assert {name: pins.get(name) for name in shipped} == shipped
    # The dev tools float, but one pinned (because a pin above forces it) is pinned at its bound too;
    # and nothing is pinned that pyproject does not name.
    dev = {name: bound for name, bound in bounds['dev'].items() if name in pins and name not in shipped}
    assert {name: pin for name, pin in pins.items() if name not in shipped} == dev


def _private_attributes() -> set[str]:
    """The `_`-prefixed attributes our packages' objects have: what `self._x = ...` sets, and their `_x` methods."""
    names: set[str] = set()
    for package in PACKAGES:
        for path in (REPO / package).rglob('*.py'):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    names.update(
                        item.name for item in node.body if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                    )
                elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == 'self':
                    names.add(node.attr)
    return {name for name in names if name.startswith('_') and not name.startswith('__')}


def _own(receiver: ast.expr) -> bool:
    """Whether an attribute is looked up on a class's own instance or class, not on one of our objects."""
    return isinstance(receiver, ast.Name) and receiver.id in ('self', 'cls')


def _reaches_inside(path: Path, attributes: set[str]) -> list[str]:
    """What `path` takes from our packages that users can't: private modules or names, private attributes of our
    objects (on anything but a class's own `self`), each as `line: what`."""
    found: list[str] = []

    def private(dotted: str) -> bool:
        parts = dotted.split('.')
        return parts[0] in PACKAGES and any(part.startswith('_') for part in parts[1:])

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [f'{node.lineno}: import {alias.name}' for alias in node.names if private(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split('.')[0] in PACKAGES:
            names = [alias.name for alias in node.names]
            if private(node.module) or any(name.startswith('_') for name in names):
                found.append(f'{node.lineno}: from {node.module} import {", ".join(names)}')
        elif isinstance(node, ast.Attribute) and node.attr in attributes and not _own(node.value):
            found.append(f'{node.lineno}: .{node.attr}')
    return found


def test_the_benchmarks_use_only_what_users_can() -> None:
    """A benchmark measures what users call: no private module or name of our packages, and no private attribute
    of our objects (a store's `_database`, `_runs`); internal figures come from the store's OpenTelemetry spans."""
    attributes = _private_attributes()
    assert {'_database', '_runs'} <= attributes, 'the private attributes the check looks for were not found'
    reached = {
        f'benchmarks/{path.name}:{where}'
        for path in sorted((REPO / 'benchmarks').glob('*.py'))
        for where in _reaches_inside(path, attributes)
    }
    assert reached == set()


PUBLIC = (
    # the store, its sessions, and pydantic-ai's conversation store over the same tables
    'SessionStore',
    'Session',
    'SQLConversationStore',
    # their settings, and the export document
    'Encryption',
    'Recall',
    'SessionExport',
    # chat front ends
    'dispatch_chat',
    'run_limits',
    # the errors, every one a StoreError
    'StoreError',
    'SessionNotFound',
    'SessionConflict',
    'StoreUnavailable',
    'ServerRefused',
    'StorageFull',
    'DatabaseLocked',
    'KeyUnavailable',
    'SchemaMismatch',
    'SummarizerFailed',
    'ExportError',
)
"""`session_store.__all__`: what a new user needs. What the store hands back is in `session_store.results`, an
export's parts in `session_store.exports`, `DEFAULT_URL` and `WindowProcessor` in `session_store.store`
(`processors.__all__` is checked in tests/test_compat.py, beside the seed package's names)."""


def test_the_package_root_gives_every_public_name_and_refuses_others() -> None:
    # The root imports each name from its module on first use: each must be there, and be the module's own.
    import session_store

    assert sorted(session_store.__all__) == sorted(PUBLIC)
    assert sorted(session_store._HOMES) == sorted(PUBLIC)
    for name in session_store.__all__:
        value = getattr(session_store, name)
        assert name in dir(session_store)
        assert value is getattr(sys.modules[f'session_store{session_store._HOMES[name]}'], name)
    with pytest.raises(AttributeError, match="no attribute 'SessionStores'; its public names are in __all__"):
        session_store.SessionStores  # noqa: B018


def test_every_folder_of_the_import_roots_is_a_package_of_the_build() -> None:
    # setuptools warns on every build about a folder Python could import that `packages` leaves out (the web
    # page's templates and static files were two), and a new code folder left out would be missing from the wheel.
    tool = tomllib.loads((REPO / 'pyproject.toml').read_text())['tool']['setuptools']
    declared = set(tool['packages'])
    homes = {name: REPO / folder for name, folder in tool['package-dir'].items()}
    folders = {
        '.'.join(folder.relative_to(REPO).parts)
        for root in PACKAGES
        for folder in [REPO / root, *(REPO / root).rglob('*')]
        if folder.is_dir() and folder.name != '__pycache__' and not folder.name.startswith('.')
    }
    for name, home in homes.items():  # the migrations, which live outside the roots
        folders |= {
            '.'.join([name, *folder.relative_to(home).parts])
            for folder in [home, *home.rglob('*')]
            if folder.is_dir() and folder.name != '__pycache__'
        }
    assert folders == declared
