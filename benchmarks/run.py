"""Measures `tracekit load` on big traces in several layouts, against HTA's parser, bare `json.load` and
DuckDB's own NDJSON read, a folder of traces on every core and on one, the named queries, small traces
loaded as a command, and the critical path, `summary` and every finding rule on the loaded 1 GB trace:
issue [18]'s targets, judged in one run (tables.py).

Each measurement runs in a fresh subprocess (measure.py); its peak RSS is the child's own. Traces are
built by build_trace.py into --dir when missing, in a child process too. Prints markdown tables
(tables.py); --json also writes the raw numbers.

    /work/venv/bin/python benchmarks/run.py --sizes 1000 --layouts kineto,lines,minified,indent4,gz \\
        --folder 32,30 --hta-sizes 100
"""

import argparse
import gzip
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
# Siblings, not a package. build_trace itself (numpy) is only ever run as a child.
import measure  # noqa: E402
import tables  # noqa: E402
from layouts import LAYOUTS, layout_path  # noqa: E402

MB = 1_000_000
# A real training trace of about 140 MB (a GPT-2 training loop on an H100: tests/data/h100/long).
REAL_TRACE = HERE.parent / "tests" / "data" / "h100" / "long" / "train_gpt2_long.json.gz"
# Small traces for the command's fixed cost: a capture of one attention loop (140 KB of JSON) and a
# GPT-2 training capture near the target's 10 MB (tests/data).
SMALL_TRACES = (HERE.parent / "tests" / "data" / "h200" / "loops" / "infer_inplace.json.gz",
                HERE.parent / "tests" / "data" / "h100" / "model_pairs" / "gpt2_train_fp32.json.gz")
# What --layouts takes: build_trace's layouts (ndjson is the floor's input, not a trace) and gz,
# Kineto's layout gzipped.
RUN_LAYOUTS = tuple(layout for layout in LAYOUTS if layout != "ndjson") + ("gz",)


def trace_path(folder, size, steps):
    """The Kineto-layout trace of `size` MB; the other layouts sit beside it (layouts.layout_path)."""
    return Path(folder) / (f"bench_{size}MB_{steps}steps.json" if steps else f"bench_{size}MB.json")


def layout_file(base, layout):
    return Path(str(base) + ".gz") if layout == "gz" else Path(layout_path(base, layout))


def build(out, size, steps, layout="kineto", gzip_too=False, count=1):
    """Runs build_trace.py in a child: this process stays small, as the children it measures inherit
    its peak RSS."""
    cmd = [sys.executable, str(HERE / "build_trace.py"), "--size", str(size), "--out", str(out), "--layout", layout]
    cmd += (["--steps", str(steps)] if steps else []) + (["--gzip"] if gzip_too else [])
    cmd += ["--count", str(count)] if count > 1 else []
    what = f"{count} × " if count > 1 else ""
    print(f"building {what}{out} ({layout}{' + .gz' if gzip_too else ''}) ...", file=sys.stderr)
    started = time.monotonic()
    if subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode:
        raise SystemExit(f"build failed: {' '.join(cmd)}")
    print(f"  built in {time.monotonic() - started:.0f} s", file=sys.stderr)


def ensure_trace(folder, size, layout, steps):
    """The trace of `size` MB in `layout`, built when missing; the Kineto-layout one always, since
    every layout's events are measured against its size."""
    base = trace_path(folder, size, steps)
    if not base.exists():
        build(base, size, steps, gzip_too=layout == "gz")
    path = layout_file(base, layout)
    if not path.exists():
        build(path, size, steps, "kineto" if layout == "gz" else layout)
    return path


def ensure_folder(root, count, size, steps):
    """A folder of `count` traces of `size` MB, each an hour later than the one before (distinct content)."""
    folder = Path(root) / f"folder_{count}x{size}MB_{steps}steps"
    stem = trace_path(folder, size, steps).name[:-len(".json")]
    paths = [folder / f"{stem}_{index:02d}.json" for index in range(count)]
    if sorted(folder.glob("*.json")) != paths:
        shutil.rmtree(folder, ignore_errors=True)
        build(trace_path(folder, size, steps), size, steps, count=count)
    return folder, paths


