"""What `tracekit open` serves: a file opened once and checked on that handle, or a loaded trace as it
was loaded.

The server reads from the handle opened here, never from the path again, so a symlink pointed
elsewhere or another file renamed over the path after the check is not what the UI gets. A loaded
trace is served from its file only while the file's SHA-256 is the one stored when it was loaded
(trace_files.file_sha256); a file changed or gone is said so in one line, and the trace rebuilt from
the database is served instead.
"""

import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tracekit.analysis.trace_lookup import trace_row
from tracekit.errors import TraceFileError
from tracekit.ingest.raw_file import open_regular
from tracekit.ingest.tracefile import check_first_event, read_header, stream_events
from tracekit.ingest.scratch import scratch_prefix

_BLOCK = 1 << 20


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
    """`path` opened once and checked to be a Chrome/Kineto trace on that same handle, to its end:
    a trace cut short (a truncated array, a gzip that ends early) is refused as `load` refuses it,
    not handed to the UI to fail there."""
    handle = open_regular(path)
    try:
        if read_header(path, handle) == {}:  # a bare array of events: are they events?
            check_first_event(path, handle)
        try:
            checked = stream_events(path, _Discarded(), handle=handle)
        except TraceFileError as exc:
            raise TraceFileError(path, _open_advice(exc.problem)) from None
        size = os.fstat(handle.fileno()).st_size
        if checked.bytes_read != size:  # still being written: the bytes served would not be those checked
            raise TraceFileError(path, f"changed while it was read ({checked.bytes_read:,} bytes read of {size:,}): "
                                       "open it once its writer is done")
        return ServedTrace(handle, Path(path).name, str(path), size)
    except BaseException:
        handle.close()
        raise


def _open_advice(problem):
    """A load's problem as `open` says it: `open` has no --lenient, `load` has, and `open --trace`
    serves what that load kept."""
    if "--lenient" not in problem:
        return problem
    problem = problem.replace("--lenient", "tracekit load --lenient", 1)
    close = problem.rfind(")")
    if close < problem.find("tracekit load --lenient"):
        return problem + " (then tracekit open --trace NAME serves what it loaded)"
    return problem[:close] + "; then tracekit open --trace NAME serves what it loaded" + problem[close:]


class _Discarded:
    """A sink for the events that keeps none: the read is the check."""

    def write(self, data):
        return len(data)


def open_loaded_trace(name, db):
    """Loaded trace `name` of the database file `db`: its file when that still holds the bytes that
    were loaded, else the trace rebuilt from the database, with a note saying why."""
    from tracekit.store.database import connect  # duckdb: imported only for --trace

    con = connect(db, read_only=True)
    try:
        return _open_loaded(con, name, db)
    finally:
        con.close()


def _open_loaded(con, name, db):
    _, path = trace_row(con, name)
    stored, dropped = con.execute("SELECT file_sha256, dropped_events FROM trace_files WHERE trace = ?",
                                  [name]).fetchone()
    if not path:
        why = f"trace {name!r} has no file"
    elif dropped:
        # loaded with --lenient: its file holds what the load dropped (a cut, broken events), which the
        # UI would fail on; the database holds what was kept
        why = f"{path} was loaded with --lenient ({dropped:,} event{'s' if dropped != 1 else ''} dropped)"
    else:
        try:
            handle = open_regular(path)
        except TraceFileError as exc:
            why = str(exc)  # the path and what is wrong: no such file, a FIFO, ...
        else:
            size = os.fstat(handle.fileno()).st_size
            if stored is not None and _sha256(handle, size) == stored:
                return ServedTrace(handle, Path(path).name, path, size)
            handle.close()
            why = (f"{path} has changed since it was loaded" if stored is not None
                   else f"{path} cannot be checked (no SHA-256 of it was stored)")
    served = _rebuilt(con, name)
    served.note = f"{why}: serving trace {name!r} rebuilt from {os.path.abspath(db)}"
    return served


def _sha256(handle, size):
    """The SHA-256 of the first `size` bytes of the open file: those the server would send."""
    digest, offset = hashlib.sha256(), 0
    while offset < size:
        block = os.pread(handle.fileno(), min(_BLOCK, size - offset), offset)
        if not block:
            break
        digest.update(block)
        offset += len(block)
    return digest.hexdigest()


def _rebuilt(con, name):
    """Loaded trace `name` written from the database into a private folder, opened, and the folder
    removed: the handle is all that is left of it."""
    from tracekit.outputs.trace_export import export

    folder = tempfile.mkdtemp(prefix=scratch_prefix("open-"))
    try:
        file_name = re.sub(r"[^A-Za-z0-9._-]+", "_", name) + ".json.gz"
        path, _, _ = export(con, Path(folder) / file_name, trace=name)
        handle = open_regular(path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return ServedTrace(handle, file_name, f"trace {name!r} rebuilt from the database",
                       os.fstat(handle.fileno()).st_size)
