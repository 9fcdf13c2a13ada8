"""Run-to-run noise in real captures, and what `tracekit diff` says about runs of the same code.

Loads the repeated captures (tests/data/cpu/repeats: one CPU variant 5 times; tests/data/h200/repeats:
one GPU variant 5 times; tests/data/h200 rerun_a, rerun_b and loops/infer_naive, infer_naive_rerun:
GPU pairs in separate processes) and the real fix infer_naive → infer_inplace into a scratch
database, then prints markdown: each set's run means per metric and their spread; for every pair
of runs of one set (the earlier run the baseline) the change, its 95% interval and the verdict of
`--fail-on "METRIC>+5%"` on the set's time metric (every pair is the same code, so every FAIL is a
false alarm); and the default run-to-run floors, measured on the two sets of 5 repeats only (the
rerun pairs are left out of them, a check they were not fitted on). tests/test_diff_noise.py
asserts the same pairs, and that run_noise_floors.csv holds what this measures.

    python benchmarks/run_to_run.py [--db /tmp/bench/run_to_run.duckdb] [--write-floors] [--coverage]

--write-floors writes tracekit/analysis/run_noise_floors.csv; --coverage simulates how often the
percentile bootstrap's 95% interval holds the truth with few steps a side (why MIN_STEADY_STEPS is 5).
"""

import argparse
import itertools
from pathlib import Path

from tracekit.analysis.compare import METRICS, diff, steady_step_figures
from tracekit.analysis.run_noise import FLOORS_FILE, measured_sd
from tracekit.ingest.loader import load_files
from tracekit.store.database import connect

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
# name -> (trace file, the set it belongs to); sets of runs of one variant, each in its own process.
RUNS = {
    **{f"cpu_run{i}": (DATA / "cpu" / "repeats" / f"run{i}.json.gz", "cpu_repeats") for i in range(1, 6)},
    **{f"h200_run{i}": (DATA / "h200" / "repeats" / f"run{i}.json.gz", "h200_repeats") for i in range(1, 6)},
    "rerun_a": (DATA / "h200" / "rerun_a" / "naive_inplace.json.gz", "h200_rerun"),
    "rerun_b": (DATA / "h200" / "rerun_b" / "naive_inplace.json.gz", "h200_rerun"),
    "infer_naive": (DATA / "h200" / "loops" / "infer_naive.json.gz", "h200_infer_rerun"),
    "infer_naive_rerun": (DATA / "h200" / "loops" / "infer_naive_rerun.json.gz", "h200_infer_rerun"),
}
# The sets each device's default floors are measured on, pooled (each set about its own mean).
FLOOR_SETS = {
    "gpu": (["h200_repeats", "h200_rerun", "h200_infer_rerun"],
            "tests/data/h200: repeats (naive_inplace 5 times), rerun_a and rerun_b, loops/infer_naive and "
            "infer_naive_rerun; 9 processes on an NVIDIA H200"),
    "cpu": (["cpu_repeats"],
            "tests/data/cpu/repeats: naive_inplace 5 times; 5 processes on a shared 2-core x86_64 VM "
            "at load average 3.6-4.3"),
}
FIX = ("infer_naive", "infer_inplace", DATA / "h200" / "loops" / "infer_inplace.json.gz")
GATE_PCT = 5


