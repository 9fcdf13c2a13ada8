"""SQL → the numbers a report shows: named queries, a few report-only queries on the views, and
the findings engine's rows.

Everything per step is over the steady steps (view steady_steps), the same steps the `summary`
query averages over; a trace without ProfilerStep#N counts as one step holding all its GPU work.
"""

from dataclasses import dataclass

import pandas as pd

from tracekit.errors import TracekitError
from tracekit.analysis.findings_engine import run_findings
from tracekit.analysis.named_queries import run_named, run_sql

# Times are summed in whole nanoseconds (sum(round(us * 1e3)) / 1e3), exact in any order: DuckDB's
# threads add their partial sums in any order, and a float sum's last bits would follow it.
#
# GPU work of the steady steps (or of the whole trace when it has no steps), one row per
# kernel, memcpy or memset. `cls` is the kernel class, 'memcpy', 'memset' or 'unclassified'.
_STEADY_WORK = """
WITH work AS (
    SELECT trace, step, name, ts_us, dur_us, coalesce(kernel_class, 'unclassified') AS cls,
           gemm_class, NULL AS kind, NULL AS bytes, cpu_op_path FROM kernels
    UNION ALL
    SELECT trace, step, name, ts_us, dur_us, 'memcpy', NULL, kind, bytes, cpu_op_path FROM memcpy
    UNION ALL
    SELECT trace, step, name, ts_us, dur_us, 'memset', NULL, kind, bytes, cpu_op_path FROM memset
)
SELECT w.* FROM work w
WHERE w.step IN (SELECT s.step FROM steady_steps s WHERE s.trace = w.trace)
   OR w.trace NOT IN (SELECT trace FROM steps)
"""

# GPU time per steady step of each kernel class (plus memcpy and memset).
_BY_CLASS = f"""
WITH w AS ({_STEADY_WORK}),
n AS (SELECT trace, count(*) AS steps FROM steady_steps GROUP BY trace)
SELECT w.trace, w.cls AS kernel_class, count(*) / coalesce(any_value(n.steps), 1) AS launches_per_step,
       sum(round(w.dur_us * 1e3)) / 1e3 / coalesce(any_value(n.steps), 1) AS us_per_step
FROM w LEFT JOIN n ON n.trace = w.trace
GROUP BY w.trace, w.cls
ORDER BY w.trace, us_per_step DESC, kernel_class
"""

# The steady step whose GPU time is the median (lower middle on an even count, earliest on
# ties); for a trace without steps, all of its GPU work (step NULL).
_TIMELINE = f"""
WITH w AS ({_STEADY_WORK}),
per_step AS (
    SELECT trace, step, sum(round(dur_us * 1e3)) / 1e3 AS gpu_us FROM w GROUP BY trace, step
), ranked AS (
    SELECT *, row_number() OVER (PARTITION BY trace ORDER BY gpu_us, step) AS r,
           count(*) OVER (PARTITION BY trace) AS n
    FROM per_step
), picked AS (
    SELECT trace, step FROM ranked WHERE r = (n + 1) // 2
)
SELECT w.trace, w.step, w.name, w.cls AS kernel_class, w.kind, w.bytes,
       w.ts_us - min(w.ts_us) OVER (PARTITION BY w.trace) AS start_us, w.dur_us
FROM w JOIN picked p ON p.trace = w.trace AND p.step IS NOT DISTINCT FROM w.step
ORDER BY w.trace, start_us, w.name
"""

# The FLOPs tracekit counts on each trace's kernels (GEMMs and fused attention, from recorded
# shapes: kernels.flops) per steady step; no row for a trace where no kernel carries any.
_FLOPS = """
SELECT k.trace, sum(k.flops) / any_value(w.steps) AS flops_per_step
FROM kernels k JOIN steady_window w ON w.trace = k.trace AND w.step IS NOT DISTINCT FROM k.step
WHERE k.flops IS NOT NULL
GROUP BY k.trace
ORDER BY k.trace
"""

# Each trace's highest steady-step memory peak (view memory_steps) on its GPU, else its CPU, with
# what was live there; no row for a trace without memory events.
_MEMORY = """
SELECT m.trace, m.step, m.device_type, m.device, m.peak_allocated_bytes, m.peak_over_start_bytes,
       m.peak_reserved_bytes, m.allocated_bytes, m.live_at_peak, m.unattributed_bytes
FROM memory_steps m JOIN steady_window w ON w.trace = m.trace AND w.step IS NOT DISTINCT FROM m.step
QUALIFY row_number() OVER (PARTITION BY m.trace ORDER BY m.device_type = 'cpu', m.peak_allocated_bytes DESC, m.step) = 1
ORDER BY m.trace
"""

