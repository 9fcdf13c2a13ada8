"""Named queries as SQL relations (issue [16] item 11): `FROM summary` and `FROM summary(trace :=
'naive')` give what `tracekit query summary` gives, in `query --sql`, the shell and a lake; a named
query never shadows a view (`memcpy` stays the view of copies); Spark says where to run them."""

import shutil

import duckdb
import pytest

from conftest import TEST_DATA, invoke_cli
from tracekit.analysis.named_queries import fetch_rows, named_queries, named_sql
from tracekit.store.database import connect_for_queries

SHADOWED = {"memcpy"}  # a named query and a view of views.sql: the view wins


def _rows(con, sql):
    return [tuple(row) for row in con.execute(sql).fetchall()]


def _named(con, name, params=None):
    return [tuple(row) for row in fetch_rows(con, *named_sql(name, params, con)).rows]


@pytest.mark.parametrize("name", sorted(set(named_queries()) - SHADOWED))
def test_every_named_query_is_a_view_and_a_macro_with_its_rows(sample_db, name):
    con = connect_for_queries(sample_db)
    try:
        expected = _named(con, name)
        assert _rows(con, f"FROM {name}()") == expected
        assert _rows(con, f"FROM {name}") == expected
    finally:
        con.close()


def test_parameters_are_named_as_p_names_them(sample_db):
    con = connect_for_queries(sample_db)
    try:
        top = _rows(con, "FROM top_kernels(trace := 'naive', \"limit\" := 2)")
        assert top == _named(con, "top_kernels", {"trace": "naive", "limit": "2"})
        assert [row[:2] for row in top] == [("naive", 1), ("naive", 2)]
        assert _rows(con, "FROM top_kernels") == _named(con, "top_kernels", {"limit": "5"})  # the header's default
        assert max(row[1] for row in _rows(con, "FROM top_kernels")) == 5
        one = _rows(con, "SELECT trace, steps FROM summary(trace := 'flex')")
        assert one == [("flex", 5)]
        assert _rows(con, "FROM summary(trace := 'it''s; DROP')") == []  # a value is a literal, never SQL
    finally:
        con.close()


def test_a_named_query_never_shadows_a_view(sample_db):
    con = connect_for_queries(sample_db)
    try:
        view = [column[0] for column in con.execute("FROM memcpy").description]
        assert view[:5] == ["trace", "name", "kind", "bytes", "ts_us"]  # as views.sql documents the view
        assert _rows(con, "SELECT count(*) FROM memcpy") == [(54,)]  # a row per copy, not the query's summary
        assert len(_named(con, "memcpy")) == 9
        with pytest.raises(duckdb.CatalogException):
            con.execute("FROM memcpy()")
    finally:
        con.close()


def test_query_sql_reads_them(sample_db):
    result = invoke_cli("query", "--db", sample_db, "-f", "csv", "--sql",
                        "SELECT trace, steps FROM summary WHERE trace IN ('naive', 'flex') ORDER BY trace")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["trace,steps", "flex,5", "naive,5"]
    from tracekit import api
    frame = api.query(sql="SELECT trace, steps FROM summary(trace := 'flex')", db=sample_db)
    assert frame.to_dict("records") == [{"trace": "flex", "steps": 5}]


def test_a_database_of_another_tracekit_gets_them_for_the_connection(sample_db, tmp_path):
    """A database whose views another tracekit made gets this one's views as temporary ones;
    the named queries come with them."""
    old = tmp_path / "old.duckdb"
    shutil.copy(sample_db, old)
    con = duckdb.connect(str(old))
    con.execute("UPDATE schema_info SET value = 'another' WHERE key = 'views_digest'")
    for name in set(named_queries()) - SHADOWED:
        con.execute(f"DROP VIEW {name}")
        con.execute(f"DROP MACRO TABLE {name}")
    con.close()
    con = connect_for_queries(old)
    try:
        assert _rows(con, "SELECT trace, steps FROM summary(trace := 'naive')") == [("naive", 5)]
        assert _rows(con, "SELECT count(*) FROM summary")[0][0] == 8
    finally:
        con.close()


def test_a_lake_reads_them(tmp_path):
    lake = tmp_path / "lake"
    assert invoke_cli("load", TEST_DATA / "h200" / "side_streams", "--lake", lake).exit_code == 0
    database = invoke_cli("query", "top_kernels", "--lake", lake, "-f", "csv")
    relation = invoke_cli("query", "--lake", lake, "-f", "csv", "--sql", "FROM top_kernels")
    assert relation.exit_code == 0, relation.output
    assert relation.output == database.output and len(relation.output.splitlines()) > 1


def test_spark_says_to_run_a_named_query_by_name():
    pytest.importorskip("pyspark")
    from tracekit.errors import QueryError
    from tracekit.spark.dialect import spark_tree
    from tracekit.spark.engine import _refuse_duckdb_only

    with pytest.raises(QueryError, match=r"summary is a named query: on Spark run it by name "
                                         r"\(tracekit query summary --lake DIR --engine spark\)"):
        _refuse_duckdb_only(spark_tree("SELECT trace FROM summary"))
    _refuse_duckdb_only(spark_tree("SELECT * FROM memcpy"))  # the view: on Spark as everywhere
    _refuse_duckdb_only(spark_tree("WITH summary AS (SELECT 1 AS x) SELECT x FROM summary"))  # a CTE of its own
