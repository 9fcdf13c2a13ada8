"""`tracekit query --lake DIR --engine spark`: every named query and every finding rule gives on
Spark, over a lake, the rows DuckDB gives on the database the lake was copied from; the rewrites
that make DuckDB's SQL Spark's give DuckDB's values on edge cases; the CLI's options and errors.

One Spark (local[2]) serves the module. Its whole lake, exported from a database by tracekit.lake's
writer, holds the sample traces, the foreign traces, the CPU trace, the H200 training (fp32; the
bf16 one as the job's ranks) and fp32 captures, the finding rules' built traces
(built_traces.BUILT), a 3-rank job with a straggler (conftest.rank_job) and a trace whose name
needs escaping: DuckDB reads it, and each named query gives the database's rows there. Spark reads
a lake of the traces picked from it (spark_lake, picked_traces): a query on Spark costs seconds
for each table's files it plans over, whatever their rows (the whole lake's 43 traces: 8-25 s a
rule, 12 s a named query), and the rows of traces a query gives nothing on prove nothing. The tests
of a way in (the CLI, the Python API, a lake's folder read by its path and its URI) and of damaged
lakes read a lake of two of those traces (small_lake): each of them opens a SparkLake of its own.
"""

import gzip
import json
import math
import os
import shutil
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from conftest import ROOT, SAMPLE_TRACES, SPARK_TEST_SETTINGS, TEST_DATA, invoke_cli
from tracekit.analysis.findings_engine import rules
from tracekit.analysis.named_queries import fetch_rows, named_queries, named_sql

pytest.importorskip("sqlglot")
pytest.importorskip("pyspark")
if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
    pytest.skip("Spark needs Java (17 or newer), which is not installed", allow_module_level=True)

QUERIES = sorted(named_queries())
RULES = sorted(rules())
TEST_SETTINGS = SPARK_TEST_SETTINGS
ODD_NAME = "rank 0=é%,#"  # a space, =, a non-ASCII letter, %: each escaped in a partition folder
# Besides the H200 training captures (train_fp32) and the gloo job, which launch_bound_db holds.
# The bf16 training capture (train_bf16) is in the lake three times as the job's ranks, which
# make_rank_traces copies from it: a fourth copy would add 31,566 events to every query's scans.
TRACE_FOLDERS = [SAMPLE_TRACES, TEST_DATA / "foreign", TEST_DATA / "cpu" / "naive_cpu.json.gz",
                 TEST_DATA / "cpu" / "memory" / "held_scores.json.gz",  # a peak_copy finding
                 TEST_DATA / "h200" / "fp32",
                 TEST_DATA / "h100" / "more_ops" / "train_more_ops.json.gz"]  # AMP's GradScaler (scaler_checks)


@pytest.fixture(scope="module")
def lake_db(tmp_path_factory, launch_bound_db, rank_job):
    """A database of the test traces, and a lake exported from it: (database, lake). It starts as
    a copy of conftest's launch_bound_db (the H200 training captures and the gloo job, the biggest
    traces but the job's ranks), the others loaded after them."""
    from tracekit.ingest.loader import expand_paths, load_file
    from tracekit.store.database import connect

    folder = tmp_path_factory.mktemp("spark")
    db = folder / "traces.duckdb"
    shutil.copyfile(launch_bound_db, db)
    odd = folder / f"{ODD_NAME}.json"
    # Another trace's content with one more newline: a trace of its own (its sha256 differs).
    odd.write_bytes(gzip.decompress((TEST_DATA / "foreign" / "l4_square_memcpy_two_steps.json.gz").read_bytes()) + b"\n")
    from built_traces import BUILT
    import trace_builder

    built = [trace_builder.write(folder, f"built_{name}", make()) for name, make in BUILT.items()]
    con = connect(db)
    try:
        for path in expand_paths([str(p) for p in TRACE_FOLDERS + built] + [str(odd)]):
            assert load_file(con, path).status == "loaded", path
    finally:
        con.close()
    # The job's ranks as `tracekit load` of their folder loads them (with their job and rank).
    assert invoke_cli("load", rank_job[1], "--db", db).exit_code == 0
    from tracekit.lake import export_database
    export_database(db, folder / "lake")
    return db, folder / "lake"


@pytest.fixture(scope="module")
def whole_duck(lake_db):
    """DuckDB on the whole lake (tracekit.lake.connect_lake)."""
    from tracekit.lake import connect_lake

    con = connect_lake(lake_db[1])
    yield con
    con.close()


