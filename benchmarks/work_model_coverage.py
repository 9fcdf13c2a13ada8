"""How much of each GPU trace's kernel time the work models cover (kernels.flops and bytes known).

Loads every trace with GPU kernels in tests/data and sample_traces into a scratch database and
prints markdown: per trace, its kernels' GPU time, the share whose work (FLOPs and bytes) the
models give (of all its kernels, and of those whose launch the trace holds: a trace's first
kernels may have been launched before the profiler began, with no op to read shapes from), the
share with a roofline (the GPU's figures known too), the share whose work was inferred from
identical kernels or ops (kernels.work_source 'identical kernel' or 'identical op': launched before the
trace began, or replayed by a CUDA graph whose capture it does not hold), and,
when --before names a database of the same files loaded by an earlier tracekit, that database's
share (kernels.flops known) beside it; then the GPU time left unmodelled, by the op that launched
it and why; then two checks of the inferred work: each launched kernel's work against what the
rule would have given it had its launch been hidden, and each inferred kernel's time against its
identical kernels'.

    python benchmarks/work_model_coverage.py [--db /tmp/bench/work_models.duckdb] [--before OLD.duckdb]
        [--write benchmarks/work_model_coverage.md]
"""

import argparse
import sys
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's tracekit, not another the environment installed

from tracekit.ingest.loader import load_files  # noqa: E402
from tracekit.store.database import connect  # noqa: E402
# Not Kineto GPU traces, or not traces at all (HTA's critical path export, the captures' timings).
SKIP = {"hta_critical_path.json", "repeats.json", "truth.json"}

_PER_TRACE = """
SELECT trace, count(*) AS kernels, sum(dur_us) / 1000 AS gpu_ms,
       100 * sum(dur_us) FILTER (WHERE flops IS NOT NULL AND bytes IS NOT NULL) / sum(dur_us) AS modelled_pct,
       100 * sum(dur_us) FILTER (WHERE roofline_us IS NOT NULL) / sum(dur_us) AS roofline_pct,
       100 * sum(dur_us) FILTER (WHERE work_source IN ('identical kernel', 'identical op')) / sum(dur_us) AS inferred_pct,
       -- of the kernels whose launch is in the trace (the first may have been launched before it began)
       100 * sum(dur_us) FILTER (WHERE flops IS NOT NULL AND bytes IS NOT NULL AND cpu_op IS NOT NULL)
           / sum(dur_us) FILTER (WHERE cpu_op IS NOT NULL) AS launched_pct
FROM kernels GROUP BY trace HAVING sum(dur_us) > 0
"""
# The time left: by the op that launched it (the innermost), and why (kernels.work_missing).
_LEFT = """
SELECT coalesce(cpu_op, '(no launch in the trace)') AS op, work_missing AS why,
       count(DISTINCT trace) AS traces, sum(dur_us) / 1000 AS gpu_ms
FROM kernels
WHERE flops IS NULL OR bytes IS NULL
GROUP BY ALL ORDER BY gpu_ms DESC LIMIT 25
"""
# Leave one out: each launched kernel that was its op's only kernel, with known work, against the
# others of its name, grid and block (of other ops): where those all did one work, the inference
# rule would give it theirs had its launch been hidden. `differ`: it would have been wrong.
_LEAVE_ONE_OUT = """
WITH k AS (
    SELECT trace, name, grid, block, cpu_op_id, flops, bytes,
           count(*) OVER (PARTITION BY trace, cpu_op_id) AS op_kernels
    FROM kernels WHERE cpu_op_id IS NOT NULL AND grid IS NOT NULL AND block IS NOT NULL
), judged AS (
    SELECT a.trace, a.cpu_op_id, a.flops, a.bytes, count(DISTINCT (b.flops, b.bytes)) AS values,
           count(*) = count(b.flops) AND max(b.op_kernels) = 1 AS all_known,
           bool_or(b.flops = a.flops AND b.bytes = a.bytes) AS own
    FROM k a JOIN k b ON b.trace = a.trace AND b.name = a.name AND b.grid = a.grid AND b.block = a.block
         AND b.cpu_op_id <> a.cpu_op_id
    WHERE a.op_kernels = 1 AND a.flops IS NOT NULL
    GROUP BY ALL
)
SELECT trace, count(*) FILTER (WHERE values = 1 AND all_known AND own) AS same,
       count(*) FILTER (WHERE values = 1 AND all_known AND NOT own) AS differ
FROM judged GROUP BY trace
"""
# Each inferred kernel's time over the median of its identical launched kernels'.
_INFERRED_TIMES = """
WITH twins AS (
    SELECT trace, name, grid, block, median(dur_us) AS median_us FROM kernels WHERE cpu_op_id IS NOT NULL GROUP BY ALL
)
SELECT count(*), min(k.dur_us / t.median_us), quantile_cont(k.dur_us / t.median_us, 0.05),
       quantile_cont(k.dur_us / t.median_us, 0.95), max(k.dur_us / t.median_us), sum(k.dur_us) / 1000
FROM kernels k JOIN twins t USING (trace, name, grid, block) WHERE k.work_source IN ('identical kernel', 'identical op')
"""


