"""Loads trace files into a tracekit database, one transaction per file.

A file either loads completely (events, derived tables, kernel classes) or leaves
the database exactly as it was. The events travel from the file to DuckDB through
FIFOs (event_read), so Python never holds more than a few pieces of the trace.
"""

import functools
import glob
import os
import threading
import time
from pathlib import Path

from tracekit.store.engine import duckdb
from tracekit.store.class_tables import store_classes
from tracekit.store.database import sql_resource, worker_connection
from tracekit.store.disk_full import disk_full_folder
from tracekit.store.guarded_sql import guarded_statements
from tracekit.store.pattern_literals import MAX_NAMES_TO_SIFT
from tracekit.store.work_models import FORMULA_MARKERS, RULE_MARKERS, render_formulas, render_rules
from tracekit.errors import DiskFullError, LoadInterrupted, NotATrace, TraceFileError, TracekitError
from tracekit.ingest.event_read import TRUNCATED, FastReadRefused, lenient_insert, read_exact, read_fast, read_lenient
# LoadResult, what load_file returns, is imported from here too.
from tracekit.ingest.load_publish import (LoadResult, Publisher, already_loaded, commit, file_error, publish, quietly,  # noqa: F401
                                   rollback, same_file_loaded)
from tracekit.ingest.event_chunks import MIN_PIECE_BYTES
from tracekit.ingest.load_stop import LoadStop
from tracekit.ingest.raw_file import check_trace_file, expected_size, file_sha256
from tracekit.ingest.scratch import remove_stale_scratch, remove_stale_spill
from tracekit.ingest.track_layout import restore_tracks

TRACE_SUFFIXES = (".json.gz", ".json", ".gz")
# `tracekit capture` writes this beside its traces; a folder load passes over it.
CAPTURE_MANIFEST = "manifest.json"
# A Parquet lake (tracekit.lake) holds this: a folder load passes over a lake inside the folder.
LAKE_MARKER = "_tracekit.json"


class TraceFiles(list):
    """The files a load was given, in order; `found_in_folders`: those a folder given held (its
    other JSON files, a timing or a manifest of one's own, are no traces: passed_over)."""

    def __init__(self, files=(), found_in_folders=()):
        super().__init__(files)
        self.found_in_folders = frozenset(found_in_folders)


def passed_over(files, path, outcome):
    """A file's outcome as its load reports it: a JSON file without a traceEvents array that a
    folder given held is passed over (a skip saying so), where one named on its own is an error."""
    if isinstance(outcome, NotATrace) and Path(path) in getattr(files, "found_in_folders", ()):
        return LoadResult(str(path), "skipped", message=f"passed over: {outcome.problem}")
    return outcome


def expand_paths(patterns):
    """Files, folders (their trace files, recursively) and globs, in a stable order, as TraceFiles."""
    found, in_folders = [], set()
    for pattern in patterns:
        # A file that exists is that file, whatever its name holds (`rank[0].json` is no pattern).
        is_glob = glob.has_magic(str(pattern)) and not os.path.lexists(pattern)
        matches = sorted(glob.glob(pattern, recursive=True)) if is_glob else [pattern]
        if is_glob and not matches:
            raise TraceFileError(pattern, "no file matches this pattern")
        for match in matches:
            path = Path(match)
            if path.is_dir():
                if (path / LAKE_MARKER).exists():
                    raise TraceFileError(path, "a tracekit lake, not a folder of traces: query it with --lake")
                traces = _trace_files_in(path)
                if not traces:
                    raise TraceFileError(path, "a folder with no .json or .json.gz trace files in it")
                found.extend(traces)
                in_folders.update(trace.resolve() for trace in traces)
            else:
                found.append(path)
    unique = list(dict.fromkeys(p.resolve() if p.exists() else p for p in found))
    # a file named on its own as well as in a folder given is the user's to call a trace
    named = {Path(p).resolve() for p in patterns if not Path(p).is_dir() and os.path.lexists(p)}
    return TraceFiles(unique, in_folders - named)


