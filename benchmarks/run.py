"""Measures `tracekit load` against HTA's parser and bare `json.load` on big traces, and the named queries.

Each measurement runs in a fresh subprocess; its peak RSS is the child's own (os.wait4's rusage,
which on Linux also covers the children it waited for). Traces are built by build_trace.py into
--dir when missing. Prints markdown tables; --json also writes the raw numbers.

    /tmp/venv/bin/python benchmarks/run.py --sizes 100,500,1000 --formats json,gz
"""

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import build_trace  # noqa: E402  (a sibling script, not a package)

MB = 1_000_000
TARGETS = {"load_mb_s": 80, "rss_bytes": 1 << 30, "vs_hta": 10, "query_s": 0.5}

# Timed inside the child, so that interpreter start-up and imports are left out of the parse time.
HTA_CODE = """
import json, sys, time
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
t1 = time.perf_counter()
analysis = TraceAnalysis(trace_dir=sys.argv[1])
t2 = time.perf_counter()
frame = analysis.t.get_trace(next(iter(analysis.t.traces)))
print(json.dumps({"import_s": t1 - t0, "parse_s": t2 - t1, "events": len(frame)}))
"""
JSON_CODE = """
import gc, gzip, json, sys, time
path, mode = sys.argv[1], sys.argv[2]
if mode == "off":
    gc.disable()
t = time.perf_counter()
with (gzip.open if path.endswith(".gz") else open)(path, "rb") as handle:
    data = json.load(handle)
print(json.dumps({"parse_s": time.perf_counter() - t, "events": len(data["traceEvents"])}))
"""
QUERY_CODE = """
import json, sys, time
from tracekit.database import connect
from tracekit.named_queries import named_queries, run_named
con = connect(sys.argv[1], read_only=True)
out = {}
for name in named_queries():
    times = []
    for _ in range(int(sys.argv[2])):
        t = time.perf_counter()
        frame = run_named(con, name)
        times.append(time.perf_counter() - t)
    out[name] = {"times": times, "rows": len(frame)}
print(json.dumps(out))
"""


def busy_cpus(interval=1.0):
    """CPUs' worth of work done by others over `interval` (we are idle while sampling), from /proc/stat."""
    def sample():
        with open("/proc/stat") as handle:
            fields = [int(v) for v in handle.readline().split()[1:]]
        return sum(fields) - fields[3] - fields[4], sum(fields)  # busy, total (idle and iowait left out)
    busy0, total0 = sample()
    time.sleep(interval)
    busy1, total1 = sample()
    return (busy1 - busy0) / max(total1 - total0, 1) * os.cpu_count()


def wait_for_quiet(limit_s, below=0.3):
    """Waits (up to `limit_s`) until other processes use less than `below` CPUs; returns their last use."""
    deadline = time.monotonic() + limit_s
    while True:
        busy = busy_cpus()
        if busy < below or time.monotonic() > deadline:
            return busy


WAIT_S = 0  # set from --wait-quiet


@dataclass
class Run:
    seconds: float
    peak_rss: int  # bytes
    rc: int
    stdout: str
    stderr: str
    load_before: float
    others_busy: float

    def last_json(self):
        lines = [line for line in self.stdout.splitlines() if line.startswith("{")]
        return json.loads(lines[-1]) if lines else None


def measure(cmd, timeout=3600, env=None):
    """Runs `cmd` in a fresh process: wall seconds, its peak RSS, exit code and output."""
    others_busy = wait_for_quiet(WAIT_S)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        deadline = started + timeout
        # wait4, not communicate(): only wait4 hands back the child's own rusage. Linux carries a
        # process's peak RSS across fork and exec, so this parent must stay small (it does: ~40 MB).
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.01)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Run(seconds, usage.ru_maxrss * 1024, proc.returncode, out.read(), err.read(), load_before, others_busy)


def _check(run, what):
    if run.rc != 0:
        print(f"{what} failed (exit {run.rc}): {(run.stderr or run.stdout).strip()[-800:]}", file=sys.stderr)
        return False
    return True


