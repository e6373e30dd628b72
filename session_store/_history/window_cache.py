"""The windows a store keeps decoded between runs, each valid only at the session revision it was read at."""

from __future__ import annotations

from collections import OrderedDict

from .windows import StoredWindow

__all__ = ('WindowCache',)


class WindowCache:
    """The last window of the sessions this process ran most recently, each valid at the revision it was read at.

    The decoded messages are shared by the runs that start from them, as `result.all_messages()` is
    when passed back to pydantic-ai: nobody changes a message in place.
    """

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._windows: OrderedDict[str, StoredWindow] = OrderedDict()

    def get(self, session_id: str, session_pk: int, revision: str) -> StoredWindow | None:
        """The session's window, if the one kept is at `revision`."""
        window = self._windows.get(session_id)
        if window is None or window.revision != revision or window.session_pk != session_pk:
            return None
        self.touch(session_id)
        return window

    def peek(self, session_id: str) -> StoredWindow | None:
        """The session's window kept, whatever its revision: what a read checks against the stored one."""
        return self._windows.get(session_id)

    def touch(self, session_id: str) -> None:
        """Mark the session's window as just used, so it is the last to be dropped."""
        self._windows.move_to_end(session_id)

    def put(self, session_id: str, window: StoredWindow | None) -> None:
        if window is None:
            self._windows.pop(session_id, None)
            return
        self._windows[session_id] = window
        self._windows.move_to_end(session_id)
        if len(self._windows) > self.size:
            self._windows.popitem(last=False)