@pytest.fixture(scope="module")
def picked_lake(lake_db, database, tmp_path_factory):
    """A lake of the traces picked_traces picks from the whole lake, exported from its database.
    They are picked on the database (DuckDB reads it in half the time it reads the lake, and gives
    the same rows: test_every_named_query_gives_the_same_rows_on_the_database_and_the_lake_...)."""
    from tracekit.lake import export_database

    lake = tmp_path_factory.mktemp("picked") / "lake"
    traces = picked_traces(database)
    assert export_database(lake_db[0], lake, traces=traces).loaded == len(traces) < 30
    return lake


@pytest.fixture(scope="module")
def spark_lake(picked_lake, spark_session):
    from tracekit.spark.engine import SparkLake

    with SparkLake(picked_lake, "local[2]", TEST_SETTINGS) as lake:
        yield lake


@pytest.fixture(scope="module")
def duck(picked_lake):
    """DuckDB on the lake Spark reads (tracekit.lake.connect_lake): the trace ids Spark sees."""
    from tracekit.lake import connect_lake

    con = connect_lake(picked_lake)
    yield con
    con.close()


@pytest.fixture(scope="module")
def database(lake_db):
    from tracekit.store.database import connect_for_queries

    con = connect_for_queries(lake_db[0])
    yield con
    con.close()


def same_value(a, b):
    """Equal, numbers to 1e-9 relative (the engines sum floats in different orders); NULL == NULL.
    A number a named query rounds may differ by one in its last digit: the engines' sums fell
    either side of a rounding boundary (3.0749999 and 3.0750001 round to 3.07 and 3.08)."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (float, Decimal)) or isinstance(b, (float, Decimal)):
        if isinstance(a, (str, bool)) or isinstance(b, (str, bool)):
            return False
        a, b = float(a), float(b)
        return a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-9 * max(abs(a), abs(b)) \
            or _one_apart_in_the_last_digit(a, b)
    return a == b


def _one_apart_in_the_last_digit(a, b):
    for digits in (1, 2, 3):
        if round(a, digits) == a and round(b, digits) == b:
            return abs(a - b) <= 1.000001 * 10 ** -digits
    return False


def _sort_key(row):
    return tuple((v is None, repr(v) if isinstance(v, float) else str(v)) for v in row)


def _same_row(a, b):
    return all(same_value(x, y) for x, y in zip(a, b))


def assert_same_rows(spark_rows, duckdb_rows):
    """The same columns, and the same rows in any order, each value as same_value says."""
    assert spark_rows.columns == duckdb_rows.columns
    assert len(spark_rows.rows) == len(duckdb_rows.rows)
    pairs = zip(sorted(spark_rows.rows, key=_sort_key), sorted(duckdb_rows.rows, key=_sort_key))
    unpaired = [pair for pair in pairs if not _same_row(*pair)]
    # Sorted alike, rows pair up; where floats that differ in their last bits ordered two rows
    # otherwise, each left-over row must still find its twin.
    left = [want for _, want in unpaired]
    for got, _ in unpaired:
        twin = next((i for i, want in enumerate(left) if _same_row(got, want)), None)
        assert twin is not None, f"Spark's row {got} is not DuckDB's (left: {left[:3]})"
        del left[twin]


VIEW_QUERIES = [
    "SELECT trace, name, dur_us, grid, block FROM kernels WHERE trace = 'naive'",
    "SELECT trace, kind, count(*) AS n, sum(bytes) AS b FROM memcpy GROUP BY ALL",
    "SELECT * FROM device_limits",
    "SELECT trace, name, flops, achieved_tflops, peak_tflops, pct_of_peak, theoretical_occupancy_pct, "
    "occupancy_limiter FROM kernels",
    "SELECT trace, name, flops, bytes, model_flops, work_family, flops_dtype, roofline_us, bound, pct_of_roofline "
    "FROM kernels",
    "SELECT * FROM gemm_math",
    "SELECT * FROM step_totals",
    "SELECT * FROM cudnn_attention_calls",
    "SELECT * FROM trace_shapes",  # a CPU trace's shape 'on the CPU', a foreign trace's NULL
    # jobs found across traces, and collectives matched and checked (the gloo job's on the CPU)
    "SELECT trace, rank, job FROM traces",
    "SELECT trace, rank, runs_on, collective, matched_by, match_key, ranks_matched, wait_us FROM collectives",
    # nccl-tests' bandwidths and the link each trace's GPU is taken to use (the knowledge table interconnects)
    "SELECT trace, rank, collective, message_bytes, bw_us, timed_from, algbw_gbps, busbw_factor, busbw_gbps, link, "
    "link_gb_s, link_pct FROM collective_bandwidth",
    "SELECT trace, cat, name, ts_us, dur_us, ts_ns FROM events WHERE ph = 'X' AND cat = 'kernel'",
    # memory: the foreign traces' [memory] events (a CUDA device, a CPU training step)
    "SELECT * FROM memory_steps",
    "SELECT * FROM memory_peak_blocks",
    "SELECT * FROM memory_events",
    # attention computed op by op: the naive samples' chains, found by their ops' shapes
    "SELECT * FROM attention_chains",
    # GradScaler's reads before the optimizer's steps (AMP's fp16 recipe)
    "SELECT * FROM scaler_checks",
    # elementwise ops a kernel each: their sizes multiply each input's dims (a list product on DuckDB,
    # an AGGREGATE on Spark)
    "SELECT * FROM elementwise_chains",
    "SELECT * FROM elementwise_chain_ops",
]


@pytest.mark.parametrize("name", QUERIES)
def test_every_named_query_gives_the_same_rows_on_the_database_and_the_lake_with_duckdb_and_spark(
        spark_lake, duck, whole_duck, database, name):
    rows = spark_lake.named(name)
    assert rows.rows, f"{name} returns nothing on the lake: the comparison would prove nothing"
    assert_same_rows(rows, fetch_rows(duck, *named_sql(name)))
    assert_same_rows(fetch_rows(whole_duck, *named_sql(name)), fetch_rows(database, *named_sql(name)))
    # No DECIMAL arithmetic crept in: Spark's numbers are DuckDB's doubles and integers.
    assert not any(isinstance(v, Decimal) for row in rows.rows for v in row)


# Parameters other than the defaults, where the lake's traces hold no default case: its collectives
# of 16 MiB or more are the built job's, whose ranks show one GPU each (no link to compare with);
# the RTX 4090 pair's 400-byte all_reduce is slow_collective's case from the first byte.
RULE_PARAMS = {"slow_collective": {"min_bytes": "1"}}


def _rule_rows(run, rule):
    """The rule's rows with its default parameters (as text, as `tracekit findings` gives them),
    but RULE_PARAMS's, its evidence parsed: JSON whose text differs between the engines only in spacing."""
    found = rules()[rule]
    rows = run(found.sql, {key: default for key, (default, _) in found.params.items()} | RULE_PARAMS.get(rule, {}))
    at = rows.columns.index("evidence")
    rows.rows = [row[:at] + (json.loads(row[at]) if row[at] is not None else None,) + row[at + 1:] for row in rows.rows]
    return rows


