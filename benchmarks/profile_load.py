"""Where `tracekit load` spends its time and memory: the loader's statements, timed, and experiments.

  statements TRACE   runs the real tracekit.ingest.loader.load_file on a fresh database through a connection
                     proxy that times each execute(), so it follows whatever the loader does today.
  plans TRACE        the same, with DuckDB's profiler on: each statement's parse, binding, planning,
                     optimizer, physical plan and operators' CPU time, the costliest first, and totals.
  phases TRACE       the same through load_files (the CLI's path: its memory limit, its publish), each
                     statement put in its phase (the event read, each derive_*.sql stage, the kernel
                     classes, publish, commit): wall and CPU seconds (all threads) and share, best of --repeat.
  insert TRACE       one way of getting the events into event_rows, in this process: through a FIFO fed
                     by stream_events (today's way) or by `cat`, or from a file; --max-object, --set.
  experiments TRACE  every `insert` variant in a fresh process (time and peak RSS), then the JSON
                     reader's scan speed: array vs NDJSON, file vs FIFO, 1 vs 2 threads.
  derive DB          today's and cheaper forms of the costliest derive_*.sql statements, on a loaded DB.

    /tmp/venv/bin/python benchmarks/profile_load.py statements /tmp/bench/bench_1000MB.json
"""

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb

from tracekit.ingest import event_read, loader
from tracekit.store.database import connect
from tracekit.ingest.tracefile import stream_events

HERE = Path(__file__).resolve().parent
WORK = Path("/tmp/bench/profile")
# Touches every column, so the reader cannot skip parsing any of them (count(*) alone can).
ALL_COLUMNS = ("count(ph) + count(cat) + count(name) + count(ts) + count(dur) + count(pid) + count(tid)"
               " + count(id) + count(bp) + count(s) + sum(length(args::VARCHAR))")


class TimedConnection:
    """Passes every call to a DuckDB connection and records how long each execute() took."""

    def __init__(self, con):
        self._con, self.timings, self.cpu, self.texts = con, [], [], []

    def execute(self, sql, *args):
        started, cpu = time.perf_counter(), time.process_time()
        result = self._con.execute(sql, *args)
        self.timings.append((time.perf_counter() - started, " ".join(sql.split())))
        self.cpu.append(time.process_time() - cpu)
        self.texts.append(sql)
        return result

    def executemany(self, sql, *args):
        started = time.perf_counter()
        result = self._con.executemany(sql, *args)
        self.timings.append((time.perf_counter() - started, "executemany: " + " ".join(sql.split())))
        return result

    def __getattr__(self, name):
        return getattr(self._con, name)


class ProfiledConnection(TimedConnection):
    """A TimedConnection that asks DuckDB's own profiler where each statement's time went: parsing
    (timed apart, on a connection of its own), binding and the rest of planning, the optimizer, the
    physical plan, and its operators' CPU time (every thread's). An EXPLAIN, timed, is no measure of
    planning: it costs about what running the statement does (it renders the plan, expressions and
    all), so it once read as if a small trace's load were all planning."""

    PARTS = ("parse", "bind", "plan", "optimize", "physical", "operators", "duckdb")

    def __init__(self, con, profile):
        super().__init__(con)
        self.profile, self.parser = Path(profile), duckdb.connect()
        self.parts = []
        for setting in ("enable_profiling = 'json'", "profiling_mode = 'detailed'",
                        f"profiling_output = '{self.profile}'"):
            con.execute(f"SET {setting}")

    def execute(self, sql, *args):
        started = time.perf_counter()
        self.parser.extract_statements(sql)
        parse = time.perf_counter() - started
        self.profile.unlink(missing_ok=True)
        result = super().execute(sql, *args)
        try:
            report = json.loads(self.profile.read_text())
        except (OSError, ValueError):
            return result  # a statement DuckDB does not profile (BEGIN, SET)
        planner, query = report.get("planner", {}), report.get("query", {})
        bind = planner.get("binding_time", 0.0)
        self.parts.append((parse, bind, planner.get("total_time", 0.0) - bind,
                           report.get("optimizer", {}).get("total_time", 0.0),
                           report.get("physical_planner", {}).get("total_time", 0.0),
                           query.get("cpu_time", 0.0), query.get("total_time", 0.0), " ".join(sql.split())))
        return result


