"""tracekit's named queries and ad hoc SQL on Apache Spark, over a Parquet lake (tracekit.lake).

Each table of the lake becomes a temporary view of its own name with the columns and types the
table has in DuckDB (tracekit.spark.lake_tables), and the views of views.sql are made from them
as a query first reads them, translated to Spark's SQL (tracekit.spark.dialect), so a query sees
what it sees in a tracekit database; and, as there, nothing else (tracekit.spark.sandbox).
"""

import functools
import re

from sqlglot import exp

from tracekit.analysis.named_queries import check_sql, named_sql
from tracekit.analysis.trace_lookup import no_such_trace
from tracekit.errors import QueryError
from tracekit.lake.layout import per_trace_tables, shared_tables
from tracekit.analysis.rows import Rows
from tracekit.spark.ctes import query_frame, release
from tracekit.spark.dialect import NOT_ON_SPARK, NOT_ON_SPARK_WHY, spark_tree, view_selects
from tracekit.spark.lake_tables import register_lake_tables
from tracekit.spark.sandbox import ctes_around, check_reach, confine
from tracekit.spark.session import own_session, spark_error_text, start_session


class SparkLake:
    """A Spark session that sees the lake at `lake` (a folder, or any URI Spark reads) as tracekit's
    tables and views. `master`: Spark's master URL (local[*] by default); `settings`: more Spark
    settings. Use it as a context manager, or call close(), to stop Spark."""

    def __init__(self, lake, master=None, settings=None):
        from pyspark.sql import SparkSession

        self.lake = lake
        # Spark already running in this process (a notebook's, a test's) is used, and left running.
        self._owns_spark = SparkSession.getActiveSession() is None
        self._base = start_session(master, settings)
        self.spark = own_session(self._base, settings)
        try:
            confine(self.spark)
            _register_format(self.spark)
            register_lake_tables(self.spark, lake)
            views = view_selects(_views_sql())
        except Exception:
            self.close()
            raise
        # Made when a query first reads them: Spark analyses a view as it is made, and all 39 took
        # 3.9 s, which a query of one view (the CLI's one query) paid in full.
        self._views = {name.lower(): select for name, select in views}
        self._needs, self._made = _view_needs(views), set()
        # What a query may read: the lake's tables and the views made of them (and its own CTEs).
        self.tables = frozenset([*per_trace_tables(), *shared_tables(), *(name for name, _ in views)])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self._owns_spark:
            try:
                self._base.stop()
            except Exception:  # py4j's, when a query killed Spark's JVM: nothing is left to stop
                pass

    def named(self, name, params=None):
        """The Rows of the named query `name` with `params` (text values, as `-p` gives them)."""
        sql, bound = named_sql(name, params)
        if bound and bound.get("trace") is not None:
            self._check_trace(bound["trace"])
        return self.rows(sql, bound)

    def rows(self, sql, params=None):
        """The Rows of one SELECT (DuckDB's dialect, `$name` parameters), run on Spark."""
        check_sql(sql, params)
        tree = spark_tree(sql)
        _refuse_duckdb_only(tree)
        check_reach(tree, self.tables)
        self._make_views_read_by(tree)
        kept = []
        try:
            frame = query_frame(self.spark, tree, params, kept)
            records = frame.collect()
            schema = frame.schema
        except Exception as exc:
            raise _query_error(exc, sql) from None
        finally:
            release(self.spark, kept)
        return Rows([field.name for field in schema.fields], [tuple(_plain(v) for v in r) for r in records],
                    [_duckdb_type(field.dataType) for field in schema.fields])

    def _make_views_read_by(self, tree):
        """Makes the views `tree` reads, and the views those read, that are not made yet, each
        after the views it reads (views.sql's order)."""
        wanted = [table.name.lower() for table in tree.find_all(exp.Table)]
        needed = set()
        while wanted:
            name = wanted.pop()
            if name in self._views and name not in needed and name not in self._made:
                needed.add(name)
                wanted.extend(self._needs[name])
        for name, select in self._views.items():
            if name in needed:
                self._view(name, select)
                self._made.add(name)

    def _view(self, name, spark_sql):
        try:
            self.spark.sql(spark_sql).createOrReplaceTempView(name)
        except Exception as exc:
            raise _query_error(exc, spark_sql) from None

    def _check_trace(self, name):
        if not self.spark.sql("SELECT 1 FROM trace_files WHERE trace = :name", args={"name": name}).take(1):
            names = [r[0] for r in self.spark.sql("SELECT trace FROM trace_files ORDER BY trace").collect()]
            raise no_such_trace(name, names)