# The traces tests below name, and those whose rows are of a kind of their own, besides those
# picked for the queries' rows: the gloo job's collectives on the CPU (rank 0 brings rank 1), a CPU
# training step's memory events, a CPU trace's shape ('on the CPU').
NAMED_IN_TESTS = ("naive", "sdpa_math", ODD_NAME, "rtx4060_runtime_without_gpu_events", "train_naive_inplace_rank0",
                  "cpu_only_linear_train_step", "naive_cpu")


def picked_traces(duck):
    """The traces a lake needs for every finding rule, named query and view the tests compare to
    give rows on two traces (or the one): where DuckDB gives rows on all the traces (`duck`), the
    trace that gives rows to the most of those still short, the smallest (by events) of equals,
    until none is short; the traces the tests name; with a trace of a job, all of the job's ranks
    (its collectives are matched across them)."""
    def fetch(sql, params=None):
        return fetch_rows(duck, sql, params)

    events = dict(duck.execute("SELECT f.trace, count(*) FROM event_rows e JOIN trace_files f USING (trace_id) "
                               "GROUP BY f.trace").fetchall())
    results = ([_rule_rows(fetch, rule) for rule in RULES] + [fetch(*named_sql(name)) for name in QUERIES]
               + [fetch(sql) for sql in VIEW_QUERIES])
    giving = [{row[rows.columns.index("trace")] for row in rows.rows} for rows in results if "trace" in rows.columns]
    chosen = set(NAMED_IN_TESTS)

    def short():
        return [traces for traces in giving if len(traces & chosen) < min(2, len(traces))]

    while short():
        still = short()
        chosen.add(max({trace for traces in still for trace in traces} - chosen,
                       key=lambda trace: (sum(trace in traces for traces in still), -events[trace], trace)))
    jobs = dict(duck.execute("SELECT trace, job FROM traces WHERE job IS NOT NULL").fetchall())
    picked_jobs = {jobs[trace] for trace in chosen if trace in jobs}
    chosen.update(trace for trace, job in jobs.items() if job in picked_jobs)
    return sorted(chosen)


