"""The Parquet lake (tracekit.lake): `tracekit load --lake`, `export --lake`, `query --lake`.

Every named query, the findings and every table give the same rows on a lake as on a database
of the same traces (the samples and the foreign traces of tests/data), loaded either way; the
layout is the documented one; a load refuses what a database load refuses, and leaves the lake
as it was. Floats are compared to 1e-12: a sum of floats follows the order DuckDB feeds it rows,
which follows hash partitions of the trace ids, which differ between a database and a lake.
"""

import hashlib
import json
import os
import shutil

import duckdb
import pytest

import make_bad_corpus as corpus
from conftest import SAMPLE_TRACES, TEST_DATA, invoke_cli
from lake_checks import PER_TRACE_TABLES, lake_state, same_rows

FOREIGN = TEST_DATA / "foreign"


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """(database, lake loaded with `load --lake`, lake exported from the database) of the samples
    and the foreign traces."""
    folder = tmp_path_factory.mktemp("lake")
    db, lake, exported = folder / "t.duckdb", folder / "lake", folder / "exported"
    assert invoke_cli("load", SAMPLE_TRACES, FOREIGN, "--db", db).exit_code == 0
    loaded = invoke_cli("load", SAMPLE_TRACES, FOREIGN, "--lake", lake)
    assert loaded.exit_code == 0, loaded.output
    assert invoke_cli("export", "--lake", exported, "--db", db).exit_code == 0
    return db, lake, exported


@pytest.fixture(scope="module")
def connections(both):
    from tracekit.lake import connect_lake
    from tracekit.store.database import connect_for_queries

    db, lake, exported = both
    opened = [connect_for_queries(db), connect_lake(lake), connect_lake(exported)]
    yield opened
    for con in opened:
        con.close()


def _named_queries():
    from tracekit.analysis.named_queries import named_queries
    return sorted(named_queries())


@pytest.mark.parametrize("name", _named_queries())
def test_every_named_query_gives_the_database_rows_on_the_lake(connections, name):
    from tracekit.analysis.named_queries import fetch_rows, named_sql

    db, lake, exported = (fetch_rows(con, *named_sql(name)) for con in connections)
    assert db.rows or name == "unclassified", f"{name} has no rows to compare"
    for other in (lake, exported):
        assert other.columns == db.columns
        same_rows(db.rows, other.rows)


def test_findings_are_the_same_on_the_lake(connections):
    from tracekit.analysis.findings_engine import run_findings

    db, lake, exported = (run_findings(con) for con in connections)
    columns = [c for c in db.columns if c != "evidence"]
    assert len(db) > 10
    for other in (lake, exported):
        same_rows(db[columns].values.tolist(), other[columns].values.tolist())
    # An exported lake keeps the database's op ids, so even the evidence is the same.
    assert db["evidence"].tolist() == exported["evidence"].tolist()


@pytest.mark.parametrize("table", PER_TRACE_TABLES)
def test_every_table_holds_the_database_rows(connections, table):
    """Row for row, by trace name: the loaded lake but for the ids a database numbers across its
    traces (trace_id, and the op ids, which are event row numbers), the exported lake wholly."""
    def rows(con, skip):
        columns = [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall() if r[0] not in skip]
        key = "" if table == "trace_files" else "(SELECT trace FROM trace_files f WHERE f.trace_id = t.trace_id), "
        return sorted(con.execute(f"SELECT {key}{', '.join(columns)} FROM {table} t").fetchall(), key=repr)

    ids = {"trace_id", "op_id", "parent_id", "cpu_op_id", "loaded_at"}
    db, lake, exported = connections
    assert rows(db, ids) == rows(lake, ids)
    assert rows(db, {"trace_id"}) == rows(exported, {"trace_id"})


