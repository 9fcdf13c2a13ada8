"""The fixed cost of loading a small trace as a command: where `tracekit load small.json.gz --db NEW`
spends its time, and the command's wall time against other trees of the code, interleaved.

  breakdown TRACE             each part of a command's load into a new database, timed in a fresh
                              process (wall and CPU): the interpreter, importing duckdb, click,
                              tracekit's CLI and the loader, the copy of the cached schema template,
                              opening it, ensure_schema, the load's statements, closing; the median
                              of --repeat processes.
  command TRACE --tree DIR..  `python -m tracekit load TRACE --db NEW` run from each tree in turn
                              (each tree's own tracekit), --repeat rounds after a warm-up round
                              (--no-warm-up for big traces); medians of wall and CPU time, peak RSS.

    python benchmarks/small_load.py breakdown tests/data/h200/loops/infer_inplace.json.gz
    python benchmarks/small_load.py command tests/data/h200/loops/infer_inplace.json.gz --tree /work/main --tree .
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import measure

# Run in a fresh process, from the tree given: every part of a command's load into a new database,
# in order, as `tracekit load` runs them (a copy of the cached schema template, then the load).
_CHILD = r"""
import time, json, sys
marks = [("start", time.perf_counter(), time.process_time())]
def mark(name): marks.append((name, time.perf_counter(), time.process_time()))
import importlib.util
if importlib.util.find_spec("tracekit.store.engine"):  # the load path imports DuckDB's engine alone
    from tracekit.store.engine import duckdb; mark("import DuckDB (its engine alone, tracekit.store.engine)")
else:
    import duckdb; mark("import DuckDB (the duckdb package)")
import click; mark("import click")
import tracekit.cli; mark("import tracekit's CLI (every command's module)")
import tracekit.ingest.load_batch, tracekit.ingest.loader as loader; mark("import the loader")
from tracekit.store import database as d
from tracekit.store.schema_template import start_from_template
db = sys.argv[2]
# the template's name: by schema_digest since issue [18]'s round 2, by views_digest before
digest = getattr(d, "schema_digest", d.views_digest)()
start_from_template(db, f"schema-{d.SCHEMA_VERSION}-{digest}", d.ensure_schema); mark("copy of the schema template")
con = duckdb.connect(db); mark("duckdb.connect (the copy)")
d.ensure_schema(con, db); mark("ensure_schema")
d.prepare(con); mark("settings and macros")
[(path, result)] = list(loader.load_files(con, [sys.argv[1]])); assert result.status == "loaded", result
mark("load_files (the trace's statements)")
con.execute("SELECT count(*) FROM trace_files").fetchone(); con.close(); mark("close (checkpoint)")
print(json.dumps([(name, t - marks[i][1], c - marks[i][2]) for i, (name, t, c) in enumerate(marks[1:])]))
"""


def _fresh_db(folder):
    return str(Path(folder) / f"small_{time.monotonic_ns()}.duckdb")


def breakdown(trace, repeat, tree):
    runs, walls, bare = [], [], []
    with tempfile.TemporaryDirectory(prefix="tk_small_") as folder:
        for _ in range(repeat):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            bare.append(time.perf_counter() - started)
            started = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", _CHILD, str(Path(trace).resolve()), _fresh_db(folder)],
                                 cwd=tree, check=True, capture_output=True, text=True).stdout
            walls.append(time.perf_counter() - started)
            runs.append(json.loads(out))
    print(f"{trace}, from {Path(tree).resolve()}: median of {repeat} fresh processes\n")
    print("| part | s (median) | CPU-s (median) | share of the process |\n|---|---:|---:|---:|")
    wall = statistics.median(walls)
    python = statistics.median(bare)
    print(f"| the interpreter's start and exit (`python -c pass`) | {python:.3f} | | {python / wall:.0%} |")
    parts = 0.0
    for i, (name, _, _) in enumerate(runs[0]):
        seconds = statistics.median(run[i][1] for run in runs)
        cpu = statistics.median(run[i][2] for run in runs)
        parts += seconds
        print(f"| {name} | {seconds:.3f} | {cpu:.3f} | {seconds / wall:.0%} |")
    rest = wall - python - parts
    print(f"| the rest: freeing the process's objects at exit, and the medians' rounding | {rest:.3f} | | {rest / wall:.0%} |")
    print(f"| the whole process | {wall:.3f} | | 100% |")


def command(trace, trees, repeat, quiet=False):
    times = {tree: [] for tree in trees}
    cpu = {tree: [] for tree in trees}
    rss = {tree: [] for tree in trees}
    with tempfile.TemporaryDirectory(prefix="tk_small_") as folder:
        for _ in range(repeat):
            for tree in trees:  # interleaved, so a busy moment hits every tree alike
                started = time.perf_counter()
                child = subprocess.Popen([sys.executable, "-m", "tracekit", "load", str(Path(trace).resolve()),
                                          "--db", _fresh_db(folder)], cwd=tree, stdout=subprocess.DEVNULL)
                _, status, usage = os.wait4(child.pid, 0)
                child.returncode = os.waitstatus_to_exitcode(status)
                assert child.returncode == 0, f"the load from {tree} failed"
                times[tree].append(time.perf_counter() - started)
                # CPU time, user and system: steadier than the wall time when others share the cores
                cpu[tree].append(usage.ru_utime + usage.ru_stime)
                rss[tree].append(usage.ru_maxrss / 1024)
    if quiet:
        return
    print(f"`tracekit load {trace} --db NEW`, {repeat} rounds, trees in turn\n")
    print("| tree | median s | median CPU-s | peak RSS MB (max) | runs, s |\n|---|---:|---:|---:|---|")
    for tree, values in times.items():
        commit = subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        print(f"| {Path(tree).resolve()} ({commit}) | {statistics.median(values):.3f} | "
              f"{statistics.median(cpu[tree]):.3f} | {max(rss[tree]):,.0f} | {', '.join(f'{v:.3f}' for v in values)} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("breakdown", "command"))
    parser.add_argument("trace")
    parser.add_argument("--tree", action="append", help="a checkout of tracekit (default: this one)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-warm-up", action="store_true", help="for `command`: no warm-up round")
    args = parser.parse_args(argv)
    trees = args.tree or [str(Path(__file__).resolve().parents[1])]
    os.environ.pop("PYTHONPATH", None)  # each tree's own tracekit: the one in its working folder
    measure.start_as_installed()  # the first round is a warm-up, not counted
    if args.what == "command" and not args.no_warm_up:
        command(args.trace, trees, 1, quiet=True)
    if args.what == "breakdown":
        for tree in trees:
            breakdown(args.trace, args.repeat, tree)
    else:
        command(args.trace, trees, args.repeat)


if __name__ == "__main__":
    main()
