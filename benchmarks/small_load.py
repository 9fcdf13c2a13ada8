"""The fixed cost of loading a small trace as a command: where `tracekit load small.json.gz --db NEW`
spends its time, and the command's wall time against other trees of the code, interleaved.

  breakdown TRACE             each part of a load into a new database, timed in a fresh process:
                              the interpreter, importing duckdb and tracekit's CLI, creating the
                              database, its tables, knowledge tables, views and rules, the load's
                              statements, closing; then what the tree's connect() of another new
                              path costs; the median of --repeat processes.
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

# Run in a fresh process, from the tree given: every part of a load into a new database, in order.
_CHILD = r"""
import time, json, sys
marks = [("start", time.perf_counter())]
def mark(name): marks.append((name, time.perf_counter()))
import duckdb; mark("import duckdb")
import tracekit.cli, tracekit.ingest.loader as loader; mark("import tracekit's CLI and loader")
from tracekit.store import database as d
from tracekit.store.knowledge import sync_knowledge
from tracekit.store.class_tables import sync_rules
con = duckdb.connect(sys.argv[2]); mark("duckdb.connect (a new file)")
con.execute("BEGIN")
for statement in d.split_statements(d.sql_resource("tables.sql")): con.execute(statement)
mark("tables.sql")
sync_knowledge(con); mark("knowledge tables (gpu specs, limits, modules)")
d.create_views(con); mark("views, named queries' views and macros")
sync_rules(con); mark("kernel rules")
con.execute("INSERT OR REPLACE INTO schema_info VALUES ('schema_version', ?), ('tracekit_version', ?), ('views_digest', ?)",
            [d.SCHEMA_VERSION, tracekit.__version__, d.views_digest()])
con.execute("COMMIT"); mark("views digest, schema commit")
d.prepare(con); mark("settings and macros")
[(path, result)] = list(loader.load_files(con, [sys.argv[1]])); assert result.status == "loaded", result
mark("load_files (the trace's statements)")
con.close(); mark("close (checkpoint)")
d.connect(sys.argv[2] + ".second").close(); mark("the same tree's connect() of another new path, closed (what a command pays)")
print(json.dumps([(name, t - marks[i][1]) for i, (name, t) in enumerate(marks[1:])]))
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
    print("| part | s (median) | share of the process |\n|---|---:|---:|")
    # the last part is no part of the load above: its share is of the process all the same
    wall = statistics.median(walls)
    python = statistics.median(bare)
    print(f"| the interpreter's start and exit (`python -c pass`) | {python:.3f} | {python / wall:.0%} |")
    for i, (name, _) in enumerate(runs[0]):
        seconds = statistics.median(run[i][1] for run in runs)
        print(f"| {name} | {seconds:.3f} | {seconds / wall:.0%} |")
    print(f"| the whole process | {wall:.3f} | 100% |")


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
    # As an installed tracekit starts (pip writes its bytecode): where PYTHONDONTWRITEBYTECODE is
    # set, every process would compile tracekit's modules again (0.09 s), so the bytecode goes to
    # a folder of the benchmark's own, kept between runs; the first round is a warm-up, not counted.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "tk_small_pycache")
    if args.what == "command" and not args.no_warm_up:
        command(args.trace, trees, 1, quiet=True)
    if args.what == "breakdown":
        for tree in trees:
            breakdown(args.trace, args.repeat, tree)
    else:
        command(args.trace, trees, args.repeat)


if __name__ == "__main__":
    main()