def test_the_layout_is_the_documented_one(both):
    _, lake, _ = both
    meta = json.loads((lake / "_tracekit.json").read_text())
    from tracekit.store.database import SCHEMA_VERSION
    assert meta == {"lake_format": 1, "tracekit_version": meta["tracekit_version"], "schema_version": SCHEMA_VERSION}
    for table in PER_TRACE_TABLES:
        folders = sorted(p.name for p in (lake / table).iterdir())
        assert len(folders) == 22 and all(name.startswith("trace=") for name in folders)
        assert all(len(list((lake / table / name).iterdir())) == 1 for name in folders)
    for table in ("kernel_rules", "gpu_specs", "gpu_arch_limits"):
        assert [p.name for p in (lake / table).iterdir()] == ["part-0.parquet"]
    # Read as any engine reads it: the partition column is the trace's name, trace_id its content's hash.
    con = duckdb.connect()
    rows = con.execute(f"SELECT trace, trace_id, sha256 FROM read_parquet('{lake}/trace_files/*/*.parquet', "
                       "hive_partitioning = true, hive_types = {'trace': VARCHAR})").fetchall()
    assert {r[0] for r in rows} >= {"naive", "sdpa_math", "t4_resnet50_train"} and len(rows) == 22
    assert all(trace_id == int(sha[:16], 16) >> 1 for _, trace_id, sha in rows)
    events = con.execute(f"SELECT count(*) FROM read_parquet('{lake}/event_rows/*/*.parquet') e "
                         f"JOIN read_parquet('{lake}/trace_files/*/*.parquet') USING (trace_id)").fetchone()[0]
    assert events == sum(con.execute(f"SELECT sum(events) FROM read_parquet('{lake}/trace_files/*/*.parquet')").fetchone())


def test_odd_trace_names_survive_the_partition_folders(tmp_path):
    name = "rank [0] = 50% → ok"
    shutil.copy(SAMPLE_TRACES / "naive.json.gz", tmp_path / f"{name}.json.gz")
    assert invoke_cli("load", tmp_path / f"{name}.json.gz", "--lake", tmp_path / "lake").exit_code == 0
    assert [p.name for p in (tmp_path / "lake" / "trace_files").iterdir()] == [
        "trace=rank%20%5B0%5D%20%3D%2050%25%20→%20ok"]
    result = invoke_cli("query", "--lake", tmp_path / "lake", "--sql", "SELECT trace FROM traces", "-f", "csv")
    assert result.output.splitlines() == ["trace", name]


def test_a_second_load_skips_and_names_are_given_as_a_database_gives_them(tmp_path):
    lake = tmp_path / "lake"
    assert invoke_cli("load", SAMPLE_TRACES / "naive.json.gz", "--lake", lake).exit_code == 0
    again = invoke_cli("load", SAMPLE_TRACES / "naive.json.gz", "--lake", lake)
    assert again.exit_code == 0 and "same content as trace 'naive'" in again.output
    # The same content under another name is skipped too, as in a database.
    shutil.copy(SAMPLE_TRACES / "naive.json.gz", tmp_path / "copy.json.gz")
    assert "same content as trace 'naive'" in invoke_cli("load", tmp_path / "copy.json.gz", "--lake", lake).output

    # Other content under a name the lake holds: the next free name-N; --replace reloads a file
    # in place of the trace it gave; each step exactly as a database does it.
    db = tmp_path / "same.duckdb"
    assert invoke_cli("load", SAMPLE_TRACES / "naive.json.gz", "--db", db).exit_code == 0
    other = tmp_path / "other" / "naive.json.gz"
    other.parent.mkdir()
    shutil.copy(SAMPLE_TRACES / "sdpa_math.json.gz", other)
    for target in (["--lake", lake], ["--db", db]):
        second = invoke_cli("load", other, *target)
        assert second.exit_code == 0 and "loaded naive-2: 1077 events" in second.output, second.output
    shutil.copy(SAMPLE_TRACES / "sdpa_flash.json.gz", other)
    for target in (["--lake", lake], ["--db", db]):
        assert "loaded naive-2: 242 events" in invoke_cli("load", other, *target, "--replace").output
    traces = [invoke_cli("query", *target, "--sql", "SELECT trace, events, sha256 FROM traces ORDER BY trace",
                         "-f", "csv").output for target in (["--lake", lake], ["--db", db])]
    flash = hashlib.sha256(__import__("gzip").decompress(other.read_bytes())).hexdigest()
    assert traces[0] == traces[1] and traces[0].splitlines()[2] == f"naive-2,242,{flash}"
    assert all(len(list((lake / table).iterdir())) == 2 for table in PER_TRACE_TABLES)
    assert not list((lake / "_staging").iterdir())


