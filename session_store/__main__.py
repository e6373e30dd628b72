"""`python -m session_store`: the `session-store` command."""

from .cli import main

main(prog_name='session-store')
