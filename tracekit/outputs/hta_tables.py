"""HTA's analyses of loaded traces, stored as DuckDB tables named hta_*.

Holistic Trace Analysis (HTA, facebookresearch/HolisticTraceAnalysis) reads a folder of
per-rank Kineto traces and finds each file's rank with the regex `"rank":\\s+(\\d+)`.
Most single traces (ours included) have no `distributedInfo.rank`, and HTA's analyses
look at rank 0 unless told otherwise. So each trace is staged for HTA on its own: a
temporary folder holding a link to the file the database's `traces.path` names, handed
to HTA as rank 0 of an explicit rank map. The user's file and folder are never
written, and a trace recorded as rank 5 of a job still lands where the analyses look.

HTA's defaults do not give the trace's numbers (NOTES.md): it drops the last
ProfilerStep and rounds timestamps to whole ns. Every run here sets
HTA_DISABLE_NS_ROUNDING=1 and include_last_profiler_step=True.

HTA (and the plotly and jupyter it pulls in) is imported only inside these functions:
`tracekit query` and `tracekit load` never import it.
"""

import logging
import os
import shutil
import sys
import tempfile
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tracekit.errors import TraceFileError, TracekitError
from tracekit.ingest.scratch import scratch_prefix
from tracekit.analysis.trace_lookup import trace_row
from tracekit.store.hta_schema import TABLES

NS_ROUNDING_ENV = "HTA_DISABLE_NS_ROUNDING"
RANK = 0


@dataclass
class Run:
    """One analysis of one trace: its status, rows stored (or why it failed) and time."""
    analysis: str
    ok: bool
    rows: int = 0
    message: str = ""
    seconds: float = 0.0


@dataclass
class TraceResult:
    """What HTA made of one trace (or pair, for trace_diff): frames per table and a Run each."""
    trace: str
    test_trace: str = None
    frames: dict = field(default_factory=dict)
    runs: list = field(default_factory=list)
    seconds: float = 0.0

    @property
    def stored(self):
        return any(run.ok and run.analysis != "parse" for run in self.runs)


# --- staging ---------------------------------------------------------------------------------

def loaded_traces(con, names=None):
    """(name, path) of the named loaded traces (all of them when names is empty)."""
    if names:
        return [trace_row(con, name) for name in dict.fromkeys(names)]
    rows = con.execute("SELECT trace, path FROM trace_files ORDER BY trace").fetchall()
    if not rows:
        raise TracekitError("no traces in the database: load traces first (tracekit load TRACE...)")
    return rows


def _check_original(con, name, path):
    """The loaded file, unchanged in size since it was loaded: HTA reads it, not the database."""
    if not path or not Path(path).is_file():
        raise TraceFileError(path, f"the file trace {name!r} was loaded from is gone (moved or deleted); "
                                   "HTA reads the original file: load it again from where it is now")
    loaded_bytes = con.execute("SELECT file_bytes FROM trace_files WHERE trace = ?", [name]).fetchone()[0]
    if loaded_bytes is not None and Path(path).stat().st_size != loaded_bytes:
        raise TraceFileError(path, f"changed since it was loaded as {name!r} ({loaded_bytes} bytes then, "
                                   f"{Path(path).stat().st_size} now): reload it with `tracekit load --replace`")


def stage(path, folder):
    """Puts `path` in `folder` as HTA's rank-0 file; a link, or a copy where links fail."""
    suffix = ".json.gz" if str(path).endswith(".gz") else ".json"
    staged = Path(folder) / f"rank-{RANK}{suffix}"
    try:
        staged.symlink_to(Path(path).resolve())
    except OSError:
        shutil.copyfile(path, staged)
    return staged


# --- running HTA -----------------------------------------------------------------------------

def require_hta():
    """Imports HTA (a second or two: it brings plotly), or says how to install it."""
    try:
        import hta.trace_analysis  # noqa: F401
        import hta.trace_diff  # noqa: F401
    except ImportError as exc:
        raise TracekitError(f"HTA is not installed ({exc}): pip install 'tracekit[hta]'") from None


@contextmanager
def _hta_session():
    """HTA imported, its ns rounding off and its stdout logging and pandas warnings quiet."""
    require_hta()
    saved_env = os.environ.get(NS_ROUNDING_ENV)
    os.environ[NS_ROUNDING_ENV] = "1"  # read at parse time, so set around every parse
    try:
        hta_logger = logging.getLogger("hta")
        saved_level = hta_logger.level
        hta_logger.setLevel(logging.CRITICAL)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                yield
        finally:
            hta_logger.setLevel(saved_level)
    finally:
        if saved_env is None:
            os.environ.pop(NS_ROUNDING_ENV, None)
        else:
            os.environ[NS_ROUNDING_ENV] = saved_env


