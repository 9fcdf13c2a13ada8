"""A lake's tables (tracekit.lake's layout) as Spark temporary views, with the columns and types
each has in a tracekit database, holding the traces a reader may take.

A lake in a folder (this machine's disk, or one that every Spark worker mounts at the same path)
is read as tracekit.lake.reader reads it: the traces whose partitions are whole when the views
are made (a snapshot; a trace a writer is still publishing is not seen). A lake at a URI that
Spark reads itself (hdfs://, s3a://: a copy of a lake) is read as its trace_files lists it:
each table is cut to the traces trace_files holds, so a partition without its trace_files
partition (a copy in progress) is not seen.
"""

import re
from pathlib import Path

from tracekit.errors import TracekitError
from tracekit.store import knowledge
from tracekit.lake.layout import (META_FILE, LakeError, check_meta, encode_name, part_generation, per_trace_tables,
                                  read_meta,
                                  shared_tables, table_columns, whole_traces)
from tracekit.spark.session import spark_error_text

# DuckDB's types of tracekit's tables, as Spark reads them from Parquet.
_SPARK_TYPES = {"INTEGER": "INT", "BIGINT": "BIGINT", "DOUBLE": "DOUBLE", "VARCHAR": "STRING", "JSON": "STRING",
                "BOOLEAN": "BOOLEAN", "TIMESTAMP": "TIMESTAMP_NTZ", "INTEGER[]": "ARRAY<INT>"}
PARTITION = "trace"


def register_lake_tables(spark, lake):
    """Makes every table of the lake at `lake` (a folder or a URI) a temporary view of `spark`."""
    uri, folder = lake_location(lake)
    columns = table_columns()
    if folder is not None:
        read_meta(folder)
        whole = whole_traces(folder)
        # The very files of the whole traces, as tracekit.lake.reader reads them: a trace replaced
        # or removed while Spark lists the lake is not read in part, nor fails the listing.
        parts = {table: [f"{uri}/{table}/{encode_name(name)}/{part}" for name, part in whole]
                 for table in per_trace_tables()}
        for table in per_trace_tables():
            frame = _dataset(spark, uri, lake, table, columns[table], parts[table])
            if table == "trace_files":
                # Read now, a row per trace: a trace another writer takes out later has then lost
                # its trace_files file (its other files stay a while: tracekit.lake.publish).
                frame = _held_by_driver(spark, frame)
            frame.createOrReplaceTempView(table)
    else:
        _check_remote_meta(spark, uri)
        current = _current_parts(spark, uri, lake, columns["trace_files"])
        for table in per_trace_tables():
            frame = _dataset(spark, uri, lake, table, columns[table], None, current)
            frame.createOrReplaceTempView(table)
    for table in shared_tables():
        _shared(spark, uri, lake, table, columns[table]).createOrReplaceTempView(table)


def _held_by_driver(spark, frame):
    """`frame`'s rows, read now, as a table the driver's JVM holds (a local relation). Not
    spark.createDataFrame(rows): that is a Python RDD, and every query reading it would start a
    Python worker to unpickle its rows (the Spark tests' queries: 58 s against 41 for four, run
    twice). Where the session has no JVM of its own (Spark Connect), the rows are a Python RDD."""
    from pyspark.sql import DataFrame

    java_session = getattr(spark, "_jsparkSession", None)
    if java_session is None:
        return spark.createDataFrame(frame.collect(), frame.schema)
    return DataFrame(java_session.createDataFrame(frame._jdf.collectAsList(), frame._jdf.schema()), spark)


def lake_location(lake):
    """(the URI Spark reads, the local folder or None): a folder as an absolute file:// URI (a bare
    path would be read from the cluster's default file system, HDFS on YARN); a file: URI as that
    folder; any other URI as given, with no local folder."""
    from urllib.parse import unquote, urlsplit

    text = str(lake)
    if text.startswith("file:"):
        parts = urlsplit(text)
        if parts.netloc not in ("", "localhost"):
            raise LakeError(f"{lake}: a file: URI of another host; give the folder as this machine mounts it")
        text = unquote(parts.path)
    elif "://" in text:
        return text.rstrip("/"), None
    folder = Path(text).resolve()
    if _GLOB.search(str(folder)):
        raise LakeError(f"{lake}: Spark reads a path with any of [ ] {{ }} * ? as a pattern; "
                        "move the lake to a folder without them")
    return f"file://{folder}", folder


