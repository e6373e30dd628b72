"""`python -m session_store.cli`: the `session-store` command (the demo's second process starts this way)."""

from . import main

main(prog_name='session-store')
