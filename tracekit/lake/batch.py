"""Loads into a lake: trace files (load_many, load_one) and a database's traces (export_database).

Each file is its own job from start to end: converted by the normal loader into an in-memory
DuckDB, written as Parquet into a staging folder of its own, published (tracekit.lake.publish).
Nothing is shared between two files but the lake's lock during the renames, so processes,
threads or the workers of a cluster can share the work any way they like.
"""

import errno
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb

from tracekit.errors import DiskFullError, LoadInterrupted, TraceFileError, TracekitError
from tracekit.ingest.load_batch import LoadBatch
from tracekit.ingest.load_publish import LoadResult
from tracekit.ingest.load_stop import LoadStop
from tracekit.ingest.turns import Turns
from tracekit.lake.layout import LakeError, part_file, partition, published_names, read_meta, trace_id_for
from tracekit.lake.publish import Staging, ensure_lake, file_index, publish, remove_leftovers
from tracekit.lake.writer import convert_file, stored_trace_file, write_shared, write_trace

# Files below this size load two at a time on two cores or more (as `tracekit load` does).
PARALLEL_BELOW_BYTES = 256 << 20


class LakeBatch(LoadBatch):
    """What a load into a lake did: a LoadBatch whose `db` is the lake's folder, so load_batch's
    summary lines serve a lake too."""

    @property
    def lake(self):
        return self.db


def load_many(files, lake, *, replace=False, lenient=False, workers=1, progress=None, on_outcome=None, stop=None):
    """Loads trace files (files, folders or globs) into the Parquet lake `lake` (a folder, made if
    missing); returns a LakeBatch. A file that fails costs only itself: its error is in
    `.failures` and nothing of it is in the lake.

    This is the unit a cluster shares out: each call converts and publishes its own files, and
    any number of calls may run at once on one lake (in processes, or on machines that share its
    folder). With Spark, map it over the rank files:

        paths = spark.sparkContext.parallelize(rank_files, len(rank_files))
        paths.foreachPartition(lambda part: load_many(list(part), "/shared/lake"))

    `workers`: files converted at once in this process (None: 2 for several small files on two
    cores or more). `on_outcome(path, LoadResult or error)` sees each file as it finishes, in the
    order given; `progress(path)` and `stop` (a LoadStop) are tracekit.ingest.loader.load_files'.
    """
    from tracekit.ingest.loader import expand_paths, passed_over
    from tracekit.ingest.raw_file import expected_size
    from tracekit.ingest.scratch import remove_stale_scratch

    # files the CLI or the API expanded already keep what their folders held
    paths = files if hasattr(files, "found_in_folders") else expand_paths(
        [str(p) for p in ([files] if isinstance(files, (str, Path)) else files)])
    _ready(lake)
    remove_stale_scratch()
    stop = stop or LoadStop()
    if workers is None:
        small = max((expected_size(p) for p in paths if Path(p).is_file()), default=0) < PARALLEL_BELOW_BYTES
        workers = 2 if len(paths) > 1 and small and (os.cpu_count() or 1) > 1 else 1

    turns = Turns()

    def one(turn, path):
        try:
            stop.check(path, started=False)
            return path, load_one(path, lake, replace=replace, lenient=lenient, stop=stop,
                                  progress=progress(path) if progress else None, ready=True,
                                  before_publish=lambda: turns.wait(turn))
        except TracekitError as exc:
            return path, exc
        finally:
            turns.done(turn)

    batch = LakeBatch(Path(lake), paths)
    try:
        with ThreadPoolExecutor(max_workers=workers) if workers > 1 else _InOrder() as pool:
            for path, outcome in pool.map(one, range(len(paths)), paths):
                outcome = passed_over(paths, path, outcome)
                batch.add(path, outcome)
                if on_outcome is not None:
                    on_outcome(path, outcome)
    except BaseException:
        stop.request("interrupted")  # the caller gave up: the other files' loads must not go on alone
        raise
    finally:
        stop.finish()
    batch.traces_held = len(published_names(lake))
    return batch


