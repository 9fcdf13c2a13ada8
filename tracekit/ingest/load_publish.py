"""The end of a file's load: its name, the check for content already loaded, and the COMMIT, whose
outcome is taken from the database itself when DuckDB reports it failed.

Loads running side by side (load_files) publish one at a time, in the order of their files, and
commit outside that turn, so the next file may publish while one commits.
"""

import json
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone

from tracekit.store.engine import duckdb
from tracekit.version import __version__
from tracekit.ingest.device import DEVICE_FROM_EVENTS, device_from_header
from tracekit.ingest.distributed import base_time_ns, rank_info
from tracekit.errors import DiskFullError, TraceFileError
from tracekit.ingest.event_read import duckdb_problem
from tracekit.ingest.raw_file import file_sha256
from tracekit.store.disk_full import disk_full_folder
from tracekit.ingest.turns import Turns


@dataclass
class LoadResult:
    """What happened to one file."""

    path: str
    status: str  # loaded, skipped, failed
    trace: str = None
    events: int = 0
    kernels: int = 0
    message: str = ""
    dropped: dict = field(default_factory=dict)  # reason -> events dropped (--lenient)
    truncated: bool = False  # the event array never ended (loaded with --lenient)
    cut_bytes: int = 0  # bytes of the trace's cut-off end left out
    junk_bytes: int = 0  # bytes after the end of the trace left out (--lenient)
    seconds: float = 0.0  # how long the load took
    sha256: str = ""  # of the trace's JSON (a skip: of the content already loaded)
    trace_id: int = None  # its row in trace_files (None for a skip)


class Publisher:
    """What loads running side by side (load_files) must agree on: names and contents taken.

    Each derives its trace on its own, then publishes it one at a time: the checks for a trace
    already loaded, the name, and the commit. A transaction sees the database as it was when it
    began, so the traces its neighbours committed since are known here, not from the database.
    """

    def __init__(self):
        self.lock = threading.RLock()
        self.names, self.shas = {}, {}  # committed by this load: name -> sha256, sha256 -> name
        self.turns = Turns()  # files publish in the order given, so names do not depend on timing

    def publishing(self, turn):
        """The lock, once the files before `turn` have published (or failed); None: any time."""
        if turn is not None:
            self.turns.wait(turn)
        return self.lock

    def done(self, turn):
        """File `turn` has published or failed: the next one may go."""
        self.turns.done(turn)

    def forget(self, result):
        """A trace reserved by `publish` was not committed after all."""
        with self.lock:
            self.names.pop(result.trace, None)
            self.shas.pop(result.sha256, None)


def already_loaded(con, path, sha256, replace, publisher):
    """(rows of traces this load replaces or duplicates, the LoadResult of a skip or None)."""
    same = con.execute("SELECT trace_id, trace, sha256 = ? FROM trace_files WHERE sha256 = ? OR (? AND path = ?)",
                       [sha256, sha256, replace, str(path.resolve())]).fetchall()
    same_content = [row[1] for row in same if row[2]] + ([publisher.shas[sha256]] if sha256 in publisher.shas else [])
    if same_content and not replace:
        return same, LoadResult(str(path), "skipped", same_content[0], sha256=sha256,
                                message=f"same content as trace {same_content[0]!r} (--replace reloads it)")
    return same, None


def same_file_loaded(con, path, stop):
    """The LoadResult of a skip when `path` holds the very bytes of a file already loaded, found
    before any parse: by its size, then by the SHA-256 of its bytes (trace_files.file_sha256).
    `stop` (a LoadStop) ends the hashing of a big file part way."""
    known = {row[0]: row[1:] for row in con.execute(
        "SELECT file_sha256, trace, sha256 FROM trace_files WHERE file_bytes = ? AND file_sha256 IS NOT NULL",
        [path.stat().st_size]).fetchall()}
    if not known:
        return None
    trace, sha256 = known.get(file_sha256(path, lambda: stop.check(path)), (None, None))
    if trace is None:
        return None
    return LoadResult(str(path), "skipped", trace, sha256=sha256,
                      message=f"same content as trace {trace!r} (--replace reloads it)")


def publish(con, path, trace_id, info, events, dropped, replace, wanted_name, publisher, turn):
    """In its turn, names the derived trace and writes its trace_files row, reserving its name and
    content for the commit; returns its LoadResult, or rolls back a skip and returns that."""
    with publisher.publishing(turn):
        same, skipped = already_loaded(con, path, info.sha256, replace, publisher)
        if skipped is not None:
            con.execute("ROLLBACK")
            return skipped
        name = same[0][1] if same else None
        for old_id, _, _ in same:
            delete_trace(con, old_id)
        name = name or _unique_name(con, wanted_name, publisher.names)
        _insert_trace_file(con, trace_id, name, path, info, events, dropped)
        con.execute(DEVICE_FROM_EVENTS, {"trace_id": trace_id})
        kernels = con.execute("SELECT count(*) FROM kernel_rows WHERE trace_id = ?", [trace_id]).fetchone()[0]
        publisher.names[name], publisher.shas[info.sha256] = info.sha256, name
    # Committed outside the lock (a commit is a fifth of a small load): name and content are
    # reserved, so the next file may publish meanwhile.
    if turn is not None:
        publisher.done(turn)
    return LoadResult(str(path), "loaded", name, events, kernels, dropped=dropped, truncated=not info.array_closed,
                      cut_bytes=info.dropped_tail_bytes, junk_bytes=info.junk_bytes, sha256=info.sha256,
                      trace_id=trace_id)