@pytest.mark.parametrize("rule", RULES)
def test_every_finding_rule_gives_duckdbs_rows_on_spark(spark_lake, duck, rule):
    rows = _rule_rows(spark_lake.rows, rule)
    assert rows.rows, f"{rule} finds nothing on the lake: the comparison would prove nothing"
    assert_same_rows(rows, _rule_rows(lambda sql, params: fetch_rows(duck, sql, params), rule))


@pytest.mark.parametrize("name, params", [("top_kernels", {"trace": "naive", "limit": "2"}),
                                          ("memcpy", {"trace": ODD_NAME}),
                                          ("anomalies", {"trace": "rtx4060_runtime_without_gpu_events"})])
def test_parameters_reach_spark(spark_lake, duck, name, params):
    rows = spark_lake.named(name, params)
    assert rows.rows and {row[0] for row in rows.rows} == {params["trace"]}
    assert_same_rows(rows, fetch_rows(duck, *named_sql(name, params)))


SMALL = ["naive", "sdpa_math"]


@pytest.fixture(scope="module")
def small_lake(lake_db, tmp_path_factory):
    """A lake of two of the database's traces, naive and sdpa_math, exported from it."""
    from tracekit.lake import export_database

    lake = tmp_path_factory.mktemp("small") / "lake"
    assert export_database(lake_db[0], lake, traces=SMALL).loaded == len(SMALL)
    return lake


@pytest.fixture(scope="module")
def torn_lake(small_lake, tmp_path_factory, spark_session):
    """A copy of the small lake (the naive and sdpa_math samples whole), plus what dead writers
    leave: `ghost`'s partitions without its trace_files partition, and beside naive's files a
    dead replacer's next generation of its events and kernels (trace_files still names the last)."""
    lake = shutil.copytree(small_lake, tmp_path_factory.mktemp("torn") / "lake")
    for table in ("event_rows", "kernel_rows"):
        shutil.copytree(lake / table / "trace=naive", lake / table / "trace=ghost")
        current = next((lake / table / "trace=naive").iterdir())
        shutil.copy(current, current.parent / f"part-9-{'0' * 32}.parquet")
    return lake


def _naive_and_math(spark):
    assert sorted(spark.rows("SELECT trace FROM traces").rows) == [("naive",), ("sdpa_math",)]
    assert sorted(spark.rows("SELECT trace, count(*) AS n FROM kernels GROUP BY trace").rows) == [
        ("naive", 30), ("sdpa_math", 120)]
    assert spark.rows("SELECT count(DISTINCT trace_id) AS n FROM event_rows").rows == [(2,)]


def test_a_lake_folder_shows_whole_traces_at_their_generation_alone(torn_lake):
    """As the DuckDB reader: no ghost, and naive's events once."""
    from tracekit.lake import connect_lake
    from tracekit.spark.engine import SparkLake

    sql = "SELECT t.trace, count(*) AS events FROM event_rows e JOIN trace_files t ON e.trace_id = t.trace_id GROUP BY t.trace"
    con = connect_lake(torn_lake)
    with SparkLake(torn_lake, "local[2]", TEST_SETTINGS) as spark:
        _naive_and_math(spark)
        assert_same_rows(spark.rows(sql), fetch_rows(con, sql))
    con.close()


def test_a_view_is_made_when_a_query_first_reads_it_and_the_views_it_reads_before_it(torn_lake):
    """Spark analyses a view as it is made: a query of one view makes that one and what it reads."""
    from tracekit.lake import connect_lake
    from tracekit.spark.engine import SparkLake

    con = connect_lake(torn_lake)
    with SparkLake(torn_lake, "local[2]", TEST_SETTINGS) as spark:
        def made():  # tracekit's views (not the lake's tables) the session holds
            return {name for name in spark._views if spark.spark.catalog.tableExists(name)}

        assert made() == set()
        sql = "SELECT trace, count(*) AS kernels FROM kernels GROUP BY trace"
        assert_same_rows(spark.rows(sql), fetch_rows(con, sql))
        assert "kernels" in made() and "elementwise_chain_ops" not in made()
        # a view of views: those it reads are made before it, once
        sql = "SELECT trace, count(*) AS ops FROM elementwise_chain_ops GROUP BY trace"
        assert_same_rows(spark.rows(sql), fetch_rows(con, sql))
        assert {"elementwise_chain_ops", "cpu_ops", "kernels"} <= made()
    con.close()


