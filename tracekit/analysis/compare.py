"""Comparing two traces, or two sets of runs: per-step figures with a confidence interval, the
change attributed to kernel classes, kernels or ops, the findings that appeared or went away, and
a verdict for CI.

A is the baseline, B the candidate; each side is one run (a trace) or several runs of one variant.
Every figure is per steady step (view steady_window), a side's the mean of its runs' means. The
interval (run_noise) is a bootstrap over each run's steps widened by a run-to-run term, measured
from the runs when a side has several, else a default per device. A change whose interval holds
zero is noise, not a regression.
"""

from tracekit.analysis import run_noise
from tracekit.analysis.diff_result import METRICS, DiffResult
from tracekit.analysis.fail_on import check, parse_condition
from tracekit.analysis.kernel_names import base_kernel_name
from tracekit.analysis.trace_lookup import traces_of
from tracekit.errors import TracekitError

__all__ = ["METRICS", "BY", "DiffResult", "diff", "parse_condition"]
BY = ("class", "kernel", "op")
# Times are summed in whole nanoseconds (sum(round(us * 1e3)) / 1e3), exact in any order: DuckDB's
# threads add their partial sums in any order, and a float sum's last bits would follow it.
_STEP_FIGURES = """
WITH w AS (SELECT step FROM steady_window WHERE trace = $t),
busy AS (SELECT step, sum(round(busy_us * 1e3)) / 1e3 AS busy, sum(round(kernel_sum_us * 1e3)) / 1e3 AS kernel_us, sum(kernels) AS kernels
         FROM gpu_busy WHERE trace = $t GROUP BY step),
copies AS (SELECT step, count(*) AS n, sum(bytes) AS bytes FROM memcpy WHERE trace = $t GROUP BY step)
SELECT w.step,
       CASE WHEN (SELECT count(*) FROM gpu_busy WHERE trace = $t) > 0 THEN coalesce(b.busy, 0) END,
       coalesce(b.kernel_us, 0), coalesce(b.kernels, 0), coalesce(c.n, 0),
       CASE WHEN c.n IS NULL THEN 0 ELSE c.bytes END,
       (SELECT s.dur_us FROM steps s WHERE s.trace = $t AND s.step = w.step)
FROM w
LEFT JOIN busy b ON b.step IS NOT DISTINCT FROM w.step
LEFT JOIN copies c ON c.step IS NOT DISTINCT FROM w.step
ORDER BY w.step NULLS FIRST
"""
# The GPU work of a trace's steady window by what it is attributed to: the kernel's class (or
# memcpy, memset), its name (cut to its base name in Python: kernel_names.base_kernel_name), or
# its launching op.
_WORK = """
WITH work AS (
    SELECT k.step, coalesce(k.kernel_class, 'unclassified') AS class, k.name, k.cpu_op, k.dur_us FROM kernels k
    WHERE k.trace = $t
    UNION ALL SELECT m.step, 'memcpy', m.name, m.cpu_op, m.dur_us FROM memcpy m WHERE m.trace = $t
    UNION ALL SELECT z.step, 'memset', z.name, z.cpu_op, z.dur_us FROM memset z WHERE z.trace = $t
)
SELECT {key} AS key, count(*) AS n, sum(round(w.dur_us * 1e3)) / 1e3 AS us
FROM work w JOIN steady_window s ON s.trace = $t AND s.step IS NOT DISTINCT FROM w.step
GROUP BY key
"""
_KEYS = {"class": "w.class",
         "kernel": "w.name",
         "op": "coalesce(w.cpu_op, '(no launching op)')"}