class _InOrder:
    """One file at a time, in this thread: a pool of one without the thread."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    @staticmethod
    def map(function, *iterables):
        return map(function, *iterables)


def load_one(path, lake, *, replace=False, lenient=False, stop=None, progress=None, ready=False,
             before_publish=None):
    """Loads one trace file into `lake`; returns its LoadResult (a skip when the lake holds its
    content), raises TraceFileError (LoadInterrupted when `stop` came first). `ready`: the lake
    exists and its leftovers were removed (load_many did it); `before_publish()` is called once
    the file is converted, before its name is picked."""
    from tracekit.ingest.loader import trace_name_for
    from tracekit.ingest.raw_file import check_trace_file

    path = Path(path)
    stop = stop or LoadStop()
    if not ready:
        _ready(lake)
    check_trace_file(path)
    name = trace_name_for(path)
    unchanged = None if replace else _same_file(lake, name, path, stop)
    if unchanged is not None:
        return unchanged
    staging = _staging(lake, path)
    try:
        result = convert_file(path, staging, lenient=lenient, stop=stop, progress=progress)
        if before_publish is not None:
            before_publish()
        stop.check(path)  # from here on no stop interrupts: the publication runs to its end
        return _published(staging, path, result, replace)
    except (duckdb.Error, OSError) as exc:
        if stop.requested:
            raise LoadInterrupted(path) from None
        error = _write_error(path, lake, exc)
        if isinstance(error, DiskFullError):
            stop.request(error)  # the files after it would meet the same full disk
        raise error from None
    finally:
        staging.close()


def export_database(db, lake, *, traces=None, replace=False, on_outcome=None):
    """Writes the traces of database `db` (all, or those named in `traces`) into `lake`, by the
    same rules as a load: a trace whose content the lake holds is skipped. Returns a LakeBatch,
    each outcome's path the trace's name."""
    from tracekit.analysis.trace_lookup import trace_row
    from tracekit.store.database import connect

    con = connect(db, read_only=True)
    try:
        names = traces or [row[0] for row in con.execute("SELECT trace FROM trace_files ORDER BY trace").fetchall()]
        for name in names:
            trace_row(con, name)  # an unknown name is an error before anything is written
        _ready(lake)
        batch = LakeBatch(Path(lake), list(names))
        for name in names:
            try:
                outcome = _export_one(con, name, lake, replace)
            except TracekitError as exc:
                outcome = exc
            batch.add(name, outcome)
            if on_outcome is not None:
                on_outcome(name, outcome)
    finally:
        con.close()
    batch.traces_held = len(published_names(lake))
    return batch


def _export_one(con, name, lake, replace):
    trace_id, sha256, events = con.execute("SELECT trace_id, sha256, events FROM trace_files WHERE trace = ?",
                                           [name]).fetchone()
    kernels = con.execute("SELECT count(*) FROM kernel_rows WHERE trace_id = ?", [trace_id]).fetchone()[0]
    staging = _staging(lake, name)
    try:
        write_trace(con, trace_id, name, sha256, staging)
        result = LoadResult(name, "loaded", name, events, kernels, sha256=sha256)
        return _published(staging, name, result, replace)
    except (duckdb.Error, OSError) as exc:
        raise _write_error(name, lake, exc) from None
    finally:
        staging.close()


def _published(staging, path, result, replace):
    """`result` once its staged trace is published, or the LoadResult of a skip."""
    try:
        name, owner = publish(staging, result.trace, result.sha256, replace, stored_trace_file)
    except LakeError as exc:
        raise TraceFileError(path, str(exc)) from None
    if owner is not None:
        return LoadResult(str(path), "skipped", owner, sha256=result.sha256,
                          message=f"same content as trace {owner!r} (--replace reloads it)")
    result.trace, result.trace_id = name, trace_id_for(result.sha256)
    return result


def _staging(lake, path):
    try:
        return Staging(lake)
    except OSError as exc:
        raise _write_error(path, lake, exc) from None


def _write_error(path, lake, exc):
    """The error of a file whose tables could not be written to the lake (DuckDB's or the OS's). It
    names the lake where DuckDB or the OS named a path of tracekit's own making, a writer's staging
    folder most often (tracekit.internal_paths): the user knows the lake, not its insides."""
    from tracekit.ingest.event_read import duckdb_problem
    from tracekit.store.disk_full import disk_full_folder
    from tracekit.internal_paths import hide_internal_paths

    full = disk_full_folder(exc, Path(lake))
    if full is not None:
        return DiskFullError(path, lake if Path(lake).resolve() in Path(full).resolve().parents else full)
    if isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG:
        # a database takes any name; a lake's partition folder is `trace=` and the name, %XX-escaped
        return TraceFileError(path, f"its trace's name is too long for a folder of the lake {lake} (trace=NAME, "
                                    "each character but letters, digits, '.', '_' and '-' as %XX: a file system "
                                    "takes 255 bytes); rename the file, or load it into a database (--db)")
    why = exc.strerror or str(exc) if isinstance(exc, OSError) else duckdb_problem(exc)
    return TraceFileError(path, f"cannot write to the lake {lake} ({hide_internal_paths(why, lake)})")


def _ready(lake):
    """Makes `lake` a lake if it is not one, and removes what dead writers left in it."""
    try:
        ensure_lake(lake, write_shared)
        read_meta(lake)  # a lake another tracekit's schema made is not written to
        remove_leftovers(lake)
    except (OSError, duckdb.Error) as exc:
        from tracekit.ingest.event_read import duckdb_problem
        from tracekit.store.disk_full import disk_full_folder

        full = disk_full_folder(exc, Path(lake))
        if full is not None:
            # The lake's own folders are the lake's business: its disk is what the user frees.
            full = lake if Path(lake).resolve() in Path(full).resolve().parents else full
            raise LakeError(f"{lake}: the disk is full (no space left in {full}): nothing was loaded; "
                            "free some space and load again") from None
        why = exc.strerror or str(exc) if isinstance(exc, OSError) else duckdb_problem(exc)
        raise LakeError(f"{lake}: cannot write to the lake ({why})") from None


def _same_file(lake, name, path, stop):
    """The LoadResult of a skip when the lake holds a trace loaded from these very bytes, found
    before any parse: by the lake's index of files (their size, then SHA-256), else, in a lake
    written before it had one, by trace `name`'s."""
    from tracekit.ingest.raw_file import file_sha256

    size = path.stat().st_size
    if file_index(lake, size).is_dir():
        digest = file_sha256(path, lambda: stop.check(path))
        try:
            other = (file_index(lake, size) / digest).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
    elif not file_index(lake).is_dir():
        other, digest = name, None
    else:
        return None
    part = part_file(partition(lake, "trace_files", other))
    try:
        stored = stored_trace_file(part) if part is not None else None
    except (duckdb.Error, OSError):
        return None  # replaced or removed by another writer this very moment: nothing to skip by
    if stored is None or stored[2] != size or stored[1] is None:
        return None
    if (digest or file_sha256(path, lambda: stop.check(path))) != stored[1]:
        return None
    return LoadResult(str(path), "skipped", other, sha256=stored[0],
                      message=f"same content as trace {other!r} (--replace reloads it)")
