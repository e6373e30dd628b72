"""What a store keeps in memory between runs: the last windows, each valid only at the session revision it was
read at; and a small mapping of the least recently used items, which both are built on."""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

from .windows import StoredWindow

__all__ = ('Recent', 'WindowCache')

K = TypeVar('K')
V = TypeVar('V')


class Recent(Generic[K, V]):
    """A mapping of at most `size` items, the least recently used dropped first."""

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The item, marked as just used."""
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found

    def peek(self, key: K) -> V | None:
        """The item, leaving its place in the order as it is."""
        return self._items.get(key)

    def put(self, key: K, value: V | None) -> None:
        """Keep `value` under `key` (`None`: forget it)."""
        if value is None:
            self._items.pop(key, None)
            return
        self._items[key] = value
        self._items.move_to_end(key)
        if len(self._items) > self.size:
            self._items.popitem(last=False)


class WindowCache(Recent[str, StoredWindow]):
    """The last window of the sessions this process ran most recently, each valid at the revision it was read at.

    The decoded messages are shared by the runs that start from them, as `result.all_messages()` is
    when passed back to pydantic-ai: nobody changes a message in place.
    """

    def at(self, session_id: str, session_pk: int, revision: str) -> StoredWindow | None:
        """The session's window, if the one kept is at `revision`."""
        window = self.peek(session_id)
        if window is None or window.revision != revision or window.session_pk != session_pk:
            return None
        return self.get(session_id)
