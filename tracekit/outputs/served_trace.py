"""What `tracekit open` serves: a file opened once and checked on that handle.

The server reads from the handle opened here, never from the path again, so a symlink pointed
elsewhere or another file renamed over the path after the check is not what the UI gets.
"""

import os
from dataclasses import dataclass
from pathlib import Path

from tracekit.ingest.raw_file import open_regular
from tracekit.ingest.tracefile import read_header


@dataclass
class ServedTrace:
    """An open trace and how to present it: `name` in the URL, `shown` in messages, `size` the bytes
    served (the file's size when it was opened), `note` a line to say before serving (or None)."""

    handle: object
    name: str
    shown: str
    size: int
    note: str = None

    def read_at(self, offset, size):
        """Up to `size` bytes from `offset`, whatever else reads the handle meanwhile."""
        return os.pread(self.handle.fileno(), size, offset)

    def close(self):
        self.handle.close()


def open_trace_file(path):
    """`path` opened once and checked to be a Chrome/Kineto trace on that same handle."""
    handle = open_regular(path)
    try:
        read_header(path, handle)
        return ServedTrace(handle, Path(path).name, str(path), os.fstat(handle.fileno()).st_size)
    except BaseException:
        handle.close()
        raise