def load_runs(db):
    """A database at `db` holding every run (and the fix) under the names above."""
    for suffix in ("", ".wal"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    con = connect(db)
    named = {path.resolve(): name for name, (path, _) in RUNS.items()} | {FIX[2].resolve(): FIX[1]}
    for path, loaded in load_files(con, list(named)):  # two at a time: small files
        if isinstance(loaded, Exception):
            raise loaded
        con.execute("UPDATE trace_files SET trace = ? WHERE path = ?", [named[Path(path)], str(path)])
    return con


def sets():
    """{set: [run names in capture order]}."""
    grouped = {}
    for name, (_, group) in RUNS.items():
        grouped.setdefault(group, []).append(name)
    return grouped


def time_metric(group):
    return "cpu_us_per_step" if group.startswith("cpu") else "gpu_us_per_step"


def pair_rows(con, group):
    """(baseline, candidate, figure, verdict) for every pair of the set's runs, earlier run first."""
    metric = time_metric(group)
    rows = []
    for a, b in itertools.combinations(sets()[group], 2):
        result = diff(con, a, b, fail_on=[f"{metric}>+{GATE_PCT}%"], findings=False)
        figure = next(f for f in result.figures if f["metric"] == metric)
        rows.append((a, b, figure, result.verdict))
    return rows


def _pct(value, base):
    return f"{100 * value / base:+.1f}%" if base else "n/a"


def print_pairs(con):
    print(f"| set | A | B | metric | A | B | change | 95% interval | beyond noise | --fail-on >+{GATE_PCT}% |")
    print("|---|---|---|---|---:|---:|---:|---|---|---|")
    totals = {}
    for group in sets():
        for a, b, f, verdict in pair_rows(con, group):
            low, high = f["ci_low"], f["ci_high"]
            interval = "none" if low is None else f"[{_pct(low, f['a'])}, {_pct(high, f['a'])}]"
            print(f"| {group} | {a} | {b} | {f['metric']} | {f['a']:.1f} | {f['b']:.1f} | {_pct(f['change'], f['a'])} "
                  f"| {interval} | {f['significant']} | {verdict} |")
            pairs, beyond, fails, undecided = totals.get(group, (0, 0, 0, 0))
            totals[group] = (pairs + 1, beyond + bool(f["significant"]), fails + (verdict == "fail"),
                             undecided + (verdict == "undecided"))
    print(f"\n| set | pairs | beyond noise | false alarms at +{GATE_PCT}% | undecided |\n|---|---:|---:|---:|---:|")
    for group, counts in totals.items():
        print(f"| {group} | {' | '.join(map(str, counts))} |")
    result = diff(con, FIX[0], FIX[1], fail_on=["gpu_us_per_step<-5%"])
    f = next(f for f in result.figures if f["metric"] == "gpu_us_per_step")
    print(f"\nThe real fix {FIX[0]} → {FIX[1]}: gpu_us_per_step {f['change']:+.1f} µs ({_pct(f['change'], f['a'])}), "
          f"interval [{f['ci_low']:+.1f}, {f['ci_high']:+.1f}], beyond noise {f['significant']}, "
          f"--fail-on gpu_us_per_step<-5%: {result.verdict}")


def run_values(con, group):
    """{metric: [each run's step values]} of a set."""
    figures = [steady_step_figures(con, name) for name in sets()[group]]
    return {metric: [f[metric] for f in figures if f[metric]] for metric in METRICS}


def print_spreads(con):
    print("| set | metric | run means | relative sd of run means | run-to-run sd (log) |\n|---|---|---|---:|---:|")
    for group in sets():
        for metric, runs in run_values(con, group).items():
            means = [sum(run) / len(run) for run in runs]
            if len(means) < 2 or not any(means):
                continue
            average = sum(means) / len(means)
            relative = (sum((m - average) ** 2 for m in means) / (len(means) - 1)) ** 0.5 / average
            sd, _ = measured_sd([runs])
            print(f"| {group} | {metric} | {', '.join(f'{m:.1f}' for m in means)} | {100 * relative:.2f}% | {sd:.4f} |")


def floor_rows(con, floor_sets=FLOOR_SETS):
    """The rows of run_noise_floors.csv: device, metric, run_sd, df, source."""
    rows = []
    for device, (groups, source) in floor_sets.items():
        values = [run_values(con, group) for group in groups]
        for metric in METRICS:
            sd, df = measured_sd([v[metric] for v in values])
            rows.append((device, metric, f"{sd:.4g}", df, source))
    return rows


def write_floors(rows, path=FLOORS_FILE):
    import csv

    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["device", "metric", "run_sd", "df", "source"])
        writer.writerows(rows)


def print_held_out(con):
    """Each GPU set's pairs judged with floors measured on the other GPU sets alone: how the
    default does on runs it was not measured on."""
    from tracekit.analysis.run_noise import RunToRun, interval

    groups, _ = FLOOR_SETS["gpu"]
    print("| set held out | its pairs | floor without it (gpu_us, log sd) | beyond noise | false alarms at +5% |")
    print("|---|---:|---:|---:|---:|")
    for held in groups:
        others = [run_values(con, g)["gpu_us_per_step"] for g in groups if g != held]
        noise = RunToRun(*measured_sd(others), "default")
        runs = run_values(con, held)["gpu_us_per_step"]
        pairs = beyond = fails = 0
        for a, b in itertools.combinations(runs, 2):
            low, high = interval(([a], [b]), (noise, noise))
            change_pct = 100 * (sum(b) / len(b) - sum(a) / len(a)) / (sum(a) / len(a))
            pairs, beyond = pairs + 1, beyond + (low > 0 or high < 0)
            fails += (low > 0 or high < 0) and change_pct > GATE_PCT
        print(f"| {held} | {pairs} | {noise.sd:.4g} ({noise.df} df) | {beyond} | {fails} |")


def print_coverage(samples=1000):
    """How often a percentile bootstrap's 95% interval of a difference of two means holds the true
    difference (0), for n normal steps a side."""
    import numpy as np

    rng = np.random.default_rng(1)
    print("| steps a side | 95% interval holds the truth |\n|---:|---:|")
    for n in (2, 3, 4, 5, 6, 8, 11):
        held = 0
        for _ in range(samples):
            a, b = rng.normal(size=n), rng.normal(size=n)
            draws = rng.choice(b, size=(2000, n)).mean(axis=1) - rng.choice(a, size=(2000, n)).mean(axis=1)
            low, high = np.percentile(draws, [2.5, 97.5])
            held += low <= 0 <= high
        print(f"| {n} | {100 * held / samples:.1f}% |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="/tmp/bench/run_to_run.duckdb")
    parser.add_argument("--write-floors", action="store_true", help=f"write {FLOORS_FILE.name}")
    parser.add_argument("--coverage", action="store_true", help="simulate the bootstrap's coverage by steps a side")
    args = parser.parse_args()
    if args.coverage:
        print_coverage()
        return
    Path(args.db).parent.mkdir(parents=True, exist_ok=True)
    con = load_runs(args.db)
    try:
        print_spreads(con)
        rows = floor_rows(con)
        if args.write_floors:
            write_floors(rows)
        print("\n| device | metric | run_sd | df |\n|---|---|---:|---:|")
        for device, metric, sd, df, _ in rows:
            print(f"| {device} | {metric} | {sd} | {df} |")
        print()
        print_held_out(con)
        print()
        print_pairs(con)
    finally:
        con.close()


if __name__ == "__main__":
    main()
