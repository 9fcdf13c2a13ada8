"""What the profiler costs the CPU per op it records, measured from captures timed without it, and
estimated from each trace alone.

A loop the CPU bounds runs its step in its CPU time; profiled, each CPU op the trace records costs
the thread more (the profiler's callbacks, record_shapes' copies of the inputs' sizes). So the
traced step less the unprofiled one, over the ops a step records, is that cost. It is measured on
the fixed ("after") loops of tests/data/h200/fixes whose unprofiled step is CPU-bound (at least
1.3x the GPU's busy time) and used by `whatif --apply no-profiler:US` to replay the "before" loops
as they run without the profiler (benchmarks/findings_vs_fixes.py). Then how well that replay
fits: each loop's steady step replayed with `no-profiler` against its unprofiled rounds.

The trace's own estimate (tracekit.replay.profiler_cost: COST_PER_GAP times the median gap between
ops C++ calls back to back) against the measured cost of every CPU-bound capture on two hosts: the
loops of tests/data/h200/fixes (CPU-bound: unprofiled step 1.3x the GPU's busy time or more) and
the 12 captures of tests/data/h200/item_rounds (unprofiled: the median of their 6 rounds). The
median of measured cost over gap is COST_PER_GAP; then each loop replayed with `no-profiler` (the
trace's estimate) against its unprofiled rounds.

With --leases, every lease instead: each folder of tests/data whose timings.csv holds each loop's
unprofiled rounds before any profiler ran in its process (capture/fix_rounds.py, model_pairs.py:
nine H100 and H200 hosts), its CPU-bound captures (unprofiled step 1.3x the GPU's busy time or more,
200 recorded ops a step or more, traced slower than unprofiled), measured cost per op over the
sibling gap, per lease; how far COST_PER_GAP and the median of the other leases (each lease left
out in turn) miss each capture's measured cost; and the other features of a trace tried as the
host's pace (a launch call's median time, a view op's).

    python benchmarks/profiler_cost.py [--db /tmp/bench/fixes.duckdb]
    python benchmarks/profiler_cost.py --leases [--db /tmp/bench/leases.duckdb]
"""