def plans(path, db, top):
    Path(db).unlink(missing_ok=True)
    con = connect(db)
    profiled = ProfiledConnection(con, WORK / "statement_profile.json")
    loader.load_file(profiled, path)
    con.close()
    heads = ("parse", "bind", "rest of planning", "optimizer", "physical plan", "operators' CPU", "DuckDB's total")
    print(f"{path}: the statements DuckDB spent most on, in ms (its profiler's figures; operators' CPU counts "
          "every thread)")
    print("| " + " | ".join(heads) + " | statement |\n" + "|---:" * len(heads) + "|---|")
    for row in sorted(profiled.parts, key=lambda row: -row[6])[:top]:
        print("| " + " | ".join(f"{seconds * 1000:.1f}" for seconds in row[:7]) + f" | `{row[7][:80]}` |")
    totals = [sum(row[i] for row in profiled.parts) * 1000 for i in range(7)]
    planning = sum(totals[1:5])
    print(f"\nthe {len(profiled.parts)} statements DuckDB profiled: " +
          ", ".join(f"{head} {ms:.0f} ms" for head, ms in zip(heads, totals)) +
          f"; planning (bind to physical plan) {planning:.0f} ms, {planning / totals[6]:.0%} of DuckDB's total; "
          f"the load's {len(profiled.timings)} calls took {sum(s for s, _ in profiled.timings) * 1000:.0f} ms "
          "(the profiler's own writing included)")


def _rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def statements(path, db, settings, top):
    Path(db).unlink(missing_ok=True)
    con = connect(db)
    for setting in settings:
        con.execute(f"SET {setting}")
    timed = TimedConnection(con)
    started = time.perf_counter()
    result = loader.load_file(timed, path)
    total = time.perf_counter() - started
    con.close()
    print(f"{path}: {result.events:,} events in {total:.2f} s, peak RSS {_rss_mb():,.0f} MB"
          f" (settings: {', '.join(settings) or 'defaults'})")
    print("| s | share | statement |\n|---:|---:|---|")
    ranked = sorted(timed.timings, reverse=True)
    for seconds, sql in ranked[:top]:
        print(f"| {seconds:.2f} | {seconds / total:.0%} | `{sql[:110]}` |")
    rest = sum(s for s, _ in ranked[top:])
    print(f"| {rest:.2f} | {rest / total:.0%} | the other {max(len(ranked) - top, 0)} statements |")


def _head(sql):
    # the statement's target: what follows it (the work models' rules and formulas) varies by trace
    return " ".join(sql.split())[:60]


def _phase_of(sql, derive_stage):
    """The phase a statement the loader ran belongs to."""
    if _head(sql) in derive_stage:
        return f"derive: {derive_stage[_head(sql)]}"
    flat = " ".join(sql.split())
    if flat.startswith("INSERT INTO kernel_classes"):
        return "kernel classes (store_classes)"
    if flat.startswith("INSERT INTO event_rows") or "FROM event_rows WHERE trace_id = $trace_id AND (ph IS NULL" in flat:
        return "read events (JSON to event_rows through the FIFOs, the typed read's check)"
    if flat.startswith("SELECT coalesce(("):
        return "derive: the guarded blocks' conditions (tracekit.store.guarded_sql)"
    if flat in ("COMMIT", "BEGIN"):
        return "begin, commit"
    if "trace_files" in flat or "kernel_rows WHERE trace_id = ?" in flat or "min(s), max(e)" in flat:
        return "publish (trace_files row, device, names)"
    return "other (settings, counts, sequence)"


