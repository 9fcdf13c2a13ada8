"""User SQL sees the trace database and nothing else: `query --sql`, `export --sql` and the API.

Each attack is run for real against files the test made, and the test then checks that it
changed nothing and read nothing. Both locks are tested on their own: our one-SELECT rule
through the CLI, DuckDB's locked configuration by running the attacks on the connection directly.
"""

import os
import shutil

import duckdb
import pytest

from conftest import SAMPLE_TRACES, invoke_cli as invoke
from make_bad_corpus import database_state
from tracekit.store.database import connect_for_queries
from tracekit.errors import QueryError

SECRET = "tracekit-sandbox-secret-7f3a"


@pytest.fixture(scope="module")
def base_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("base") / "base.duckdb"
    assert invoke("load", SAMPLE_TRACES / "naive.json.gz", "--db", path).exit_code == 0
    return path


@pytest.fixture
def place(base_db, tmp_path, monkeypatch):
    """A trace database, a hard link to it, another DuckDB database, a secret file and a CSV of the
    user's own, all in the test's folder (the working directory)."""
    db = tmp_path / "t.duckdb"
    shutil.copy(base_db, db)
    os.link(db, tmp_path / "hardlink.duckdb")
    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("CREATE TABLE precious AS SELECT range AS n FROM range(5)")
    con.close()
    (tmp_path / "secret.txt").write_text(SECRET + "\n")
    (tmp_path / "mine.csv").write_text("kernel_class,budget_us\nsoftmax,100\ngemm,500\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _other_rows(place):
    con = duckdb.connect(str(place / "other.duckdb"), read_only=True)
    try:
        return con.execute("SELECT count(*) FROM precious").fetchone()[0]
    finally:
        con.close()


def _files(place):
    return sorted(p.name for p in place.iterdir())


# Each attack, and the text that shows it was refused before it did anything.
ATTACKS = {
    "attach another database writable": (
        "ATTACH 'other.duckdb' AS o (READ_ONLY false)", "ATTACH is not allowed"),
    "attach and delete in one go": (
        "ATTACH 'other.duckdb' AS o (READ_ONLY false); DELETE FROM o.precious", "holds 2 statements"),
    "delete through a hard link": (
        "ATTACH 'hardlink.duckdb' AS h (READ_ONLY false); DELETE FROM h.trace_files", "holds 2 statements"),
    "copy to a file": ("COPY (SELECT * FROM kernels) TO 'stolen.csv'", "COPY is not allowed"),
    "copy over an existing file": ("COPY (SELECT 1) TO 'mine.csv'", "COPY is not allowed"),
    "export the database": ("EXPORT DATABASE 'dumped'", "EXPORT is not allowed"),
    "read a file": ("SELECT * FROM read_text('secret.txt')", "reaches outside the trace database (secret.txt)"),
    "read /etc/passwd": ("SELECT * FROM read_text('/etc/passwd')", "reaches outside the trace database (/etc/passwd)"),
    "list a folder": ("SELECT * FROM glob('/root/*')", "reaches outside the trace database (/root/*)"),
    "list this folder": ("SELECT * FROM glob('*')", "reaches outside the trace database (*)"),
    "read a csv": ("SELECT * FROM 'mine.csv'", "reaches outside the trace database (mine.csv)"),
    "turn the guard off": ("SET enable_external_access = true", "SET is not allowed"),
    "install an extension": ("INSTALL httpfs", "INSTALL is not allowed"),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_query_sql_reaches_nothing_but_the_trace_database(place, attack):
    sql, refusal = ATTACKS[attack]
    before = database_state(place / "t.duckdb"), _other_rows(place), _files(place), (place / "mine.csv").read_bytes()
    result = invoke("query", "--db", "t.duckdb", "--sql", sql)
    assert result.exit_code == 1, result.output
    assert result.output.count("\n") == 1 and "Traceback" not in result.output
    assert result.output.startswith("Error: ") and refusal in result.output, result.output
    assert SECRET not in result.output and "root:" not in result.output
    after = database_state(place / "t.duckdb"), _other_rows(place), _files(place), (place / "mine.csv").read_bytes()
    assert after == before


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_export_sql_reaches_nothing_but_the_trace_database(place, attack):
    sql, refusal = ATTACKS[attack]
    before = _other_rows(place), _files(place)
    result = invoke("export", "--db", "t.duckdb", "--sql", sql, "-o", "out.json")
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    assert refusal in result.output and SECRET not in result.output
    assert (_other_rows(place), _files(place)) == before


def test_a_statement_hidden_behind_exports_wrapping_is_refused(place):
    # export wraps the SQL as SELECT * FROM (...): closing that parenthesis must not open a door.
    sql = "SELECT * FROM events) AS x; COPY (SELECT 1) TO 'smuggled.csv'; SELECT * FROM (SELECT 1"
    result = invoke("export", "--db", "t.duckdb", "--sql", sql, "-o", "out.json")
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert not (place / "smuggled.csv").exists() and not (place / "out.json").exists()


@pytest.mark.parametrize("sql", [
    "ATTACH 'other.duckdb' AS o (READ_ONLY false)",
    "ATTACH 'hardlink.duckdb' AS h (READ_ONLY false)",
    "COPY (SELECT 1) TO 'stolen.csv'",
    "EXPORT DATABASE 'dumped'",
    "SELECT * FROM read_text('secret.txt')",
    "SELECT * FROM glob('*')",
    "SELECT * FROM read_csv('mine.csv')",
    "INSTALL httpfs",
])
def test_duckdbs_own_lock_refuses_each_attack_without_our_statement_check(place, sql):
    """The second lock alone: SQL run straight on the connection, past tracekit's one-SELECT rule."""
    before = _other_rows(place), _files(place)
    con = connect_for_queries(place / "t.duckdb")
    try:
        with pytest.raises(duckdb.PermissionException):
            con.execute(sql).fetchall()
    finally:
        con.close()
    assert (_other_rows(place), _files(place)) == before


@pytest.mark.parametrize("allow_files", [False, True])
@pytest.mark.parametrize("sql", ["SET enable_external_access = true", "RESET enable_external_access",
                                 "SET lock_configuration = false", "SET autoinstall_known_extensions = true"])
def test_the_configuration_is_locked(place, allow_files, sql):
    con = connect_for_queries(place / "t.duckdb", allow_files=allow_files)
    try:
        with pytest.raises(duckdb.Error, match="configuration has been locked"):
            con.execute(sql)
    finally:
        con.close()


def test_allow_files_joins_a_csv_of_the_users_own(place):
    result = invoke("query", "--db", "t.duckdb", "--allow-files", "-f", "csv", "--sql",
                    "SELECT k.kernel_class, count(*) AS kernels, any_value(m.budget_us) AS budget_us "
                    "FROM kernels k JOIN read_csv('mine.csv') m USING (kernel_class) "
                    "GROUP BY ALL ORDER BY 1")
    assert result.exit_code == 0, result.output
    expected = duckdb.connect(str(place / "t.duckdb"), read_only=True).execute(
        "SELECT kernel_class, count(*) FROM kernels WHERE kernel_class IN ('softmax', 'gemm') "
        "GROUP BY 1 ORDER BY 1").fetchall()
    budgets = {"softmax": 100, "gemm": 500}
    assert result.output.splitlines() == ["kernel_class,kernels,budget_us"] + [
        f"{cls},{n},{budgets[cls]}" for cls, n in expected]
    assert len(expected) == 2


@pytest.mark.parametrize("sql, refusal", [
    ("COPY (SELECT * FROM kernels) TO 'stolen.csv'", "COPY is not allowed"),
    ("ATTACH 'other.duckdb' AS o (READ_ONLY false)", "ATTACH is not allowed"),
    ("EXPORT DATABASE 'dumped'", "EXPORT is not allowed"),
    ("SELECT 1; COPY (SELECT 1) TO 'stolen.csv'", "holds 2 statements"),
    ("SET enable_external_access = false", "SET is not allowed"),
])
@pytest.mark.parametrize("output", [(), ("-o", "rows.parquet")], ids=["printed", "parquet"])
def test_allow_files_still_never_writes_nor_attaches(place, sql, refusal, output):
    # -o FILE.parquet runs the SQL by its own path (a relation, not a cursor): the same check holds there.
    before = _other_rows(place), _files(place)
    result = invoke("query", "--db", "t.duckdb", "--allow-files", "--sql", sql, *output)
    assert result.exit_code == 1 and refusal in result.output and result.output.count("\n") == 1
    assert (_other_rows(place), _files(place)) == before


def test_export_allow_files_reads_a_csv_of_trace_names(place):
    (place / "wanted.csv").write_text("trace\nnaive\n")
    result = invoke("export", "--db", "t.duckdb", "--allow-files", "-o", "picked.json", "--sql",
                    "SELECT * FROM events WHERE cat = 'kernel' AND trace IN (SELECT trace FROM 'wanted.csv')")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("wrote ") and (place / "picked.json").is_file()


def test_python_api_keeps_files_out_unless_allowed(place):
    import tracekit

    with pytest.raises(QueryError, match=r"reaches outside the trace database \(mine.csv\)"):
        tracekit.query(sql="SELECT * FROM 'mine.csv'", db="t.duckdb")
    with pytest.raises(QueryError, match="COPY is not allowed"):
        tracekit.query(sql="COPY (SELECT 1) TO 'stolen.csv'", db="t.duckdb", allow_files=True)
    frame = tracekit.query(sql="SELECT * FROM 'mine.csv' ORDER BY budget_us", db="t.duckdb", allow_files=True)
    assert frame["budget_us"].tolist() == [100, 500]
    assert not (place / "stolen.csv").exists()


def test_the_lock_stays_on_its_own_connection(place):
    """A locked query connection leaves the process's other DuckDB connections to the file as they were."""
    mine = duckdb.connect(str(place / "t.duckdb"), read_only=True)
    try:
        con = connect_for_queries(place / "t.duckdb")
        con.close()
        assert mine.execute("SELECT count(*) FROM read_csv('mine.csv')").fetchone() == (2,)
        mine.execute("SET threads = 1")
    finally:
        mine.close()


def test_the_database_itself_and_the_named_queries_still_work(place):
    result = invoke("query", "summary", "--db", "t.duckdb", "-f", "csv")
    assert result.exit_code == 0 and result.output.splitlines()[1].startswith("naive,")
    result = invoke("query", "--db", "t.duckdb", "-f", "csv", "--sql", "DESCRIBE kernels")
    assert result.exit_code == 0 and "\nkernel_class," in result.output


def test_a_small_database_is_queried_on_one_thread_and_a_big_one_on_duckdbs(place):
    """A database of fewer than SMALL_DATABASE_EVENTS events (the naive sample's 500) is queried on
    one thread, where a second only coordinates; a ResNet-18 training capture (22,559 events) keeps
    DuckDB's own count, the machine's cores."""
    from conftest import TEST_DATA
    from tracekit.store.database import SMALL_DATABASE_EVENTS

    assert invoke("load", TEST_DATA / "h100" / "model_pairs" / "resnet_train_pageable.json.gz",
                  "--db", "big.duckdb").exit_code == 0
    if duckdb.connect().execute("SELECT current_setting('threads')").fetchone()[0] < 2:
        pytest.skip("DuckDB runs one thread on this machine anyway")
    small = connect_for_queries(place / "t.duckdb")
    big = connect_for_queries(place / "big.duckdb")
    try:
        assert small.execute("SELECT count(*) FROM event_rows").fetchone()[0] < SMALL_DATABASE_EVENTS
        assert small.execute("SELECT current_setting('threads')").fetchone() == (1,)
        assert big.execute("SELECT count(*) FROM event_rows").fetchone()[0] >= SMALL_DATABASE_EVENTS
        assert big.execute("SELECT current_setting('threads')").fetchone() == (duckdb.connect().execute(
            "SELECT current_setting('threads')").fetchone()[0],)
        # the user's own files may be big whatever the traces are
        files = connect_for_queries(place / "t.duckdb", allow_files=True)
        assert files.execute("SELECT current_setting('threads')").fetchone()[0] > 1
        files.close()
    finally:
        small.close()
        big.close()