def _trace_files_in(folder):
    """The trace files below `folder`, sorted, passing over the lakes inside it (their own
    _tracekit.json is no trace, and their Parquet files are read with --lake)."""
    found = []
    for parent, folders, files in os.walk(folder):
        if LAKE_MARKER in files and Path(parent) != Path(folder):
            folders.clear()
            continue
        found.extend(Path(parent) / name for name in files
                     if name.endswith(TRACE_SUFFIXES) and name != CAPTURE_MANIFEST)
    return sorted(found)


def trace_name_for(path):
    name = Path(path).name
    for suffix in TRACE_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)] or name
    return name


# DuckDB's memory for a load, shared by its workers: sorts and joins spill to disk beside the
# database instead of holding gigabytes (1 GB trace: 0.7 GB peak). Not every operator of the
# derivation can spill: a 10 GB trace (27 M events) ran out at 600 MB, so once the events are
# read the limit grows with their number, up to half the RAM. By events, not bytes: the same
# events pretty-printed by another tool take 2.3 times the bytes and need no more memory.
MIN_LOAD_MEMORY_BYTES = 600 << 20
LOAD_MEMORY_PER_EVENT_BYTES = 230
# Two loads at once keep both cores busy (one is parsing while the other derives); past this
# size one load fills them alone, and two would need twice the memory.
PARALLEL_BELOW_BYTES = 256 << 20


def load_files(con, paths, *, replace=False, lenient=False, workers=None, progress=None, stop=None):
    """Loads each file in its own transaction, several at a time when they are small; yields
    (path, LoadResult or the TracekitError it raised) in the order given. `progress(path)` gives
    the progress object of one file's load (see load_file).

    `stop` (a LoadStop) ends the loads part way: each file not committed by then yields a
    LoadInterrupted. A full disk stops them too, the file that met it yielding a DiskFullError.
    """
    paths = list(paths)
    stop = stop or LoadStop()
    # What loads killed with kill -9 left behind: their FIFO folders, DuckDB's spill files.
    remove_stale_scratch()
    remove_stale_spill(con.execute("SELECT current_setting('temp_directory')").fetchone()[0])
    biggest = max((expected_size(p) for p in paths if Path(p).is_file()), default=0)
    if workers is None:
        small = biggest < PARALLEL_BELOW_BYTES
        workers = 2 if len(paths) > 1 and small and (os.cpu_count() or 1) > 1 else 1

    publisher = Publisher()
    before, threads = con.execute("SELECT current_setting('memory_limit'), current_setting('threads')").fetchone()
    con.execute(f"SET memory_limit = '{MIN_LOAD_MEMORY_BYTES >> 20}MB'")
    # A trace read as one piece (event_chunks) gives a second DuckDB thread nothing to do but
    # hand work over and wait: a 9 KB trace's load as a command takes 0.02 CPU-s less on one.
    one_thread = biggest <= MIN_PIECE_BYTES and threads > 1
    if one_thread:
        con.execute("SET threads = 1")
    # On small traces the derive statements' cost is planning them, not running them: these
    # rewrites of DuckDB's optimizer, which only pay on rows, cost a 9 KB trace's load about a tenth
    # and a 10-45 MB one's about a twentieth; from 135 MB to 1 GB they neither pay nor cost.
    skip_optimizers = biggest <= UNOPTIMIZED_BELOW_BYTES
    if skip_optimizers:
        optimizers = con.execute("SELECT current_setting('disabled_optimizers')").fetchone()[0]
        con.execute(f"SET disabled_optimizers = '{SMALL_TRACE_SKIPPED_OPTIMIZERS}'")
    # One trace's rows go to the WAL at its commit, only to be read back and written again by the
    # checkpoint at close: checkpointing at the commit writes them once (a 9.7 MB trace's load and
    # close: 0.77 -> 0.71 s). A folder's loads keep the WAL, which gathers many into one checkpoint.
    checkpoint_at_commit = len(paths) == 1
    if checkpoint_at_commit:
        # Given back as DuckDB shows it, which is exact for its default (16.0 MiB) and may round
        # another value; like the memory limit, the setting is the database's, not the connection's.
        threshold = con.execute("SELECT current_setting('checkpoint_threshold')").fetchone()[0]
        con.execute("SET checkpoint_threshold = '0 bytes'")
    try:
        yield from _load_all(con, paths, workers, publisher, replace, lenient, progress, stop)
    except BaseException:
        # KeyboardInterrupt in the caller's thread, or the caller gave up on the results: the
        # loads in the other threads must not go on alone.
        stop.request("interrupted")
        raise
    finally:
        stop.finish()
        try:
            con.execute(f"SET memory_limit = '{before}'")
            if one_thread:
                con.execute(f"SET threads = {threads}")
            if skip_optimizers:
                con.execute(f"SET disabled_optimizers = '{optimizers}'")
            if checkpoint_at_commit:
                con.execute(f"SET checkpoint_threshold = '{threshold}'")
        except duckdb.Error:
            pass  # DuckDB gave up on the database (a full disk): the load's own error says why