def _hta_python(asked):
    for candidate in ([asked] if asked else []) + [sys.executable, "/tmp/hta-venv/bin/python"]:
        if candidate and subprocess.run([candidate, "-c", "import hta"], capture_output=True).returncode == 0:
            return candidate
    return None


def versions(hta_python):
    # Imported here, after every measurement: duckdb and tracekit would swell this process.
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


def _ints(text):
    return [int(value) for value in text.split(",") if value]


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000", help="trace sizes in MB of Kineto-layout JSON [1000]")
    parser.add_argument("--layouts", default=",".join(RUN_LAYOUTS),
                        help=f"layouts of each size, of {', '.join(RUN_LAYOUTS)} (gz: Kineto's, gzipped) [all]")
    parser.add_argument("--folder", default="32,30", metavar="N,SIZE_MB",
                        help="a folder of N traces of SIZE_MB each, loaded with `tracekit load FOLDER`, "
                        "then pinned to one core [32,30]")
    parser.add_argument("--dir", default="/tmp/bench", help="where traces and databases go [/tmp/bench]")
    parser.add_argument("--steps", type=int, default=30, help="steady steps per trace, each holding many "
                        "forwards, as in a real training trace; 0: one step per forward [30]")
    parser.add_argument("--hta-sizes", default="100", help="run HTA on the Kineto-layout traces of these "
                        "sizes, in --sizes or not; the × HTA column uses the nearest [100]")
    parser.add_argument("--repeat", type=int, default=1, help="loads, the floor and CLI queries: best of N [1]")
    parser.add_argument("--query-repeat", type=int, default=3, help="runs of each query [3]")
    parser.add_argument("--skip-hta", action="store_true")
    parser.add_argument("--skip-json", action="store_true", help="skip json.load")
    parser.add_argument("--skip-folder", action="store_true")
    parser.add_argument("--skip-floor", action="store_true", help="skip DuckDB's NDJSON read")
    parser.add_argument("--skip-queries", action="store_true")
    parser.add_argument("--real", default=str(REAL_TRACE), metavar="TRACE",
                        help="a real trace (.json or .json.gz, read as plain JSON) measured beside json.load and HTA "
                             "['' to skip; default tests/data/h100/long's 135 MB training trace]")
    parser.add_argument("--small", default=",".join(str(p) for p in SMALL_TRACES), metavar="TRACES",
                        help="small traces (comma-separated) loaded as a command, --small-runs times each")
    parser.add_argument("--small-runs", type=int, default=9, help="fresh `tracekit load` runs of each small trace [9]")
    parser.add_argument("--skip-small", action="store_true")
    parser.add_argument("--skip-analysis", action="store_true", help="skip the critical path, summary and "
                        "finding rules on the biggest Kineto-layout database")
    parser.add_argument("--hta-python", help="a python with holistictraceanalysis [this one, else /tmp/hta-venv]")
    parser.add_argument("--wait-quiet", type=float, default=0, metavar="S",
                        help="before each measurement wait up to S s until other processes use < 0.3 CPUs [0]")
    parser.add_argument("--json", dest="json_out", help="also write the raw numbers here")
    args = parser.parse_args(argv)
    args.sizes, args.hta_sizes = _ints(args.sizes), _ints(args.hta_sizes)
    args.layouts = [layout for layout in args.layouts.split(",") if layout]
    unknown = set(args.layouts) - set(RUN_LAYOUTS)
    if unknown or not args.sizes or not args.layouts:
        parser.error(f"--sizes and --layouts may not be empty; layouts are {', '.join(RUN_LAYOUTS)}"
                     + (f" (not {', '.join(sorted(unknown))})" if unknown else ""))
    folder = _ints(args.folder)
    if not args.skip_folder and (len(folder) != 2 or min(folder) < 1):
        parser.error("--folder takes N,SIZE_MB, e.g. 32,30")
    args.folder = None if args.skip_folder else folder
    return args


