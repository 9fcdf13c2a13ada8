"""How long `tracekit diff` takes on two 1 GB traces: the issue's target is under 5 s.

Loads the Kineto-layout 1 GB benchmark trace and the same events laid out one per line (a
different file, so a second trace) into one database, then times `tracekit diff A B` as a command,
start-up included, and prints the runs. Build the traces first with run.py or build_trace.py.

    python benchmarks/diff_speed.py [--dir /tmp/bench] [--repeat 3]
"""

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp/bench")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    folder = Path(args.dir)
    a, b = folder / "bench_1000MB_30steps.json", folder / "bench_1000MB_30steps.lines.json"
    missing = [str(p) for p in (a, b) if not p.is_file()]
    if missing:
        sys.exit(f"missing {', '.join(missing)}: build them with benchmarks/run.py or build_trace.py")
    db = folder / "diff_speed.duckdb"
    for suffix in ("", ".wal"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    tracekit = [sys.executable, "-m", "tracekit"]
    subprocess.run([*tracekit, "load", str(a), str(b), "--db", str(db)], check=True, stdout=subprocess.DEVNULL)
    times = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        subprocess.run([*tracekit, "diff", "bench_1000MB_30steps", "bench_1000MB_30steps.lines", "--db", str(db),
                        "--fail-on", "gpu_us_per_step>+5%"], check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    print("| traces | runs | min s | median s | target |")
    print("|---|---:|---:|---:|---|")
    print(f"| two 1 GB traces (2.7 M events each) | {len(times)} | {min(times):.2f} | {statistics.median(times):.2f} | "
          f"< 5 s: {'met' if statistics.median(times) < 5 else 'missed'} |")


if __name__ == "__main__":
    main()