_GLOB = re.compile(r"[\[\]{}*?]")


def _current_parts(spark, uri, lake, columns):
    """{trace: the file of its newest generation} of a lake Spark lists itself, read from the
    file names of trace_files (a --replace puts a trace's next generation beside the last)."""
    frame = _read(spark, uri, lake, "trace_files", _ddl(_stored(columns) + [(PARTITION, "VARCHAR")]))
    current = {}
    for trace, file_name in frame.select(PARTITION, "_metadata.file_name").distinct().collect():
        if part_generation(file_name) is not None and (
                trace not in current or part_generation(file_name) > part_generation(current[trace])):
            current[trace] = file_name
    return current


def _stored(columns):
    return [(name, kind) for name, kind in columns if name != PARTITION]


def _dataset(spark, uri, lake, table, columns, files, current=None):
    """The table's rows from `files` (its partition files; None: the whole dataset, cut to the
    files of `current`, {trace: its newest file}); `trace` only in trace_files, where the
    partition folder gives it."""
    from pyspark.sql import functions as F

    stored = _stored(columns)
    ddl = _ddl(stored + [(PARTITION, "VARCHAR")])
    if files == [] or current == {}:
        frame = spark.createDataFrame([], ddl)
    else:
        frame = _read(spark, uri, lake, table, ddl, files)
        if current is not None:
            _check_whole(frame, current, table, lake)
            # By trace first, so Spark lists those traces' folders alone; then by file name (a
            # part file's name holds its writer's id: it is one trace's, at one generation).
            frame = frame.where(F.col(PARTITION).isin(sorted(current)))
            frame = frame.where(F.col("_metadata.file_name").isin(sorted(current.values())))
    wanted = [name for name, _ in columns] if table == "trace_files" else [name for name, _ in stored]
    return frame.select(*[f"`{name}`" for name in wanted])


def _read(spark, uri, lake, table, ddl, files=None):
    path = f"{uri}/{table}"
    try:
        return spark.read.schema(ddl).option("basePath", path).parquet(*(files or [path]))
    except Exception as exc:
        if "PATH_NOT_FOUND" not in str(exc):
            raise TracekitError(f"{lake}: Spark cannot read its {table} ({spark_error_text(exc)})") from None
        if table == "trace_files":
            raise LakeError(f"{lake}: not a tracekit lake (it has no trace_files dataset)") from None
        raise LakeError(f"{lake}: its traces have no {table} partitions (was the lake copied in part?)") from None


def _check_whole(frame, current, table, lake):
    """Raises LakeError, as tracekit.lake.layout.whole_traces does, for a trace whose file of
    `table` is missing (a damaged lake, or a copy of it still in progress)."""
    present = {name.rsplit("/", 1)[-1] for name in frame.inputFiles()}
    for trace, part in sorted(current.items()):
        if part not in present:
            raise LakeError(f"{lake}: trace {trace!r} is damaged: its {table} partition lacks {part}; "
                            "load its file again with --replace")


def _shared(spark, uri, lake, table, columns):
    path = f"{uri}/{table}"
    try:
        return spark.read.schema(_ddl(columns)).parquet(path).select(*[f"`{name}`" for name, _ in columns])
    except Exception as exc:
        if "PATH_NOT_FOUND" not in str(exc):
            raise TracekitError(f"{lake}: Spark cannot read its {table} ({spark_error_text(exc)})") from None
        if table in knowledge.TABLES:  # a knowledge table added since the lake was written: this tracekit's rows
            return spark.createDataFrame(knowledge.rows(table), _ddl(columns))
        raise LakeError(f"{lake}: a lake without its {table} table (was it copied in part?)") from None


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