def test_a_lake_at_a_uri_is_cut_to_the_files_trace_files_names(torn_lake, monkeypatch):
    """A lake Spark lists itself (hdfs://, s3a://; here a folder read that way): a partition
    without its trace_files partition is not seen, nor a generation trace_files does not name."""
    from tracekit.spark import lake_tables
    from tracekit.spark.engine import SparkLake

    monkeypatch.setattr(lake_tables, "lake_location", lambda lake: (f"file://{lake}", None))
    with SparkLake(torn_lake, "local[2]", TEST_SETTINGS) as spark:
        _naive_and_math(spark)


@pytest.mark.parametrize("by_uri", [False, True])
def test_a_trace_missing_a_partition_file_is_an_error_naming_it(torn_lake, tmp_path, monkeypatch, by_uri):
    from tracekit.lake.layout import LakeError
    from tracekit.spark import lake_tables
    from tracekit.spark.engine import SparkLake

    damaged = shutil.copytree(torn_lake, tmp_path / "lake")
    part = next((damaged / "step_rows" / "trace=sdpa_math").iterdir())
    part.unlink()
    if by_uri:
        monkeypatch.setattr(lake_tables, "lake_location", lambda lake: (f"file://{lake}", None))
    with pytest.raises(LakeError) as error:
        SparkLake(damaged, "local[2]", TEST_SETTINGS)
    assert str(error.value) == (f"{damaged}: trace 'sdpa_math' is damaged: its step_rows partition lacks {part.name}; "
                                "load its file again with --replace")


def test_a_lake_folder_with_odd_characters_read_by_its_path_and_its_file_uri(small_lake, spark_session, tmp_path):
    from tracekit.lake import connect_lake
    from tracekit.spark.engine import SparkLake

    odd = shutil.copytree(small_lake, tmp_path / "my lake é%20")
    sql = "SELECT trace, count(*) AS kernels FROM kernels GROUP BY trace"
    con = connect_lake(small_lake)
    want = fetch_rows(con, sql)
    con.close()
    assert sorted(want.rows) == [("naive", 30), ("sdpa_math", 120)]
    for given in (odd, odd.as_uri()):  # file:///.../my%20lake%20%C3%A9%2520
        with SparkLake(given, "local[2]", TEST_SETTINGS) as spark:
            assert_same_rows(spark.rows(sql), want)


def test_a_lake_path_spark_would_read_as_a_pattern_is_one_error(tmp_path):
    result = invoke_cli("query", "summary", "--lake", tmp_path / "lake[1]", "--engine", "spark")
    assert result.exit_code == 1
    assert result.output.strip() == (f"Error: {tmp_path / 'lake[1]'}: Spark reads a path with any of [ ] {{ }} * ? "
                                     "as a pattern; move the lake to a folder without them")


@pytest.mark.parametrize("view", ["critical_path", "step_bounds"])
def test_the_critical_path_is_refused_on_spark_saying_where_to_run_it(spark_lake, view):
    from tracekit.errors import QueryError

    with pytest.raises(QueryError) as error:
        spark_lake.rows(f"SELECT * FROM {view}")
    assert str(error.value) == (f"{view} is not on Spark: it walks each step's critical path back hop by hop, which "
                                "Spark runs far too slowly; query it with DuckDB on the same lake (tracekit query "
                                "--lake DIR, without --engine spark)")


def test_a_trace_name_that_needs_escaping_reads_back_as_loaded(spark_lake):
    names = [row[0] for row in spark_lake.rows("SELECT trace FROM traces").rows]
    assert ODD_NAME in names and len(names) == len(set(names))


@pytest.mark.parametrize("sql", VIEW_QUERIES)
def test_the_views_give_duckdbs_rows_on_spark(spark_lake, duck, sql):
    assert_same_rows(spark_lake.rows(sql), fetch_rows(duck, sql))


