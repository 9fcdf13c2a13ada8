"""A trace file's bytes: a regular file (never a FIFO or a device), its gzip layers undone, its hash.

The readers (tracefile) take the stream open_raw gives; the loader checks a file with
check_trace_file before anything opens it, and recognises a file already loaded by file_sha256.
open_regular opens a file once and checks what it opened, so whatever the path names later (a
symlink pointed elsewhere, another file renamed over it) is never what is read.
"""

import gzip
import hashlib
import os
import stat
import zlib

from tracekit.errors import TraceFileError

GZIP_MAGIC = b"\x1f\x8b"
# Layers of gzip unwrapped before the JSON must start.
MAX_GZIP_LAYERS = 3

# ISA-L's gzip (python-isal, `pip install 'tracekit[fast]'`) inflates 1 GB in 0.4 s where zlib
# takes 2.4 s, the difference between a .json.gz loading slower than its .json or as fast.
try:
    from isal import igzip, isal_zlib
    _GZIP_FILE, _ZLIB_ERRORS = igzip.IGzipFile, (zlib.error, isal_zlib.error)
except ImportError:  # pragma: no cover - the standard library's gzip is the fallback
    _GZIP_FILE, _ZLIB_ERRORS = gzip.GzipFile, (zlib.error,)

_NOT_FILES = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a device"),
              (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"))


def check_trace_file(path):
    """Raises TraceFileError unless `path` is a regular file: a FIFO would block the read until
    someone writes to it, a device (/dev/zero) would never end."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise _unreadable(path, exc) from None
    _check_mode(path, mode)


def _check_mode(path, mode):
    for is_kind, kind in _NOT_FILES:
        if is_kind(mode):
            raise TraceFileError(path, f"is {kind}, not a trace file")
    if not stat.S_ISREG(mode):
        raise TraceFileError(path, "is not a regular file, not a trace file")


def _unreadable(path, exc):
    if isinstance(exc, FileNotFoundError):
        return TraceFileError(path, "no such file")
    return TraceFileError(path, f"cannot be read ({exc.strerror})")


def open_regular(path):
    """`path` opened for binary reading, once: refused (TraceFileError) unless what was opened is
    a regular file. Opening does not wait for a FIFO's writer, and the check is of the handle."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        raise _unreadable(path, exc) from None
    try:
        _check_mode(path, os.fstat(fd).st_mode)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def open_raw(path, *, salvage=False):
    """Opens `path` for binary reading, transparently un-gzipping it. `salvage`: with the standard
    library's gzip, which hands over every byte a gzip cut short holds before it fails."""
    handle = open_regular(path)
    try:
        return (*gunzipped(handle, path, salvage=salvage), handle)
    except BaseException:
        handle.close()
        raise


def gunzipped(handle, path, *, salvage=False):
    """(the text of the open file `handle`, every gzip layer undone, whether it was gzipped)."""
    magic = handle.read(2)
    handle.seek(0)
    if magic != GZIP_MAGIC:
        return handle, False
    opener = gzip.GzipFile if salvage else _GZIP_FILE
    stream = opener(fileobj=handle, mode="rb")
    # A .gz gzipped again (`gzip -f` on a .json.gz, an upload that compresses): unwrap each layer.
    for _ in range(MAX_GZIP_LAYERS - 1):
        if _peek(stream, path, 2) != GZIP_MAGIC:
            return stream, True
        stream = opener(fileobj=stream, mode="rb")
    if _peek(stream, path, 2) == GZIP_MAGIC:
        raise TraceFileError(path, f"gzip inside gzip more than {MAX_GZIP_LAYERS} deep: not a trace")
    return stream, True


def _peek(stream, path, size):
    """The first `size` bytes `stream` will give, left for the next read."""
    try:
        return stream.peek(size)[:size]
    except EOFError:
        return b""  # cut short: the read says so
    except (OSError, *_ZLIB_ERRORS) as exc:
        raise TraceFileError(path, f"corrupt gzip: {exc}") from None


def file_sha256(path, check=None):
    """The SHA-256 of the file's bytes as they are on disk (gzip and all), read without parsing.
    `check()`, when given, is called before each MiB: a stopped load raises there, not seconds on."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            if check is not None:
                check()
            digest.update(block)
    return digest.hexdigest()


def expected_size(path):
    """About how many bytes the trace's JSON holds: the file's size, or for gzip the size its
    trailer records (modulo 4 GiB, so a wrapped value is replaced by a guess)."""
    size = os.path.getsize(path)
    with open(path, "rb") as handle:
        if handle.read(2) != GZIP_MAGIC or size < 18:
            return size
        handle.seek(-4, os.SEEK_END)
        recorded = int.from_bytes(handle.read(4), "little")
    return recorded if recorded >= size else size * 10
