"""What the profiler costs the CPU per op it records, measured from captures timed without it.

A loop the CPU bounds runs its step in its CPU time; profiled, each CPU op the trace records costs
the thread more (the profiler's callbacks, record_shapes' copies of the inputs' sizes). So the
traced step less the unprofiled one, over the ops a step records, is that cost. It is measured on
the fixed ("after") loops of tests/data/h200/fixes whose unprofiled step is CPU-bound (at least
1.3x the GPU's busy time) and used by `whatif --apply no-profiler:US` to replay the "before" loops
as they run without the profiler (benchmarks/findings_vs_fixes.py). Then how well that replay
fits: each loop's steady step replayed with `no-profiler` against its unprofiled rounds.

    python benchmarks/profiler_cost.py [--db /tmp/bench/fixes.duckdb]
"""

import argparse
import csv
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXES = ROOT / "tests" / "data" / "h200" / "fixes"
CPU_BOUND = 1.3  # an unprofiled step this much longer than the GPU's busy time is the CPU's


def unprofiled_rounds():
    """{loop: [step_us of each of repeats.csv's unprofiled rounds]}."""
    rounds = {}
    for row in csv.DictReader(open(FIXES / "repeats.csv")):
        if row["phase"] == "unprofiled":
            rounds.setdefault(row["loop"], []).append(float(row["step_us"]))
    return rounds


def unprofiled_steps():
    """{loop: median step_us of repeats.csv's unprofiled rounds}."""
    return {loop: statistics.median(values) for loop, values in unprofiled_rounds().items()}


def cost_per_op(con, prefix=""):
    """(median µs per recorded op, [(loop, traced, unprofiled, busy, ops per step, µs per op)]) over
    the "after" loops the CPU bounds without the profiler; `con` holds tests/data/h200/fixes, each
    trace named `prefix` + its loop."""
    truth = {row["loop"]: row for row in csv.DictReader(open(FIXES / "truth.csv"))}
    unprofiled = unprofiled_steps()
    rows = []
    for loop, traced, ops in con.execute(
            """SELECT s.trace, avg(s.step_us), (SELECT count(*) FROM cpu_ops o JOIN steady_steps w USING (trace, step)
                                                 WHERE o.trace = s.trace) / count(*)
               FROM step_bounds s JOIN steady_steps USING (trace, step) GROUP BY s.trace ORDER BY s.trace""").fetchall():
        loop = loop[len(prefix):] if loop.startswith(prefix) else None
        row = truth.get(loop)
        if row is None or row["role"] != "after" or loop not in unprofiled:
            continue
        busy = float(row["gpu_busy_us"])
        if unprofiled[loop] >= CPU_BOUND * busy and ops:
            rows.append((loop, traced, unprofiled[loop], busy, ops, (traced - unprofiled[loop]) / ops))
    return (statistics.median(r[-1] for r in rows) if rows else None), rows


def replay_fit(con, cost, prefix=""):
    """[(loop, role, replayed µs, replayed without the profiler µs, unprofiled rounds)] for each
    loop of repeats.csv: how well `no-profiler:cost` replays the loop as it runs unprofiled."""
    from tracekit.replay.savings import TraceReplay

    roles = {row["loop"]: row["role"] for row in csv.DictReader(open(FIXES / "truth.csv"))}
    rows = []
    for loop, rounds in sorted(unprofiled_rounds().items()):
        replayed = TraceReplay(con, prefix + loop).saving(f"no-profiler:{cost:.1f}")
        rows.append((loop, roles.get(loop), replayed.step_us, replayed.fixed_us, rounds))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="/tmp/bench/fixes.duckdb")
    args = parser.parse_args()
    from tracekit.ingest.loader import load_file
    from tracekit.store.database import connect, connect_for_queries

    Path(args.db).parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", ".wal"):
        Path(args.db + suffix).unlink(missing_ok=True)
    con = connect(args.db)
    for file in sorted(FIXES.glob("*.json.gz")):
        load_file(con, file)
    con.close()
    cost, rows = cost_per_op(connect_for_queries(args.db))
    print("| loop (fixed, CPU-bound) | traced µs/step | unprofiled µs/step | GPU busy µs/step | ops/step | µs per op |")
    print("|---|---:|---:|---:|---:|---:|")
    for loop, traced, unprofiled, busy, ops, per_op in rows:
        print(f"| `{loop}` | {traced:,.0f} | {unprofiled:,.0f} | {busy:,.0f} | {ops:,.0f} | {per_op:.1f} |")
    print(f"\nThe profiler's cost per recorded op: {cost:.1f} µs (median)\n")
    print(f"| loop | role | replayed µs/step | without the profiler ({cost:.1f} µs an op) | unprofiled: median [min-max] | error |")
    print("|---|---|---:|---:|---:|---:|")
    errors = []
    for loop, role, replayed, without, rounds in replay_fit(connect_for_queries(args.db), cost):
        median = statistics.median(rounds)
        errors.append(100 * (without - median) / median)
        print(f"| `{loop}` | {role} | {replayed:,.0f} | {without:,.0f} | {median:,.0f} [{min(rounds):,.0f}-{max(rounds):,.0f}] | "
              f"{errors[-1]:+.0f}% |")
    print(f"\n|error|: median {statistics.median(map(abs, errors)):.1f}%, mean {statistics.mean(map(abs, errors)):.1f}%; "
          f"{sum(abs(e) <= 25 for e in errors)} of {len(errors)} loops within 25%")


if __name__ == "__main__":
    main()
