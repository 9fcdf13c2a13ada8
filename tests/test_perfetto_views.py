"""The Perfetto-compatible views (tracekit/store/sql/views_perfetto.sql): Perfetto's own example
queries, run on the sample traces, give what the trace files hold (read here with json, apart
from tracekit's loader) and what tracekit's tables say (cpu_ops' nesting, the launches' links to
their kernels), and what tracekit's Perfetto export writes."""

import gzip
import json
from collections import Counter
from decimal import Decimal

import pytest

from conftest import SAMPLE_TRACES, invoke_cli

SAMPLES = sorted(p.name.removesuffix(".json.gz") for p in SAMPLE_TRACES.glob("*.json.gz"))


def file_events(trace):
    """The trace file's events, times kept as the exact decimals it writes."""
    with gzip.open(SAMPLE_TRACES / f"{trace}.json.gz", "rt") as f:
        return json.load(f, parse_float=Decimal)["traceEvents"]


def ns(value):
    return int(Decimal(value) * 1000)


def file_slices(trace):
    """The events Perfetto's JSON importer makes slices of: complete events with a dur, and instants."""
    return [e for e in file_events(trace)
            if (e["ph"] == "X" and "dur" in e) or (e["ph"] in "iI" and e.get("s", "t") in "tpg")]


@pytest.fixture(scope="module")
def con(sample_db):
    from tracekit.store.database import connect_for_queries

    connection = connect_for_queries(sample_db)
    yield connection
    connection.close()


def rows(con, sql, params=None):
    return con.execute(sql, params or {}).fetchall()


def rows_of_db(db, sql):
    from tracekit.store.database import connect_for_queries

    connection = connect_for_queries(db)
    try:
        return rows(connection, sql)
    finally:
        connection.close()


@pytest.mark.parametrize("trace", SAMPLES)
def test_slice_counts_by_name_are_the_files(con, trace):
    """Perfetto's first example: SELECT name, count(*) FROM slice GROUP BY name."""
    got = dict(rows(con, "SELECT name, count(*) FROM slice WHERE trace = $t GROUP BY name", {"t": trace}))
    assert got == Counter(e["name"] for e in file_slices(trace))


def test_slice_counts_by_category_are_tracekits(con):
    """Each cpu op, runtime call, kernel, copy and fill of tracekit's views is one slice."""
    by_cat = dict(rows(con, "SELECT category, count(*) FROM slice GROUP BY ALL"))
    tables = {"cpu_op": "cpu_ops WHERE cat = 'cpu_op'", "user_annotation": "cpu_ops WHERE cat = 'user_annotation'",
              "kernel": "kernels", "gpu_memcpy": "memcpy", "gpu_memset": "memset",
              "cuda_runtime": "runtime WHERE cat = 'cuda_runtime'", "cuda_driver": "runtime WHERE cat = 'cuda_driver'"}
    for cat, table in tables.items():
        assert by_cat[cat] == rows(con, f"SELECT count(*) FROM {table}")[0][0], cat
    assert (by_cat["cpu_op"], by_cat["kernel"], by_cat["cuda_runtime"]) == (3876, 210, 512)


@pytest.mark.parametrize("trace", ["naive", "flex"])
def test_the_longest_slices_are_the_files(con, trace):
    """SELECT ts, dur, name FROM slice ORDER BY dur DESC LIMIT 10: the file's longest events, in ns."""
    got = rows(con, "SELECT ts, dur, name FROM slice WHERE trace = $t ORDER BY dur DESC, ts LIMIT 10", {"t": trace})
    events = sorted(((ns(e["ts"]), ns(e["dur"]), e["name"]) for e in file_slices(trace) if e["ph"] == "X"),
                    key=lambda s: (-s[1], s[0]))
    assert got == events[:10]
    assert got[0][2].startswith("ProfilerStep#") or got[0][2].startswith("PyTorch Profiler")