# Each rewrite of tracekit.spark.dialect and spark_aggregates, on the values where Spark's
# own reading of the SQL sqlglot writes would differ from DuckDB's.
EDGE_CASES = {
    "decimal literals are doubles": "SELECT 7 / 2.0 AS a, 1 / 3.0 * 3 AS b, 100.0 * 1 / 3 AS c",
    "format rounds as fmt": "SELECT format('{:.1f}|{:.2f}|{:.0f}|{}|{}|{}|{}', 0.25, 2.675, 2.5, 1e20, 100.0, 7, 'x') AS f",
    "format of NULL is NULL": "SELECT format('{} us', CAST(NULL AS DOUBLE)) AS f",
    "list keeps its order, NULLS LAST, and NULLs":
        "SELECT list(x ORDER BY y DESC, x) AS l FROM (VALUES (1, NULL), (2, 5), (3, 5), (NULL, 1), (4, 7)) t(x, y)",
    "list NULLS FIRST": "SELECT list(x ORDER BY y NULLS FIRST) AS l FROM (VALUES (1, NULL), (2, 5), (3, 4)) t(x, y)",
    "list FILTER that no row passes is NULL":
        "SELECT g, list(x ORDER BY x) FILTER (WHERE x > 2) AS l FROM (VALUES (1, 1), (1, 3), (2, 1)) t(g, x) GROUP BY g",
    "a slice and to_json with NULL fields":
        "SELECT to_json(list(struct_pack(a := x, b := NULL) ORDER BY x DESC)[1:2]) AS j FROM (VALUES (1), (2), (3)) t(x)",
    "string_agg DISTINCT with a FILTER and another DISTINCT":
        "SELECT g, string_agg(DISTINCT s, ', ' ORDER BY s) FILTER (WHERE s <> 'b') AS a, count(DISTINCT s) AS n "
        "FROM (VALUES (1, 'c'), (1, 'a'), (1, 'b'), (1, 'a'), (2, 'b')) t(g, s) GROUP BY g",
    "string_agg in order": "SELECT string_agg(s, ';' ORDER BY k DESC) AS a FROM (VALUES ('x', 1), ('y', 2)) t(s, k)",
    "regexp_replace, every match and anchored":
        "SELECT regexp_replace('a#1 b#22', '#[0-9]+', '#N', 'g') AS a, regexp_replace('x#12', '#[0-9]+$', '$N') AS b, "
        "regexp_replace('AbA', 'a', '-', 'gi') AS c",
    "regexp_full_match": "SELECT regexp_full_match('ProfilerStep#12', 'ProfilerStep#\\d+') AS a, "
                         "regexp_full_match('xProfilerStep#1', 'ProfilerStep#\\d+') AS b",
    "json_type tells arrays and objects": "SELECT json_type(json_extract('{\"a\": [1], \"b\": {}}', '$.a')) AS a, "
                                          "json_type(json_extract('{\"a\": [1], \"b\": {}}', '$.b')) AS b, "
                                          "json_type(json_extract('{\"a\": 1}', '$.c')) AS c",
    "an array index past the end is NULL": "SELECT [4, 2][1] AS a, [4, 2][3] AS b",
    "a slice that does not start at 1": "SELECT [1, 2, 3, 4][2:3] AS a, [1, 2][2:5] AS b",
    "integer division": "SELECT 7 // 2 AS a, -7 // 2 AS b, 7 / 2 AS c",
}


@pytest.mark.parametrize("case", EDGE_CASES)
def test_the_rewrites_give_duckdbs_values(spark_lake, duck, case):
    sql = EDGE_CASES[case]
    assert_same_rows(spark_lake.rows(sql), fetch_rows(duck, sql))


@pytest.mark.parametrize("sql, says", [
    ("SELECT regexp_replace('a1b1', '1', '2') AS a", "regexp_replace without 'g'"),
    ("SELECT [1, 2, 3][1 + 1:3] AS l", "literal start of 1"),
])
def test_what_does_not_translate_is_refused_not_mistranslated(spark_lake, sql, says):
    from tracekit.errors import QueryError

    with pytest.raises(QueryError, match=says):
        spark_lake.rows(sql)


def test_ad_hoc_sql_with_a_parameter(spark_lake, duck):
    sql = "SELECT trace, count(*) AS kernels FROM kernels WHERE dur_us > $min_us GROUP BY trace ORDER BY trace"
    rows = spark_lake.rows(sql, {"min_us": 100})
    assert rows.rows
    assert_same_rows(rows, fetch_rows(duck, sql, {"min_us": 100}))


