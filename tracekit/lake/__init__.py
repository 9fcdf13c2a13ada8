"""A Parquet lake: the traces' tables as Parquet files in a folder, written by any number of
processes (or machines sharing the folder) at once, read by DuckDB here and by Spark.

Layout (the contract readers rely on; LAKE_FORMAT in _tracekit.json is its version):

    LAKE/_tracekit.json                    {"lake_format": 1, "tracekit_version": ..., "schema_version": ...}
    LAKE/<table>/trace=<name>/part-<generation>-<writer>.parquet
        one dataset per physical table of store/sql/tables.sql that holds per-trace rows (every table
        with a trace_id column: trace_files, event_rows, step_rows, cpu_op_rows, runtime_rows, memory_rows,
        kernel_rows, transfer_rows, gpu_busy_rows, kernel_classes, collective_rows), Hive-style partitions: one folder
        per trace, holding a file per generation (with zero rows where the trace has none), whose columns
        are the table's less `trace`, which the folder name gives. <name> is the trace's name with
        every ASCII character other than letters, digits, `.`, `_` and `-` written as %XX (its
        other characters as they are), so `trace` read back (DuckDB's hive_partitioning, Spark's
        partition discovery; read it as a string) equals trace_files.trace.
    LAKE/kernel_rules/part-0.parquet, LAKE/gpu_specs/part-0.parquet, LAKE/gpu_arch_limits/part-0.parquet
        the tables every trace shares (the classification rules and what tracekit knows of GPUs)
    LAKE/_staging/, LAKE/_content/, LAKE/_lock
        the writers' own: readers ignore every name that starts with `_` or `.` (as Spark and Hive
        do; a dot-file is one a writer was killed writing). tracekit follows no link inside a lake:
        a link where it keeps a folder or its lock is an error naming it.

    A reader takes the traces of trace_files, and of every other table only those traces' rows
    (a semi-join on `trace` or trace_id): a partition whose trace has no trace_files partition is
    a write in progress, or a dead writer's leftover. A trace's current files are those of the
    newest generation its trace_files partition holds: every table's partition holds a file of
    that name (else the lake is damaged, and readers say so). A --replace puts generation N+1
    beside N, trace_files last; N stays SUPERSEDED_KEPT_S (publish.py) for the readers that took
    it before, then a load removes it. A lake written before generations names its files
    part-<writer>.parquet: generation 0. Read `trace` as a string (Spark:
    spark.sql.sources.partitionColumnTypeInference.enabled=false, or a trace named 007 is 7).

    trace_id is the first 63 bits of the trace's content SHA-256 (trace_files.sha256), so writers
    that never talk to each other give distinct traces distinct ids (a trace's content is in a lake
    once); every table carries it, and the views join on it as in a database.

A trace is in the lake once its trace_files partition is: a writer converts a file on its own
(the normal loader, into an in-memory DuckDB), writes its tables as Parquet into a staging folder
inside the lake, and publishes them by renaming each partition folder (a replaced trace's: each
file) into place, trace_files last. Readers take the traces trace_files lists and, for every other table, only those traces'
partitions, so a trace is seen whole or not at all. A writer that crashes leaves a staging folder
and perhaps partitions with no trace_files partition: nobody reads them, and the next load
removes them. The renames of one publication hold LAKE/_lock (an flock, a few milliseconds), and
so does the choice of its name (a database's rule: the file's name, or when other content holds
it the first free name-2, name-3, ...), so two writers never publish one name; everything else
runs in parallel. The lake must sit on
a POSIX file system that every writer sees (a local disk, NFS), not on an object store.

    load_many(files, lake)    what `tracekit load FILES --lake LAKE` runs; a Spark job maps it over
                              rank files, each worker converting and publishing its own
    load_one(path, lake)      one file
    export_database(db, lake) what `tracekit export --lake LAKE --db DB` runs
    connect_lake(lake)        a read-only DuckDB connection with the database's tables and views
"""

from tracekit.lake.batch import LakeBatch, export_database, load_many, load_one  # noqa: F401
from tracekit.lake.reader import connect_lake  # noqa: F401

__all__ = ["LakeBatch", "connect_lake", "export_database", "load_many", "load_one"]