def phases(path, db, repeat, top):
    """Each phase of a load of `path` (load_files, as the CLI runs it), best of `repeat` by total."""
    # By each statement's start: _op_work's formulas are filled in as it runs, deep inside it.
    derive_stage = {_head(statement): name for name in loader.DERIVE_STAGES
                    for _, _, statement in loader.guarded_statements(loader.sql_resource(name))}
    runs = []
    for _ in range(repeat):
        for leftover in (Path(db), Path(f"{db}.wal")):
            leftover.unlink(missing_ok=True)
        con = connect(db)
        timed = TimedConnection(con)
        started, cpu = time.perf_counter(), time.process_time()
        [(_, result)] = list(loader.load_files(timed, [path]))
        runs.append((time.perf_counter() - started, time.process_time() - cpu, timed, result))
        con.close()
    total, total_cpu, timed, result = min(runs, key=lambda run: run[0])
    by_phase = {}
    for seconds, cpu, sql in zip((t for t, _ in timed.timings), timed.cpu, timed.texts):
        wall_cpu = by_phase.setdefault(_phase_of(sql, derive_stage), [0.0, 0.0, 0])
        wall_cpu[0] += seconds
        wall_cpu[1] += cpu
        wall_cpu[2] += 1
    print(f"{path}: {result.events:,} events, load_files {total:.2f} s wall, {total_cpu:.2f} CPU-s"
          f" (best of {repeat}), peak RSS {_rss_mb():,.0f} MB\n")
    print("| phase | statements | s | share | CPU-s |\n|---|---:|---:|---:|---:|")
    for phase, (seconds, cpu, count) in sorted(by_phase.items(), key=lambda item: -item[1][0]):
        print(f"| {phase} | {count} | {seconds:.2f} | {seconds / total:.0%} | {cpu:.2f} |")
    rest = total - sum(v[0] for v in by_phase.values())
    print(f"| Python between statements (skip check, hashing a .gz file) | | {rest:.2f} | {rest / total:.0%} | |")
    print("\n| s | CPU-s | phase | statement |\n|---:|---:|---|---|")
    ranked = sorted(zip((t for t, _ in timed.timings), timed.cpu, timed.texts), key=lambda row: -row[0])
    for seconds, cpu, sql in ranked[:top]:
        print(f"| {seconds:.2f} | {cpu:.2f} | {_phase_of(sql, derive_stage).split(' (')[0]} | `{_head(sql)[:90]}` |")


def array_file(path):
    """The trace's event array alone, as a plain file (made once)."""
    WORK.mkdir(parents=True, exist_ok=True)
    target = WORK / (Path(path).name.split(".")[0] + "_array.json")
    if not target.exists():
        with open(target, "wb", buffering=1 << 20) as sink:
            stream_events(path, sink)
    return target


def ndjson_file(path):
    """The same events, one per line (made once, by DuckDB)."""
    target = WORK / (Path(path).name.split(".")[0] + ".ndjson")
    if not target.exists():
        duckdb.connect().execute(f"COPY (SELECT * FROM read_json('{array_file(path)}', format='array', "
                                 f"columns={event_read.EVENT_COLUMNS})) TO '{target}' (FORMAT json)")
    return target


def with_fifo(feed, query):
    """Runs `query(fifo)` while the thread `feed(fifo)` writes into the FIFO."""
    fifo = WORK / f"fifo_{os.getpid()}"
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    writer = threading.Thread(target=feed, args=(fifo,))
    writer.start()
    try:
        return query(fifo)
    finally:
        writer.join()
        fifo.unlink()


def python_feed(path):
    def feed(fifo):
        with open(fifo, "wb", buffering=1 << 20) as sink:
            stream_events(path, sink)
    return feed


def cat_feed(source):
    return lambda fifo: subprocess.run(["sh", "-c", f"cat '{source}' > '{fifo}'"], check=True)