def test_a_trace_that_is_not_in_the_lake_is_an_error(spark_lake):
    from tracekit.errors import TracekitError

    with pytest.raises(TracekitError, match="no trace named 'nope' \\(loaded: .*naive"):
        spark_lake.named("summary", {"trace": "nope"})


@pytest.mark.parametrize("sql, says", [
    ("SELECT nosuch FROM kernels", "Spark: .*nosuch"),
    ("DELETE FROM kernels", "DELETE is not allowed"),
    ("SELECT reflect('java.lang.System', 'exit', 0)", "reflect is not allowed on Spark"),
    ("SELECT * FROM kernels QUALIFY row_number() OVER (PARTITION BY trace ORDER BY ts_us) = 1",
     "QUALIFY under SELECT \\*"),
])
def test_bad_sql_is_one_error_and_reads_nothing_else(spark_lake, sql, says):
    from tracekit.errors import QueryError

    with pytest.raises(QueryError, match=says):
        spark_lake.rows(sql)


def test_sql_cannot_read_files_beside_the_lake(spark_lake, lake_db):
    """Spark reads `parquet.`PATH`` as a table unless told not to: tracekit tells it not to (and
    refuses the SQL before Spark reads it: tests/test_spark_sandbox.py)."""
    from pyspark.errors import AnalysisException

    with pytest.raises(AnalysisException, match="TABLE_OR_VIEW_NOT_FOUND"):
        spark_lake.spark.sql(f"SELECT * FROM parquet.`{lake_db[1] / 'gpu_specs'}`").collect()


def test_the_cli_runs_a_named_query_on_spark(small_lake, spark_session):
    result = invoke_cli("query", "top_kernels", "--lake", small_lake, "--engine", "spark", "-p", "trace", "naive",
                        "-p", "limit", "2", "-f", "csv")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == ",".join(named_queries()["top_kernels"].columns)
    assert [line.split(",")[:2] for line in lines[1:]] == [["naive", "1"], ["naive", "2"]]