# The CPU work of the steady steps of each trace without GPU work: its outermost operators (an op
# no other op on its thread encloses, so none is counted twice), as the GPU's work is counted for
# the others.
_STEADY_CPU_OPS = """
WITH ops AS (
    SELECT c.trace, c.op_id, c.step, c.name, c.tid, c.depth, c.ts_us, c.dur_us
    FROM cpu_ops c JOIN steady_window w ON w.trace = c.trace AND w.step IS NOT DISTINCT FROM c.step
    WHERE c.cat = 'cpu_op' AND c.trace NOT IN (SELECT trace FROM gpu_busy)
)
SELECT o.* FROM ops o
WHERE NOT EXISTS (SELECT 1 FROM ops e WHERE e.trace = o.trace AND e.tid = o.tid AND e.depth < o.depth
                  AND e.ts_us <= o.ts_us AND e.ts_us + e.dur_us >= o.ts_us + o.dur_us)
"""

# CPU time per steady step of each operator name, for traces without GPU work.
_CPU_BY_OP = f"""
WITH o AS ({_STEADY_CPU_OPS}),
n AS (SELECT trace, any_value(steps) AS steps FROM steady_window GROUP BY trace)
SELECT o.trace, o.name AS op, count(*) / any_value(n.steps) AS calls_per_step,
       sum(round(o.dur_us * 1e3)) / 1e3 / any_value(n.steps) AS us_per_step
FROM o JOIN n ON n.trace = o.trace
GROUP BY o.trace, o.name
ORDER BY o.trace, us_per_step DESC, op
"""

# The outermost CPU ops of the steady step whose op time is the median (as _TIMELINE picks), for
# traces without GPU work; their time from the step's first op.
_CPU_TIMELINE = f"""
WITH o AS ({_STEADY_CPU_OPS}),
per_step AS (
    SELECT trace, step, sum(round(dur_us * 1e3)) / 1e3 AS cpu_us FROM o GROUP BY trace, step
), ranked AS (
    SELECT *, row_number() OVER (PARTITION BY trace ORDER BY cpu_us, step) AS r,
           count(*) OVER (PARTITION BY trace) AS n
    FROM per_step
)
SELECT o.trace, o.step, o.name, 'CPU op' AS kernel_class, NULL AS kind, NULL AS bytes,
       o.ts_us - min(o.ts_us) OVER (PARTITION BY o.trace) AS start_us, o.dur_us
FROM o JOIN ranked p ON p.trace = o.trace AND p.step IS NOT DISTINCT FROM o.step AND p.r = (p.n + 1) // 2
ORDER BY o.trace, start_us, o.name
"""

# The occupancy each kernel's launch allows (view kernels: theoretical_occupancy_pct and what
# limits it) over the steady steps, the launch shape most used speaking for the kernel: the figure
# the low_occupancy rule's findings give, so the chart, the table and the cards say one number.
_LAUNCH_OCCUPANCY = """
SELECT k.trace, k.name AS kernel, mode(k.theoretical_occupancy_pct) AS occupancy_pct,
       mode(k.occupancy_limiter) AS occupancy_limiter
FROM kernels k JOIN steady_window w ON w.trace = k.trace AND w.step IS NOT DISTINCT FROM k.step
GROUP BY k.trace, k.name
"""

_TRACES = """
SELECT t.trace, t.variant, t.device_name, t.compute_capability, t.metadata, s.device, s.shape
FROM traces t LEFT JOIN trace_shapes s ON s.trace = t.trace
ORDER BY t.trace
"""


@dataclass
class ReportData:
    """The frames a report is drawn from, each with a column `trace`."""

    source: str              # what the data came from, for the page header
    summary: pd.DataFrame    # named query summary, fastest first
    traces: pd.DataFrame     # view traces: variant, device, metadata
    by_class: pd.DataFrame   # GPU µs per steady step of each kernel class
    gemm: pd.DataFrame       # named query gemm_classes
    occupancy: pd.DataFrame  # named query occupancy (per kernel name)
    plans: pd.DataFrame      # named query cudnn_plan_time
    timeline: pd.DataFrame   # GPU work of one (the median) steady step per trace
    findings: pd.DataFrame   # the findings engine's rows, ranked (tracekit.analysis.findings_engine)
    flops: pd.DataFrame      # counted kernel FLOPs per steady step (traces with any)
    memory: pd.DataFrame     # each trace's highest steady memory peak (traces with memory events)
    cpu_by_op: pd.DataFrame  # CPU µs per steady step of each outermost op (traces without GPU work)
    cpu_timeline: pd.DataFrame  # the outermost CPU ops of one steady step (traces without GPU work)
    launch_occupancy: pd.DataFrame  # each kernel's theoretical occupancy and its limiter

    @property
    def order(self):
        """Trace names, fastest first by GPU time per step (the summary's order)."""
        return list(self.summary["trace"])


def collect(con, source=""):
    """Runs every query a report needs on an open connection; raises when no trace is loaded."""
    summary = run_named(con, "summary")
    if summary.empty:
        raise TracekitError(f"{source or 'the database'}: no traces loaded; "
                            "load some with `tracekit load TRACE... --db FILE`")
    # Fastest first, as the summary orders them: by GPU time, then traces without GPU work by CPU time.
    return ReportData(
        source=source,
        summary=summary,
        traces=run_sql(con, _TRACES),
        by_class=run_sql(con, _BY_CLASS),
        gemm=run_named(con, "gemm_classes"),
        occupancy=run_named(con, "occupancy"),
        plans=run_named(con, "cudnn_plan_time"),
        timeline=run_sql(con, _TIMELINE),
        findings=run_findings(con),
        flops=run_sql(con, _FLOPS),
        memory=run_sql(con, _MEMORY),
        cpu_by_op=run_sql(con, _CPU_BY_OP),
        cpu_timeline=run_sql(con, _CPU_TIMELINE),
        launch_occupancy=run_sql(con, _LAUNCH_OCCUPANCY),
    )