def test_depth_and_parent_are_cpu_ops_nesting(con):
    """On traces without python_function events (which Perfetto nests ops under), each op's slice
    has the depth and parent that tracekit's cpu_ops gives it; every op has its slice."""
    found = rows(con, """
        SELECT count(*), count(*) FILTER (WHERE s.depth <> o.depth),
               count(*) FILTER (WHERE p.name IS DISTINCT FROM o.parent OR p.ts IS DISTINCT FROM po.ts_ns)
        FROM cpu_op_rows o
        JOIN trace_files f USING (trace_id)
        JOIN slice s ON s.trace = f.trace AND s.ts = o.ts_ns AND s.dur = o.dur_ns AND s.name = o.name AND s.cat = o.cat
        LEFT JOIN slice p ON p.id = s.parent_id
        LEFT JOIN cpu_op_rows po ON po.trace_id = o.trace_id AND po.op_id = o.parent_id""")
    assert found == [(rows(con, "SELECT count(*) FROM cpu_ops")[0][0], 0, 0)]
    assert found[0][0] == 4080


def test_ids_are_unique_across_traces(con):
    assert rows(con, "SELECT count(*) = count(DISTINCT id), min(id), max(id) + 1 = count(*) FROM slice") == [(True, 0, True)]
    assert rows(con, "SELECT count(DISTINCT trace) FROM slice") == [(8,)]
    assert rows(con, "SELECT count(*) = count(DISTINCT utid) FROM thread") == [(True,)]


@pytest.mark.parametrize("trace", SAMPLES)
def test_slices_by_thread_are_the_files(con, trace):
    """Perfetto's example join: slice → thread_track → thread → process, counted by (pid, tid)."""
    got = rows(con, """
        SELECT process.pid, thread.tid, thread.name, count(*)
        FROM slice JOIN thread_track ON slice.track_id = thread_track.id
        JOIN thread USING (utid) JOIN process USING (upid)
        WHERE slice.trace = $t GROUP BY ALL""", {"t": trace})
    events = file_events(trace)
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}

    def thread(e):  # a pid or tid written as text is no number; a tid as text names its thread
        number = [v if isinstance(v, int) else None for v in (e["pid"], e["tid"])]
        return (*number, names.get((e["pid"], e["tid"]), None if number[1] is not None else e["tid"]))

    want = Counter(thread(e) for e in file_slices(trace) if e["ph"] == "X" or e.get("s", "t") == "t")
    assert {(p, t, n): c for p, t, n, c in got} == want


@pytest.mark.parametrize("trace", SAMPLES)
def test_trace_bounds_are_the_first_start_and_last_end(con, trace):
    events = file_slices(trace)
    start = min(ns(e["ts"]) for e in events)
    end = max(ns(e["ts"]) + ns(e.get("dur", 0)) for e in events)
    assert rows(con, "SELECT start_ts, end_ts FROM trace_bounds WHERE trace = $t", {"t": trace}) == [(start, end)]


def test_ancestors_of_a_kernels_launch_are_its_op_path(con):
    """Follow the flow into each kernel back to its launch, and the launch's ancestor_slice() up to
    the step: the cpu ops among them, outermost first, are the kernel's cpu_op_path."""
    kernels = rows(con, """
        SELECT k.id, launch.id, launch.name, kr.cpu_op_path
        FROM slice k JOIN flow ON flow.slice_in = k.id JOIN slice launch ON launch.id = flow.slice_out
        JOIN kernel_rows kr ON kr.ts_ns = k.ts AND kr.name = k.name
        JOIN trace_files f ON f.trace_id = kr.trace_id AND f.trace = k.trace
        WHERE k.category = 'kernel' AND k.trace = 'naive'""")
    assert len(kernels) == rows(con, "SELECT count(*) FROM kernels WHERE trace = 'naive'")[0][0] == 30
    for _, launch_id, launch_name, op_path in kernels:
        assert launch_name in ("cudaLaunchKernel", "cuLaunchKernelEx")
        ancestors = rows(con, "SELECT name, category, depth FROM ancestor_slice($id)", {"id": launch_id})
        assert [depth for _, _, depth in ancestors] == list(range(len(ancestors) - 1, -1, -1))
        assert ancestors[-1][0] == "ProfilerStep#" + ancestors[-1][0].split("#")[1]
        assert " → ".join(name for name, cat, _ in reversed(ancestors) if cat == "cpu_op") == op_path