def _gpu_events(analysis):
    """HTA's frame of GPU events (stream != -1), the rows its kernel breakdown aggregates."""
    frame = analysis.t.get_trace(RANK)
    return frame[frame["stream"].ne(-1)]


def _kernel_breakdown(analysis):
    # num_kernels and duration_ratio that never fold kernels into HTA's "others" row, whose
    # max/min/stddev would be over per-name totals rather than launches.
    by_type, by_kernel = analysis.get_gpu_kernel_breakdown(
        visualize=False, duration_ratio=1.0, num_kernels=sys.maxsize, include_memory_kernels=True)
    symbols = analysis.t.symbol_table.get_sym_table()
    calls = _gpu_events(analysis)["name"].map(lambda i: symbols[i]).value_counts()
    by_kernel = by_kernel.assign(calls=by_kernel["name"].map(calls).fillna(0))
    return {"hta_kernel_breakdown": by_kernel, "hta_kernel_type_breakdown": by_type}


def _temporal_breakdown(analysis):
    return {"hta_temporal_breakdown": analysis.get_temporal_breakdown(visualize=False)}


def _idle_time(analysis):
    idle, _ = analysis.get_idle_time_breakdown(ranks=[RANK], visualize=False)
    return {"hta_idle_time": idle}


def _launch_stats(analysis):
    import pandas as pd
    per_rank = analysis.get_cuda_kernel_launch_stats(ranks=[RANK], visualize=False)
    return {"hta_launch_stats": pd.concat([frame.assign(rank=rank) for rank, frame in per_rank.items()])}


# Analysis name -> (function of a TraceAnalysis, the table whose rows the CLI counts).
ANALYSES = {
    "kernel_breakdown": (_kernel_breakdown, "hta_kernel_breakdown"),
    "temporal_breakdown": (_temporal_breakdown, "hta_temporal_breakdown"),
    "idle_time": (_idle_time, "hta_idle_time"),
    "launch_stats": (_launch_stats, "hta_launch_stats"),
}
SINGLE_TRACE_TABLES = ("hta_kernel_breakdown", "hta_kernel_type_breakdown", "hta_temporal_breakdown",
                       "hta_idle_time", "hta_launch_stats")


def _reason(exc, analysis=None):
    """One line saying why HTA failed, with the cause when it is one we know."""
    text = " ".join(str(exc).split())[:300]
    message = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    if analysis is not None:
        try:
            if _gpu_events(analysis).empty:
                return f"the trace has no GPU kernels (HTA raised {message})"
        except Exception:  # the frame itself is what broke: the plain message says so
            pass
    return message


def _shape(frame, table, trace, test_trace=None):
    """HTA's frame as the table's columns; raises if HTA did not return a column we store."""
    columns = TABLES[table]
    wanted = [source for _, _, source in columns if source]
    missing = [source for source in wanted if source not in frame.columns]
    if missing:
        raise TracekitError(f"HTA returned no column {', '.join(map(repr, missing))} "
                            f"(it returned {', '.join(map(str, frame.columns))})")
    shaped = frame[wanted].copy()
    shaped.columns = [name for name, _, source in columns if source]
    shaped.insert(0, "trace", trace)
    if "test_trace" in [name for name, _, _ in columns]:
        shaped.insert(1, "test_trace", test_trace)
    return shaped.reset_index(drop=True)


def _timed(result, name, work, analysis=None):
    """Runs one analysis into `result`. An HTA failure is recorded, never raised: one broken
    analysis (HTA's temporal breakdown on a CPU-only trace) must not cost the others."""
    started = time.monotonic()
    try:
        frames = {table: _shape(frame, table, result.trace, result.test_trace)
                  for table, frame in work().items()}
    except Exception as exc:
        result.runs.append(Run(name, False, message=_reason(exc, analysis),
                               seconds=time.monotonic() - started))
        return
    result.frames.update(frames)
    counted = ANALYSES[name][1] if name in ANALYSES else next(iter(frames))
    result.runs.append(Run(name, True, rows=len(frames[counted]), seconds=time.monotonic() - started))


