import pytest

# testkit's checks (the door reports, the pair-safety oracle) assert with pytest's explanations, as tests do: this
# package is imported before conftest.py, so before anything imports testkit.
pytest.register_assert_rewrite('testkit')
