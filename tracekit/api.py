"""The Python API: what the CLI does, one call each, returning what the command prints or writes.

Each call waits, as the commands do, up to `wait` seconds for a database another process (a
load) holds, with a warning when it starts to; its errors are TracekitErrors whose messages
name this API's arguments (`lenient=True`), not the command line's flags.
"""

import glob
import warnings
from dataclasses import dataclass
from pathlib import Path

from tracekit.api_wording import speaks_python
from tracekit.store.database import (DEFAULT_DB, DEFAULT_LOCK_WAIT_S, connect, connect_for_queries,
                               waiting_for_lock)
from tracekit.errors import LoadError, TracekitError
from tracekit.ingest.samples import resolve_db


def _waiting(wait):
    return waiting_for_lock(wait, on_wait=lambda message: warnings.warn(message, stacklevel=4))


@speaks_python
def query(name=None, *, sql=None, db=None, params=None, allow_files=False, lake=None, engine="duckdb",
          master=None, wait=DEFAULT_LOCK_WAIT_S):
    """Runs a named query (or `sql`, one SELECT) read-only and returns a DataFrame.

    With no `db` and no tracekit.duckdb in the working directory it runs on the
    bundled sample traces: `tracekit.query("summary")`. `params` gives the query's
    `$name` parameters, the named query's or those of `sql`.

    The query sees the trace database and nothing else, as `tracekit query` does:
    no other file, no ATTACH, no COPY. `allow_files=True` lets it read files too
    (`read_csv('mine.csv')`, `'runs.parquet'`) to join with the traces; it still
    never writes. Off by default, so SQL passed on from someone else stays inside.

    `lake` runs it on a Parquet lake (tracekit.lake) instead of a database, with
    DuckDB; `engine="spark"` runs it there on Apache Spark (`master`: Spark's master
    URL, local[*] by default), the same SQL giving the same rows; a Spark session
    this process already runs is used, and left running.
    """
    from tracekit.analysis.named_queries import run_named, run_sql
    if (name is None) == (sql is None):
        raise ValueError("give a query name or sql=, not both")
    if engine not in ("duckdb", "spark"):
        raise ValueError(f'engine={engine!r}: it is "duckdb" or "spark"')
    if engine == "spark":
        return _query_on_spark(lake, master, name, sql, params, db, allow_files)
    if master is not None:
        raise ValueError('master= is for engine="spark"')
    con = _connect_source(db, lake, allow_files, wait)
    try:
        return run_named(con, name, params) if name is not None else run_sql(con, sql, params)
    finally:
        con.close()


def _query_on_spark(lake, master, name, sql, params, db, allow_files):
    import pandas as pd

    from tracekit.spark import query_lake

    if lake is None or db is not None or allow_files:
        raise ValueError('engine="spark" reads lake= (and not db=, nor allow_files=)')
    rows = query_lake(lake, name, sql=sql, params=params, master=master)
    return pd.DataFrame(rows.rows, columns=rows.columns)


@speaks_python
def load(paths, *, db=DEFAULT_DB, replace=False, lenient=False, lake=None, wait=DEFAULT_LOCK_WAIT_S):
    """Loads trace files, folders or globs into `db`; returns a LoadResult per file loaded or skipped.

    Every file that can load does, each in one transaction. When some fail, it raises
    LoadError after loading the others: its message names each bad file and why, its
    `.results` are the LoadResults of the good ones, its `.failures` the (path, error)
    of the bad. One file that fails raises its own error. `lenient=True` loads what can
    be read from a truncated or partly malformed trace. `lake` loads into a Parquet lake
    (a folder) instead of a database (tracekit.lake.load_many).
    """
    from tracekit.ingest.load_batch import failure_summary, load_batch
    from tracekit.ingest.loader import expand_paths

    if isinstance(paths, (str, Path)):
        paths = [paths]
    files = expand_paths([str(p) for p in paths])
    if lake is not None:
        if db != DEFAULT_DB:
            raise ValueError("give db= or lake=, not both")
        from tracekit.lake import load_many
        batch = load_many(files, lake, replace=replace, lenient=lenient, workers=None)
    else:
        with _waiting(wait):
            batch = load_batch(db, files, replace=replace, lenient=lenient)
    if len(batch.failures) == 1 and len(batch.files) == 1:
        raise batch.failures[0][1]
    if batch.failures:
        raise LoadError(failure_summary(batch, with_reasons=True), batch.results, batch.failures)
    return batch.results


@speaks_python
def report(db=None, *, fmt="html", output=None, force=False, wait=DEFAULT_LOCK_WAIT_S):
    """The report `tracekit report` writes, as text (html, or markdown with fmt="markdown");
    also written to `output` when given (never over a file of another kind unless `force`)."""
    from tracekit.outputs.output_guard import HTML, TEXT, check_output
    from tracekit.outputs.report import render
    from tracekit.outputs.report.data import load as report_data

    path, is_samples = resolve_db(db)
    if output is not None:
        check_output(output, HTML if fmt == "html" else TEXT, what=fmt, database=path, force=force)
    with _waiting(wait):
        text = render(report_data(None if is_samples else path), fmt)
    if output is not None:
        _write_text(output, text)
    return text


