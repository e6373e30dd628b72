"""How the store reaches its database: engines and connections, transactions, the schema check and upgrade,
each backend's full-text index, and the sealing of private values as they are written and read.

The lowest layer of `session_store`: it imports nothing from `_history` or `_upkeep`.
"""
