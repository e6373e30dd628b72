"""`python -m session_store.cli`: the `session-store` command (the demo's second process starts this way)."""

from . import start

start()