@dataclass
class Exported:
    """What export() wrote: the trace file, its events, and the slices moved off overlaps."""

    path: Path
    events: int
    moved_slices: int


@speaks_python
def export(output, *, trace=None, sql=None, db=None, findings=False, allow_files=False, force=False,
           wait=DEFAULT_LOCK_WAIT_S):
    """Writes a Chrome JSON trace (.json or .json.gz) of loaded trace `trace`, or of the events
    `sql` selects, as `tracekit export` does; returns an Exported."""
    from tracekit.outputs.trace_export import export as export_trace
    from tracekit.outputs.output_guard import JSON, check_output

    if (trace is None) == (sql is None):
        raise ValueError("give trace= or sql=, not both")
    path, _ = resolve_db(db)
    gzipped = str(output).endswith(".gz")
    check_output(output, "gzip" if gzipped else JSON, what="a .json.gz trace" if gzipped else "a JSON trace",
                 database=path, force=force)
    with _waiting(wait):
        con = connect_for_queries(path, allow_files=allow_files)
    try:
        written, count, moved = export_trace(con, output, trace=trace, sql=sql, findings=findings)
    finally:
        con.close()
    return Exported(Path(written), count, moved)


@speaks_python
def schema(db=None, *, wait=DEFAULT_LOCK_WAIT_S):
    """What `tracekit schema` prints: every table and view a query can read, with its columns."""
    from tracekit.analysis.schema_listing import schema_text

    path, _ = resolve_db(db)
    with _waiting(wait):
        con = connect_for_queries(path)
    try:
        return schema_text(con)
    finally:
        con.close()


@speaks_python
def hta(traces=None, *, db=DEFAULT_DB, wait=DEFAULT_LOCK_WAIT_S):
    """Runs HTA's analyses on loaded traces (all of them by default) into the hta_* tables, as
    `tracekit hta` does; returns a DataFrame with a row per trace and analysis: status ok,
    failed or not analysed, rows stored, why, seconds."""
    from tracekit.outputs.hta_tables import run_all

    if isinstance(traces, str):
        traces = [traces]
    skipped = []
    with _waiting(wait):
        con = connect(_existing(db))
    try:
        results = run_all(con, traces or (), on_error=lambda name, exc: skipped.append((name, exc)))
    finally:
        con.close()
    if not any(result.stored for result in results):
        raise TracekitError("nothing stored: HTA could not analyse any trace"
                            + "".join(f"; {name}: {exc}" for name, exc in skipped))
    return _hta_frame(results, skipped)


@speaks_python
def hta_diff(control, test, *, db=DEFAULT_DB, wait=DEFAULT_LOCK_WAIT_S):
    """HTA's TraceDiff of two loaded traces into hta_trace_diff, as `tracekit hta diff` does;
    returns the rows it stored as a DataFrame."""
    from tracekit.outputs.hta_tables import run_diff

    with _waiting(wait):
        con = connect(_existing(db))
    try:
        result = run_diff(con, control, test)
    finally:
        con.close()
    if not result.stored:
        failed = "; ".join(run.message for run in result.runs if not run.ok)
        raise TracekitError(f"nothing stored: HTA's trace diff of {control} and {test} failed: {failed}")
    return result.frames["hta_trace_diff"]


@speaks_python
def open_trace(trace_file=None, *, trace=None, db=None, port=9001, browser=True, timeout=None):
    """`tracekit.open()`: serves a trace file (or loaded trace `trace`, as it was loaded) to ui.perfetto.dev until
    the UI has fetched it, as `tracekit open` does; returns the URL it gave the UI."""
    from tracekit.outputs.perfetto_server import open_in_perfetto
    from tracekit.outputs.served_trace import open_loaded_trace

    if (trace_file is None) == (trace is None):
        raise ValueError("give trace_file or trace=, not both")
    served = trace_file if trace is None else open_loaded_trace(trace, resolve_db(db)[0])
    return open_in_perfetto(served, port=port, browser=browser, timeout=timeout)


def _connect_source(db, lake, allow_files, wait):
    """A connection for queries to the lake `lake`, or else to the database `db` (see resolve_db)."""
    if lake is not None:
        if db is not None:
            raise ValueError("give db= or lake=, not both")
        from tracekit.lake import connect_lake
        return connect_lake(lake, allow_files=allow_files)
    path, _ = resolve_db(db)
    with _waiting(wait):
        return connect_for_queries(path, allow_files=allow_files)


def _existing(db):
    """HTA writes tables, so unlike a query there is no falling back to the read-only samples."""
    if not Path(db).is_file():
        raise TracekitError(f"{db}: no database: load traces first (tracekit load TRACE... --db {db})")
    return db