# Traces up to this size load with the optimizer passes below skipped (the same rows: compared table
# by table on a 45 MB trace); above it, where the passes were measured to neither pay nor cost, they
# stay, as no bigger trace's plans were checked without them.
UNOPTIMIZED_BELOW_BYTES = 64 << 20
# DuckDB optimizer passes a small trace's load skips (DuckDB's names; filter pushdown, which turns a
# filtered product into a join, stays).
SMALL_TRACE_SKIPPED_OPTIMIZERS = ("join_order,statistics_propagation,common_subexpressions,expression_rewriter,"
                                  "filter_pullup,projection_pullup,unused_columns,common_subplan")


def load_memory_limit(events):
    """Bytes of memory DuckDB may use to derive the tables of a trace of `events` events."""
    try:
        half_the_ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError):
        half_the_ram = 4 << 30
    return max(MIN_LOAD_MEMORY_BYTES, min(events * LOAD_MEMORY_PER_EVENT_BYTES, half_the_ram))


def _make_room(con, events):
    """Raises DuckDB's memory limit (never lowers it: loads side by side share it) for deriving
    a trace of `events` events."""
    wanted = load_memory_limit(events)
    current = con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    if wanted > MIN_LOAD_MEMORY_BYTES and wanted > _setting_bytes(current):
        con.execute(f"SET memory_limit = '{wanted >> 20}MB'")


def _setting_bytes(text):
    """DuckDB's memory_limit as it prints it ('572.2 MiB', '1.3 GiB') in bytes."""
    number, _, unit = text.partition(" ")
    scale = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
             "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}.get(unit.strip(), 1)
    try:
        return int(float(number) * scale)
    except ValueError:
        return 0


def _load_all(con, paths, workers, publisher, replace, lenient, progress, stop):
    def one(turn, path, worker_con):
        try:
            stop.check(path, started=False)
            return path, load_file(worker_con, path, replace=replace, lenient=lenient,
                                   progress=progress(path) if progress else None, publisher=publisher, turn=turn,
                                   stop=stop)
        except TracekitError as exc:
            return path, exc
        finally:
            publisher.done(turn)

    if workers == 1:
        for turn, path in enumerate(paths):
            yield one(turn, path, con)
        return
    # Only here: concurrent.futures brings logging and traceback along, 5 ms of every one-file load.
    from concurrent.futures import ThreadPoolExecutor

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


