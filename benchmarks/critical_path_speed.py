"""Issue [15]'s speed target, timed beside HTA: tracekit's critical path and all its finding rules, and HTA
0.5.0's critical path, on the same trace (the 1 GB benchmark trace) in one run, printed side by side as a
markdown table (tool, what, seconds, peak RSS).

tracekit: `tracekit load` of the trace into a fresh database, or a copy of --db (a database the trace is
already loaded in; the copy's views are brought up to this tracekit's, untimed), then, in one fresh
process, best of --repeat of `SELECT count(*)` from step_bounds (each step's critical path by kind),
critical_path (its segments) and findings (every rule). The issue asks for step_bounds and findings
together in under 10 s.

HTA: critical_path_hta.run_hta, in a Python with HTA 0.5.0 and pandas < 3: TraceAnalysis's parse, then
critical_path_analysis on --hta-steps CPU ProfilerSteps spread over the trace (critical_path_hta.
pick_instances). Every step would take minutes more, so the whole trace is extrapolated: the mean timed
step × the trace's CPU ProfilerSteps, plus the parse; on the 1 GB trace that comes out about 13 % low,
as every few steps one takes 2-3× as long (critical_path_hta.md); --hta-steps 31 runs them all.
--hta-timeout stops HTA; a timeout or HTA's own failure is reported in the table.

Each side runs in child processes, and each peak RSS is that child's own (os.wait4, or the HTA child's
getrusage): this process imports only the standard library, so that the children do not inherit a big
peak from it. Build the trace with benchmarks/run.py or build_trace.py (--size 1000 --steps 30).

    PYTHONPATH=. python benchmarks/critical_path_speed.py /tmp/bench/bench_1000MB_30steps.json \\
        [--db /tmp/w/big.duckdb] [--hta-steps 3] [--hta-timeout 1200] [--repeat 2] [--json OUT]
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
# Siblings, not a package; both import only the standard library at the top.
import measure  # noqa: E402
from critical_path_hta import HtaFailed, run_hta  # noqa: E402

QUERIES = {"step_bounds": "each step's critical path, by kind", "critical_path": "the path's segments",
           "findings": "every finding rule"}
TARGET_S = 10  # issue [15]: the critical path and all rules on the 1 GB trace
MB = 1_000_000


# ---- tracekit ---------------------------------------------------------------------------------------------

def queries_child(db, repeat):
    """In the child: the three views timed, best of `repeat` each, printed as one JSON line."""
    from tracekit.store.database import connect

    began = time.perf_counter()
    # Writable: a copied database made by another tracekit gets this one's views here, not in the timings.
    con = connect(db)
    out = {"connect_s": time.perf_counter() - began,
           "traces": con.execute("SELECT trace, file_bytes FROM trace_files ORDER BY trace").fetchall()}
    for view in QUERIES:
        times = []
        for _ in range(repeat):
            began = time.perf_counter()
            rows = con.execute(f"SELECT count(*) FROM {view}").fetchone()[0]
            times.append(time.perf_counter() - began)
        out[view] = {"rows": rows, "times": times}
    con.close()
    print(json.dumps(out))


def tracekit_database(trace, db, workdir):
    """The database to time the queries on, and the load's measurement (None when --db was copied)."""
    target = Path(workdir) / "tracekit.duckdb"
    if db:
        shutil.copyfile(db, target)
        return target, None
    print(f"tracekit load {trace} ...", file=sys.stderr)
    loaded = measure.measure_load(trace, target, repeat=1)
    if loaded is None:
        raise SystemExit("tracekit load failed (its error is above)")
    return target, loaded


def time_tracekit(trace, db, repeat, workdir):
    database, loaded = tracekit_database(trace, db, workdir)
    print(f"tracekit queries on {database} ...", file=sys.stderr)
    run = measure.measure([sys.executable, __file__, str(trace), "--queries-child", str(database), str(repeat)])
    if run.rc != 0:
        raise SystemExit(f"the query child failed (exit {run.rc}): {run.stderr.strip()[-800:]}")
    result = run.last_json()
    _check_same_trace(trace, result["traces"])
    return {"load": loaded, "queries": result, "queries_peak_rss": run.peak_rss, "db_bytes": database.stat().st_size}