def test_descendants_are_what_the_step_encloses(con):
    step = rows(con, "SELECT id, ts, dur, track_id FROM slice WHERE trace = 'naive' AND name = 'ProfilerStep#2'")[0]
    below = rows(con, "SELECT count(*), min(depth), bool_and(ts >= $ts AND ts + dur <= $end) FROM descendant_slice($id)",
                 {"id": step[0], "ts": step[1], "end": step[1] + step[2]})
    enclosed = rows(con, "SELECT count(*) FROM slice WHERE track_id = $track AND id <> $id AND ts >= $ts "
                         "AND ts + dur <= $end", {"track": step[3], "id": step[0], "ts": step[1], "end": step[1] + step[2]})
    assert below == [(enclosed[0][0], 1, True)] and enclosed[0][0] == 48


def test_each_flow_leads_from_a_launch_to_the_gpu_work_it_launched(con):
    """Every ac2g flow of the files (a start and an end of one id) is a row of flow, from the
    runtime call tracekit links by correlation to the kernel, copy or fill of that correlation."""
    flows = rows(con, """
        SELECT flow.trace, flow.trace_id, o.name, o.ts, i.name, i.ts
        FROM flow JOIN slice o ON o.id = flow.slice_out JOIN slice i ON i.id = flow.slice_in
        WHERE flow.category = 'ac2g'""")
    paired = 0
    for trace in SAMPLES:
        ids = Counter(e["id"] for e in file_events(trace) if e.get("cat") == "ac2g" and e["ph"] in "sf")
        paired += sum(1 for n in ids.values() if n == 2)
    assert len(flows) == paired == 290
    launches = {(t, c, n, ts) for t, c, n, ts in rows(con, """
        SELECT f.trace, r.correlation, r.name, r.ts_ns FROM runtime_rows r JOIN trace_files f USING (trace_id)""")}
    gpu = {(t, c, n, ts) for t, c, n, ts in rows(con, """
        SELECT f.trace, g.correlation, g.name, g.ts_ns FROM (
            SELECT trace_id, correlation, name, ts_ns FROM kernel_rows
            UNION ALL SELECT trace_id, correlation, name, ts_ns FROM transfer_rows) g JOIN trace_files f USING (trace_id)""")}
    for trace, correlation, out_name, out_ts, in_name, in_ts in flows:
        assert (trace, correlation, out_name, out_ts) in launches
        assert (trace, correlation, in_name, in_ts) in gpu


def test_the_export_perfetto_opens_holds_the_same_slices(con, sample_db, tmp_path):
    """tracekit export writes the JSON Perfetto opens: its events are the slices and bounds here."""
    out = tmp_path / "naive.json"
    assert invoke_cli("export", "--trace", "naive", "--db", sample_db, "-o", out).exit_code == 0
    events = [e for e in json.loads(out.read_text(), parse_float=Decimal)["traceEvents"]
              if (e["ph"] == "X" and "dur" in e) or (e["ph"] in "iI" and e.get("s", "t") in "tpg")]
    got = rows(con, "SELECT name, ts, dur FROM slice WHERE trace = 'naive'")
    assert Counter(got) == Counter((e["name"], ns(e["ts"]), ns(e.get("dur", 0))) for e in events)
    assert rows(con, "SELECT start_ts, end_ts FROM trace_bounds WHERE trace = 'naive'") == [
        (min(ns(e["ts"]) for e in events), max(ns(e["ts"]) + ns(e.get("dur", 0)) for e in events))]