def tracekit_bin():
    found = Path(sys.executable).parent / "tracekit"
    return str(found) if found.exists() else shutil.which("tracekit")


def measure_load(trace, db, repeat):
    """Best of `repeat` fresh loads of `trace` into a new database `db`."""
    best = None
    for _ in range(repeat):
        Path(db).unlink(missing_ok=True)
        Path(str(db) + ".wal").unlink(missing_ok=True)
        run = measure([tracekit_bin(), "load", str(trace), "--db", str(db)])
        if not _check(run, f"tracekit load {trace}"):
            return None
        best = run if best is None or run.seconds < best.seconds else best
    found = re.search(r"loaded \S+: (\d+) events, (\d+) kernels .* in ([\d.]+) s", best.stdout)
    return {"seconds": best.seconds, "peak_rss": best.peak_rss, "load": best.load_before, "others_busy": best.others_busy,
            "events": int(found.group(1)) if found else None, "kernels": int(found.group(2)) if found else None,
            "reported_s": float(found.group(3)) if found else None, "db_bytes": Path(db).stat().st_size}


def measure_hta(trace, hta_python, stage_root):
    """HTA 0.5's TraceAnalysis on a folder holding just this trace (as rank 0)."""
    folder = Path(stage_root) / Path(trace).name.replace(".", "_")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / Path(trace).name).symlink_to(Path(trace).resolve())
    run = measure([hta_python, "-c", HTA_CODE, str(folder)])
    if not _check(run, f"HTA on {trace}"):
        return None
    result = run.last_json()
    return {"seconds": result["parse_s"], "wall_s": run.seconds, "peak_rss": run.peak_rss,
            "events": result["events"], "load": run.load_before,
            "others_busy": run.others_busy}


def measure_json(trace, gc_mode):
    run = measure([sys.executable, "-c", JSON_CODE, str(trace), gc_mode])
    if not _check(run, f"json.load {trace}"):
        return None
    result = run.last_json()
    return {"seconds": result["parse_s"], "peak_rss": run.peak_rss, "events": result["events"],
            "load": run.load_before, "others_busy": run.others_busy}


def measure_queries(db, repeat):
    """Each named query: `tracekit query` wall time (best of `repeat`) and in-process run_named times."""
    inproc = measure([sys.executable, "-c", QUERY_CODE, str(db), str(repeat)])
    if not _check(inproc, "run_named"):
        return None
    results = {}
    for name, info in inproc.last_json().items():
        walls = []
        for _ in range(repeat):
            run = measure([tracekit_bin(), "query", name, "--db", str(db)])
            if not _check(run, f"tracekit query {name}"):
                break
            walls.append(run.seconds)
        results[name] = {"rows": info["rows"], "cli_s": min(walls) if walls else None,
                         "first_s": info["times"][0], "warm_s": statistics.median(info["times"][1:] or info["times"])}
    return results


def trace_path(folder, size, steps):
    return Path(folder) / (f"bench_{size}MB_{steps}steps.json" if steps else f"bench_{size}MB.json")


def ensure_traces(folder, sizes, formats, steps):
    traces = []
    for size in sizes:
        plain = trace_path(folder, size, steps)
        wanted = [plain] if "json" in formats else []
        wanted += [Path(str(plain) + ".gz")] if "gz" in formats else []
        if not all(path.exists() for path in wanted):
            print(f"building {plain} (+ .gz) ...", file=sys.stderr)
            build_trace.build(plain, size, gzip_too=True, steps=steps)
        traces += [(size, path) for path in wanted]
    return traces


def versions(hta_python):
    import duckdb
    import tracekit
    found = {"python": platform.python_version(), "duckdb": duckdb.__version__, "tracekit": tracekit.__version__}
    if hta_python:
        probe = subprocess.run([hta_python, "-c", "import importlib.metadata as m, pandas; "
                                "print(m.version('HolisticTraceAnalysis'), pandas.__version__)"],
                               capture_output=True, text=True)
        if probe.returncode == 0:
            found["hta"], found["hta_pandas"] = probe.stdout.split()
    return found


def _mb(value):
    return "" if value is None else f"{value / MB:,.0f}"