def trace_files():
    found = sorted(p for folder in ("tests/data", "sample_traces") for p in (ROOT / folder).rglob("*.json*")
                   if p.name not in SKIP and not p.name.startswith("manifest") and "/cpu/" not in str(p))
    return found


def before_shares(path):
    if path is None:
        return {}
    con = duckdb.connect(str(path), read_only=True)
    try:
        return dict(con.execute("SELECT f.path, 100 * sum(k.dur_us) FILTER (WHERE k.flops IS NOT NULL) / sum(k.dur_us) "
                                "FROM kernels k JOIN trace_files f ON f.trace = k.trace "
                                "GROUP BY f.path HAVING sum(k.dur_us) > 0").fetchall())
    finally:
        con.close()


def measure(db, before):
    Path(db).unlink(missing_ok=True)
    con = connect(db)
    for path, result in load_files(con, trace_files()):
        if isinstance(result, Exception):
            raise SystemExit(f"{path}: {result}")
    rows = con.execute(f"SELECT f.path, m.* FROM ({_PER_TRACE}) m JOIN trace_files f ON f.trace = m.trace "
                       "ORDER BY f.path").fetchall()
    left = con.execute(_LEFT).fetchall()
    checks = con.execute(_LEAVE_ONE_OUT).fetchall()
    times = con.execute(_INFERRED_TIMES).fetchone()
    inferring = {t for (t,) in con.execute("SELECT DISTINCT trace FROM kernels "
                                           "WHERE work_source IN ('identical kernel', 'identical op')").fetchall()}
    con.close()
    shares = before_shares(before)
    lines = ["| trace file | kernels | GPU ms | modelled | of kernels launched in the trace | with roofline | "
             "inferred | before |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for path, _, kernels, gpu_ms, modelled, roofline, inferred, launched in rows:
        was = shares.get(path)
        shown = "n/a" if launched is None else f"{launched:.1f}%"
        lines.append(f"| {Path(path).relative_to(ROOT)} | {kernels} | {gpu_ms:,.1f} | {modelled or 0:.1f}% | {shown} | "
                     f"{roofline or 0:.1f}% | {inferred or 0:.1f}% | {'' if not shares else f'{was or 0:.1f}%'} |")
    reached = sum(1 for r in rows if (r[4] or 0) >= 90)
    launched = sum(1 for r in rows if (r[7] or 0) >= 90)
    lines += ["", f"{reached} of {len(rows)} traces have ≥ 90% of their GPU time modelled; {launched} have ≥ 90% of "
              "the GPU time of the kernels they hold the launch of.", "",
              "GPU time left unmodelled, by the op that launched it (all traces):", "",
              "| op | why | traces | GPU ms |", "|---|---|---:|---:|"]
    lines += [f"| {op} | {why} | {traces} | {gpu_ms:,.1f} |" for op, why, traces, gpu_ms in left]
    return "\n".join(lines + _checks(checks, times, inferring)) + "\n"


def _checks(checks, times, inferring):
    same = sum(r[1] for r in checks)
    wrong = [(trace, differ) for trace, _, differ in checks if differ]
    count, low, p5, p95, high, ms = times
    # the rule's own check should keep such a trace from inferring: say so where it did not
    where = ", ".join(f"{differ} in {trace}" + (" (and it inferred work!)" if trace in inferring else "")
                      for trace, differ in sorted(wrong, key=lambda r: -r[1]))
    return ["", "Inferred work, checked:", "",
            f"- Each launched kernel's work against what the rule would give it with its launch hidden: "
            f"{same:,} kernels would get their own back, {sum(d for _, d in wrong)} another's"
            + (f" ({where}; a trace where one would infers nothing)." if wrong else "."),
            f"- {count:,} kernels inferred ({ms:,.1f} GPU ms): each ran {low:.2f}x to {high:.2f}x the median time of "
            f"its identical kernels (5th to 95th percentile {p5:.2f}x to {p95:.2f}x)."]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="/tmp/bench/work_models.duckdb")
    parser.add_argument("--before", help="a database of the same traces loaded by an earlier tracekit")
    parser.add_argument("--write", help="also write the markdown to this file")
    args = parser.parse_args()
    Path(args.db).parent.mkdir(parents=True, exist_ok=True)
    text = measure(args.db, args.before)
    print(text, end="")
    if args.write:
        Path(args.write).write_text(text)


if __name__ == "__main__":
    main()