def test_counter_events_are_counters_named_as_perfetto_names_them(tmp_path):
    """No bundled trace has counter events (Kineto writes none): a built one, with a value per
    arg, one as text, one with an id, and one arg that is no number (Perfetto skips it)."""
    import trace_builder
    from tracekit.store.database import connect

    counters = [{"ph": "C", "name": "mem", "pid": 1, "tid": 1, "ts": 10.5, "args": {"allocated": 1024, "reserved": "2048"}},
                {"ph": "C", "name": "mem", "pid": 1, "tid": 1, "ts": 20, "args": {"allocated": 512, "note": "x"}},
                {"ph": "C", "name": "queue", "id": 3, "pid": 1, "tid": 1, "ts": 15, "args": {"depth": 7}}]
    path = trace_builder.write(tmp_path, "counters", trace_builder.trace(
        [trace_builder.op("aten::mm", 5, 30)] + counters))
    db = tmp_path / "c.duckdb"
    assert invoke_cli("load", path, "--db", db).exit_code == 0
    con = connect(db, read_only=True)
    try:
        got = rows(con, """SELECT t.name, c.ts, c.value, p.pid FROM counter c JOIN counter_track t ON t.id = c.track_id
                           JOIN process p USING (upid) ORDER BY c.ts, t.name""")
        bounds = rows(con, "SELECT start_ts, end_ts FROM trace_bounds")
    finally:
        con.close()
    assert got == [("mem allocated", 10500, 1024.0, 1), ("mem reserved", 10500, 2048.0, 1),
                   ("queue id: 3 depth", 15000, 7.0, 1), ("mem allocated", 20000, 512.0, 1)]
    assert bounds == [(5000, 35000)]


def test_saved_queries_run_from_the_cli_and_on_a_lake(sample_db, tmp_path):
    """ancestor_slice() through `tracekit query --sql` (read-only, sandboxed), and the views on a lake."""
    sql = ("SELECT a.name FROM slice s, ancestor_slice(s.id) a WHERE s.trace = 'naive' AND s.name = 'cudaMemsetAsync' "
           "ORDER BY s.ts, a.depth DESC LIMIT 1")
    result = invoke_cli("query", "--db", sample_db, "-f", "json", "--sql", sql)
    assert result.exit_code == 0, result.output
    launched_by = rows_of_db(sample_db, "SELECT cpu_op FROM runtime WHERE trace = 'naive' AND name = 'cudaMemsetAsync' "
                                        "ORDER BY ts_us LIMIT 1")
    assert json.loads(result.output) == [{"name": launched_by[0][0]}] == [{"name": "aten::bmm"}]
    from tracekit.lake import connect_lake, export_database

    export_database(sample_db, tmp_path / "lake")
    lake = connect_lake(tmp_path / "lake")
    try:
        counts = rows(lake, "SELECT (SELECT count(*) FROM slice), (SELECT count(*) FROM flow)")
    finally:
        lake.close()
    assert counts == [(5031, 290)]


def test_spark_names_the_views_it_does_not_make():
    pytest.importorskip("sqlglot")
    from tracekit.errors import QueryError
    from tracekit.spark.dialect import NOT_ON_SPARK, spark_tree, view_selects
    from tracekit.spark.engine import _refuse_duckdb_only
    from tracekit.store.database import sql_resource, split_statements

    perfetto = [s.split()[4] if " VIEW " in s else s.split()[4].split("(")[0]
                for s in split_statements(sql_resource("views_perfetto.sql"))]
    assert set(perfetto) <= NOT_ON_SPARK and "ancestor_slice" in perfetto
    assert view_selects(sql_resource("views_perfetto.sql")) == ()
    with pytest.raises(QueryError, match="ancestor_slice is not on Spark: the Perfetto-compatible views"):
        _refuse_duckdb_only(spark_tree("SELECT * FROM ancestor_slice(3)"))
