"""A job's ranks into a Parquet lake: load time with one and with two processes, the lake's size
against the JSON's, and each named query's time on the lake with DuckDB (the database's beside it).

The ranks are built by build_trace.py from the real sample traces (64 × 30 MB by default: distinct
traces, each an hour after the one before, as a job's ranks are distinct). Each load is a fresh
`tracekit load` process into a fresh lake; "2 processes" is two of them started together, each
given half of the ranks, writing to one lake. Prints markdown tables; --json keeps the figures.

    python benchmarks/lake.py [--dir /tmp/bench/lake] [--ranks 64] [--size 30] [--query-repeat 5] [--wait-quiet S]

With pyspark installed, the same named queries run on Spark local[*] over the same lake beside them.
"""

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import measure as measuring
from measure import busy_cpus, measure, tracekit_bin, wait_for_quiet

HERE = Path(__file__).resolve().parent
MB = 1_000_000

# In-process times of every named query, the source opened once (a lake or a database with
# DuckDB, or a lake on Spark local[*]): its first call, then warm calls.
QUERY_CODE = """
import json, sys, time
kind, path, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
t = time.perf_counter()
from tracekit.analysis.named_queries import fetch_rows, named_queries, named_sql
if kind == "spark":
    from tracekit.spark.engine import SparkLake
    source = SparkLake(path)
    run = source.named
else:
    if kind == "lake":
        from tracekit.lake import connect_lake
        source = connect_lake(path)
    else:
        from tracekit.store.database import connect_for_queries
        source = connect_for_queries(path)
    run = lambda name: fetch_rows(source, *named_sql(name))
out = {"open_s": time.perf_counter() - t, "queries": {}}
for name in named_queries():
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        rows = run(name)
        times.append(time.perf_counter() - t)
    out["queries"][name] = {"times": times, "rows": len(rows.rows)}
source.close()
print(json.dumps(out))
"""


def build_ranks(folder, ranks, size_mb):
    """rank_00.json ... in `folder`, built once and kept for the next run."""
    wanted = [folder / f"rank_{i:02d}.json" for i in range(ranks)]
    if all(p.is_file() for p in wanted):
        return wanted
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, str(HERE / "build_trace.py"), "--size", str(size_mb), "--steps", "30",
                    "--count", str(ranks), "--out", str(folder / "rank.json")], check=True, stdout=subprocess.DEVNULL)
    return wanted


