"""What the tests and the benchmarks share: a throwaway PostgreSQL server, scripted models, and tool-using histories.

Lives beside `tests/` and `benchmarks/` (not in the wheel) so that both may import it.
"""
