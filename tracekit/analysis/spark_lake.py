"""tracekit's named queries and ad hoc SQL on Apache Spark, over a Parquet lake of its tables.

The lake holds a dataset per table of tables.sql (Hive-partitioned by trace: LAKE/kernel_rows/
trace=NAME/part-....parquet) and the knowledge tables (gpu_specs, gpu_arch_limits). Each becomes a
temporary view of its own name with the columns and types the table has in DuckDB, then the
views of views.sql are made from them, translated to Spark's SQL (tracekit.analysis.spark_dialect),
so a query sees what it sees in a tracekit database.
"""

from tracekit.analysis.named_queries import check_sql, named_sql
from tracekit.analysis.spark_ctes import query_frame, release
from tracekit.analysis.spark_dialect import spark_tree, view_selects
from tracekit.analysis.spark_session import own_session, spark_error_text, start_session
from tracekit.analysis.trace_lookup import no_such_trace
from tracekit.errors import QueryError, TracekitError
from tracekit.outputs.rows import Rows

# DuckDB's types of tracekit's tables, as Spark reads them from Parquet.
_SPARK_TYPES = {"INTEGER": "INT", "BIGINT": "BIGINT", "DOUBLE": "DOUBLE", "VARCHAR": "STRING", "JSON": "STRING",
                "BOOLEAN": "BOOLEAN", "TIMESTAMP": "TIMESTAMP_NTZ", "INTEGER[]": "ARRAY<INT>"}
PARTITION = "trace"


def lake_tables():
    """{table: [(column, DuckDB type), ...]} of every table a lake holds: those of tables.sql but
    schema_info, and the knowledge tables, as DuckDB creates them."""
    import duckdb

    from tracekit.store.database import split_statements, sql_resource
    from tracekit.store.knowledge import create_statements

    con = duckdb.connect(":memory:")
    try:
        for statement in split_statements(sql_resource("tables.sql")) + create_statements():
            con.execute(statement)
        rows = con.execute("SELECT table_name, column_name, data_type FROM information_schema.columns "
                           "WHERE table_name <> 'schema_info' ORDER BY table_name, ordinal_position").fetchall()
    finally:
        con.close()
    tables = {}
    for table, column, kind in rows:
        tables.setdefault(table, []).append((column, kind))
    return tables


class SparkLake:
    """A Spark session that sees the lake at `lake` (a folder, or any URI Spark reads) as tracekit's
    tables and views. `master`: Spark's master URL (local[*] by default); `settings`: more Spark
    settings. Use it as a context manager, or call close(), to stop Spark."""

    def __init__(self, lake, master=None, settings=None):
        from pyspark.sql import SparkSession

        self.lake = _lake_uri(lake)
        # Spark already running in this process (a notebook's, a test's) is used, and left running.
        self._owns_spark = SparkSession.getActiveSession() is None
        self._base = start_session(master, settings)
        self.spark = own_session(self._base, settings)
        try:
            _register_format(self.spark)
            self._register_tables()
            for name, select in view_selects(_views_sql()):
                self._view(name, select)
        except Exception:
            self.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self._owns_spark:
            self._base.stop()

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

    def _view(self, name, spark_sql):
        try:
            self.spark.sql(spark_sql).createOrReplaceTempView(name)
        except Exception as exc:
            raise _query_error(exc, spark_sql) from None

    def _check_trace(self, name):
        if not self.spark.sql("SELECT 1 FROM trace_files WHERE trace = :name", args={"name": name}).take(1):
            names = [r[0] for r in self.spark.sql("SELECT trace FROM trace_files ORDER BY trace").collect()]
            raise no_such_trace(name, names)

    def _register_tables(self):
        tables = lake_tables()
        # trace_files first: a folder without it is no lake, said before anything else is read.
        for table in sorted(tables, key=lambda name: name != "trace_files"):
            self._dataset(table, tables[table]).createOrReplaceTempView(table)

    def _dataset(self, table, columns):
        """The table's dataset as a DataFrame of its columns; an empty one when the lake has none
        (no trace had a row of it), but trace_files, without which it is no lake."""
        names = [name for name, _ in columns]
        partitioned = "trace_id" in names  # per-trace tables; the shared ones hold no trace_id
        read = columns + ([(PARTITION, "VARCHAR")] if partitioned and PARTITION not in names else [])
        ddl = ", ".join(f"`{name}` {_SPARK_TYPES[kind]}" for name, kind in read)
        path = f"{self.lake}/{table}"
        try:
            frame = self.spark.read.schema(ddl).option("basePath", path).parquet(path)
        except Exception as exc:
            if "PATH_NOT_FOUND" not in str(exc):
                raise TracekitError(f"{path}: Spark cannot read it ({spark_error_text(exc)})") from None
            if table == "trace_files":
                raise TracekitError(f"{self.lake}: not a tracekit lake (it has no trace_files dataset)") from None
            frame = self.spark.createDataFrame([], ddl)
        if table == "trace_files":
            frame = frame.withColumn(PARTITION, _utf8_partition_value(PARTITION))
        return frame.select(*[f"`{name}`" for name in names])


def _utf8_partition_value(column):
    """The partition value as written: the lake percent-encodes a name's UTF-8 bytes (é is %C3%A9),
    and Spark decodes each %XX as a character of its own (Ã©); those characters are the bytes, so
    taken as Latin-1 and read as UTF-8 they give the name back. A value that is not such a string
    (any character past U+00FF, or bytes that are no UTF-8) is the name itself."""
    from pyspark.sql import functions as F

    raw = F.col(column)
    utf8 = F.decode(F.encode(raw, "ISO-8859-1"), "UTF-8")
    misread = raw.rlike("^[\\x00-\\xff]*[\\x80-\\xff]") & ~raw.rlike("[^\\x00-\\xff]") & ~utf8.contains("\ufffd")
    return F.when(misread, utf8).otherwise(raw)


def _register_format(session):
    """The UDF tk_format, DuckDB's format() (tracekit.analysis.spark_format), sent to the executors
    by value: they need not have tracekit installed."""
    from pyspark import cloudpickle

    from tracekit.analysis import spark_format

    cloudpickle.register_pickle_by_value(spark_format)
    session.udf.register(spark_format.UDF_NAME, spark_format.duckdb_format, "string")


def _views_sql():
    from tracekit.store.database import sql_resource
    return sql_resource("views.sql")


def _lake_uri(lake):
    """A local folder as an absolute path (Spark resolves a relative one against its own working
    directory); a URI (hdfs://, s3a://, file:/...) as given."""
    from pathlib import Path

    text = str(lake)
    if "://" in text or text.startswith("file:"):
        return text.rstrip("/")
    return str(Path(text).resolve())


def _query_error(exc, sql):
    shown = " ".join(sql.split())
    shown = shown if len(shown) <= 300 else shown[:297] + "..."
    return QueryError(f"Spark: {spark_error_text(exc)} — in SQL: {shown}")


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


def query_lake(lake, name=None, *, sql=None, params=None, master=None, settings=None):
    """The Rows of named query `name` (or of `sql`, one SELECT in DuckDB's dialect) with `params`,
    run by Spark on `master` over the lake at `lake`; Spark is started for it and stopped after."""
    with SparkLake(lake, master, settings) as spark:
        return spark.named(name, params) if sql is None else spark.rows(sql, params or None)
