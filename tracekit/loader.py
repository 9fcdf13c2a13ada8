"""Loads trace files into a tracekit database, one transaction per file.

A file either loads completely (events, derived tables, kernel classes) or leaves
the database exactly as it was. The events travel from the file to DuckDB through
FIFOs (event_read), so Python never holds more than a few pieces of the trace.
"""

import glob
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import duckdb

from tracekit import __version__
from tracekit.class_tables import store_classes
from tracekit.database import split_statements, sql_resource, worker_connection
from tracekit.device import DEVICE_FROM_EVENTS, device_from_header
from tracekit.errors import TraceFileError, TracekitError
from tracekit.event_read import (TRUNCATED, FastReadRefused, duckdb_problem, lenient_insert, read_exact,
                                 read_fast, read_lenient)
from tracekit.raw_file import check_trace_file, expected_size, file_sha256
from tracekit.track_layout import restore_tracks

TRACE_SUFFIXES = (".json.gz", ".json", ".gz")
# `tracekit capture` writes this beside its traces; a folder load passes over it.
CAPTURE_MANIFEST = "manifest.json"
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


def expand_paths(patterns):
    """Files, folders (their trace files, recursively) and globs, in a stable order."""
    found = []
    for pattern in patterns:
        # A file that exists is that file, whatever its name holds (`rank[0].json` is no pattern).
        is_glob = glob.has_magic(str(pattern)) and not os.path.lexists(pattern)
        matches = sorted(glob.glob(pattern, recursive=True)) if is_glob else [pattern]
        if is_glob and not matches:
            raise TraceFileError(pattern, "no file matches this pattern")
        for match in matches:
            path = Path(match)
            if path.is_dir():
                traces = sorted(p for p in path.rglob("*")
                                if p.is_file() and p.name.endswith(TRACE_SUFFIXES) and p.name != CAPTURE_MANIFEST)
                if not traces:
                    raise TraceFileError(path, "a folder with no .json or .json.gz trace files in it")
                found.extend(traces)
            else:
                found.append(path)
    unique = list(dict.fromkeys(p.resolve() if p.exists() else p for p in found))
    return unique


def trace_name_for(path):
    name = Path(path).name
    for suffix in TRACE_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)] or name
    return name


def _unique_name(con, wanted, also_taken=()):
    taken = {row[0] for row in con.execute(
        "SELECT trace FROM trace_files WHERE trace = ? OR trace LIKE ? || '-%'", [wanted, wanted]).fetchall()}
    taken |= set(also_taken)
    if wanted not in taken:
        return wanted
    n = 2
    while f"{wanted}-{n}" in taken:
        n += 1
    return f"{wanted}-{n}"


def delete_trace(con, trace_id):
    for table in ("event_rows", "step_rows", "cpu_op_rows", "runtime_rows", "kernel_rows",
                  "transfer_rows", "gpu_busy_rows", "kernel_classes", "trace_files"):
        con.execute(f"DELETE FROM {table} WHERE trace_id = ?", [trace_id])


# DuckDB's memory for a load, shared by its workers: sorts and joins spill to disk beside the
# database instead of holding gigabytes (1 GB trace: 0.7 GB peak). Not every operator can spill:
# a 10 GB trace ran out at 600 MB, so the limit grows with the biggest trace, up to half the RAM.
MIN_LOAD_MEMORY_BYTES = 600 << 20
LOAD_MEMORY_PER_TRACE_BYTE = 0.6
# Two loads at once keep both cores busy (one is parsing while the other derives); past this
# size one load fills them alone, and two would need twice the memory.
PARALLEL_BELOW_BYTES = 256 << 20


def load_files(con, paths, *, replace=False, lenient=False, workers=None, progress=None):
    """Loads each file in its own transaction, several at a time when they are small; yields
    (path, LoadResult or the TracekitError it raised) in the order given. `progress(path)` gives
    the progress object of one file's load (see load_file)."""
    paths = list(paths)
    biggest = max((expected_size(p) for p in paths if Path(p).is_file()), default=0)
    if workers is None:
        small = biggest < PARALLEL_BELOW_BYTES
        workers = 2 if len(paths) > 1 and small and (os.cpu_count() or 1) > 1 else 1

    publisher = Publisher()
    before = con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    con.execute(f"SET memory_limit = '{load_memory_limit(biggest) >> 20}MB'")
    try:
        yield from _load_all(con, paths, workers, publisher, replace, lenient, progress)
    finally:
        con.execute(f"SET memory_limit = '{before}'")