import argparse
import csv
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXES = ROOT / "tests" / "data" / "h200" / "fixes"
ROUNDS = ROOT / "tests" / "data" / "h200" / "item_rounds"
H100_ROUNDS = ROOT / "tests" / "data" / "h100" / "fix_rounds"  # a third host: every loop timed in its capture's process
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
    loop of repeats.csv: how well `no-profiler:cost` (cost None: the trace's own estimate) replays
    the loop as it runs unprofiled."""
    from tracekit.replay.savings import TraceReplay
    from tracekit.replay.whatif import whatif

    roles = {row["loop"]: row["role"] for row in csv.DictReader(open(FIXES / "truth.csv"))}
    rows = []
    for loop, rounds in sorted(unprofiled_rounds().items()):
        replayed = whatif(con, prefix + loop, []).mean("replayed_us")
        without = TraceReplay(con, prefix + loop).saving("no-profiler" if cost is None else f"no-profiler:{cost:.1f}")
        # a trace with too few gaps to estimate from is replayed as traced
        rows.append((loop, roles.get(loop), replayed, replayed if without.fixed_us is None else without.fixed_us, rounds))
    return rows


def round_timings():
    """{(phase, loop): step_us} of item_rounds/timings.csv (pre0-2, post0-2 unprofiled rounds, truth0-3
    right after each round's capture)."""
    rows = [line.split(",") for line in (ROUNDS / "timings.csv").read_text().splitlines() if line]
    return {(row[0], row[1]): float(row[2]) for row in rows if row[0] != "cpu"}


def h100_rounds():
    """{loop: [step_us of each round before any profiler ran in its process]} of
    tests/data/h100/fix_rounds (`pre`: after the traces a CPU-bound loop runs up to a third slower)."""
    rounds = {}
    for row in csv.DictReader(open(H100_ROUNDS / "timings.csv")):
        if row["phase"] == "pre":
            rounds.setdefault(row["loop"], []).append(float(row["step_us"]))
    return rounds


def measured_against_estimated(fixes_con, rounds_con, h100_con=None):
    """[(host, capture, ops per step, measured µs per op, median sibling gap µs)] of every CPU-bound
    capture: the fixes/ loops (unprofiled: repeats.csv's median), item_rounds' captures
    (unprofiled: the median of the loop's 6 unprofiled rounds) and, with `h100_con`, the H100
    host's fix_rounds (unprofiled: the median of the loop's 7 rounds before the traces, CPU-bound as fixes/ is,
    against the trace's own GPU busy time)."""
    from tracekit.replay.profiler_cost import sibling_gap_us

    truth = {row["loop"]: float(row["gpu_busy_us"]) for row in csv.DictReader(open(FIXES / "truth.csv"))}
    timings = round_timings()
    rows = []
    for host, con in (("fixes", fixes_con), ("item_rounds", rounds_con)):
        for trace, traced, ops in _traced_steps(con):
            if host == "fixes":
                unprofiled = unprofiled_steps().get(trace)
                if unprofiled is None or unprofiled < CPU_BOUND * truth[trace]:
                    continue
            else:
                loop = trace.rsplit("_", 1)[0]
                unprofiled = statistics.median(us for (phase, name), us in timings.items()
                                               if name == loop and phase[:3] in ("pre", "pos"))
            rows.append((host, trace, ops, (traced - unprofiled) / ops, sibling_gap_us(con, trace)[0]))
    if h100_con is not None:
        rounds = h100_rounds()
        busy = dict(h100_con.execute("SELECT trace, gpu_us_per_step FROM step_totals").fetchall())
        for trace, traced, ops in _traced_steps(h100_con):
            unprofiled = statistics.median(rounds[trace]) if trace in rounds else None
            gap = sibling_gap_us(h100_con, trace)[0]
            if unprofiled is None or busy.get(trace) is None or unprofiled < CPU_BOUND * busy[trace] or gap is None:
                continue
            rows.append(("h100 fix_rounds", trace, ops, (traced - unprofiled) / ops, gap))
    return rows


def _traced_steps(con):
    return con.execute("""SELECT s.trace, avg(s.step_us), (SELECT count(*) FROM cpu_ops o JOIN steady_steps w
                          USING (trace, step) WHERE o.trace = s.trace) / count(*)
                          FROM step_bounds s JOIN steady_steps USING (trace, step) GROUP BY s.trace
                          ORDER BY s.trace""").fetchall()


def _load(db, folder):
    return _load_files(db, sorted(folder.glob("*.json.gz")))


def _load_files(db, files):
    from tracekit.ingest.loader import load_file
    from tracekit.store.database import connect, connect_for_queries

    Path(db).parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", ".wal"):
        Path(db + suffix).unlink(missing_ok=True)
    con = connect(db)
    for file in files:
        load_file(con, file)
    con.close()
    return connect_for_queries(db)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="/tmp/bench/fixes.duckdb")
    parser.add_argument("--leases", action="store_true", help="every lease's CPU-bound captures (see above)")
    args = parser.parse_args()
    from tracekit.replay.profiler_cost import COST_PER_GAP

    if args.leases:
        leases_table(lease_captures(args.db.replace(".duckdb", "")), COST_PER_GAP)
        return

    con = _load(args.db, FIXES)
    rounds_con = _load(args.db.replace(".duckdb", "") + "_rounds.duckdb", ROUNDS)
    h100_con = _load(args.db.replace(".duckdb", "") + "_h100.duckdb", H100_ROUNDS)
    estimated_table(measured_against_estimated(con, rounds_con, h100_con), COST_PER_GAP)
    fit_table(con, None, f"the trace's own estimate, {COST_PER_GAP} gaps an op")
    h100_fit_table(h100_con)
    cost, rows = cost_per_op(con)
    print("| loop (fixed, CPU-bound) | traced µs/step | unprofiled µs/step | GPU busy µs/step | ops/step | µs per op |")
    print("|---|---:|---:|---:|---:|---:|")
    for loop, traced, unprofiled, busy, ops, per_op in rows:
        print(f"| `{loop}` | {traced:,.0f} | {unprofiled:,.0f} | {busy:,.0f} | {ops:,.0f} | {per_op:.1f} |")
    print(f"\nThe profiler's cost per recorded op: {cost:.1f} µs (median)\n")
    fit_table(con, cost, f"{cost:.1f} µs an op")


MIN_OPS = 200  # fewer ops a step and the profiler's share is within the rounds' spread (the 3 ms stall's 36)

# A trace's other candidates for the host's pace under the profiler, µs (steady steps).
_PACES = """
SELECT (SELECT median(r.dur_us) FROM runtime r JOIN steady_steps USING (trace, step)
        WHERE r.trace = $trace AND r.name LIKE '%LaunchKernel%'),
       (SELECT median(o.dur_us) FROM cpu_ops o JOIN steady_steps USING (trace, step)
        WHERE o.trace = $trace AND o.name IN ('aten::view', 'aten::as_strided', 'aten::expand', 'aten::_reshape_alias'))
"""


def lease_rounds(folder):
    """{loop: median step_us of its rounds before any profiler ran in its process} of a lease's timings.csv."""
    rounds = {}
    for row in csv.DictReader(open(folder / "timings.csv")):
        if row.get("phase") == "pre":
            rounds.setdefault(row["loop"], []).append(float(row["step_us"]))
    return {loop: statistics.median(values) for loop, values in rounds.items()}


def lease_captures(scratch):
    """[(lease, capture, ops a step, measured µs per op, sibling gap, launch µs, view µs)] of every
    CPU-bound capture of the leases under tests/data with unprofiled rounds (see the module's doc)."""
    from tracekit.replay.profiler_cost import sibling_gap_us

    rows = []
    data = ROOT / "tests" / "data"
    for folder in sorted(data.glob("*/*")):
        unprofiled = lease_rounds(folder) if (folder / "timings.csv").exists() else {}
        files = [folder / f"{loop}.json.gz" for loop in unprofiled if (folder / f"{loop}.json.gz").exists()]
        if not files:
            continue
        lease = f"{folder.parent.name}/{folder.name}"
        con = _load_files(f"{scratch}_{folder.parent.name}_{folder.name}.duckdb", files)
        busy = dict(con.execute("SELECT trace, gpu_us_per_step FROM step_totals").fetchall())
        for trace, traced, ops in _traced_steps(con):
            gap = sibling_gap_us(con, trace)[0]
            if (trace not in unprofiled or busy.get(trace) is None or gap is None or ops < MIN_OPS
                    or unprofiled[trace] < CPU_BOUND * busy[trace] or traced <= unprofiled[trace]):
                continue
            launch, view = con.execute(_PACES, {"trace": trace}).fetchone()
            rows.append((lease, trace, ops, (traced - unprofiled[trace]) / ops, gap, launch, view))
        con.close()
    return rows


def leases_table(rows, per_gap):
    """Measured cost per op over each pace of the trace, per lease, and how well each predicts it."""
    print("| lease | CPU-bound captures | measured / sibling gap: median (range) |")
    print("|---|---:|---|")
    leases = sorted({row[0] for row in rows})
    for lease in leases:
        ratios = [row[3] / row[4] for row in rows if row[0] == lease]
        print(f"| `{lease}` | {len(ratios)} | {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) |")
    print(f"\n{len(rows)} captures of {len(leases)} leases\n")
    print("| the host's pace | per capture: median µs | × it (all leases' median) | |error| at that, median | "
          f"within 30% | each lease left out: |error| median | within 30% |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, column in (("sibling gap (tracekit's)", 4), ("a kernel launch call", 5), ("a view op", 6)):
        usable = [row for row in rows if row[column]]
        factor = statistics.median(row[3] / row[column] for row in usable)
        errors = [abs(factor * row[column] / row[3] - 1) for row in usable]
        left_out = []
        for row in usable:
            others = statistics.median(r[3] / r[column] for r in usable if r[0] != row[0])
            left_out.append(abs(others * row[column] / row[3] - 1))
        print(f"| {name} | {statistics.median(row[column] for row in usable):.2f} | {factor:.2f} | "
              f"{100 * statistics.median(errors):.0f}% | {sum(e <= 0.3 for e in errors)} of {len(usable)} | "
              f"{100 * statistics.median(left_out):.0f}% | {sum(e <= 0.3 for e in left_out)} of {len(usable)} |")
    errors = [abs(per_gap * row[4] / row[3] - 1) for row in rows]
    print(f"\nCOST_PER_GAP ({per_gap}): |error| median {100 * statistics.median(errors):.0f}%, within 30% "
          f"{sum(e <= 0.3 for e in errors)} of {len(rows)}\n")


def estimated_table(rows, per_gap):
    """Measured µs per op against the trace's estimate, each CPU-bound capture of every host."""
    print("| host | capture (CPU-bound) | ops/step | measured µs per op | sibling gap µs | measured / gap | "
          f"estimated ({per_gap} gaps) µs per op | error |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    errors = []
    for host, trace, ops, measured, gap in rows:
        estimate = per_gap * gap
        errors.append(100 * (estimate - measured) / measured)
        print(f"| {host} | `{trace}` | {ops:,.0f} | {measured:.2f} | {gap:.2f} | {measured / gap:.2f} | {estimate:.2f} | "
              f"{errors[-1]:+.0f}% |")
    print(f"\nmeasured / gap: median {statistics.median(r[3] / r[4] for r in rows):.2f} over {len(rows)} captures; "
          f"estimate within 30%: {sum(abs(e) <= 30 for e in errors)} of {len(errors)}; |error| median "
          f"{statistics.median(map(abs, errors)):.0f}%\n")


def h100_fit_table(con):
    """Each loop of the H100 host (out of sample) replayed without the profiler at the trace's own
    estimate, against its rounds before any profiler ran in its process."""
    from tracekit.replay.savings import TraceReplay
    from tracekit.replay.whatif import whatif

    rows = []
    for loop, rounds in sorted(h100_rounds().items()):
        replayed = whatif(con, loop, []).mean("replayed_us")
        without = TraceReplay(con, loop).saving("no-profiler").fixed_us
        rows.append((loop, "", replayed, replayed if without is None else without, rounds))
    _print_fit(rows, "loop (H100, out of sample)", "the trace's own estimate")


def fit_table(con, cost, label):
    """Each fixes/ loop replayed without the profiler (`cost` µs an op; None: the trace's estimate)."""
    _print_fit(replay_fit(con, cost), "loop", label)


def _print_fit(rows, loop_header, label):
    """A fit table of (loop, role, replayed µs, replayed without the profiler µs, unprofiled rounds)."""
    print(f"| {loop_header} | role | replayed µs/step | without the profiler ({label}) | unprofiled: median [min-max] | error |")
    print("|---|---|---:|---:|---:|---:|")
    errors = []
    for loop, role, replayed, without, rounds in rows:
        median = statistics.median(rounds)
        errors.append(100 * (without - median) / median)
        print(f"| `{loop}` | {role or ''} | {replayed:,.0f} | {without:,.0f} | {median:,.0f} [{min(rounds):,.0f}-{max(rounds):,.0f}] | "
              f"{errors[-1]:+.0f}% |")
    print(f"\n|error|: median {statistics.median(map(abs, errors)):.1f}%, mean {statistics.mean(map(abs, errors)):.1f}%; "
          f"{sum(abs(e) <= 25 for e in errors)} of {len(errors)} loops within 25%\n")


if __name__ == "__main__":
    main()
