"""A full disk, as the OS or DuckDB says it: which folder's disk has no room left. A load, a
lake's writer and opening a database all name that folder in their error."""

import errno
import re
import tempfile
from pathlib import Path

# What the OS says, and DuckDB repeats, when a disk has no room left (or the user's quota is spent).
_NO_SPACE = ("No space left on device", "Disk quota exceeded")
_QUOTED_PATH = re.compile(r'"(/[^"]+)"')


def disk_full_folder(exc, fallback):
    """The folder whose disk is full, when `exc` (a DuckDB error, an OSError, or a tracekit error
    that repeats DuckDB's message) says a disk is full; None otherwise. `fallback` when it does
    not say where."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        written = exc.filename
    elif any(words in str(exc) for words in _NO_SPACE):
        quoted = _QUOTED_PATH.search(str(exc))
        written = quoted.group(1) if quoted else None
    else:
        return None
    if written is None:
        return str(fallback)
    folder = Path(written).parent
    if folder.name.endswith(".tmp"):
        folder = folder.parent  # DuckDB's spill folder beside the database (`DB.tmp`): name the database's
    elif str(folder).startswith(tempfile.gettempdir()) and folder.name.startswith("tracekit-"):
        folder = folder.parent  # a FIFO folder of our own: name the temp folder the user can change ($TMPDIR)
    return str(folder)
