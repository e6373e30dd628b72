"""The alembic environment and versions that make session-store's schema.

A package only so that it installs beside `session_store`; `session_store.migration` finds it by
path, never by importing the name `migrations`, which an application may well use for its own.
"""
