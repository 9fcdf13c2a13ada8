"""tracekit writes only into its own databases, of its own schema, and says why it refuses others."""

import hashlib
import shutil

import duckdb
import pytest

import tracekit
from conftest import SAMPLE_TRACES, invoke_cli as invoke
from tracekit.store.database import SCHEMA_VERSION
from tracekit.errors import DatabaseError

NAIVE = SAMPLE_TRACES / "naive.json.gz"
FLEX = SAMPLE_TRACES / "flex.json.gz"


@pytest.fixture(scope="module")
def base_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("base") / "base.duckdb"
    assert invoke("load", NAIVE, "--db", path).exit_code == 0
    return path


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def contents(path):
    """Every table's rows and every view's SQL: what must not change."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
        views = con.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal ORDER BY 1").fetchall()
        return {t: sorted(map(repr, con.execute(f'SELECT * FROM "{t}"').fetchall())) for t in tables}, views
    finally:
        con.close()


def someone_elses(path):
    con = duckdb.connect(str(path))
    # Names tracekit uses too: a careless load would merge into `events` or replace the `kernels` view.
    con.execute("CREATE TABLE events (ts DOUBLE, what VARCHAR)")
    con.execute("INSERT INTO events VALUES (1.5, 'their row')")
    con.execute("CREATE VIEW kernels AS SELECT what FROM events")
    con.execute("CREATE TABLE results AS SELECT 42 AS answer")
    con.close()
    return path


def assert_one_line_error(result, *parts):
    assert result.exit_code == 1, result.output
    assert result.output.count("\n") == 1 and result.output.startswith("Error: ") and "Traceback" not in result.output
    for part in parts:
        assert part in result.output, result.output


def test_loading_into_someone_elses_database_is_refused_and_changes_nothing(tmp_path):
    db = someone_elses(tmp_path / "theirs.duckdb")
    before, before_bytes = contents(db), digest(db)
    result = invoke("load", NAIVE, "--db", db)
    assert_one_line_error(result, f"{db}: a DuckDB database that is not tracekit's: "
                                  "it has tables/views events, kernels, results")
    assert contents(db) == before and digest(db) == before_bytes
    assert not (tmp_path / "theirs.duckdb.wal").exists()


def test_querying_or_reporting_on_someone_elses_database_is_refused(tmp_path):
    db = someone_elses(tmp_path / "theirs.duckdb")
    for command in (["query", "summary"], ["query", "--sql", "SELECT * FROM events"], ["report", "-f", "markdown"],
                    ["export", "--trace", "naive", "-o", tmp_path / "x.json"]):
        assert_one_line_error(invoke(*command, "--db", db), "is not tracekit's: it has tables/views events, kernels")


def test_the_python_api_refuses_it_too(tmp_path):
    db = someone_elses(tmp_path / "theirs.duckdb")
    with pytest.raises(DatabaseError, match="not tracekit's"):
        tracekit.load(NAIVE, db=db)
    with pytest.raises(DatabaseError, match="not tracekit's"):
        tracekit.query("summary", db=db)


def test_a_schema_info_of_someone_elses_is_not_tracekits(tmp_path):
    db = tmp_path / "theirs.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE schema_info (version INTEGER)")
    con.execute("INSERT INTO schema_info VALUES (7)")
    con.close()
    before = contents(db)
    assert_one_line_error(invoke("load", NAIVE, "--db", db), "not tracekit's: it has tables/views schema_info")
    assert contents(db) == before


def test_an_empty_duckdb_file_becomes_a_tracekit_database(tmp_path):
    db = tmp_path / "empty.duckdb"
    duckdb.connect(str(db)).close()
    assert_one_line_error(invoke("query", "summary", "--db", db), "no traces loaded; load traces into it first")
    result = invoke("load", NAIVE, "--db", db)
    assert result.exit_code == 0, result.output
    assert invoke("query", "summary", "--db", db).exit_code == 0


def with_schema(base_db, tmp_path, version):
    db = tmp_path / f"schema{version}.duckdb"
    shutil.copy(base_db, db)
    con = duckdb.connect(str(db))
    con.execute("UPDATE schema_info SET value = ? WHERE key = 'schema_version'", [version])
    con.close()
    return db


def test_a_newer_schema_is_refused_on_every_open_and_kept(base_db, tmp_path):
    newer = str(int(SCHEMA_VERSION) + 1)
    db = with_schema(base_db, tmp_path, newer)
    before, before_bytes = contents(db), digest(db)
    for command in (["load", FLEX], ["query", "summary"], ["query", "--sql", "SELECT 1"], ["report", "-f", "markdown"],
                    ["hta"]):
        assert_one_line_error(invoke(*command, "--db", db), f"{db}: made by a newer tracekit (schema {newer})")
    assert contents(db) == before and digest(db) == before_bytes


def test_an_older_schema_is_refused_with_what_to_do_and_kept(base_db, tmp_path):
    older = str(int(SCHEMA_VERSION) - 1)
    db = with_schema(base_db, tmp_path, older)
    before, before_bytes = contents(db), digest(db)
    for command in (["load", FLEX], ["load", NAIVE, "--replace"], ["query", "summary"]):
        assert_one_line_error(invoke(*command, "--db", db),
                              f"made by an older tracekit (schema {older}; this one uses {SCHEMA_VERSION})",
                              "load its traces again into a new database (tracekit load TRACE... --db NEW.duckdb)")
    assert contents(db) == before and digest(db) == before_bytes


def test_a_failed_load_into_a_tracekit_database_keeps_its_schema_info(base_db, tmp_path):
    db = tmp_path / "t.duckdb"
    shutil.copy(base_db, db)
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X"')
    before = contents(db)
    assert invoke("load", bad, "--db", db).exit_code == 1
    assert contents(db) == before


@pytest.mark.parametrize("command", [["load", FLEX], ["query", "summary"], ["query", "--sql", "SELECT 1"]])
@pytest.mark.parametrize("source, holds", [(NAIVE, "a gzipped trace (Kineto's JSON)"), (None, "text")], ids=["gzip", "text"])
def test_a_db_that_is_no_duckdb_file_is_refused_before_duckdb_opens_it(tmp_path, command, source, holds):
    # DuckDB itself would open a .json.gz as an in-memory database holding a view of the file.
    db = tmp_path / "trace.json.gz"
    if source:
        shutil.copy(source, db)
    else:
        db.write_text("trace,kernels\nnaive,30\n")
    before = digest(db)
    assert_one_line_error(invoke(*command, "--db", db), f"{db}: not a DuckDB database file, it holds {holds}")
    assert digest(db) == before and sorted(p.name for p in tmp_path.iterdir()) == ["trace.json.gz"]


def test_a_database_with_another_tracekits_views_is_read_with_this_ones(tmp_path):
    """Same schema, older views (an upgrade of tracekit between load and query): a read-only open
    makes this tracekit's views for its connection, and leaves the file as it was."""
    db = tmp_path / "old_views.duckdb"
    assert invoke("load", SAMPLE_TRACES / "naive.json.gz", "--db", db).exit_code == 0
    con = duckdb.connect(str(db))
    con.execute("CREATE OR REPLACE VIEW step_bounds AS SELECT 'stale' AS trace")
    con.execute("UPDATE schema_info SET value = 'older' WHERE key = 'views_digest'")
    con.close()
    bounds = tracekit.query(sql="SELECT trace, count(*) AS steps FROM step_bounds GROUP BY trace", db=db)
    assert list(bounds["trace"]) == ["naive"] and list(bounds["steps"]) == [6]
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT trace FROM step_bounds").fetchall() == [("stale",)]  # the file untouched
    con.close()


