"""A lake's tables (tracekit.lake's layout) as Spark temporary views, with the columns and types
each has in a tracekit database, holding the traces a reader may take.

A lake in a folder (this machine's disk, or one that every Spark worker mounts at the same path)
is read as tracekit.lake.reader reads it: the traces whose partitions are whole when the views
are made (a snapshot; a trace a writer is still publishing is not seen). A lake at a URI that
Spark reads itself (hdfs://, s3a://: a copy of a lake) is read as its trace_files lists it:
each table is cut to the traces trace_files holds, so a partition without its trace_files
partition (a copy in progress) is not seen.
"""

from pathlib import Path

from tracekit.errors import TracekitError
from tracekit.lake.layout import (META_FILE, LakeError, check_meta, per_trace_tables, read_meta, shared_tables,
                                  table_columns, whole_traces)
from tracekit.spark.session import spark_error_text

# DuckDB's types of tracekit's tables, as Spark reads them from Parquet.
_SPARK_TYPES = {"INTEGER": "INT", "BIGINT": "BIGINT", "DOUBLE": "DOUBLE", "VARCHAR": "STRING", "JSON": "STRING",
                "BOOLEAN": "BOOLEAN", "TIMESTAMP": "TIMESTAMP_NTZ", "INTEGER[]": "ARRAY<INT>"}
PARTITION = "trace"


def register_lake_tables(spark, lake):
    """Makes every table of the lake at `lake` (a folder or a URI) a temporary view of `spark`."""
    uri, folder = lake_location(lake)
    if folder is not None:
        read_meta(folder)
        names = [name for name, _ in whole_traces(folder)]
    else:
        _check_remote_meta(spark, uri)
        names = None
    columns = table_columns()
    trace_files = _dataset(spark, uri, "trace_files", columns["trace_files"], names)
    if names is None:
        names = [row[0] for row in trace_files.select(PARTITION).distinct().collect()]
    trace_files.createOrReplaceTempView("trace_files")
    for table in per_trace_tables()[1:]:
        _dataset(spark, uri, table, columns[table], names).createOrReplaceTempView(table)
    for table in shared_tables():
        _shared(spark, uri, table, columns[table]).createOrReplaceTempView(table)


def lake_location(lake):
    """(the URI Spark reads, the local folder or None): a folder as an absolute file: URI (a bare
    path would be read from the cluster's default file system, HDFS on YARN); a file: URI as that
    folder; any other URI as given, with no local folder."""
    text = str(lake)
    if text.startswith("file:"):
        text = text[len("file:"):].lstrip("/")
        text = "/" + text
    elif "://" in text:
        return text.rstrip("/"), None
    folder = Path(text).resolve()
    return f"file://{folder}", folder


def _dataset(spark, uri, table, columns, names):
    """The table's rows of the traces `names` (their partitions alone are read; None: every
    partition); `trace` only in trace_files, where the partition folder gives it."""
    from pyspark.sql import functions as F

    stored = [(name, kind) for name, kind in columns if name != PARTITION]
    ddl = _ddl(stored + [(PARTITION, "VARCHAR")])
    path = f"{uri}/{table}"
    if names == []:
        frame = spark.createDataFrame([], ddl)
    else:
        try:
            frame = spark.read.schema(ddl).option("basePath", path).parquet(path)
        except Exception as exc:
            if "PATH_NOT_FOUND" not in str(exc):
                raise TracekitError(f"{path}: Spark cannot read it ({spark_error_text(exc)})") from None
            if table == "trace_files":
                raise LakeError(f"{uri}: not a tracekit lake (it has no trace_files dataset)") from None
            raise LakeError(f"{uri}: its traces have no {table} partitions (was the lake copied in part?)") from None
        if names is not None:
            # A filter on the partition column: Spark reads those traces' folders alone.
            frame = frame.where(F.col(PARTITION).isin(names))
    wanted = [name for name, _ in columns] if table == "trace_files" else [name for name, _ in stored]
    return frame.select(*[f"`{name}`" for name in wanted])


def _shared(spark, uri, table, columns):
    path = f"{uri}/{table}"
    try:
        return spark.read.schema(_ddl(columns)).parquet(path).select(*[f"`{name}`" for name, _ in columns])
    except Exception as exc:
        if "PATH_NOT_FOUND" not in str(exc):
            raise TracekitError(f"{path}: Spark cannot read it ({spark_error_text(exc)})") from None
        raise LakeError(f"{uri}: a lake without its {table} table (was it copied in part?)") from None


def _check_remote_meta(spark, uri):
    """Checks the lake's _tracekit.json as tracekit.lake.layout.read_meta does, read through
    Hadoop's file system (Spark's readers skip every file whose name starts with `_`)."""
    import json

    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(f"{uri}/{META_FILE}")
    try:
        files = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        if not files.exists(path):
            raise LakeError(f"{uri}: not a tracekit lake (it has no {META_FILE})")
        stream = files.open(path)
        try:
            text = jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
        finally:
            stream.close()
    except LakeError:
        raise
    except Exception as exc:  # py4j's errors: the file system cannot be reached or read
        raise TracekitError(f"{uri}: Spark cannot read it ({spark_error_text(exc)})") from None
    try:
        stored = json.loads(text)
    except ValueError as exc:
        raise LakeError(f"{uri}: its {META_FILE} cannot be read ({exc})") from None
    check_meta(stored, uri)


def _ddl(columns):
    # trace_id is 63 bits of the trace's SHA-256 in a lake (tracekit.lake.layout.trace_id_for).
    return ", ".join(f"`{name}` {'BIGINT' if name == 'trace_id' else _SPARK_TYPES[kind]}" for name, kind in columns)