# Typed columns: the reader parses ts and dur straight into exact decimals (JSON columns hold numbers
# as doubles, which lose the ns of epoch-microsecond timestamps) and names as text.
TYPED_COLUMNS = ("{ph: 'VARCHAR', cat: 'VARCHAR', name: 'VARCHAR', ts: 'DECIMAL(38,3)', dur: 'DECIMAL(38,3)',"
                 " pid: 'VARCHAR', tid: 'VARCHAR', id: 'VARCHAR', bp: 'VARCHAR', s: 'VARCHAR', args: 'JSON'}")
TYPED_INSERT = ("INSERT INTO event_rows SELECT $trace_id, cat, name, ph, CAST(ts * 1000 AS BIGINT), "
                "CAST(dur * 1000 AS BIGINT), pid, tid, id, bp, s, @ARGS FROM read_json($fifo, format = '@FORMAT', "
                "columns = " + TYPED_COLUMNS + ")")


def insert(path, source, max_object, settings, typed=None):
    """Today's INSERT INTO event_rows (with the per-event checks), fed one way; prints time and RSS.
    `typed` ("args" or "no-args"): instead, typed columns and no checks, args kept or left NULL."""
    db = WORK / f"insert_{os.getpid()}.duckdb"
    db.unlink(missing_ok=True)
    con = connect(db)
    for setting in settings:
        con.execute(f"SET {setting}")
    # The loader's exact read, with its per-event checks (the fast read is `--typed args` from a file).
    sql = event_read._strict_sql()
    if typed:
        sql = TYPED_INSERT.replace("@ARGS", "args" if typed == "args" else "NULL").replace(
            "@FORMAT", "newline_delimited" if source.startswith("ndjson") else "array")
    if max_object:
        sql = sql.replace(f"maximum_object_size = {event_read.MAX_EVENT_BYTES}", f"maximum_object_size = {max_object}")
    con.execute("BEGIN")
    started = time.perf_counter()
    run = lambda target: con.execute(sql, {"fifo": str(target), "trace_id": 1})  # noqa: E731
    try:
        if source == "file":
            run(array_file(path))
        elif source == "ndjson":
            run(ndjson_file(path))
        elif source == "ndjson-cat":
            with_fifo(cat_feed(ndjson_file(path)), run)
        else:
            with_fifo(python_feed(path) if source == "fifo" else cat_feed(array_file(path)), run)
        seconds = time.perf_counter() - started
        con.execute("COMMIT")
    finally:
        con.close()
        db.unlink()
    print(f"| {seconds:.2f} | {_rss_mb():,.0f} | {source} | {max_object or event_read.MAX_EVENT_BYTES} "
          f"| {', '.join(settings + ([f'typed columns, args {typed}'] if typed else [])) or 'defaults'} |", flush=True)


def _timed(label, work, repeat=2):
    best = min(_once(work) for _ in range(repeat))
    print(f"| {best:.2f} | {label} |", flush=True)


def _once(work):
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def experiments(path, part="all"):
    # The files are made in a child: Linux keeps a process's peak RSS across fork and exec, so a
    # big parent would hide its children's own peaks.
    subprocess.run([sys.executable, __file__, "prepare", str(path)], check=True)
    array, ndjson = array_file(path), ndjson_file(path)
    if part in ("all", "inserts"):
        _insert_variants(path)
    if part in ("all", "scans"):
        _scans(path, array, ndjson)


def _insert_variants(path):
    print("INSERT INTO event_rows, each in a fresh process:\n\n| s | peak RSS MB | fed from | maximum_object_size"
          " | settings |\n|---:|---:|---|---:|---|", flush=True)
    variants = [("fifo", 0, []), ("fifo", 16 << 20, []), ("cat", 0, []), ("file", 0, []), ("fifo", 0, ["threads=1"]),
                ("fifo", 0, ["memory_limit='1GB'"]), ("fifo", 16 << 20, ["memory_limit='1GB'"]),
                ("file", 0, ["memory_limit='600MB'"]), ("file", 0, ["preserve_insertion_order=false"]),
                ("file", 0, [], "args"), ("ndjson", 0, [], "args"), ("ndjson-cat", 0, [], "args"),
                ("ndjson", 0, [], "no-args")]
    for source, max_object, settings, *typed in variants:
        cmd = [sys.executable, __file__, "insert", str(path), "--source", source, "--max-object", str(max_object)]
        cmd += ["--typed", typed[0]] if typed else []
        result = subprocess.run(cmd + [arg for s in settings for arg in ("--set", s)], capture_output=True, text=True)
        errors = [line for line in result.stderr.splitlines() if "Error" in line] or result.stderr.splitlines()[-1:]
        print(result.stdout.strip() or f"| failed | | {source} | {max_object} | {', '.join(settings)}: "
              f"{errors[-1][:160] if errors else ''} |", flush=True)