def fresh(path):
    shutil.rmtree(path, ignore_errors=True)
    for suffix in ("", ".wal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return path


def load_once(files, target, *flags):
    """One `tracekit load FILES TARGET FLAGS` process: wall s, peak RSS."""
    run = measure([tracekit_bin(), "load", *map(str, files), *target, *flags])
    if run.rc != 0:
        sys.exit(f"load failed: {run.stderr[-800:]}")
    return {"seconds": run.seconds, "peak_rss": run.peak_rss, "load": run.load_before}


def load_in_processes(files, lake, processes):
    """`processes` `tracekit load` processes started together, each with its share of `files`
    (one file at a time), into one lake: wall s until the last ends, each one's peak RSS."""
    wait_for_quiet(measuring.WAIT_S)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    children = [subprocess.Popen([tracekit_bin(), "load", *map(str, files[i::processes]), "--lake", str(lake),
                                  "-j", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                for i in range(processes)]
    peaks = []
    for child in children:
        _, status, usage = os.wait4(child.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"load failed: {child.stderr.read().decode()[-800:]}")
        peaks.append(usage.ru_maxrss * 1024)
    return {"seconds": time.perf_counter() - started, "peak_rss": max(peaks), "load": load_before}


def folder_bytes(folder):
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


def query_times(kind, target, repeat):
    """Each named query in process (first call, median warm) and as a `tracekit query` command
    (best of `repeat`; on Spark, of two: each command starts and stops its own Spark). `kind`:
    lake or db with DuckDB, or spark (the lake on Spark local[*])."""
    run = measure([sys.executable, "-c", QUERY_CODE, kind, str(target), str(repeat)])
    if run.rc != 0:
        sys.exit(f"queries on the {kind} failed: {run.stderr[-800:]}")
    found = run.last_json()
    flags = {"lake": ["--lake"], "db": ["--db"], "spark": ["--lake"]}[kind] + [str(target)]
    flags += ["--engine", "spark"] if kind == "spark" else []
    waited, measuring.WAIT_S = measuring.WAIT_S, 0  # the commands run back to back
    for name, info in found["queries"].items():
        walls = [measure([tracekit_bin(), "query", name, *flags]).seconds
                 for _ in range(min(repeat, 2) if kind == "spark" else repeat)]
        info.update(first_s=info["times"][0], warm_s=statistics.median(info["times"][1:] or info["times"]),
                    cli_s=min(walls))
    measuring.WAIT_S = waited
    return found


def print_tables(result):
    loads, sizes = result["loads"], result["sizes"]
    ranks, json_mb = result["ranks"], sizes["json"] / MB
    print(f"\n{ranks} ranks, {json_mb:,.0f} MB of JSON; others used {result['others_busy']:.1f} CPUs before the run\n")
    print("| load | processes × files at once | s | MB/s | peak RSS MB (per process) |")
    print("|---|---|---:|---:|---:|")
    for label, key, shape in (("into a lake", "lake_1", "1 × 1"), ("into a lake", "lake_2", "2 × 1"),
                              ("into a lake", "lake_j2", "1 × 2"), ("into a database", "db", "1 × 2")):
        run = loads[key]
        print(f"| {label} | {shape} | {run['seconds']:.1f} | {json_mb / run['seconds']:.0f} | "
              f"{run['peak_rss'] / 2**20:.0f} |")
    print("\n| what | MB | × the JSON |\n|---|---:|---:|")
    for label, key in (("the ranks' JSON", "json"), ("the lake (Parquet, zstd)", "lake"), ("the database", "db")):
        print(f"| {label} | {sizes[key] / MB:,.0f} | {sizes[key] / sizes['json']:.3f} |")
    lake, db, spark = result["queries"]["lake"], result["queries"]["db"], result["queries"].get("spark")
    print(f"\nOpening: the lake {lake['open_s']:.3f} s (its file lists and views), the database {db['open_s']:.3f} s"
          + (f", the lake on Spark {spark['open_s']:.1f} s (starting Spark, its views)" if spark else "") + "\n")
    print("| query | rows | lake: first s | lake: warm s | lake: command s | database: warm s | database: command s"
          " | Spark: first s | Spark: warm s | Spark: command s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, info in lake["queries"].items():
        other = db["queries"][name]
        on_spark = (spark or {"queries": {}})["queries"].get(name)
        spark_cells = ("— | — | —" if on_spark is None else
                       f"{on_spark['first_s']:.2f} | {on_spark['warm_s']:.2f} | {on_spark['cli_s']:.1f}")
        print(f"| {name} | {info['rows']} | {info['first_s']:.3f} | {info['warm_s']:.3f} | {info['cli_s']:.2f} | "
              f"{other['warm_s']:.3f} | {other['cli_s']:.2f} | {spark_cells} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp/bench/lake")
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--size", type=float, default=30, help="MB of JSON per rank")
    parser.add_argument("--query-repeat", type=int, default=5)
    parser.add_argument("--wait-quiet", type=float, default=0, metavar="S",
                        help="before each load and each in-process query run, wait up to S seconds for other "
                             "processes to go quiet")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    measuring.WAIT_S = args.wait_quiet
    folder = Path(args.dir)
    files = build_ranks(folder / f"ranks_{args.ranks}x{args.size:g}MB", args.ranks, args.size)
    lake, db = folder / "lake", folder / "ranks.duckdb"
    result = {"ranks": args.ranks, "others_busy": busy_cpus(), "loads": {}}
    result["loads"]["lake_2"] = load_in_processes(files, fresh(lake), 2)
    result["loads"]["lake_j2"] = load_once(files, ["--lake", str(fresh(lake))], "-j", "2")
    result["loads"]["lake_1"] = load_once(files, ["--lake", str(fresh(lake))], "-j", "1")
    result["loads"]["db"] = load_once(files, ["--db", str(fresh(db))])
    result["sizes"] = {"json": sum(p.stat().st_size for p in files), "lake": folder_bytes(lake),
                       "db": Path(db).stat().st_size}
    result["queries"] = {"lake": query_times("lake", lake, args.query_repeat),
                         "db": query_times("db", db, args.query_repeat),
                         "spark": (query_times("spark", lake, args.query_repeat)
                                   if importlib.util.find_spec("pyspark") else None)}
    for other in ("db", "spark"):
        found = result["queries"][other]
        differ = [name for name, info in result["queries"]["lake"]["queries"].items()
                  if found is not None and info["rows"] != found["queries"][name]["rows"]]
        if differ:
            sys.exit(f"the lake and the {other} disagree on the row counts of {', '.join(differ)}")
    print_tables(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