def load_memory_limit(biggest):
    """Bytes of memory DuckDB may use to load traces the biggest of which holds `biggest` bytes."""
    try:
        half_the_ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError):
        half_the_ram = 4 << 30
    return max(MIN_LOAD_MEMORY_BYTES, min(int(biggest * LOAD_MEMORY_PER_TRACE_BYTE), half_the_ram))


def _load_all(con, paths, workers, publisher, replace, lenient, progress):
    def one(turn, path, worker_con):
        try:
            return path, load_file(worker_con, path, replace=replace, lenient=lenient,
                                   progress=progress(path) if progress else None, publisher=publisher, turn=turn)
        except TracekitError as exc:
            return path, exc
        finally:
            publisher.done(turn)

    if workers == 1:
        for turn, path in enumerate(paths):
            yield one(turn, path, con)
        return
    local = threading.local()
    opened = []

    def run(turn, path):
        if not hasattr(local, "con"):
            local.con = worker_connection(con)
            opened.append(local.con)
        return one(turn, path, local.con)

    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            yield from pool.map(run, range(len(paths)), paths)
    finally:
        for worker in opened:
            worker.close()


def load_file(con, path, *, replace=False, lenient=False, progress=None, publisher=None, turn=None):
    """Loads one trace file in one transaction; returns a LoadResult, raises TracekitError.

    `progress`, when given, is called with the bytes of the file read so far, and its
    `deriving(done, total)` method (if it has one) with the steps done after the read.
    `publisher` and `turn` are load_files' own: the loads it runs side by side, and this one's place.
    """
    started = time.monotonic()
    # The slot: who this load publishes with, and its turn among them.
    result = _load_file(con, Path(path), replace, lenient, progress, (publisher or Publisher(), turn))
    result.seconds = time.monotonic() - started
    return result


def _load_file(con, path, replace, lenient, progress, slot):
    check_trace_file(path)  # before anything opens it: a FIFO would block, a device never end
    unchanged = None if replace else _same_file_loaded(con, path)
    if unchanged is not None:
        return unchanged
    if lenient:
        try:
            info, lines = read_lenient(con, path, progress)
            return _in_transaction(con, path, replace, lambda trace_id: (info, lenient_insert(con, trace_id, lines)),
                                   slot, lenient=True, progress=progress)
        finally:
            con.execute("DROP TABLE IF EXISTS _raw")
    try:
        return _in_transaction(con, path, replace, lambda trace_id: (read_fast(con, path, trace_id, progress), {}),
                               slot, progress=progress)
    except FastReadRefused:
        # Read it again, exactly, to load what the fast read would not take or to say which event is bad.
        return _in_transaction(con, path, replace, lambda trace_id: (read_exact(con, path, trace_id, progress), {}),
                               slot, progress=progress)


def _in_transaction(con, path, replace, read, slot, *, lenient=False, progress=None):
    """Runs `read(trace_id)` -> (TraceStream, dropped) and the derivations in one transaction."""
    con.execute("BEGIN")
    try:
        return _load_events(con, path, replace, read, lenient, getattr(progress, "deriving", None), *slot)
    except duckdb.Error as exc:
        # Whatever DuckDB refuses in the events (a value no check foresaw) is the file's error.
        _rollback(con)
        raise TraceFileError(path, duckdb_problem(exc)) from None
    except BaseException:
        _rollback(con)
        raise


def _rollback(con):
    try:
        con.execute("ROLLBACK")
    except duckdb.Error:
        pass  # a failed COMMIT has ended the transaction already


class Publisher:
    """What loads running side by side (load_files) must agree on: names and contents taken.

    Each derives its trace on its own, then publishes it one at a time: the checks for a trace
    already loaded, the name, and the commit. A transaction sees the database as it was when it
    began, so the traces its neighbours committed since are known here, not from the database.
    """

    def __init__(self):
        self.lock = threading.Condition()
        self.names, self.shas = {}, {}  # committed by this load: name -> sha256, sha256 -> name
        self.next_turn = 0  # files publish in the order given, so names do not depend on timing

    def publishing(self, turn):
        """The lock, once the files before `turn` have published (or failed); None: any time."""
        if turn is not None:
            with self.lock:
                self.lock.wait_for(lambda: self.next_turn >= turn)
        return self.lock

    def done(self, turn):
        """File `turn` has published or failed: the next one may go."""
        with self.lock:
            self.next_turn = max(self.next_turn, turn + 1)
            self.lock.notify_all()