def test_a_load_into_a_database_with_another_tracekits_views_makes_this_ones(base_db, tmp_path):
    """A writable open makes the views again only where views_digest is not this tracekit's (it
    skips them otherwise: binding them is most of a small load's time): here a database whose
    `kernels` view is gone and whose `traces` view says a wrong count, as another build's might."""
    db = tmp_path / "t.duckdb"
    shutil.copy(base_db, db)
    con = duckdb.connect(str(db))
    built = con.execute("SELECT value FROM schema_info WHERE key = 'views_digest'").fetchone()
    con.execute("DROP VIEW kernels")
    con.execute("CREATE OR REPLACE VIEW traces AS SELECT trace, 0 AS events FROM trace_files")
    con.execute("UPDATE schema_info SET value = 'older' WHERE key = 'views_digest'")
    con.close()
    assert invoke("load", FLEX, "--db", db).exit_code == 0
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT value FROM schema_info WHERE key = 'views_digest'").fetchone() == built
        assert con.execute("SELECT trace, events FROM traces ORDER BY trace").fetchall() == [("flex", 3272), ("naive", 517)]
        assert con.execute("SELECT trace, count(*) FROM kernels GROUP BY trace ORDER BY trace").fetchall() == [
            ("flex", 6), ("naive", 30)]
    finally:
        con.close()