def _check_same_trace(trace, traces):
    """A --db must hold this very trace (same name, same size), or the two sides time different work."""
    name, size = Path(trace).name.removesuffix(".gz").removesuffix(".json"), Path(trace).stat().st_size
    if [name, size] not in [list(t) for t in traces]:
        raise SystemExit(f"the database holds {traces}, not {name} of {size:,} bytes")


# ---- HTA --------------------------------------------------------------------------------------------------

def time_hta(trace, steps, timeout, hta_python):
    print(f"HTA on {trace}: parse, then {steps} steps (up to {timeout} s) ...", file=sys.stderr)
    began = time.perf_counter()
    try:
        return run_hta(trace, hta_python=hta_python, timeout=timeout, max_steps=steps)
    except HtaFailed as err:
        return {"error": str(err), "wall_s": round(time.perf_counter() - began, 1)}


def hta_whole_trace(hta):
    """(critical path s of every CPU step, parse + that, measured or not), from the steps HTA got through:
    their sum where it ran every CPU step, else their mean × the CPU steps; None where it got through none."""
    done = [s["seconds"] for s in hta["steps"] if not s["error"]]
    if not done:
        return None
    measured = len(done) == hta["cpu_instances"]
    steps = sum(done) if measured else statistics.mean(done) * hta["cpu_instances"]
    return steps, hta["load_s"] + steps, measured


# ---- the table --------------------------------------------------------------------------------------------

def _rss(value):
    return "" if value is None else f"{value / 2**30:.2f} GiB" if value >= 2**30 else f"{value / 2**20:,.0f} MiB"


def _row(tool, what, seconds, rss=None):
    return f"| {tool} | {what} | {seconds} | {_rss(rss)} |"


def tracekit_rows(tk):
    rows, queries = [], tk["queries"]
    if tk["load"]:
        load = tk["load"]
        events = f" ({load['events']:,} events)" if load["events"] else ""
        rows.append(_row("tracekit", f"`tracekit load` into a fresh database{events}",
                         f"{load['seconds']:.2f}", load["peak_rss"]))
    best = {view: min(queries[view]["times"]) for view in QUERIES}
    for number, (view, meaning) in enumerate(QUERIES.items()):
        runs = ", ".join(f"{t:.2f}" for t in queries[view]["times"])
        rows.append(_row("tracekit", f"`SELECT count(*) FROM {view}` ({meaning}; {queries[view]['rows']:,} rows; "
                         f"runs {runs})", f"{best[view]:.2f}", tk["queries_peak_rss"] if number == 0 else None))
    target = best["step_bounds"] + best["findings"]
    rows.append(_row("tracekit", f"step_bounds + findings: issue [15]'s target, < {TARGET_S} s "
                     f"({'met' if target < TARGET_S else 'missed'})", f"**{target:.2f}**"))
    if tk["load"]:
        rows.append(_row("tracekit", "load + step_bounds + findings", f"{tk['load']['seconds'] + target:.2f}"))
    return rows


MANY_STEPS = 5  # more steps than this are summed up in one row, not a row each


def _hta_step_rows(tool, hta):
    """A row per step, or, for many, one of the fastest, median and slowest; the child's peak RSS once
    every step has run goes on the last."""
    done = [s for s in hta["steps"] if not s["error"]]
    if len(done) > MANY_STEPS:
        times = sorted(s["seconds"] for s in done)
        cells = [(f"`critical_path_analysis` on each of {len(done)} ProfilerSteps: fastest / median / slowest",
                  f"{times[0]:.2f} / {statistics.median(times):.2f} / {times[-1]:.2f}")]
    else:
        cells = [(f"`critical_path_analysis` on {s['name']} (instance {s['instance_id']})", f"{s['seconds']:.2f}")
                 for s in done]
    cells += [(f"`critical_path_analysis` on {s['name']}: failed, {s['error']}", f"{s['seconds']:.2f}")
              for s in hta["steps"] if s["error"]]
    return [_row(tool, what, seconds, hta["peak_rss"] if number == len(cells) else None)
            for number, (what, seconds) in enumerate(cells, 1)]


