"""run.py's measurements, each in a fresh process: `tracekit load`, HTA's parser, `json.load`, DuckDB's
own NDJSON read (the floor), the named queries, a small trace's load as a command, and the analysis
of a loaded trace (its critical path, `summary` and every finding rule).

A child's peak RSS is its own: os.wait4's rusage, which on Linux also covers the children it waited for.
"""

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# Before each measurement, wait up to this many seconds for the machine to be quiet (run.py sets it).
WAIT_S = 0


def start_as_installed():
    """The children start as an installed tracekit does (pip writes its bytecode): where
    PYTHONDONTWRITEBYTECODE is set, every fresh process would compile tracekit's modules again
    (0.04-0.09 s of a small trace's load), so the bytecode goes to a folder of the benchmark's own,
    kept between runs. The first run of each measurement (a warm-up) writes it."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "tk_bench_pycache")

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
# The floor: DuckDB's reader alone on the events as NDJSON, with typed columns, into a file database
# as `tracekit load` writes one; nothing derived, nothing checked.
FLOOR_COLUMNS = ("{ph: 'VARCHAR', cat: 'VARCHAR', name: 'VARCHAR', ts: 'DECIMAL(38,3)', dur: 'DECIMAL(38,3)',"
                 " pid: 'VARCHAR', tid: 'VARCHAR', id: 'VARCHAR', bp: 'VARCHAR', s: 'VARCHAR', args: 'JSON'}")
FLOOR_SQL = f"CREATE TABLE t AS SELECT * FROM read_json($path, format = 'newline_delimited', columns = {FLOOR_COLUMNS})"
FLOOR_CODE = f"""
import json, sys, time
import duckdb
con = duckdb.connect(sys.argv[2])
t = time.perf_counter()
con.execute({FLOOR_SQL!r}, {{"path": sys.argv[1]}})
seconds = time.perf_counter() - t
rows = con.execute("SELECT count(*) FROM t").fetchone()[0]
con.close()
print(json.dumps({{"seconds": seconds, "rows": rows}}))
"""
QUERY_CODE = """
import json, sys, time
from tracekit.store.database import connect
from tracekit.analysis.named_queries import named_queries, run_named
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
# The analysis issue [18] times on the loaded 1 GB trace, in one fresh process on a read-only
# connection as `tracekit query` opens one, each relation read whole once, in this order.
ANALYSIS = {"critical_path": "SELECT count(*) FROM critical_path", "step_bounds": "SELECT count(*) FROM step_bounds",
            "summary": None, "findings": "SELECT count(*) FROM findings"}  # None: the named query
ANALYSIS_CODE = f"""
import json, sys, time
from tracekit.store.database import connect_for_queries
from tracekit.analysis.named_queries import run_named
con = connect_for_queries(sys.argv[1])
out = {{}}
for name, sql in {ANALYSIS!r}.items():
    t = time.perf_counter()
    rows = len(run_named(con, name)) if sql is None else con.execute(sql).fetchone()[0]
    out[name] = {{"seconds": time.perf_counter() - t, "rows": rows}}
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

    def stats(self):
        return {"peak_rss": self.peak_rss, "load": self.load_before, "others_busy": self.others_busy}


def measure(cmd, timeout=3600):
    """Runs `cmd` in a fresh process: wall seconds, its peak RSS, exit code and output."""
    others_busy = wait_for_quiet(WAIT_S)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err)
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


_LOADED = re.compile(r"loaded \S+: (\d+) events, (\d+) kernels .* in ([\d.]+) s")


def measure_load(target, db, repeat, pin=None):
    """Best of `repeat` fresh `tracekit load TARGET` (a file or a folder) into a new database `db`;
    `pin` a CPU list for `taskset -c`."""
    best = None
    for _ in range(repeat):
        Path(db).unlink(missing_ok=True)
        Path(str(db) + ".wal").unlink(missing_ok=True)
        cmd = ([] if pin is None else ["taskset", "-c", pin]) + [tracekit_bin(), "load", str(target), "--db", str(db)]
        run = measure(cmd)
        if not _check(run, " ".join(cmd)):
            return None
        best = run if best is None or run.seconds < best.seconds else best
    found = [tuple(map(float, m)) for m in _LOADED.findall(best.stdout)]
    return {"seconds": best.seconds, **best.stats(), "files": len(found),
            "events": int(sum(f[0] for f in found)) if found else None,
            "kernels": int(sum(f[1] for f in found)) if found else None,
            "reported_s": sum(f[2] for f in found) if found else None, "db_bytes": Path(db).stat().st_size}


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
    return {"seconds": result["parse_s"], "wall_s": run.seconds, "events": result["events"], **run.stats()}


def measure_json(trace, gc_mode="off"):
    run = measure([sys.executable, "-c", JSON_CODE, str(trace), gc_mode])
    if not _check(run, f"json.load {trace}"):
        return None
    result = run.last_json()
    return {"seconds": result["parse_s"], "events": result["events"], **run.stats()}


def measure_floor(ndjson, db, repeat):
    """DuckDB's typed NDJSON read of the events into a fresh file database: best of `repeat`."""
    best = None
    for _ in range(repeat):
        Path(db).unlink(missing_ok=True)
        Path(str(db) + ".wal").unlink(missing_ok=True)
        run = measure([sys.executable, "-c", FLOOR_CODE, str(ndjson), str(db)])
        if not _check(run, f"DuckDB read_json {ndjson}"):
            return None
        if best is None or run.last_json()["seconds"] < best.last_json()["seconds"]:
            best = run
    result = best.last_json()
    return {"seconds": result["seconds"], "wall_s": best.seconds, "events": result["rows"], **best.stats()}


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


def measure_small_command(trace, db, runs):
    """`tracekit load TRACE --db NEW` as a user runs it, start-up included: the median of `runs` fresh
    processes (the first, which warms the page cache, left out), and their spread."""
    walls = []
    for _ in range(runs + 1):
        Path(db).unlink(missing_ok=True)
        Path(str(db) + ".wal").unlink(missing_ok=True)
        run = measure([tracekit_bin(), "load", str(trace), "--db", str(db)])
        if not _check(run, f"tracekit load {trace}"):
            return None
        walls.append(run.seconds)
        last = run
    walls = walls[1:]
    return {"seconds": statistics.median(walls), "min_s": min(walls), "max_s": max(walls), "runs": len(walls),
            "file_bytes": Path(trace).stat().st_size, **last.stats()}


def measure_analysis(db):
    """The critical path, step_bounds, `summary` and the findings view (every rule) on `db`, in one fresh
    process, each read once; and `tracekit findings` (the rules with each fix replayed) as a command."""
    run = measure([sys.executable, "-c", ANALYSIS_CODE, str(db)])
    if not _check(run, "the analysis"):
        return None
    result = {"parts": run.last_json(), **run.stats()}
    result["seconds"] = sum(part["seconds"] for part in result["parts"].values())
    command = measure([tracekit_bin(), "findings", "--db", str(db)])
    result["findings_command_s"] = command.seconds if _check(command, "tracekit findings") else None
    return result
