"""How much of each GPU trace's kernel time the work models cover (kernels.flops and bytes known).

Loads every trace with GPU kernels in tests/data and sample_traces into a scratch database and
prints markdown: per trace, its kernels' GPU time, the share whose work (FLOPs and bytes) the
models give (of all its kernels, and of those whose launch the trace holds: a trace's first
kernels may have been launched before the profiler began, with no op to read shapes from), the
share with a roofline (the GPU's figures known too), and, when --before names a database of the
same files loaded by an earlier tracekit, that database's share (kernels.flops known) beside it;
then the GPU time left unmodelled, by the op that launched it and why.

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
# Traces that are not Kineto GPU traces, or not traces at all (HTA's critical path export).
SKIP = {"hta_critical_path.json"}

_PER_TRACE = """
SELECT trace, count(*) AS kernels, sum(dur_us) / 1000 AS gpu_ms,
       100 * sum(dur_us) FILTER (WHERE flops IS NOT NULL AND bytes IS NOT NULL) / sum(dur_us) AS modelled_pct,
       100 * sum(dur_us) FILTER (WHERE roofline_us IS NOT NULL) / sum(dur_us) AS roofline_pct,
       -- of the kernels whose launch is in the trace (the first may have been launched before it began)
       100 * sum(dur_us) FILTER (WHERE flops IS NOT NULL AND bytes IS NOT NULL AND cpu_op IS NOT NULL)
           / sum(dur_us) FILTER (WHERE cpu_op IS NOT NULL) AS launched_pct
FROM kernels GROUP BY trace HAVING sum(dur_us) > 0
"""
# The time left: by the op that launched it (the innermost), and whether that op recorded shapes.
_LEFT = """
SELECT coalesce(k.cpu_op, '(no launch in the trace)') AS op,
       CASE WHEN k.cpu_op IS NULL THEN 'launch outside the trace'
            WHEN o.input_dims IS NULL THEN 'no shapes recorded'
            WHEN k.work_family IS NULL THEN 'no formula'
            ELSE 'shapes incomplete (tensor list, no dtype, no is_causal)' END AS why,
       count(DISTINCT k.trace) AS traces, sum(k.dur_us) / 1000 AS gpu_ms
FROM kernels k JOIN trace_files f ON f.trace = k.trace
LEFT JOIN cpu_op_rows o ON o.trace_id = f.trace_id AND o.op_id = k.cpu_op_id
WHERE k.flops IS NULL OR k.bytes IS NULL
GROUP BY ALL ORDER BY gpu_ms DESC LIMIT 25
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
    con.close()
    shares = before_shares(before)
    lines = ["| trace file | kernels | GPU ms | modelled | of kernels launched in the trace | with roofline | before |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for path, _, kernels, gpu_ms, modelled, roofline, launched in rows:
        was = shares.get(path)
        shown = "n/a" if launched is None else f"{launched:.1f}%"
        lines.append(f"| {Path(path).relative_to(ROOT)} | {kernels} | {gpu_ms:,.1f} | {modelled or 0:.1f}% | {shown} | "
                     f"{roofline or 0:.1f}% | {'' if not shares else f'{was or 0:.1f}%'} |")
    reached = sum(1 for r in rows if (r[4] or 0) >= 90)
    launched = sum(1 for r in rows if (r[6] or 0) >= 90)
    lines += ["", f"{reached} of {len(rows)} traces have ≥ 90% of their GPU time modelled; {launched} have ≥ 90% of "
              "the GPU time of the kernels they hold the launch of.", "",
              "GPU time left unmodelled, by the op that launched it (all traces):", "",
              "| op | why | traces | GPU ms |", "|---|---|---:|---:|"]
    lines += [f"| {op} | {why} | {traces} | {gpu_ms:,.1f} |" for op, why, traces, gpu_ms in left]
    return "\n".join(lines) + "\n"


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