def measure_loads(args, root):
    rows = []
    for size in args.sizes:
        for layout in args.layouts:
            path = ensure_trace(root, size, layout, args.steps)
            kineto = trace_path(root, size, args.steps)
            row = {"size": size, "layout": layout, "path": str(path), "file_bytes": path.stat().st_size,
                   "json_bytes": kineto.stat().st_size if layout == "gz" else path.stat().st_size,
                   "kineto_bytes": kineto.stat().st_size}
            print(f"measuring {path.name} ...", file=sys.stderr)
            row["tracekit"] = measure.measure_load(path, root / f"{path.name}.duckdb", args.repeat)
            if not args.skip_json:
                row["json_gc_off"] = measure.measure_json(path)
            rows.append(row)
            tk, off = row["tracekit"], row.get("json_gc_off")
            print(f"  tracekit load {tk['seconds']:.2f} s, {tk['peak_rss'] / MB:,.0f} MB" if tk else "  tracekit load failed",
                  *([f"json.load {off['seconds']:.2f} s"] if off else []), sep="; ", file=sys.stderr)
    return rows


def measure_hta(args, root, rows, hta_python):
    entries = []
    for size in args.hta_sizes:
        path = ensure_trace(root, size, "kineto", args.steps)
        print(f"HTA on {path.name} ...", file=sys.stderr)
        entry = {"size": size, "path": str(path), "json_bytes": path.stat().st_size,
                 "hta": measure.measure_hta(path, hta_python, root / "hta")}
        done = next((row for row in rows if row["path"] == str(path)), None)
        entry["tracekit"] = done["tracekit"] if done else measure.measure_load(path, root / f"{path.name}.duckdb",
                                                                              args.repeat)
        entries.append(entry)
    return entries