def commit(con, path, staged, publisher, stop):
    """Commits a published load unless `stop` came first; a COMMIT that DuckDB says failed is
    looked for in the database. Returns `staged`; raises LoadInterrupted or the file's error."""
    try:
        stop.check(path)  # from here on no stop interrupts: the COMMIT runs to its end
        con.execute("COMMIT")
    except BaseException as exc:
        publisher.forget(staged)
        if not isinstance(exc, duckdb.Error):
            raise
        rollback(con)
        committed = is_committed(con, staged)
        if not committed:
            error = file_error(path, exc)
            if committed is None:
                error.unsettled = staged
            raise error from None
        publisher.names[staged.trace], publisher.shas[staged.sha256] = staged.sha256, staged.trace
    return staged


def is_committed(con, result):
    """Whether the trace of `result` is in the database; None when DuckDB cannot say (it has given
    up on the database after a full disk: the file on disk, reopened, will tell)."""
    try:
        return con.execute("SELECT count(*) FROM trace_files WHERE trace_id = ? AND sha256 = ?",
                           [result.trace_id, result.sha256]).fetchone()[0] > 0
    except duckdb.Error:
        return None


def file_error(path, exc):
    """A DuckDB error during a file's load, as the file's error."""
    full = disk_full_folder(exc, path.parent)
    return DiskFullError(path, full) if full is not None else TraceFileError(path, duckdb_problem(exc))


def rollback(con):
    quietly(con, "ROLLBACK")  # a failed COMMIT has ended the transaction already


def quietly(con, statement):
    """Runs a statement of clean-up, which fails where DuckDB has given up on the database (a full
    disk): the error that led here says why."""
    try:
        con.execute(statement)
    except duckdb.Error:
        pass


def _unique_name(con, wanted, also_taken=()):
    taken = {row[0] for row in con.execute(
        "SELECT trace FROM trace_files WHERE trace = ? OR trace LIKE ? || '-%'", [wanted, wanted]).fetchall()}
    return free_name(wanted, taken | set(also_taken))


def free_name(wanted, taken):
    """The name a trace gets (in a database and in a lake): `wanted`, or when it is taken the first
    of wanted-2, wanted-3, ... that is not."""
    if wanted not in taken:
        return wanted
    n = 2
    while f"{wanted}-{n}" in taken:
        n += 1
    return f"{wanted}-{n}"


def delete_trace(con, trace_id):
    for table in ("event_rows", "step_rows", "cpu_op_rows", "runtime_rows", "memory_rows", "kernel_rows",
                  "transfer_rows", "gpu_busy_rows", "collective_rows", "kernel_classes", "trace_files"):
        con.execute(f"DELETE FROM {table} WHERE trace_id = ?", [trace_id])


def _insert_trace_file(con, trace_id, name, path, info, events, dropped):
    header = info.header
    metadata = header.get("tracekit") if isinstance(header.get("tracekit"), dict) else None
    device = device_from_header(header)
    ranked = rank_info(header)
    first_ns, last_ns = _time_range(con, trace_id)
    con.execute(
        "INSERT INTO trace_files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [trace_id, name, str(path.resolve()), info.sha256, info.file_sha256 or None, path.stat().st_size,
         datetime.now(timezone.utc).replace(tzinfo=None), __version__,
         json.dumps({k: v for k, v in header.items() if k != "tracekit"}),
         json.dumps(metadata) if metadata is not None else None, device.name, device.compute_capability, events,
         sum(dropped.values()), json.dumps(dropped) if dropped else None, device.vendor, device.arch,
         ranked.rank, ranked.world_size, ranked.backend, ranked.default_group, base_time_ns(header),
         first_ns, last_ns])


def _time_range(con, trace_id):
    """(first start, last end) of the trace's ops, GPU work and steps, ns on its clock, from the
    derived rows (a few per step and op: no pass over the events)."""
    return con.execute("""
        SELECT min(s), max(e) FROM (
            SELECT min(ts_ns) AS s, max(ts_ns + greatest(coalesce(dur_ns, 0), 0)) AS e FROM cpu_op_rows WHERE trace_id = $t
            UNION ALL SELECT min(first_ns), max(last_ns) FROM gpu_busy_rows WHERE trace_id = $t
            UNION ALL SELECT min(ts_ns), max(end_ns) FROM step_rows WHERE trace_id = $t)""", {"t": trace_id}).fetchone()
