"""Bytecode for the test run kept outside the tree when `PYTHONDONTWRITEBYTECODE` forbids it inside.

With `PYTHONDONTWRITEBYTECODE=1` (as some shells and containers set it) nothing caches compiled modules, so
every pytest process, each xdist worker included, compiles this project's modules and rewrites the asserts of
every test module from source: about 6 s of CPU a process here, a sixth of the quick tier. What that setting
keeps out of the tree is `__pycache__` folders, so the run writes its bytecode under the temp directory
instead (`sys.pycache_prefix`, as `PYTHONPYCACHEPREFIX` would), where the next run finds it. A prefix of the
user's own, or bytecode allowed in the tree, is left as it is. Imported first by `tests/conftest.py`, before
the packages it tests.
"""

from __future__ import annotations

import os
import sys
import tempfile

if sys.dont_write_bytecode and sys.pycache_prefix is None:
    sys.pycache_prefix = os.path.join(tempfile.gettempdir(), f'session-store-pycache-{os.getuid()}')
    sys.dont_write_bytecode = False
