"""The archive: a session's tree of segments, its messages and summaries, the windows runs start from and the
runs that extend it, branches, reviews, exports and imports, leases, and search.

Built on `_db`; nothing here imports `_upkeep`.
"""