def _scans(path, array, ndjson):
    print("\nThe JSON reader alone (every column read, best of 2):\n\n| s | what |\n|---:|---|")
    _timed("stream_events to /dev/null (Python: read, gunzip, sha256, cut the array)",
           lambda: stream_events(path, open(os.devnull, "wb")))
    for threads in (1, 2):
        con = duckdb.connect()
        con.execute(f"SET threads = {threads}")

        def scan(source, fmt="array"):
            return lambda: con.execute(f"SELECT {ALL_COLUMNS} FROM read_json('{source}', format='{fmt}', "
                                       f"columns={event_read.EVENT_COLUMNS})").fetchone()
        _timed(f"array, from a file, {threads} thread(s)", scan(array))
        _timed(f"array, FIFO fed by stream_events, {threads} thread(s)",
               lambda: with_fifo(python_feed(path), lambda fifo: scan(fifo)()))
        _timed(f"NDJSON, from a file, {threads} thread(s)", scan(ndjson, "newline_delimited"))
        _timed(f"NDJSON, FIFO fed by `cat`, {threads} thread(s)",
               lambda: with_fifo(cat_feed(ndjson), lambda fifo: scan(fifo, "newline_delimited")()))
        con.close()


_OPS_WHERE = ("FROM event_rows WHERE trace_id = $t AND ph = 'X' AND ts_ns IS NOT NULL"
              " AND lower(cat) IN ('cpu_op', 'user_annotation', 'operator')")
_GPU_WHERE = ("FROM event_rows WHERE trace_id = $t AND ph = 'X'"
              " AND lower(cat) IN ('kernel', 'gpu_memcpy', 'memcpy', 'gpu_memset', 'memset')")
