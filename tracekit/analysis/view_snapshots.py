"""Views that many queries of one run read, computed once for the run.

The finding rules each read a few small views (a row per step or per trace: `steps`,
`step_totals`...) over the big tables, and DuckDB plans and computes a view again in every query
that reads it: on a small trace most of a rule's time is that planning. Inside `snapshots`, each
such view is a temporary table of the same name, which an unqualified name in a query resolves to
before the database's view (DuckDB looks in the connection's temporary objects first); the rows are
the view's, as the database is not changed meanwhile, and the tables go when the run ends.
"""

import re
from contextlib import contextmanager

import duckdb


@contextmanager
def snapshots(con, views, sqls):
    """Each of `views` that two or more of `sqls` read, as a temporary table of its name while the
    block runs. A name the connection already holds among its temporary objects (the views it
    made for a database of an older tracekit) is left as it is."""
    taken = {name for (name,) in con.execute(
        "SELECT view_name FROM duckdb_views() WHERE temporary UNION ALL "
        "SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall()}
    wanted = [view for view in views if view not in taken and _readers(view, sqls) >= 2]
    made = []
    try:
        home = _quoted(*con.execute("SELECT current_database(), current_schema()").fetchone())
        for view in wanted:
            con.execute(f"CREATE TEMP TABLE {_quoted(view)} AS SELECT * FROM {home}.{_quoted(view)}")
            made.append(view)
        yield made
    finally:
        for view in reversed(made):
            try:
                con.execute(f"DROP TABLE IF EXISTS temp.main.{_quoted(view)}")
            except duckdb.Error:
                pass  # the connection is closing or broken: its temporary tables go with it


def _readers(view, sqls):
    read = re.compile(rf"\b(FROM|JOIN)\s+{re.escape(view)}\b", re.IGNORECASE)
    own = re.compile(rf"\b{re.escape(view)}\s+AS\s*\(", re.IGNORECASE)  # a CTE of the name reads that instead
    return sum(1 for sql in sqls if read.search(sql) and not own.search(sql))


def _quoted(*names):
    """A qualified name, each part quoted (a database is named after its file: `my-run`, `2x`)."""
    return ".".join('"' + name.replace('"', '""') + '"' for name in names)