def test_a_job_of_rank_folders_loads_into_a_lake_as_into_a_database(tmp_path, rank_job):
    """rank0/trace.json.gz, rank1/trace.json.gz...: one command, distinct names, their ranks."""
    _, folder, db = rank_job
    lake = tmp_path / "lake"
    loaded = invoke_cli("load", folder, "--lake", lake)
    assert loaded.exit_code == 0, loaded.output
    sql = "SELECT trace, rank, world_size, sha256 FROM traces ORDER BY rank"
    on_lake = invoke_cli("query", "--lake", lake, "--sql", sql, "-f", "csv").output.splitlines()
    assert on_lake == invoke_cli("query", "--db", db, "--sql", sql, "-f", "csv").output.splitlines()
    assert [row.split(",")[:3] for row in on_lake[1:]] == [["trace", "0", "3"], ["trace-2", "1", "3"],
                                                           ["trace-3", "2", "3"]]
    again = invoke_cli("load", folder, "--lake", lake)
    assert again.exit_code == 0, again.output
    assert [line.split(": ")[1] for line in again.output.splitlines()[:3]] == [
        f"same content as trace {name!r} (--replace reloads it)" for name in ("trace", "trace-2", "trace-3")]


def test_bad_files_are_one_line_each_and_leave_the_lake_as_it_was(tmp_path):
    bad = tmp_path / "bad"
    cases = corpus.build(bad)
    failing = [bad / name for name, case in cases.items() if case.problem]
    lake = tmp_path / "lake"
    assert invoke_cli("load", SAMPLE_TRACES / "naive.json.gz", "--lake", lake).exit_code == 0
    before = lake_state(lake)
    result = invoke_cli("load", *failing, "--lake", lake)
    assert result.exit_code == 1 and "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == len(failing) + 1
    for path, line in zip(failing, lines):
        assert line.startswith(f"Error: {path}: ") and cases[path.name].problem in line, line
    assert lines[-1].startswith(f"Error: {len(failing)} of {len(failing)} files failed to load")
    assert lake_state(lake) == before


def test_what_is_not_a_lake_is_refused(tmp_path):
    foreign = tmp_path / "photos"
    foreign.mkdir()
    (foreign / "cat.jpg").write_bytes(b"\xff\xd8")
    result = invoke_cli("load", SAMPLE_TRACES / "naive.json.gz", "--lake", foreign)
    assert result.exit_code == 1
    assert result.output.strip() == (f"Error: {foreign}: a folder that is not a tracekit lake: it holds cat.jpg; "
                                     "give --lake a new or empty folder")
    assert sorted(p.name for p in foreign.iterdir()) == ["cat.jpg"]
    for command in (["query", "summary"], ["findings"], ["schema"], ["report", "-f", "markdown"]):
        missing = invoke_cli(*command, "--lake", tmp_path / "nowhere")
        assert missing.exit_code == 1
        assert missing.output.strip() == (f"Error: {tmp_path / 'nowhere'}: no such lake; create it with "
                                          f"`tracekit load TRACE... --lake {tmp_path / 'nowhere'}`")
    newer = tmp_path / "newer"
    newer.mkdir()
    (newer / "_tracekit.json").write_text(json.dumps({"lake_format": 2, "schema_version": "3"}))
    assert "made by a newer tracekit (lake format 2)" in invoke_cli("query", "summary", "--lake", newer).output


def test_db_and_lake_together_are_a_usage_error(tmp_path):
    for command in (["load", SAMPLE_TRACES / "naive.json.gz"], ["query", "summary"], ["findings"]):
        result = invoke_cli(*command, "--db", tmp_path / "t.duckdb", "--lake", tmp_path / "lake")
        assert result.exit_code == 2 and "give --db or --lake, not both" in result.output
    assert not (tmp_path / "lake").exists() and not (tmp_path / "t.duckdb").exists()


def test_an_empty_lake_answers_with_no_rows(tmp_path):
    from tracekit.lake import connect_lake
    from tracekit.lake.batch import _ready

    _ready(tmp_path / "lake")
    con = connect_lake(tmp_path / "lake")
    assert con.execute("SELECT count(*) FROM kernels").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM kernel_rules").fetchone()[0] > 10


