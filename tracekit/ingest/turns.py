"""The order in which the files of one load publish, while they are read side by side."""

import threading


class Turns:
    """File `turn` (its place in the load) publishes once every file before it has published or
    failed, so the names a load gives (name, name-2, ...) follow the order of its files, not which
    file was read first. A file that fails or is skipped early does not let the files after it
    pass one before it that is still being read."""

    def __init__(self):
        self._changed = threading.Condition()
        self._finished = set()
        self._next = 0  # every turn before it has finished

    def wait(self, turn):
        with self._changed:
            self._changed.wait_for(lambda: self._next >= turn)

    def done(self, turn):
        """File `turn` has published or failed (said again: no matter)."""
        with self._changed:
            self._finished.add(turn)
            while self._next in self._finished:
                self._finished.discard(self._next)
                self._next += 1
            self._changed.notify_all()
