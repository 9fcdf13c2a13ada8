"""Views are made with DEFER_BINDING (tracekit.store.database.deferred), so DuckDB no longer checks
them as they are made: here every view and named-query relation a database holds is bound, on the
sample traces and on a database with no trace in it."""

import duckdb
import pytest

from tracekit.store.database import connect


def _views(con):
    return [row[0] for row in con.execute(
        "SELECT view_name FROM duckdb_views() WHERE NOT internal AND database_name = current_database() "
        "ORDER BY view_name").fetchall()]


def _unbindable(con):
    failed = {}
    for view in _views(con):
        try:
            con.execute(f'SELECT * FROM "{view}" LIMIT 0')
        except duckdb.Error as exc:
            failed[view] = str(exc).splitlines()[0]
    return failed


def test_every_view_binds_on_the_samples(sample_db):
    con = duckdb.connect(str(sample_db), read_only=True)
    try:
        assert len(_views(con)) > 60
        assert _unbindable(con) == {}
    finally:
        con.close()


def test_every_view_binds_with_no_trace_loaded(tmp_path):
    con = connect(tmp_path / "empty.duckdb")
    try:
        assert _unbindable(con) == {}
    finally:
        con.close()


def test_views_are_made_unbound(tmp_path):
    """What the speed comes from: a new database's views are stored unbound, bound at first use (those
    a named query's table macro reads DuckDB binds as it makes the macro)."""
    con = connect(tmp_path / "new.duckdb")
    try:
        bound = dict(con.execute("SELECT view_name, is_bound FROM duckdb_views() WHERE NOT internal "
                                 "AND database_name = current_database()").fetchall())
        assert bound["findings"] is False and bound["critical_path"] is False
    finally:
        con.close()


@pytest.mark.parametrize("statement, expected", [
    ("CREATE OR REPLACE VIEW kernels AS SELECT 1",
     "CREATE OR REPLACE VIEW kernels WITH (DEFER_BINDING) AS SELECT 1"),
    ("-- @view x: what\n-- a: column\nCREATE OR REPLACE TEMP VIEW x AS SELECT 1 AS a",
     "-- @view x: what\n-- a: column\nCREATE OR REPLACE TEMP VIEW x WITH (DEFER_BINDING) AS SELECT 1 AS a"),
    ("CREATE OR REPLACE MACRO m(a) AS TABLE SELECT a", "CREATE OR REPLACE MACRO m(a) AS TABLE SELECT a"),
])
def test_deferred_adds_the_option_to_views_only(statement, expected):
    from tracekit.store.database import deferred

    assert deferred(statement) == expected