def _hta_frame(results, skipped):
    import pandas as pd
    rows = [{"trace": r.trace, "analysis": run.analysis, "status": "ok" if run.ok else "failed",
             "rows": run.rows, "message": run.message or None, "seconds": round(run.seconds, 3)}
            for r in results for run in r.runs if run.analysis != "parse" or not run.ok]
    rows += [{"trace": name, "analysis": None, "status": "not analysed", "rows": 0, "message": str(exc),
              "seconds": 0.0} for name, exc in skipped]
    return pd.DataFrame(rows, columns=["trace", "analysis", "status", "rows", "message", "seconds"])


def _write_text(output, text):
    try:
        with Path(output).open("w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise TracekitError(f"{output}: cannot write ({exc.strerror})") from None


@speaks_python
def findings(*, db=None, trace=None, rule=None, params=None, lake=None, wait=DEFAULT_LOCK_WAIT_S):
    """What the finding rules see (as `tracekit findings`): a DataFrame of trace, rule, severity,
    title, detail, fix, whatif (the fix as the replay takes it), saving_us_per_step (the step time
    the fix saves, replayed on the loop without the profiler's estimated cost),
    traced_saving_us_per_step (replayed on the loop as traced), estimate_us_per_step (the rule's
    own figure) and evidence (a list of
    the events each rests on), ranked by saving, each trace's fixes together (rule all_fixes)
    last. `params` sets rules' thresholds by name. `lake`: a Parquet lake's traces."""
    from tracekit.analysis.findings_engine import run_findings

    con = _connect_source(db, lake, False, wait)
    try:
        return run_findings(con, trace=trace, rule=rule, params=params)
    finally:
        con.close()


@speaks_python
def diff(a, b, *, db=None, by="class", fail_on=(), top=10, wait=DEFAULT_LOCK_WAIT_S):
    """Compares `b` against baseline `a` (as `tracekit diff`); returns a
    tracekit.analysis.compare.DiffResult with per-step figures and intervals, the attribution, the findings'
    change and the verdict. Each side is a trace name in `db`, a glob of names, or a list of names; or
    trace files (a file, a folder of them, a glob, or a list), loaded into a temporary database. A side
    of several traces is several runs of one variant: their spread sets the run-to-run term."""
    import tempfile

    from tracekit.analysis.compare import diff as run_diff

    files = [_side_files(side) for side in (a, b)]
    if all(files):
        with tempfile.TemporaryDirectory(prefix="tracekit-diff-") as folder:
            results = load([*files[0], *files[1]], db=Path(folder) / "diff.duckdb")
            trace_of = {Path(r.path).resolve(): r.trace for r in results}
            runs = [[trace_of[path.resolve()] for path in side] for side in files]
            # One file: its trace's name; several: the side as the caller wrote it.
            labels = [names[0] if len(names) == 1 else str(side) if isinstance(side, (str, Path))
                      else ", ".join(map(str, side)) for names, side in zip(runs, (a, b))]
            con = connect_for_queries(Path(folder) / "diff.duckdb")
            try:
                return run_diff(con, *runs, by=by, fail_on=fail_on, top=top, labels=labels)
            finally:
                con.close()
    path, _ = resolve_db(db)
    with _waiting(wait):
        con = connect_for_queries(path)
    try:
        return run_diff(con, a if isinstance(a, str) else list(a), b if isinstance(b, str) else list(b),
                        by=by, fail_on=fail_on, top=top)
    finally:
        con.close()


@speaks_python
def whatif(trace, apply=(), *, db=None, lake=None, wait=DEFAULT_LOCK_WAIT_S):
    """Replays `trace`'s steps with the fixes `apply` (as `tracekit whatif --apply` takes them:
    'drop-copies:OP', 'cuda-graph', ...; tracekit.replay.fixes lists them); returns a tracekit.replay.whatif.WhatIf:
    each step's time as the trace has it, as replayed without change and with the fixes, and
    `saving_us`, what the fixes save a steady step. A trace without steps is replayed whole, as one
    step (`whole_trace`)."""
    import duckdb

    from tracekit.replay.fixes import parse_fix
    from tracekit.replay.whatif import whatif as run_whatif

    texts = [apply] if isinstance(apply, str) else list(apply)
    fixes = [parse_fix(text) for text in texts]
    if lake is not None:
        from tracekit.lake import connect_lake
        con = connect_lake(lake)
    else:
        path, _ = resolve_db(db)
        with _waiting(wait):
            con = connect_for_queries(path)
    try:
        return run_whatif(con, trace, fixes, texts)
    except duckdb.Error as exc:
        raise TracekitError(f"whatif {trace}: {str(exc).splitlines()[0]}") from None
    finally:
        con.close()


def names_trace_files(side):
    """Whether a side of diff names trace files (a file, a folder, a glob that matches files, or a
    list of them) rather than traces in a database."""
    patterns = [str(side)] if isinstance(side, (str, Path)) else [str(p) for p in side]
    return bool(patterns) and all(Path(p).exists() or glob.has_magic(p) and glob.glob(p) for p in patterns)


def _side_files(side):
    """The trace files a side of diff names, or None when it names traces in the database."""
    from tracekit.ingest.loader import expand_paths

    if not names_trace_files(side):
        return None
    return expand_paths([str(side)] if isinstance(side, (str, Path)) else [str(p) for p in side])
