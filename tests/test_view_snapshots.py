"""tracekit.analysis.view_snapshots: the views the finding rules share, computed once for a run of
the rules, give the rules the rows the views give, and go when the run ends."""

import pytest

from tracekit.analysis import findings_engine
from tracekit.analysis.view_snapshots import snapshots
from tracekit.store.database import connect_for_queries

# the temporary tables of the views' names (the replay keeps tables of its own, named _...)
TEMPORARY_TABLES = ("SELECT table_name FROM duckdb_tables() WHERE temporary AND table_name IN "
                    f"{tuple(findings_engine.SHARED_VIEWS)} ORDER BY 1")


@pytest.fixture
def con(sample_db):
    con = connect_for_queries(sample_db)
    yield con
    con.close()


@pytest.mark.parametrize("trace", [None, "naive"])
def test_findings_are_the_same_with_the_shared_views_computed_once(con, monkeypatch, trace):
    with_snapshots = findings_engine.run_findings(con, trace=trace)
    monkeypatch.setattr(findings_engine, "SHARED_VIEWS", ())
    without = findings_engine.run_findings(con, trace=trace)
    assert len(with_snapshots) > 3
    assert with_snapshots.to_csv() == without.to_csv()
    assert con.execute(TEMPORARY_TABLES).fetchall() == []


def test_a_view_is_a_table_of_its_rows_inside_the_block_and_gone_after(con):
    sqls = ["SELECT * FROM step_totals", "SELECT t.* FROM kernels k JOIN step_totals t USING (trace)",
            "SELECT * FROM steps", "WITH steps AS (SELECT 1 AS step) SELECT * FROM steps"]
    rows = sorted(con.execute("SELECT * FROM step_totals").fetchall())
    with snapshots(con, ("step_totals", "steps"), sqls) as made:
        # steps: one query reads it (the other its own CTE of the name), so it stays the view
        assert made == ["step_totals"]
        assert con.execute(TEMPORARY_TABLES).fetchall() == [("step_totals",)]
        assert sorted(con.execute("SELECT * FROM step_totals").fetchall()) == rows
    assert con.execute(TEMPORARY_TABLES).fetchall() == []


def test_the_tables_go_when_the_block_fails(con):
    with pytest.raises(ZeroDivisionError):
        with snapshots(con, ("steps",), ["SELECT * FROM steps", "SELECT 1 FROM steps"]):
            assert con.execute(TEMPORARY_TABLES).fetchall() == [("steps",)]
            1 / 0
    assert con.execute(TEMPORARY_TABLES).fetchall() == []


def test_a_temporary_object_of_the_name_is_left_as_it_is(con):
    """A connection to a database of an older tracekit holds temporary views of these names."""
    con.execute("CREATE TEMP VIEW steps AS SELECT * FROM tracekit.main.steps WHERE trace = 'naive'")
    with snapshots(con, ("steps", "step_totals"), ["FROM steps", "JOIN steps", "FROM step_totals JOIN steps"]) as made:
        assert made == []
        assert {row[0] for row in con.execute("SELECT DISTINCT trace FROM steps").fetchall()} == {"naive"}
    assert con.execute(TEMPORARY_TABLES).fetchall() == []
    assert {row[0] for row in con.execute("SELECT DISTINCT trace FROM steps").fetchall()} == {"naive"}


def test_a_database_named_as_sql_would_not_read_it_is_quoted(sample_db, tmp_path):
    """A database opened directly takes its file's name (`my-run`, `2x`, `select`)."""
    import shutil

    from tracekit.store.database import connect

    for name in ("my-run", "2x", "select"):
        db = shutil.copyfile(sample_db, tmp_path / f"{name}.duckdb")
        con = connect(db)
        try:
            rows = sorted(con.execute("SELECT * FROM step_totals").fetchall())
            with snapshots(con, ("step_totals",), ["FROM step_totals", "JOIN step_totals"]) as made:
                assert made == ["step_totals"]
                assert sorted(con.execute("SELECT * FROM step_totals").fetchall()) == rows
        finally:
            con.close()