def load(db=None):
    """ReportData of `db` (or ./tracekit.duckdb, else the bundled samples), opened read-only."""
    from tracekit.ingest.samples import resolve_db
    from tracekit.store.database import connect_for_queries

    path, is_samples = resolve_db(db)
    source = "the bundled sample traces" if is_samples else str(path)
    # As `tracekit query` opens it: a database loaded by an older tracekit gets this one's views.
    con = connect_for_queries(path)
    try:
        return collect(con, source)
    finally:
        con.close()


def top_kernel_rows(data):
    """Each trace's top kernel (the summary's) with its launch resources from `occupancy` and the
    occupancy its launch allows (occupancy_pct, occupancy_limiter: the low_occupancy rule's figure)."""
    merged = data.summary[["trace", "top_kernel"]].merge(
        data.occupancy, how="left", left_on=["trace", "top_kernel"], right_on=["trace", "kernel"])
    merged = merged.drop(columns=["kernel"]).merge(
        data.launch_occupancy, how="left", left_on=["trace", "top_kernel"], right_on=["trace", "kernel"])
    return merged.drop(columns=["kernel"])


def on_gpu(row):
    """True when a summary row's trace has GPU work."""
    return present(row.gpu_us_per_step) and row.gpu_us_per_step > 0


def step_time(row):
    """(µs per step, 'GPU' or 'CPU'): the GPU's busy time, or for a trace without GPU work its
    CPU span per step; (None, None) when it has neither."""
    if on_gpu(row):
        return float(row.gpu_us_per_step), "GPU"
    if present(row.cpu_us_per_step):
        return float(row.cpu_us_per_step), "CPU"
    return None, None


def like_groups(data):
    """{group: [traces, fastest first]} of the traces with a step time, a group per shape and
    device (view trace_shapes); a trace whose shape is unknown groups by its device alone."""
    shapes = {t.trace: t.shape if present(t.shape) else f"unknown shape on {t.device}"
              for t in data.traces.itertuples()}
    groups = {}
    for row in data.summary.itertuples():
        if step_time(row)[0] is not None:
            groups.setdefault(shapes.get(row.trace), []).append(row.trace)
    return groups


def fastest_of_groups(data):
    """The traces that are the fastest of a group of two or more like traces (like_groups)."""
    return {traces[0] for traces in like_groups(data).values() if len(traces) > 1}


def step_kinds(summary):
    """How many traces average over several steady steps, have exactly one, or have no
    ProfilerStep#N at all (their CPU time per step is unknown; the whole trace is one step)."""
    stepped = summary["cpu_us_per_step"].notna()
    several = stepped & (summary["steps"] > 1)
    return int(several.sum()), int((stepped & ~several).sum()), int((~stepped).sum())


def steps_wording(summary):
    """What a per-step figure of these traces stands for, in a sentence's words: a mean over the
    steady steps only where a trace has several; one steady step's figures where it has one; the
    whole trace where it has no ProfilerStep#N."""
    several, one, none = step_kinds(summary)
    if not several and not one:
        return "no trace has ProfilerStep#N steps: each counts as one step, its figures the whole trace's"
    if several:
        lead = "per-step figures are means over the steady steps (all but the first)"
    elif none:
        lead = "per-step figures are each trace's one steady step"
    else:
        return "each trace has one steady step: per-step figures are that step's"
    extra = ["a trace with one steady step has that step's"] if several and one else []
    extra += ["a trace without ProfilerStep#N counts as one step, the whole trace"] if none else []
    return "; ".join([lead] + extra)


def all_captures(data):
    """True when every trace is a `tracekit capture` (it names its variant)."""
    return bool(data.traces["variant"].notna().all())


def table_heading(data):
    return f"{'Variants' if all_captures(data) else 'Traces'}, fastest first"


def step_noun(summary):
    """'steady step' where every trace averages over several steady steps, else 'step'."""
    several, one, none = step_kinds(summary)
    return "steady step" if not (one or none) else "step"


def timeline_wording(summary):
    """Which step a timeline lane shows, for these traces."""
    several, one, none = step_kinds(summary)
    parts = ["the steady step with the median GPU time"] if several else []
    parts += ["the one steady step" + (" where it has one" if several else "")] if one else []
    parts += ["the whole trace" + (" where it has no ProfilerStep#N" if several or one else
                                  " (no trace has ProfilerStep#N steps)")] if none else []
    return "; ".join(parts)


def present(value):
    """True when a cell holds a value (not None/NaN/NA)."""
    return value is not None and not pd.isna(value)