_OP_KIND = "CASE WHEN lower(cat) = 'kernel' THEN 'kernel' WHEN lower(cat) IN ('gpu_memcpy', 'memcpy') THEN 'memcpy' ELSE 'memset' END"
DERIVE_CASES = {
    "_ops today: row_number() over 5 keys + 3 args extractions": f"""
        SELECT row_number() OVER (ORDER BY pid, tid, ts_ns, dur_ns DESC, name) - 1 AS op_id, cat, name, ts_ns,
               coalesce(dur_ns, 0) AS dur_ns, pid, tid,
               TRY_CAST(json_extract_string(args, '$."External id"') AS BIGINT) AS external_id,
               json_extract(args, '$."Input Dims"') AS input_dims, json_extract(args, '$."Input type"') AS input_types
        {_OPS_WHERE}""",
    "_ops without the args extractions": f"""
        SELECT row_number() OVER (ORDER BY pid, tid, ts_ns, dur_ns DESC, name) - 1 AS op_id, cat, name, ts_ns,
               coalesce(dur_ns, 0) AS dur_ns, pid, tid {_OPS_WHERE}""",
    "_ops without the window": f"""
        SELECT cat, name, ts_ns, coalesce(dur_ns, 0) AS dur_ns, pid, tid,
               TRY_CAST(json_extract_string(args, '$."External id"') AS BIGINT) AS external_id,
               json_extract(args, '$."Input Dims"') AS input_dims, json_extract(args, '$."Input type"') AS input_types
        {_OPS_WHERE}""",
    "_ops args in one json_extract(args, [paths]) call, no window": f"""
        SELECT cat, name, ts_ns, coalesce(dur_ns, 0) AS dur_ns, pid, tid,
               json_extract(args, ['$."External id"', '$."Input Dims"', '$."Input type"']) AS x {_OPS_WHERE}""",
    "_ops window on the narrow rows, then one json_extract list per row": f"""
        SELECT n.op_id, e.cat, e.name, e.ts_ns, coalesce(e.dur_ns, 0) AS dur_ns, e.pid, e.tid,
               json_extract(e.args, ['$."External id"', '$."Input Dims"', '$."Input type"']) AS x
        FROM (SELECT rowid AS r, row_number() OVER (ORDER BY pid, tid, ts_ns, dur_ns DESC, name) - 1 AS op_id
              {_OPS_WHERE}) n JOIN event_rows e ON e.rowid = n.r""",
    "_gpu today: 4 json_extract_string calls": f"""
        SELECT {_OP_KIND} AS op, name, ts_ns, dur_ns, args,
               TRY_CAST(json_extract_string(args, '$.device') AS INTEGER) AS device,
               TRY_CAST(json_extract_string(args, '$.stream') AS INTEGER) AS stream,
               TRY_CAST(json_extract_string(args, '$.correlation') AS BIGINT) AS correlation,
               TRY_CAST(json_extract_string(args, '$."External id"') AS BIGINT) AS external_id {_GPU_WHERE}""",
    "_gpu with one json_extract_string(args, [paths]) call": f"""
        SELECT op, name, ts_ns, dur_ns, args, TRY_CAST(x[1] AS INTEGER) AS device, TRY_CAST(x[2] AS INTEGER) AS stream,
               TRY_CAST(x[3] AS BIGINT) AS correlation, TRY_CAST(x[4] AS BIGINT) AS external_id
        FROM (SELECT {_OP_KIND} AS op, name, ts_ns, dur_ns, args,
                     json_extract_string(args, ['$.device', '$.stream', '$.correlation', '$."External id"']) AS x
              {_GPU_WHERE})""",
}


def derive(db):
    con = connect(db)
    trace_id = con.execute("SELECT max(trace_id) FROM trace_files").fetchone()[0]
    print(f"derive_*.sql statement forms on {db} (trace_id {trace_id}), best of 2:\n\n| s | form |\n|---:|---|")
    for label, sql in DERIVE_CASES.items():
        _timed(label, lambda: con.execute("CREATE OR REPLACE TEMP TABLE _x AS " + sql, {"t": trace_id}))
    con.close()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("statements", "plans", "phases", "insert", "experiments", "derive", "prepare"))
    parser.add_argument("target", help="a trace file (a database for `derive`)")
    parser.add_argument("--db", default=str(WORK / "profile.duckdb"), help="for `statements`")
    parser.add_argument("--set", action="append", default=[], help="a DuckDB setting, e.g. threads=1")
    parser.add_argument("--source", choices=("fifo", "cat", "file", "ndjson", "ndjson-cat"), default="fifo",
                        help="for `insert`")
    parser.add_argument("--typed", choices=("args", "no-args"), help="for `insert`: typed columns, no checks")
    parser.add_argument("--max-object", type=int, default=0, help="for `insert`: maximum_object_size")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=3, help="for `phases`")
    parser.add_argument("--part", choices=("all", "inserts", "scans"), default="all", help="for `experiments`")
    args = parser.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    if args.what == "statements":
        statements(args.target, args.db, args.set, args.top)
    elif args.what == "plans":
        plans(args.target, args.db, args.top)
    elif args.what == "phases":
        phases(args.target, args.db, args.repeat, args.top)
    elif args.what == "insert":
        insert(args.target, args.source, args.max_object, args.set, args.typed)
    elif args.what == "experiments":
        experiments(args.target, args.part)
    elif args.what == "prepare":
        ndjson_file(args.target)
    else:
        derive(args.target)


if __name__ == "__main__":
    main()
