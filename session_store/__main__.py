"""`python -m session_store`: the `session-store` command."""

from .cli import start

start()
