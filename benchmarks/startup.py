"""How fast `tracekit query` starts: `tracekit query --sql "SELECT 42"` against `python -c` that
imports duckdb and runs the same query (the target: within 2x), each a fresh process, run in turn
--repeat times so that a busy moment of the machine hits them alike. Prints a markdown table.

    python benchmarks/startup.py --repeat 20

It runs in a scratch folder with no tracekit.duckdb, so `tracekit query` answers from the bundled
sample traces, as a new user's first command does; the samples database is built (in a private
cache) by a warm-up run that is not counted.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 2.0


def _tracekit():
    """The `tracekit` console script beside this Python, else `python -m tracekit`."""
    script = Path(sys.executable).with_name("tracekit")
    return [str(script)] if script.exists() else [sys.executable, "-m", "tracekit"]


def commands():
    """(label, argv) of each command measured; the first is the baseline."""
    tracekit = _tracekit()
    return [
        ("python -c: import duckdb, SELECT 42", [sys.executable, "-c",
                                                 "import duckdb; print(duckdb.connect().execute('SELECT 42').fetchall())"]),
        ('tracekit query --sql "SELECT 42"', tracekit + ["query", "--sql", "SELECT 42"]),
        ("tracekit query summary", tracekit + ["query", "summary"]),
        ("python -c: import pandas (what query no longer pays)", [sys.executable, "-c", "import pandas"]),
    ]


def _run(argv, env, cwd):
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def measure(repeat):
    """{label: [seconds, ...]} for every command, run in turn `repeat` times after one warm-up round."""
    scratch = tempfile.mkdtemp(prefix="tracekit-startup-")
    env = dict(os.environ, TRACEKIT_CACHE=os.path.join(scratch, "cache"))
    env.pop("COLUMNS", None)
    measured = commands()
    for _, argv in measured:
        _run(argv, env, scratch)  # warm-up: builds the samples database, fills the page cache
    times = {label: [] for label, _ in measured}
    for _ in range(repeat):
        for label, argv in measured:
            times[label].append(_run(argv, env, scratch))
    return times


def table(times):
    labels = list(times)
    base_min, base_median = min(times[labels[0]]), statistics.median(times[labels[0]])
    lines = ["| command | min s | median s | median × baseline |", "|---|---:|---:|---:|"]
    for label in labels:
        runs = times[label]
        lines.append(f"| {label} | {min(runs):.3f} | {statistics.median(runs):.3f} | "
                     f"{statistics.median(runs) / base_median:.2f} |")
    query = times[labels[1]]
    ratio = statistics.median(query) / base_median
    verdict = "met" if ratio <= TARGET else "missed"
    lines.append("")
    lines.append(f"Target: `{labels[1]}` within {TARGET:g}× the baseline: {verdict} "
                 f"(median {ratio:.2f}×, min {min(query) / base_min:.2f}×; {len(query)} runs each, "
                 f"load average {os.getloadavg()[0]:.2f} at the end).")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="runs of each command (default 20)")
    args = parser.parse_args()
    print(table(measure(args.repeat)))


if __name__ == "__main__":
    main()