def _refuse_duckdb_only(tree):
    from sqlglot import exp

    for table in tree.find_all(exp.Table):
        # a table function's name (ancestor_slice(42)) is its call's
        name = table.this.name if isinstance(table.this, exp.Anonymous) else table.name
        if name.lower() in _named_relations() and name.lower() not in ctes_around(table):
            raise QueryError(f"{name} is a named query: on Spark run it by name (tracekit query "
                             f"{name.lower()} --lake DIR --engine spark); as a table (FROM {name}) "
                             "it is DuckDB's only")
        if name.lower() in NOT_ON_SPARK:
            raise QueryError(f"{name} is not on Spark: {NOT_ON_SPARK_WHY[name.lower()]}; query it with DuckDB on the "
                             "same lake (tracekit query --lake DIR, without --engine spark)")


def _named_relations():
    """The named queries that DuckDB reads as views and table macros (tracekit.store.query_relations)
    and Spark does not: a view there would need each query translated at every session's start."""
    from tracekit.store.database import split_statements, views_sql
    from tracekit.store.query_relations import named_query_texts, view_names

    return set(named_query_texts()) - view_names(split_statements(views_sql()))


def _register_format(session):
    """The UDF tk_format, DuckDB's format() (tracekit.spark.format_udf), sent to the executors
    by value: they need not have tracekit installed."""
    from pyspark import cloudpickle

    from tracekit.spark import format_udf

    cloudpickle.register_pickle_by_value(format_udf)
    session.udf.register(format_udf.UDF_NAME, format_udf.duckdb_format, "string")


@functools.lru_cache(maxsize=4)
def _view_needs(views):
    """{view: the other views its SELECT names}, of `views` ((name, Spark SQL) in views.sql's
    order). A name found as a column or a CTE's name too only makes a view early, never one late."""
    names = [name.lower() for name, _ in views]
    found = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b", re.IGNORECASE)
    return {name.lower(): sorted({hit.lower() for hit in found.findall(select)} - {name.lower()})
            for name, select in views}


def _views_sql():
    from tracekit.store.database import views_sql
    return views_sql()


def _query_error(exc, sql):
    shown = " ".join(sql.split())
    shown = shown if len(shown) <= 300 else shown[:297] + "..."
    if _jvm_gone(exc):
        # In local mode the executors are the driver's JVM: an OutOfMemoryError in a task (a value
        # of billions of characters made row by row) ends it, and py4j finds no one to talk to
        return QueryError(f"Spark stopped: its JVM ended while it ran the query (out of memory? a value of "
                          f"billions of characters or elements), and takes no more queries; start Spark again "
                          f"(a new command, or a new SparkLake) — in SQL: {shown}")
    return QueryError(f"Spark: {spark_error_text(exc)} — in SQL: {shown}")


def _jvm_gone(exc):
    """Whether `exc` says Spark's JVM is gone: py4j's lost connection, or a task lost to an
    OutOfMemoryError (the JVM ends right after it says so)."""
    text = str(exc)
    return (isinstance(exc, ConnectionError) or type(exc).__name__ in ("Py4JNetworkError",)
            or "Connection refused" in text or "Error while sending or receiving" in text
            or "because SparkContext was shut down" in text
            or "java.lang.OutOfMemoryError" in text and "Lost task" in text)


def _plain(value):
    """A Spark value as the renderer's plain Python value: a struct (Row) as a dict."""
    from pyspark.sql import Row

    if isinstance(value, Row):
        return {key: _plain(v) for key, v in value.asDict().items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {key: _plain(v) for key, v in value.items()}
    return value


def _duckdb_type(data_type):
    """DuckDB's name for a Spark column type (for -f parquet), or None where sqlglot has none."""
    import sqlglot

    try:
        return sqlglot.exp.DataType.build(data_type.simpleString(), dialect="spark").sql("duckdb")
    except (sqlglot.errors.SqlglotError, ValueError):
        return None