def _already_loaded(con, path, sha256, replace, publisher):
    """(rows of traces this load replaces or duplicates, the LoadResult of a skip or None)."""
    same = con.execute("SELECT trace_id, trace, sha256 = ? FROM trace_files WHERE sha256 = ? OR (? AND path = ?)",
                       [sha256, sha256, replace, str(path.resolve())]).fetchall()
    same_content = [row[1] for row in same if row[2]] + ([publisher.shas[sha256]] if sha256 in publisher.shas else [])
    if same_content and not replace:
        return same, LoadResult(str(path), "skipped", same_content[0],
                                message=f"same content as trace {same_content[0]!r} (--replace reloads it)")
    return same, None


def _same_file_loaded(con, path):
    """The LoadResult of a skip when `path` holds the very bytes of a file already loaded, found
    before any parse: by its size, then by the SHA-256 of its bytes (trace_files.file_sha256)."""
    known = dict(con.execute("SELECT file_sha256, trace FROM trace_files WHERE file_bytes = ? AND file_sha256"
                             " IS NOT NULL", [path.stat().st_size]).fetchall())
    trace = known.get(file_sha256(path)) if known else None
    if trace is None:
        return None
    return LoadResult(str(path), "skipped", trace, message=f"same content as trace {trace!r} (--replace reloads it)")


def _load_events(con, path, replace, read, lenient, deriving, publisher, turn):
    """Loads the events with `read`, derives the rest and commits (or rolls back a skip).
    `deriving(done, total)`, when given, hears of each step after the read."""
    trace_id = con.execute("SELECT nextval('trace_id_seq')").fetchone()[0]
    info, dropped = read(trace_id)
    skipped = _already_loaded(con, path, info.sha256, replace, publisher)[1]
    if skipped is not None:
        con.execute("ROLLBACK")
        return skipped
    restore_tracks(con, trace_id, info.header)  # a tracekit export's slices back on their threads
    # The file's own bytes: the content's for a plain file, hashed again for a gzip (a tenth the size).
    info.file_sha256 = file_sha256(path) if info.compressed else info.sha256
    events = con.execute("SELECT count(*) FROM event_rows WHERE trace_id = ?", [trace_id]).fetchone()[0]
    if info.cut_events:
        dropped[TRUNCATED] = info.cut_events
    if lenient and dropped and not events:
        reasons = ", ".join(f"{count} {why}" if why == TRUNCATED else f"{count} with {why}"
                            for why, count in dropped.items())
        raise TraceFileError(path, f"no event is readable, even with --lenient (dropped {reasons})")
    statements = split_statements(sql_resource("derive.sql"))
    for done, statement in enumerate(statements, start=1):
        con.execute(statement, {"trace_id": trace_id} if "$trace_id" in statement else None)
        if deriving is not None:
            deriving(done, len(statements) + 1)
    store_classes(con, trace_id)
    with publisher.publishing(turn):
        same, skipped = _already_loaded(con, path, info.sha256, replace, publisher)
        if skipped is not None:
            con.execute("ROLLBACK")
            return skipped
        name = same[0][1] if same else None
        for old_id, _, _ in same:
            delete_trace(con, old_id)
        name = name or _unique_name(con, trace_name_for(path), publisher.names)
        _insert_trace_file(con, trace_id, name, path, info, events, dropped)
        con.execute(DEVICE_FROM_EVENTS, {"trace_id": trace_id})
        kernels = con.execute("SELECT count(*) FROM kernel_rows WHERE trace_id = ?", [trace_id]).fetchone()[0]
        publisher.names[name], publisher.shas[info.sha256] = info.sha256, name
    # Committed outside the lock (a commit is a fifth of a small load): name and content are
    # reserved, so the next file may publish meanwhile.
    if turn is not None:
        publisher.done(turn)
    try:
        con.execute("COMMIT")
    except BaseException:
        with publisher.lock:
            publisher.names.pop(name, None)
            publisher.shas.pop(info.sha256, None)
        raise
    if deriving is not None:
        deriving(len(statements) + 1, len(statements) + 1)
    return LoadResult(str(path), "loaded", name, events, kernels, dropped=dropped,
                      truncated=not info.array_closed, cut_bytes=info.dropped_tail_bytes, junk_bytes=info.junk_bytes)


def _insert_trace_file(con, trace_id, name, path, info, events, dropped):
    header = info.header
    metadata = header.get("tracekit") if isinstance(header.get("tracekit"), dict) else None
    device = device_from_header(header)
    con.execute(
        "INSERT INTO trace_files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [trace_id, name, str(path.resolve()), info.sha256, info.file_sha256, path.stat().st_size,
         datetime.now(timezone.utc).replace(tzinfo=None), __version__,
         json.dumps({k: v for k, v in header.items() if k != "tracekit"}),
         json.dumps(metadata) if metadata is not None else None, device.name, device.compute_capability, events,
         sum(dropped.values()), json.dumps(dropped) if dropped else None, device.vendor, device.arch])

