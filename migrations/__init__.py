"""The alembic environment and versions that make session-store's schema.

Installed as `session_store.migrations` (the packaging maps this directory there), so the wheel adds
no top-level `migrations` package that could shadow an application's own; `session_store._db.schema`
finds it through `importlib.resources`.
"""