def test_the_cli_writes_spark_rows_to_parquet_with_their_types(small_lake, spark_session, tmp_path):
    import duckdb

    out = tmp_path / "gemm.parquet"
    result = invoke_cli("query", "gemm_classes", "--lake", small_lake, "--engine", "spark", "-o", out)
    assert result.exit_code == 0, result.output
    types = dict(duckdb.sql(f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM '{out}')").fetchall())
    assert types["trace"] == "VARCHAR" and types["tensor_core_gemms"] == "BIGINT" and types["simt_us"] == "DOUBLE"


def test_the_cli_runs_ad_hoc_sql_on_spark(small_lake, spark_session):
    result = invoke_cli("query", "--lake", small_lake, "--engine", "spark", "-f", "csv",
                        "--sql", "SELECT count(*) AS traces FROM traces")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["traces", str(len(SMALL))]


@pytest.mark.parametrize("args, says", [
    (["--engine", "spark"], "--engine spark reads a lake: give --lake DIR"),
    (["--master", "local[1]"], "--master is Spark's: add --engine spark"),
    (["--lake", "L", "--db", "x.duckdb", "--engine", "spark"], "give --db or --lake, not both"),
    (["--lake", "L", "--engine", "spark", "--allow-files"], "--allow-files is DuckDB's"),
])
def test_options_that_do_not_go_together(args, says):
    result = invoke_cli("query", "summary", *args)
    assert result.exit_code == 2 and says in result.output


def test_a_folder_that_is_no_lake(tmp_path, spark_lake):
    result = invoke_cli("query", "summary", "--lake", tmp_path, "--engine", "spark")
    assert result.exit_code == 1
    assert result.output.strip() == (f"Error: {tmp_path}: not a tracekit lake (it has no _tracekit.json); "
                                     "create one with `tracekit load TRACE... --lake NEW_FOLDER`")


def test_a_spark_job_loads_a_jobs_ranks_on_its_workers(spark_lake, rank_job, tmp_path):
    """tracekit.lake.load_many mapped over the rank files by Spark's workers, as docs/lake.md's
    example does: the lake holds the ranks `tracekit load FOLDER` put in the database."""
    from tracekit.lake import connect_lake, load_many
    from tracekit.store.database import connect_for_queries

    _, folder, db = rank_job
    files = sorted(str(path) for path in folder.rglob("*.json.gz"))
    lake = str(tmp_path / "lake")

    def load_partition(paths):
        batch = load_many(list(paths), lake, workers=1)
        for path, outcome in batch.outcomes:
            yield str(path), getattr(outcome, "status", str(outcome))

    context = spark_lake.spark.sparkContext
    statuses = context.parallelize(files, len(files)).mapPartitions(load_partition).collect()
    assert sorted(statuses) == [(path, "loaded") for path in files]
    sql = "SELECT rank, world_size, sha256, events FROM traces ORDER BY rank"
    con, database = connect_lake(lake), connect_for_queries(db)
    assert fetch_rows(con, sql).rows == fetch_rows(database, sql).rows
    database.close()
    # The workers raced for the file name every rank shares: each got one of the names a database gives.
    assert sorted(row[0] for row in con.execute("SELECT trace FROM traces").fetchall()) == ["trace", "trace-2", "trace-3"]
    con.close()


def test_the_python_api_runs_a_query_on_spark(lake_db, small_lake, spark_session):
    import tracekit
    from tracekit.analysis.rows import Rows

    params = {"trace": "naive", "limit": "3"}
    frame = tracekit.query("top_kernels", lake=small_lake, engine="spark", params=params)
    duckdb_frame = tracekit.query("top_kernels", db=lake_db[0], params=params)
    assert len(frame) == 3
    assert_same_rows(Rows.from_frame(frame), Rows.from_frame(duckdb_frame))


def test_the_python_api_names_its_own_arguments_without_pyspark(monkeypatch, tmp_path):
    import tracekit
    from tracekit.errors import TracekitError

    monkeypatch.setitem(sys.modules, "pyspark", None)
    with pytest.raises(TracekitError, match='^engine="spark" needs pyspark, which is not installed: '
                                          "pip install 'tracekit\\[spark\\]'$"):
        tracekit.query("summary", lake=tmp_path, engine="spark")


def test_without_pyspark_it_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pyspark", None)  # makes the import fail
    result = invoke_cli("query", "summary", "--lake", tmp_path, "--engine", "spark")
    assert result.exit_code == 1
    assert result.output.strip() == ("Error: --engine spark needs pyspark, which is not installed: "
                                     "pip install 'tracekit[spark]'")


def test_a_master_spark_cannot_use_is_one_error(tmp_path):
    code = ("from tracekit.cli import cli\nfrom click.testing import CliRunner\n"
            f"r = CliRunner().invoke(cli, ['query', 'summary', '--lake', {str(tmp_path)!r}, '--engine', 'spark', "
            "'--master', 'nonsense://x'])\nprint(r.exit_code, r.output)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert done.stdout.startswith("1 Error: Spark did not start on nonsense://x: "), done.stdout + done.stderr
    assert len(done.stdout.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_duckdb_queries_and_import_tracekit_never_import_spark_or_sqlglot(lake_db):
    code = ("import sys\nimport tracekit\nfrom click.testing import CliRunner\nfrom tracekit.cli import cli\n"
            f"r = CliRunner().invoke(cli, ['query', 'summary', '--db', {str(lake_db[0])!r}])\n"
            "assert r.exit_code == 0, r.output\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'sqlglot', 'py4j')))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_spark_leaves_no_warehouse_where_it_ran(spark_session, tmp_path, monkeypatch):
    """Spark makes a spark-warehouse folder in the working directory unless told where: tracekit
    keeps no Spark tables, so the session's goes to the temporary folder (none was left in the
    repository after the tests, issue [16])."""
    monkeypatch.chdir(tmp_path)
    spark_session.sql("CREATE TEMPORARY VIEW probe AS SELECT 1 AS one").collect()
    spark_session.sql("SHOW TABLES").collect()
    assert not (tmp_path / "spark-warehouse").exists() and not (ROOT / "spark-warehouse").exists()
    assert spark_session.conf.get("spark.sql.warehouse.dir").rstrip("/").endswith(f"tracekit-spark-warehouse-{os.getpid()}")
    # That folder, empty, goes when Python exits (one was left in the temporary folder per run).
    import atexit
    from tracekit.spark.session import start_session

    at_exit = []
    monkeypatch.setattr(atexit, "register", lambda call, *args: at_exit.append((call, args)))
    assert start_session("local[2]", SPARK_TEST_SETTINGS) is spark_session  # the running one, its exit calls told
    warehouse = Path(spark_session.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))
    assert warehouse.is_dir() and not any(warehouse.iterdir())
    for call, args in at_exit:
        call(*args)
    assert not warehouse.exists()

