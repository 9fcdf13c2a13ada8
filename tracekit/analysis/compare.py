"""Comparing two traces: per-step figures with a confidence interval, the change attributed to
kernel classes, kernels or ops, the findings that appeared or went away, and a verdict for CI.

A is the baseline, B the candidate. Every figure is per steady step (view steady_window), and the
interval is a bootstrap over steps: each side's steps are resampled with replacement, the
difference of the means taken each time, and the 2.5th to 97.5th percentile kept. A change whose
interval holds zero is noise, not a regression.
"""

import re
from dataclasses import dataclass, field

from tracekit.analysis.kernel_names import base_kernel_name
from tracekit.errors import TracekitError

METRICS = {
    "gpu_us_per_step": "GPU busy time per step, µs (union of kernels, copies and fills)",
    "kernel_us_per_step": "summed kernel time per step, µs",
    "kernels_per_step": "kernel launches per step",
    "memcpy_per_step": "memcpys per step",
    "memcpy_bytes_per_step": "bytes copied per step (copies of known size)",
    "cpu_us_per_step": "CPU span of the step, µs (ProfilerStep#N)",
}
BY = ("class", "kernel", "op")
BOOTSTRAP_SAMPLES = 2000
_STEP_FIGURES = """
WITH w AS (SELECT step FROM steady_window WHERE trace = $t),
busy AS (SELECT step, sum(busy_us) AS busy, sum(kernel_sum_us) AS kernel_us, sum(kernels) AS kernels
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
SELECT {key} AS key, count(*) AS n, sum(w.dur_us) AS us
FROM work w JOIN steady_window s ON s.trace = $t AND s.step IS NOT DISTINCT FROM w.step
GROUP BY key
"""
_KEYS = {"class": "w.class",
         "kernel": "w.name",
         "op": "coalesce(w.cpu_op, '(no launching op)')"}
_FAIL_ON = re.compile(r"^\s*(\w+)\s*(>=|<=|>|<)\s*([+-]?)(\d+(?:\.\d+)?)\s*(%?)\s*$")


@dataclass
class Condition:
    text: str
    metric: str = None
    op: str = None
    value: float = 0.0
    relative: bool = False
    change: bool = False  # compares the change (signed value) rather than B's own value
    finding: str = None


@dataclass
class DiffResult:
    a: str
    b: str
    steps: tuple
    figures: list  # dicts: metric, a, b, change, change_pct, ci_low, ci_high, significant
    attribution: list  # dicts: key, a_us_per_step, b_us_per_step, change_us_per_step, share_pct, ...
    by: str
    findings_appeared: list = field(default_factory=list)  # (rule, title)
    findings_gone: list = field(default_factory=list)
    failed: list = field(default_factory=list)  # (condition text, why)

    @property
    def verdict(self):
        return "fail" if self.failed else "pass"


def parse_condition(text):
    """A --fail-on expression: `metric>+3%` (relative change), `metric>+100` (absolute change),
    `metric>0` (B's value), or `finding:rule` (the rule's finding appears in B)."""
    if text.startswith("finding:"):
        rule = text[len("finding:"):].strip()
        if not rule:
            raise TracekitError(f"--fail-on {text!r}: name a rule after finding:")
        from tracekit.analysis.findings_engine import rules
        known = sorted(rules())
        if rule not in known:
            # A misspelt rule would never appear in B: a CI gate that could never fail.
            raise TracekitError(f"--fail-on {text!r}: no finding rule {rule!r} (rules: {', '.join(known)})")
        return Condition(text, finding=rule)
    match = _FAIL_ON.match(text)
    if match is None:
        raise TracekitError(f"--fail-on {text!r}: write METRIC>VALUE, METRIC>+N% or finding:RULE "
                            f"(metrics: {', '.join(METRICS)})")
    metric, op, sign, number, pct = match.groups()
    if metric not in METRICS:
        raise TracekitError(f"--fail-on {text!r}: no metric {metric!r} (metrics: {', '.join(METRICS)})")
    value = float(number) * (-1 if sign == "-" else 1)
    return Condition(text, metric, op, value, relative=bool(pct), change=bool(sign or pct))


def diff(con, a, b, *, by="class", fail_on=(), top=10):
    """Compares traces `a` (baseline) and `b` in the database of `con`; returns a DiffResult."""
    from tracekit.analysis.trace_lookup import trace_row

    if by not in BY:
        raise TracekitError(f"--by {by!r}: choose one of {', '.join(BY)}")
    conditions = [parse_condition(text) if isinstance(text, str) else text for text in fail_on]
    for name in (a, b):
        trace_row(con, name)
    series_a, series_b = _series(con, a), _series(con, b)
    figures = [_figure(metric, i, series_a, series_b) for i, metric in enumerate(METRICS)]
    attribution = _attribution(con, a, b, by, len(series_a), len(series_b), top)
    appeared, gone = _findings_change(con, a, b)
    result = DiffResult(a, b, (len(series_a), len(series_b)), figures, attribution, by, appeared, gone)
    result.failed = [outcome for c in conditions if (outcome := _check(c, result)) is not None]
    return result


