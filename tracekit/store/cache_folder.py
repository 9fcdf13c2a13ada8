"""tracekit's cache folder: the sample traces' database and the empty database a new one starts
from live there, both rebuilt when missing."""

import errno
import os
from pathlib import Path

from tracekit.errors import TracekitError


def cache_dir():
    """tracekit's cache folder (TRACEKIT_CACHE, else the user's cache), made when missing."""
    root = Path(os.environ.get("TRACEKIT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "tracekit"))
    try:
        root.mkdir(parents=True, exist_ok=True)
        if not os.access(root, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
    except OSError as exc:
        why = "it is a file, not a folder" if root.exists() and not root.is_dir() else exc.strerror or str(exc)
        raise unusable_cache(root, why) from None
    return root


def unusable_cache(folder, why):
    return TracekitError(f"{folder}: the cache folder cannot be used ({why}); set TRACEKIT_CACHE to a folder"
                         " tracekit may write, or give --db")