def diff(con, a, b, *, by="class", fail_on=(), top=10, findings=True, labels=None):
    """Compares `b` against baseline `a` in the database of `con`; returns a DiffResult. Each side is
    a trace name, a glob of names or a list of names (several runs of one variant). `labels` names
    the sides in the result (default: as given); `findings=False` leaves the finding rules out (the
    slowest part), and with them the findings' change and `finding:` conditions."""
    if by not in BY:
        raise TracekitError(f"--by {by!r}: choose one of {', '.join(BY)}")
    conditions = [parse_condition(text) if isinstance(text, str) else text for text in fail_on]
    if not findings and any(c.finding for c in conditions):
        raise TracekitError("a finding: condition needs the findings: leave findings on")
    runs = (traces_of(con, a), traces_of(con, b))
    series = [[_series(con, trace) for trace in side] for side in runs]
    devices = [_device(side) for side in series]
    figures = [_figure(metric, i, series, devices) for i, metric in enumerate(METRICS)]
    steps = tuple(sum(len(run) for run in side) for side in series)
    attribution = _attribution(con, runs, by, steps, top)
    appeared, gone = _findings_change(con, runs) if findings else ([], [])
    label_a, label_b = labels or (_label(a), _label(b))
    result = DiffResult(label_a, label_b, steps, figures, attribution, by, appeared, gone, runs=runs,
                        untrusted_because=run_noise.untrusted_because(
                            runs, [[len(run) for run in side] for side in series], devices),
                        unlike_because=_unlike_because(con, runs), gated=bool(conditions))
    for condition in conditions:
        outcome = check(condition, result)
        if outcome is not None:
            (result.failed if outcome[0] == "fail" else result.undecided).append(outcome[1])
    return result


# What a capture records of its shape (tracekit capture's metadata); a foreign trace has none.
_SIDE_SETUP = """
SELECT -- a GPU whose name the trace leaves out (an AMD one's, often) by its maker and arch
       coalesce(device_name, CASE WHEN vendor IS NOT NULL OR gpu_arch IS NOT NULL
                                  THEN concat_ws(' ', upper(vendor), gpu_arch, 'GPU') END, 'no GPU') AS device,
       CASE WHEN json_extract_string(metadata, '$.seq_len') IS NOT NULL THEN
            concat_ws('x', json_extract_string(metadata, '$.batch'), json_extract_string(metadata, '$.heads'),
                      json_extract_string(metadata, '$.seq_len'), json_extract_string(metadata, '$.head_dim'))
            || ' ' || coalesce(json_extract_string(metadata, '$.dtype'), '') END AS shape
FROM traces WHERE trace = $t
"""


def _unlike_because(con, runs):
    """How the two sides differ besides their code: the device they ran on, the shape they ran at
    (where both sides' captures record one). A change between them may be that, not the code's."""
    sides = [[con.execute(_SIDE_SETUP, {"t": trace}).fetchone() for trace in side] for side in runs]
    reasons = []
    for what, index in (("devices", 0), ("shapes", 1)):
        a, b = (sorted({row[index] for row in side if row and row[index]}) for side in sides)
        if a and b and a != b:
            reasons.append(f"the sides ran on different {what}: {', '.join(a)} against {', '.join(b)}, "
                           "so a change may be theirs, not the code's")
    return reasons


def _label(side):
    return side if isinstance(side, str) else ", ".join(side)


def steady_step_figures(con, trace):
    """{metric: [its value in each steady step]} of one trace, steps without the figure left out."""
    series = _series(con, trace)
    return {metric: [step[i] for step in series if step[i] is not None] for i, metric in enumerate(METRICS)}


def _series(con, trace):
    rows = con.execute(_STEP_FIGURES, {"t": trace}).fetchall()
    return [tuple(None if v is None else float(v) for v in row[1:]) for row in rows]


def _device(runs):
    """'gpu' when any run of a side has GPU work (a GPU busy figure), else 'cpu': whose default
    run-to-run term applies."""
    busy = list(METRICS).index("gpu_us_per_step")
    return "gpu" if any(step[busy] is not None for run in runs for step in run) else "cpu"