def analyze(name, path):
    """Runs every analysis of ANALYSES on one trace file. Raises TracekitError only when HTA
    cannot parse the file at all; a failed analysis is a failed Run in the result."""
    result = TraceResult(name)
    started = time.monotonic()
    with _hta_session(), tempfile.TemporaryDirectory(prefix=scratch_prefix("hta-")) as folder:
        from hta.trace_analysis import TraceAnalysis
        staged = stage(path, folder)
        try:
            analysis = TraceAnalysis(trace_files={RANK: str(staged)}, trace_dir=folder,
                                     include_last_profiler_step=True)
        except Exception as exc:
            raise TraceFileError(path, f"HTA cannot parse it ({_reason(exc)})") from None
        result.runs.append(Run("parse", True, seconds=time.monotonic() - started))
        for analysis_name, (function, _) in ANALYSES.items():
            _timed(result, analysis_name, lambda: function(analysis), analysis)
    result.seconds = time.monotonic() - started
    return result


def _labeled(label, path, folder):
    from hta.common.trace import Trace
    from hta.trace_diff import LabeledTrace
    folder.mkdir()
    staged = stage(path, folder)
    return LabeledTrace(label=label, t=Trace(trace_files={RANK: str(staged)}, trace_dir=str(folder)))


def diff(control_name, control_path, test_name, test_path):
    """HTA's TraceDiff.compare_traces of two traces over all their ProfilerSteps (HTA's
    default is the first step only, which in a capture is the cold call)."""
    result = TraceResult(control_name, test_trace=test_name)
    started = time.monotonic()
    with _hta_session(), tempfile.TemporaryDirectory(prefix=scratch_prefix("hta-")) as folder:
        from hta.trace_diff import TraceDiff
        labeled = {}
        for label, path in (("control", control_path), ("test", test_path)):
            try:
                labeled[label] = _labeled(label, path, Path(folder) / label)
            except Exception as exc:
                raise TraceFileError(path, f"HTA cannot parse it ({_reason(exc)})") from None
        control, test = labeled["control"], labeled["test"]

        def compare():
            frame = TraceDiff.compare_traces(control, test, control_iteration=control.iterations() or None,
                                             test_iteration=test.iterations() or None)
            return {"hta_trace_diff": frame.rename_axis("name").reset_index()}
        _timed(result, "trace_diff", compare)
    result.seconds = time.monotonic() - started
    return result


# --- storing ---------------------------------------------------------------------------------

def ensure_tables(con):
    for table, columns in TABLES.items():
        body = ", ".join(f"{name} {sql_type}" for name, sql_type, _ in columns)
        con.execute(f"CREATE TABLE IF NOT EXISTS {table} ({body})")


def store(con, result):
    """Replaces the trace's (or pair's) rows in every hta_* table, in one transaction: the
    tables hold the latest run, and an analysis that failed this time keeps no stale rows."""
    if result.test_trace is None:
        deletes = [(table, "trace = ?", [result.trace]) for table in SINGLE_TRACE_TABLES]
        deletes.append(("hta_runs", "trace = ? AND test_trace IS NULL", [result.trace]))
    else:
        pair = "trace = ? AND test_trace = ?", [result.trace, result.test_trace]
        deletes = [("hta_trace_diff", *pair), ("hta_runs", *pair)]
    con.execute("BEGIN")
    try:
        ensure_tables(con)
        for table, condition, params in deletes:
            con.execute(f"DELETE FROM {table} WHERE {condition}", params)
        for table, frame in result.frames.items():
            con.register("_hta_frame", frame)
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _hta_frame")
            con.unregister("_hta_frame")
        con.executemany("INSERT INTO hta_runs VALUES (?, ?, ?, ?, ?, ?, now()::TIMESTAMP)", [
            [result.trace, result.test_trace, run.analysis, "ok" if run.ok else "failed",
             run.message or None, round(run.seconds, 3)] for run in result.runs])
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise


def run_all(con, names=None, on_result=None, on_error=None):
    """Analyses each named trace (every loaded trace by default) and stores it as it goes.

    `on_result(result)` sees each stored result, `on_error(name, error)` each trace HTA could
    not read (its earlier results, if any, stay as they were). Returns the results.
    """
    targets = loaded_traces(con, names)
    require_hta()  # before the first trace, so its time is not the first trace's
    results = []
    for name, path in targets:
        try:
            _check_original(con, name, path)
            result = analyze(name, path)
        except TraceFileError as exc:
            if on_error is None:
                raise
            on_error(name, exc)
            continue
        store(con, result)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


def run_diff(con, control, test):
    """Compares two loaded traces with HTA's TraceDiff and stores the result."""
    (control, control_path), (test, test_path) = trace_row(con, control), trace_row(con, test)
    _check_original(con, control, control_path)
    _check_original(con, test, test_path)
    require_hta()
    result = diff(control, control_path, test, test_path)
    store(con, result)
    return result