def _series(con, trace):
    rows = con.execute(_STEP_FIGURES, {"t": trace}).fetchall()
    return [tuple(None if v is None else float(v) for v in row[1:]) for row in rows]


def _figure(metric, index, series_a, series_b):
    import numpy as np

    a = [row[index] for row in series_a if row[index] is not None]
    b = [row[index] for row in series_b if row[index] is not None]
    mean_a = float(np.mean(a)) if a else None
    mean_b = float(np.mean(b)) if b else None
    figure = {"metric": metric, "a": mean_a, "b": mean_b, "change": None, "change_pct": None,
              "ci_low": None, "ci_high": None, "significant": None}
    if mean_a is None or mean_b is None:
        return figure
    change = mean_b - mean_a
    figure.update(change=change, change_pct=100.0 * change / mean_a if mean_a else None)
    if len(a) >= 2 and len(b) >= 2:
        rng = np.random.default_rng(0)  # the same interval for the same traces, run after run
        draws_a = rng.choice(a, size=(BOOTSTRAP_SAMPLES, len(a))).mean(axis=1)
        draws_b = rng.choice(b, size=(BOOTSTRAP_SAMPLES, len(b))).mean(axis=1)
        low, high = np.percentile(draws_b - draws_a, [2.5, 97.5])
        figure.update(ci_low=float(low), ci_high=float(high), significant=bool(low > 0 or high < 0))
    else:
        figure["significant"] = change != 0  # one step a side: no spread to judge noise by
    return figure


def _attribution(con, a, b, by, steps_a, steps_b, top):
    side_a, side_b = _work(con, a, by), _work(con, b, by)
    rows = []
    for key in side_a.keys() | side_b.keys():
        n_a, us_a = side_a.get(key, (0, 0.0))
        n_b, us_b = side_b.get(key, (0, 0.0))
        per_a, per_b = us_a / max(steps_a, 1), us_b / max(steps_b, 1)
        rows.append({"key": key, "a_us_per_step": per_a, "b_us_per_step": per_b, "change_us_per_step": per_b - per_a,
                     "a_per_step": n_a / max(steps_a, 1), "b_per_step": n_b / max(steps_b, 1),
                     "status": "appeared" if key not in side_a else "disappeared" if key not in side_b else ""})
    total = sum(abs(r["change_us_per_step"]) for r in rows) or 1.0
    for row in rows:
        row["share_pct"] = 100.0 * abs(row["change_us_per_step"]) / total
    rows.sort(key=lambda r: (-abs(r["change_us_per_step"]), str(r["key"])))
    shown = rows[:top] + [r for r in rows[top:] if r["status"]]
    return shown


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


def _findings_change(con, a, b):
    from concurrent.futures import ThreadPoolExecutor

    from tracekit.analysis.findings_engine import run_findings

    catalog = con.execute("SELECT current_database()").fetchone()[0]

    def rules_of(trace):
        cursor = con.cursor()  # a connection of its own per thread, on the same database
        try:
            cursor.execute(f'USE "{catalog}"')  # a cursor starts in its instance's default catalog
            found = run_findings(cursor, trace=trace)
        finally:
            cursor.close()
        return {rule: title for rule, title in zip(found["rule"], found["title"])}

    # Side by side: much of a rule's plan runs on one core (sorts, windows over one thread's ops).
    with ThreadPoolExecutor(max_workers=2) as pool:
        before, after = pool.map(rules_of, (a, b))
    appeared = sorted((rule, after[rule]) for rule in after.keys() - before.keys())
    gone = sorted((rule, before[rule]) for rule in before.keys() - after.keys())
    return appeared, gone


def _check(condition, result):
    """(condition, why) when the condition holds and the change is beyond noise, else None."""
    if condition.finding is not None:
        hit = [title for rule, title in result.findings_appeared if rule == condition.finding]
        return (condition.text, f"{condition.finding} appeared in {result.b}: {hit[0]}") if hit else None
    figure = next(f for f in result.figures if f["metric"] == condition.metric)
    if figure["change"] is None:
        return None
    if condition.relative:
        if figure["change_pct"] is None:
            return None
        measured, unit = figure["change_pct"], "%"
    elif condition.change:
        measured, unit = figure["change"], ""
    else:
        measured, unit = figure["b"], ""
    holds = {">": measured > condition.value, ">=": measured >= condition.value,
             "<": measured < condition.value, "<=": measured <= condition.value}[condition.op]
    if not holds or not figure["significant"]:
        return None
    what = "changed by" if condition.change else f"is {_num(figure['b'])} in {result.b}, changed by"
    return (condition.text, f"{condition.metric} {what} {_num(figure['change'], '+')} "
                            f"({_pct(figure['change_pct'])}), 95% interval {_interval(figure)}")


def _num(value, sign=""):
    return f"{value:{sign},.0f}" if float(value).is_integer() else f"{value:{sign},.3f}"


def _pct(value):
    return "from zero" if value is None else f"{value:+.1f}%"


def _interval(figure):
    if figure["ci_low"] is None:
        return "none (one step a side)"
    return f"[{_num(figure['ci_low'], '+')}, {_num(figure['ci_high'], '+')}]"