def _s(value):
    return "" if value is None else f"{value:.2f}"


def load_table(rows):
    head = ("| trace | JSON MB | file MB | events | `tracekit load` s | MB/s | peak RSS MB | HTA parse s | HTA RSS MB"
            " | × HTA | `json.load` s, GC off | GC on | `json.load` RSS MB |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for row in rows:
        tk, hta, off, on = row["tracekit"], row.get("hta"), row.get("json_gc_off"), row.get("json_gc_on")
        rate = row["json_bytes"] / tk["seconds"] / MB if tk else None
        ratio = f"{hta['seconds'] / tk['seconds']:.1f}" if hta and tk else ""
        lines.append(" | ".join([
            f"| {Path(row['path']).name}", _mb(row["json_bytes"]), _mb(row["file_bytes"]),
            f"{tk['events']:,}" if tk and tk["events"] else "", _s(tk and tk["seconds"]),
            f"{rate:.0f}" if rate else "", _mb(tk and tk["peak_rss"]), _s(hta and hta["seconds"]),
            _mb(hta and hta["peak_rss"]), ratio, _s(off and off["seconds"]), _s(on and on["seconds"]),
            _mb((off or on) and (off or on)["peak_rss"])]) + " |")
    return "\n".join(lines)


def query_table(results, db):
    lines = [f"Named queries on `{Path(db).name}` ({_mb(Path(db).stat().st_size)} MB database):", "",
             "| query | rows | `tracekit query` wall s | `run_named` first s | `run_named` warm s |",
             "|---|---:|---:|---:|---:|"]
    for name, info in results.items():
        lines.append(f"| {name} | {info['rows']} | {_s(info['cli_s'])} | {info['first_s']:.3f} | {info['warm_s']:.3f} |")
    return "\n".join(lines)


def targets(rows, queries):
    """One line per target: met or missed, with the number that decides it."""
    biggest = max(rows, key=lambda r: r["json_bytes"])["json_bytes"]
    lines = []
    for row in (r for r in rows if r["json_bytes"] == biggest and r["tracekit"]):
        tk, name = row["tracekit"], Path(row["path"]).name
        rate = row["json_bytes"] / tk["seconds"] / MB
        lines.append(f"- load {name}: {rate:.0f} MB/s (target ≥ {TARGETS['load_mb_s']}): "
                     f"{'met' if rate >= TARGETS['load_mb_s'] else 'MISSED'}")
        lines.append(f"- peak RSS {name}: {tk['peak_rss'] / MB:,.0f} MB (target ≤ {TARGETS['rss_bytes'] / MB:,.0f}): "
                     f"{'met' if tk['peak_rss'] <= TARGETS['rss_bytes'] else 'MISSED'}")
        if row.get("hta"):
            ratio = row["hta"]["seconds"] / tk["seconds"]
            lines.append(f"- vs HTA {name}: {ratio:.1f}× (target ≥ {TARGETS['vs_hta']}×): "
                         f"{'met' if ratio >= TARGETS['vs_hta'] else 'MISSED'}")
    if queries:
        slowest = max(queries.items(), key=lambda item: item[1]["cli_s"] or 0)
        warm = max(queries.items(), key=lambda item: item[1]["warm_s"])
        lines.append(f"- slowest `tracekit query`: {slowest[0]} {slowest[1]['cli_s']:.2f} s wall (target < "
                     f"{TARGETS['query_s']}): {'met' if slowest[1]['cli_s'] < TARGETS['query_s'] else 'MISSED'}")
        lines.append(f"- slowest `run_named` (warm): {warm[0]} {warm[1]['warm_s']:.3f} s: "
                     f"{'met' if warm[1]['warm_s'] < TARGETS['query_s'] else 'MISSED'}")
    return "\n".join(lines)


def _hta_python(asked):
    for candidate in ([asked] if asked else []) + [sys.executable, "/tmp/hta-venv/bin/python"]:
        if candidate and subprocess.run([candidate, "-c", "import hta"], capture_output=True).returncode == 0:
            return candidate
    return None


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,500,1000", help="trace sizes in MB of JSON [100,500,1000]")
    parser.add_argument("--formats", default="json,gz", help="json, gz or both [json,gz]")
    parser.add_argument("--dir", default="/tmp/bench", help="where traces and databases go [/tmp/bench]")
    parser.add_argument("--steps", type=int, default=30, help="steady steps per trace, each holding many "
                        "forwards, as in a real training trace; 0: one step per forward [30]")
    parser.add_argument("--hta-sizes", help="run HTA only on these sizes [all]")
    parser.add_argument("--repeat", type=int, default=1, help="loads and CLI queries: best of N [1]")
    parser.add_argument("--query-repeat", type=int, default=3, help="runs of each query [3]")
    parser.add_argument("--skip-hta", action="store_true")
    parser.add_argument("--skip-json", action="store_true", help="skip the json.load floor")
    parser.add_argument("--skip-queries", action="store_true")
    parser.add_argument("--hta-python", help="a python with holistictraceanalysis [this one, else /tmp/hta-venv]")
    parser.add_argument("--wait-quiet", type=float, default=0, metavar="S",
                        help="before each measurement wait up to S s until other processes use < 0.3 CPUs [0]")
    parser.add_argument("--json", dest="json_out", help="also write the raw numbers here")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    global WAIT_S
    WAIT_S = args.wait_quiet
    sizes = [int(s) for s in args.sizes.split(",")]
    formats = args.formats.split(",")
    hta_python = None if args.skip_hta else _hta_python(args.hta_python)
    if not args.skip_hta and hta_python is None:
        raise SystemExit("no python with `import hta`: pip install holistictraceanalysis==0.5.0 into "
                         "/tmp/hta-venv, or pass --skip-hta")
    folder = Path(args.dir)
    rows = []
    hta_sizes = [int(s) for s in args.hta_sizes.split(",")] if args.hta_sizes else sizes
    for size, trace in ensure_traces(folder, sizes, formats, args.steps):
        plain = Path(str(trace)[:-3]) if str(trace).endswith(".gz") else trace
        row = {"path": str(trace), "file_bytes": trace.stat().st_size,
               "json_bytes": plain.stat().st_size if plain.exists() else None}
        print(f"measuring {trace.name} ...", file=sys.stderr)
        row["tracekit"] = measure_load(trace, folder / f"{trace.name}.duckdb", args.repeat)
        if hta_python and size in hta_sizes:
            row["hta"] = measure_hta(trace, hta_python, folder / "hta")
        if not args.skip_json:
            row["json_gc_off"] = measure_json(trace, "off")
            row["json_gc_on"] = measure_json(trace, "on")
        rows.append(row)
        print(load_table([row]).splitlines()[-1], file=sys.stderr)
    biggest = trace_path(folder, max(sizes), args.steps)
    query_db = folder / f"{biggest.name}{'.gz' if 'json' not in formats else ''}.duckdb"
    queries = None if args.skip_queries else measure_queries(query_db, args.query_repeat)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    meta = {"date": stamp, "cpus": os.cpu_count(), "machine": platform.platform(),
            "versions": versions(hta_python), "load_avg_range": [min(_loads(rows)), max(_loads(rows))],
            "others_busy_range": [min(_loads(rows, "others_busy")), max(_loads(rows, "others_busy"))]}
    print(f"{stamp}, {meta['cpus']} CPUs, {meta['machine']}, {meta['versions']}; before each measurement: "
          f"1-min load average {meta['load_avg_range'][0]:.2f}–{meta['load_avg_range'][1]:.2f}, other processes "
          f"busy {meta['others_busy_range'][0]:.2f}–{meta['others_busy_range'][1]:.2f} CPUs\n")
    print(load_table(rows) + "\n")
    if queries:
        print(query_table(queries, query_db) + "\n")
    print(targets(rows, queries))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"meta": meta, "rows": rows, "queries": queries}, indent=1))


def _loads(rows, key="load"):
    found = [m[key] for row in rows for m in row.values() if isinstance(m, dict) and key in m]
    return found or [0.0]


if __name__ == "__main__":
    main()