def test_a_query_on_a_lake_reads_no_file_outside_it(both, tmp_path):
    _, lake, _ = both
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n")
    refused = invoke_cli("query", "--lake", lake, "--sql", f"SELECT * FROM read_csv('{secret}')")
    assert refused.exit_code == 1 and "reaches outside the trace database" in refused.output
    allowed = invoke_cli("query", "--lake", lake, "--allow-files", "--sql", f"SELECT * FROM read_csv('{secret}')")
    assert allowed.exit_code == 0 and "(1 row)" in allowed.output
    assert invoke_cli("query", "--lake", lake, "--sql", f"COPY kernels TO '{tmp_path}/x.csv'").exit_code == 1
    assert not (tmp_path / "x.csv").exists()


def test_load_many_is_importable_and_loads_a_folder(tmp_path):
    from tracekit.lake import load_many

    batch = load_many([str(SAMPLE_TRACES)], tmp_path / "lake", workers=2)
    assert batch.loaded == 8 and not batch.failures and batch.traces_held == 8
    assert sorted(r.trace for r in batch.results) == sorted(p.name[:-8] for p in SAMPLE_TRACES.glob("*.json.gz"))
    assert all(r.trace_id == int(r.sha256[:16], 16) >> 1 for r in batch.results)
    assert os.listdir(tmp_path / "lake" / "_staging") == []


def test_load_many_passes_over_a_folders_json_that_is_no_trace(tmp_path):
    from tracekit.lake import load_many

    folder = tmp_path / "capture"
    folder.mkdir()
    shutil.copy(SAMPLE_TRACES / "naive.json.gz", folder / "naive.json.gz")
    (folder / "timings.json").write_text('{"naive": [1180.5]}')
    batch = load_many(folder, tmp_path / "lake")
    assert not batch.failures and batch.loaded == 1 and batch.traces_held == 1
    assert [(r.status, r.message) for r in batch.results if r.status == "skipped"] == [
        ("skipped", "passed over: a JSON object without a traceEvents array: not a Chrome/Kineto trace")]
    named = load_many([folder / "timings.json"], tmp_path / "lake")
    assert [str(error) for _, error in named.failures] == [
        f"{folder / 'timings.json'}: a JSON object without a traceEvents array: not a Chrome/Kineto trace"]


def test_the_python_api_takes_a_lake(both):
    import tracekit
    from tracekit.lake.layout import LakeError

    db, lake, _ = both
    on_db, on_lake = tracekit.query("memcpy", db=db), tracekit.query("memcpy", lake=lake)
    same_rows(on_db.values.tolist(), on_lake.values.tolist())
    # one trace's (test_findings_are_the_same_on_the_lake compares every trace's, on connections)
    on_db, on_lake = tracekit.findings(db=db, trace="naive"), tracekit.findings(lake=lake, trace="naive")
    assert len(on_db) > 1
    columns = [c for c in on_db.columns if c != "evidence"]  # a loaded lake numbers its op ids anew
    same_rows(on_db[columns].values.tolist(), on_lake[columns].values.tolist())
    [skipped] = tracekit.load(SAMPLE_TRACES / "naive.json.gz", lake=lake)
    assert skipped.status == "skipped" and skipped.trace == "naive"
    with pytest.raises(LakeError, match=r'create it with tracekit.load\(TRACE..., lake="nowhere"\)'):
        tracekit.query("summary", lake="nowhere")
    with pytest.raises(ValueError, match="give db= or lake=, not both"):
        tracekit.query("summary", db=db, lake=lake)


def test_a_lake_of_another_schema_is_not_written_to(tmp_path):
    lake = tmp_path / "lake"
    assert invoke_cli("load", SAMPLE_TRACES / "naive.json.gz", "--lake", lake).exit_code == 0
    meta = json.loads((lake / "_tracekit.json").read_text())
    (lake / "_tracekit.json").write_text(json.dumps({**meta, "schema_version": "2"}))
    before = lake_state(lake)
    result = invoke_cli("load", SAMPLE_TRACES / "flex.json.gz", "--lake", lake)
    assert result.exit_code == 1
    assert result.output.strip().startswith(f"Error: {lake}: made by an older tracekit (schema 2; this one uses")
    assert lake_state(lake) == before