def hta_rows(hta):
    tool = "HTA 0.5.0"
    if "error" in hta:
        return [_row(tool, f"failed after {hta['wall_s']} s: {hta['error']}", "—")]
    rows = [_row(tool, "`TraceAnalysis(trace_dir=...)`: the parse", f"{hta['load_s']:.2f}", hta["peak_rss_load"])]
    rows += _hta_step_rows(tool, hta)
    whole = hta_whole_trace(hta)
    if whole:
        steps, total, measured = whole
        cpu, done = hta["cpu_instances"], sum(not s["error"] for s in hta["steps"])
        how = "summed" if measured else f"the mean of the {done} timed × {cpu}, extrapolated"
        mark = "" if measured else "~"
        rows += [_row(tool, f"critical path, all {cpu} CPU ProfilerSteps ({how})", f"{mark}{steps:.0f}"),
                 _row(tool, f"parse + all steps{'' if measured else ', extrapolated'}", f"**{mark}{total:.0f}**")]
    return rows


def markdown(tk, hta):
    head = ["| tool | what | seconds | peak RSS |", "|---|---|---:|---:|"]
    return "\n".join(head + tracekit_rows(tk) + hta_rows(hta))


def machine():
    """The machine and how busy it is: load average (1, 5, 15 min) and other processes' CPUs over a second."""
    with open("/proc/meminfo") as handle:
        total_kib = int(handle.readline().split()[1])
    return {"cpus": os.cpu_count(), "memory_gib": round(total_kib / 2**20, 1), "loadavg": os.getloadavg(),
            "others_busy_cpus": round(measure.busy_cpus(), 2)}


def _load_text(state):
    load = ", ".join(f"{v:.2f}" for v in state["loadavg"])
    return f"load average {load}; other processes busy {state['others_busy_cpus']} CPUs"


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path, help="the Kineto trace (the 1 GB benchmark trace)")
    parser.add_argument("--db", type=Path, help="a database the trace is loaded in: copied, not loaded afresh")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each query; the best counts [2]")
    parser.add_argument("--hta-steps", type=int, default=3, help="ProfilerSteps HTA's critical path runs on [3]")
    parser.add_argument("--hta-timeout", type=int, default=1200, help="seconds for HTA's parse and steps [1200]")
    parser.add_argument("--hta-python", help="a Python with holistictraceanalysis 0.5.0 and pandas < 3")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--queries-child", nargs=2, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.queries_child:
        return queries_child(args.queries_child[0], int(args.queries_child[1]))
    if not args.trace.is_file():
        raise SystemExit(f"{args.trace}: no such file; build it with benchmarks/run.py or build_trace.py")
    before = machine()
    with tempfile.TemporaryDirectory(prefix="critical_path_speed_") as workdir:
        tk = time_tracekit(args.trace, args.db, args.repeat, workdir)
    middle = machine()
    hta = time_hta(args.trace, args.hta_steps, args.hta_timeout, args.hta_python)
    after = machine()
    print(f"`{args.trace.name}` ({args.trace.stat().st_size / MB:,.0f} MB); {before['cpus']} CPUs, "
          f"{before['memory_gib']} GiB\n")
    print(markdown(tk, hta) + "\n")
    for when, state in (("before tracekit", before), ("before HTA", middle), ("after HTA", after)):
        print(f"- {when}: {_load_text(state)}")
    if args.json:
        args.json.write_text(json.dumps({"trace": str(args.trace), "machine": [before, middle, after],
                                         "tracekit": tk, "hta": hta}, indent=1, default=str))


if __name__ == "__main__":
    main()