def load_file(con, path, *, replace=False, lenient=False, progress=None, publisher=None, turn=None, stop=None):
    """Loads one trace file in one transaction; returns a LoadResult, raises TracekitError.

    `progress`, when given, is called with the bytes of the file read so far, and its
    `deriving(done, total)` method (if it has one) with the steps done after the read.
    `publisher` and `turn` are load_files' own: the loads it runs side by side, and this one's place.
    `stop` (a LoadStop) ends the load before its commit, raising LoadInterrupted.
    """
    started = time.monotonic()
    # The slot: who this load publishes with, and its turn among them.
    result = _load_file(con, Path(path), replace, lenient, progress, (publisher or Publisher(), turn),
                        stop or LoadStop())
    result.seconds = time.monotonic() - started
    return result


def _load_file(con, path, replace, lenient, progress, slot, stop):
    check_trace_file(path)  # before anything opens it: a FIFO would block, a device never end
    try:
        return _read_and_commit(con, path, replace, lenient, progress, slot, stop)
    except LoadInterrupted:
        raise
    except TracekitError as exc:
        if stop.requested and getattr(exc, "unsettled", None) is None:
            raise LoadInterrupted(path) from None  # the stop ended it (DuckDB's interrupt error), not the file
        if isinstance(exc, DiskFullError) or getattr(exc, "unsettled", None) is not None:
            stop.request(exc)  # the files after it would meet the same full disk, or DuckDB has given up
        raise


def _read_and_commit(con, path, replace, lenient, progress, slot, stop):
    # The very bytes of a file already loaded: skipped before any parse.
    unchanged = None if replace else same_file_loaded(con, path, stop)
    if unchanged is not None:
        return unchanged
    reading = _stopping(progress, stop, path)
    if lenient:
        try:
            with stop.interruptible(con, path):
                info, lines = read_lenient(con, path, reading)
            return _in_transaction(con, path, replace, lambda trace_id: (info, lenient_insert(con, trace_id, lines)),
                                   slot, stop, lenient=True, progress=progress)
        finally:
            quietly(con, "DROP TABLE IF EXISTS _raw")
    try:
        return _in_transaction(con, path, replace, lambda trace_id: (read_fast(con, path, trace_id, reading), {}),
                               slot, stop, progress=progress)
    except FastReadRefused as refused:
        stop.check(path)  # an interrupt fails the fast read too: no second read then
        full = disk_full_folder(refused, path.parent)
        if full is not None:
            raise DiskFullError(path, full) from None
        # Read it again, exactly, to load what the fast read would not take or to say which event is bad.
        return _in_transaction(con, path, replace, lambda trace_id: (read_exact(con, path, trace_id, reading), {}),
                               slot, stop, progress=progress)


def _stopping(progress, stop, path):
    """What a read calls after each block of the file: `progress`, and a stop's LoadInterrupted.
    DuckDB's interrupt lands only once data reaches it, and a run of gigabytes of whitespace
    sends it none, so the read itself must stop."""
    def reading(done):
        stop.check(path)
        if progress is not None:
            progress(done)
    return reading


def _in_transaction(con, path, replace, read, slot, stop, *, lenient=False, progress=None):
    """Runs `read(trace_id)` -> (TraceStream, dropped) and the derivations in one transaction, and
    commits it unless `stop` came first."""
    deriving = getattr(progress, "deriving", None)
    con.execute("BEGIN")
    try:
        with stop.interruptible(con, path):
            staged = _load_events(con, path, replace, read, lenient, deriving, stop, *slot)
        if staged.status == "skipped":
            return staged
        commit(con, path, staged, slot[0], stop)
    except duckdb.Error as exc:
        # Whatever DuckDB refuses in the events (a value no check foresaw) is the file's error.
        rollback(con)
        raise file_error(path, exc) from None
    except OSError as exc:
        rollback(con)
        full = disk_full_folder(exc, path.parent)
        if full is None:
            raise
        raise DiskFullError(path, full) from None  # no room for the FIFOs in the temp folder
    except BaseException:
        rollback(con)
        raise
    if deriving is not None:
        steps = len(_derive_statements()) + 1
        deriving(steps, steps)
    return staged