def _figure(metric, index, series, devices):
    """One metric's figure: each side's level (the mean of its runs' means), the change, its 95%
    interval and whether that leaves out zero, and the run-to-run sd the interval took (in %)."""
    sides = [[values for run in side if (values := [step[index] for step in run if step[index] is not None])]
             for side in series]
    figure = {"metric": metric, "a": None, "b": None, "change": None, "change_pct": None,
              "ci_low": None, "ci_high": None, "significant": None, "run_sd_pct": None, "run_sd_from": None}
    if not all(sides):
        return figure
    level_a, level_b = (sum(sum(run) / len(run) for run in side) / len(side) for side in sides)
    change = level_b - level_a
    noises = run_noise.run_to_run(metric, sides, devices)
    low, high = run_noise.interval(sides, noises)
    figure.update(a=level_a, b=level_b, change=change, change_pct=100.0 * change / level_a if level_a else None,
                  ci_low=low, ci_high=high, significant=bool(low > 0 or high < 0),
                  run_sd_pct=100.0 * max(n.sd for n in noises), run_sd_from=noises[0].source)
    return figure


def _attribution(con, runs, by, steps, top):
    """The change per steady step by key, each side's work summed over its runs and divided by
    all its steps."""
    side_a, side_b = (_side_work(con, traces, by) for traces in runs)
    steps_a, steps_b = (max(n, 1) for n in steps)
    rows = []
    for key in side_a.keys() | side_b.keys():
        n_a, us_a = side_a.get(key, (0, 0.0))
        n_b, us_b = side_b.get(key, (0, 0.0))
        per_a, per_b = us_a / steps_a, us_b / steps_b
        rows.append({"key": key, "a_us_per_step": per_a, "b_us_per_step": per_b, "change_us_per_step": per_b - per_a,
                     "a_per_step": n_a / steps_a, "b_per_step": n_b / steps_b,
                     "status": "appeared" if key not in side_a else "disappeared" if key not in side_b else ""})
    total = sum(abs(r["change_us_per_step"]) for r in rows) or 1.0
    for row in rows:
        row["share_pct"] = 100.0 * abs(row["change_us_per_step"]) / total
    rows.sort(key=lambda r: (-abs(r["change_us_per_step"]), str(r["key"])))
    shown = rows[:top] + [r for r in rows[top:] if r["status"]]
    return shown


def _side_work(con, traces, by):
    work = {}
    for trace in traces:
        for key, (n, us) in _work(con, trace, by).items():
            n_so_far, us_so_far = work.get(key, (0, 0.0))
            work[key] = (n_so_far + n, us_so_far + us)
    return work


def _work(con, trace, by):
    """{key: (count, µs)} of the trace's steady GPU work; by kernel, the instantiations of one
    kernel template (`void f<float>(float*)`, `void f<half>(half*)`) are one key, `f`."""
    rows = con.execute(_WORK.format(key=_KEYS[by]), {"t": trace}).fetchall()
    key_of = base_kernel_name if by == "kernel" else (lambda key: key)
    work = {}
    for key, n, us in rows:
        n_so_far, us_so_far = work.get(key_of(key), (0, 0.0))
        work[key_of(key)] = (n_so_far + n, us_so_far + (us or 0.0))
    return work


def _rules_found(found):
    return {rule: title for rule, title in zip(found["rule"], found["title"])}


def _findings_change(con, runs):
    """(appeared, gone): the rules found in some run of B and in no run of A, and the reverse."""
    from concurrent.futures import ThreadPoolExecutor

    from tracekit.analysis.findings_engine import run_findings
    from tracekit.store.database import second_connections

    traces = list(dict.fromkeys(runs[0] + runs[1]))
    make_connection = second_connections(con)

    def rules_of(trace):
        cursor = make_connection()  # a connection of its own per thread, on the same database
        try:
            found = run_findings(cursor, trace=trace, replay=False)
        finally:
            cursor.close()
        return _rules_found(found)

    if make_connection is None:  # not DuckDB's: one at a time on this connection
        found = {trace: _rules_found(run_findings(con, trace=trace, replay=False)) for trace in traces}
    else:
        # Two at once: much of a rule's plan runs on one core (sorts, windows over one thread's ops).
        with ThreadPoolExecutor(max_workers=2) as pool:
            found = dict(zip(traces, pool.map(rules_of, traces)))
    before, after = ({rule: title for trace in side for rule, title in found[trace].items()} for side in runs)
    appeared = sorted((rule, after[rule]) for rule in after.keys() - before.keys())
    gone = sorted((rule, before[rule]) for rule in before.keys() - after.keys())
    return appeared, gone