def measure_real(args, root, hta_python):
    """tracekit load, json.load and HTA's parser on a real trace, as plain JSON in --dir."""
    source = Path(args.real)
    path = root / (source.name[:-len(".gz")] if source.name.endswith(".gz") else source.name)
    if not path.exists() or path.stat().st_mtime < source.stat().st_mtime:
        with (gzip.open(source, "rb") if source.name.endswith(".gz") else open(source, "rb")) as src, \
                open(path, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
    print(f"measuring the real trace {path.name} ...", file=sys.stderr)
    real = {"path": str(path), "json_bytes": path.stat().st_size,
            "tracekit": measure.measure_load(path, root / f"{path.name}.duckdb", args.repeat)}
    if not args.skip_json:
        real["json_gc_off"] = measure.measure_json(path)
    if hta_python:
        real["hta"] = measure.measure_hta(path, hta_python, root / "hta")
    return real


def measure_folder(args, root):
    count, size = args.folder
    folder, paths = ensure_folder(root, count, size, args.steps)
    print(f"measuring the folder {folder.name} ...", file=sys.stderr)
    result = {"path": str(folder), "traces": count, "json_bytes": sum(path.stat().st_size for path in paths)}
    result["tracekit"] = measure.measure_load(folder, root / f"{folder.name}.duckdb", args.repeat)
    result["pinned"] = measure.measure_load(folder, root / f"{folder.name}.pinned.duckdb", args.repeat, pin="0")
    return result


def measure_floor(args, root):
    size = max(args.sizes)
    ndjson = ensure_trace(root, size, "ndjson", args.steps)
    print(f"the floor: DuckDB's read_json of {ndjson.name} ...", file=sys.stderr)
    return {"path": str(ndjson), "file_bytes": ndjson.stat().st_size,
            "kineto_bytes": trace_path(root, size, args.steps).stat().st_size,
            "duckdb": measure.measure_floor(ndjson, root / f"{ndjson.name}.floor.duckdb", args.repeat)}


def measure_small(args, root):
    entries = []
    for trace in (Path(p) for p in args.small.split(",") if p):
        print(f"{trace.name} as a command, {args.small_runs} runs ...", file=sys.stderr)
        opener = gzip.open if trace.name.endswith(".gz") else open
        with opener(trace, "rb") as handle:
            json_bytes = sum(len(block) for block in iter(lambda: handle.read(1 << 20), b""))
        entries.append({"path": str(trace), "file_bytes": trace.stat().st_size, "json_bytes": json_bytes,
                        "tracekit": measure.measure_small_command(trace, root / "small.duckdb", args.small_runs)})
    return entries


def measure_analysis(db):
    print(f"the critical path, summary and finding rules on {db.name} ...", file=sys.stderr)
    return {"db": str(db), "tracekit": measure.measure_analysis(db)}


def _measurements(value):
    """Every measurement's dict (those carrying the machine's load) inside `value`."""
    if isinstance(value, dict):
        found = [value] if "load" in value else []
        return found + [m for item in value.values() for m in _measurements(item)]
    if isinstance(value, list):
        return [m for item in value for m in _measurements(item)]
    return []


def main(argv=None):
    args = parse_args(argv)
    measure.WAIT_S = args.wait_quiet
    measure.start_as_installed()
    hta_python = None if args.skip_hta else _hta_python(args.hta_python)
    if not args.skip_hta and hta_python is None:
        raise SystemExit("no python with `import hta`: python -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip "
                         "install holistictraceanalysis==0.5.0, or pass --skip-hta")
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    rows = measure_loads(args, root)
    hta = measure_hta(args, root, rows, hta_python) if hta_python and args.hta_sizes else []
    folder = measure_folder(args, root) if args.folder else None
    real = measure_real(args, root, hta_python) if args.real else None
    floor = None if args.skip_floor else measure_floor(args, root)
    biggest = [row for row in rows if row["size"] == max(args.sizes) and row.get("tracekit")]
    kineto_row = next((row for row in biggest if row["layout"] == "kineto"), None)
    query_row = kineto_row or (biggest[0] if biggest else None)
    query_db = query_row and root / f"{Path(query_row['path']).name}.duckdb"
    queries = None if args.skip_queries or not query_db else measure.measure_queries(query_db, args.query_repeat)
    analysis = None if args.skip_analysis or not kineto_row else measure_analysis(query_db)
    small = None if args.skip_small else measure_small(args, root)

    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    taken = _measurements([rows, hta, folder, floor, real, small, analysis]) or [{"load": 0.0, "others_busy": 0.0}]
    meta = {"date": stamp, "cpus": os.cpu_count(), "machine": platform.platform(), "versions": versions(hta_python),
            "repeat": args.repeat, "load_avg_range": [min(m["load"] for m in taken), max(m["load"] for m in taken)],
            "others_busy_range": [min(m["others_busy"] for m in taken), max(m["others_busy"] for m in taken)]}
    print(f"{stamp}, {meta['cpus']} CPUs, {meta['machine']}, {meta['versions']}; best of {args.repeat}; before each "
          f"measurement: 1-min load average {meta['load_avg_range'][0]:.2f}–{meta['load_avg_range'][1]:.2f}, other "
          f"processes busy {meta['others_busy_range'][0]:.2f}–{meta['others_busy_range'][1]:.2f} CPUs\n")
    print("### Loading one trace\n\n" + tables.load_table(rows, hta, max(args.sizes)) + "\n")
    if hta:
        print("### HTA's parser\n\n" + tables.hta_table(hta) + "\n")
    if real:
        print("### A real training trace\n\n" + tables.real_table(real) + "\n")
    if folder:
        print("### A folder of traces\n\n" + tables.folder_table(folder) + "\n")
    if floor:
        print("### The floor\n\n" + tables.floor_table(floor, kineto_row) + "\n")
    if queries:
        print("### Named queries\n\n" + tables.query_table(queries, query_db) + "\n")
    if small:
        print("### A small trace as a command\n\n" + tables.small_table(small) + "\n")
    if analysis:
        print("### The analysis of the loaded trace\n\n" + tables.analysis_table(analysis) + "\n")
    print("### Against the targets\n\n" + tables.targets(rows, hta, folder, floor, queries, max(args.sizes),
                                                          real, small, analysis))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"meta": meta, "rows": rows, "hta": hta, "folder": folder,
                                                   "floor": floor, "queries": queries, "real": real, "small": small,
                                                   "analysis": analysis}, indent=1))


if __name__ == "__main__":
    main()