def _load_events(con, path, replace, read, lenient, deriving, stop, publisher, turn):
    """Loads the events with `read`, derives the rest and publishes the trace (its name and content
    reserved, its row in trace_files), ready to commit; returns its LoadResult, or rolls back a skip
    and returns that. `deriving(done, total)`, when given, hears of each step after the read."""
    trace_id = con.execute("SELECT nextval('trace_id_seq')").fetchone()[0]
    info, dropped = read(trace_id)
    skipped = already_loaded(con, path, info.sha256, replace, publisher)[1]
    if skipped is not None:
        con.execute("ROLLBACK")
        return skipped
    restore_tracks(con, trace_id, info.header)  # a tracekit export's slices back on their threads
    # The file's own bytes: the content's for a plain file, hashed again for a gzip (a tenth the size).
    info.file_sha256 = file_sha256(path, lambda: stop.check(path)) if info.compressed else info.sha256
    events = con.execute("SELECT count(*) FROM event_rows WHERE trace_id = ?", [trace_id]).fetchone()[0]
    _make_room(con, events)
    if info.cut_events:
        dropped[TRUNCATED] = info.cut_events
    if lenient and dropped and not events:
        reasons = ", ".join(f"{count} {why}" if why == TRUNCATED else f"{count} with {why}"
                            for why, count in dropped.items())
        raise TraceFileError(path, f"no event is readable, even with --lenient (dropped {reasons})")
    statements = _derive_statements()
    steps = len(statements) + 1  # the last is the commit
    conditions = {}  # each guarded block's condition, selected as its first statement comes
    for done, (condition, runs_if, statement) in enumerate(statements, start=1):
        stop.check(path)
        if condition is None or _holds(con, condition, trace_id, conditions) == runs_if:
            if RULE_MARKERS[0] in statement:
                statement = render_rules(statement, _op_names(con))
            if FORMULA_MARKERS[0] in statement:
                statement = render_formulas(statement, _rules_used(con))
            con.execute(statement, _params(statement, trace_id))
        if deriving is not None:
            deriving(done, steps)
    store_classes(con, trace_id)
    return publish(con, path, trace_id, info, events, dropped, replace, trace_name_for(path), publisher, turn)


# The derivation of a trace's rows from its events, stage by stage (tracekit/store/sql/).
DERIVE_STAGES = ("derive_1_ops.sql", "derive_2_launches.sql", "derive_3_kernels.sql", "derive_4_collectives.sql",
                 "derive_5_transfers_busy.sql")


def _params(sql, trace_id):
    return {"trace_id": trace_id} if "$trace_id" in sql else None


def _holds(con, condition, trace_id, known):
    """Whether a guarded block's `condition` holds for this trace (tracekit.store.guarded_sql);
    selected once per load."""
    if condition not in known:
        sql = f"SELECT coalesce(({condition}), false)"
        known[condition] = bool(con.execute(sql, _params(condition, trace_id)).fetchone()[0])
    return known[condition]


def _op_names(con):
    """The op names of the trace (_tree), which _op_rules matches to the work models' patterns; None
    for more than MAX_NAMES_TO_SIFT, to match against every pattern."""
    names = [row[0] for row in con.execute(f"SELECT DISTINCT name FROM _tree WHERE name IS NOT NULL"
                                           f" LIMIT {MAX_NAMES_TO_SIFT + 1}").fetchall()]
    return None if len(names) > MAX_NAMES_TO_SIFT else names


def _rules_used(con):
    """The work-model rules (op_work_models.csv's rows, numbered) that the trace's ops take."""
    return {row[0] for row in con.execute("SELECT DISTINCT rule FROM _op_rules WHERE rule IS NOT NULL").fetchall()}


@functools.lru_cache(maxsize=None)
def _derive_statements():
    """(condition, runs_if, statement) of every derive stage in order: see tracekit.store.guarded_sql."""
    return tuple((condition, runs_if, statement)
                 for name in DERIVE_STAGES for condition, runs_if, statement in guarded_statements(sql_resource(name)))
