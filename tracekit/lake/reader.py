"""Reading a lake with DuckDB: an in-memory database whose tables are views over the lake's
Parquet files, with tracekit's views over them, so every named query, finding rule and ad hoc SQL
runs on a lake as on a database file.

The traces are those trace_files lists when the connection opens (a snapshot: a trace published
later is not seen), and every other table reads only their partitions, so a trace a writer is
still publishing, or one a dead writer left half-written, is never seen in part. The small tables
are read into memory then (IN_MEMORY); the big ones are read from their files by each query.
"""

from pathlib import Path

import duckdb

from tracekit.lake.layout import (SHARED_PART, LakeError, own_folder, partition, per_trace_tables, read_meta, shared_tables,
                                  table_columns, whole_traces)
from tracekit.store.knowledge import TABLES as KNOWLEDGE_TABLES, add_missing


# A trace taken out of the lake while a connection opens (another --replace's) loses its
# trace_files file between the listing and the read of it: the snapshot is then taken again.
_OPEN_TRIES = 3


def connect_lake(lake, *, allow_files=False):
    """A read-only connection to `lake` for queries, confined as tracekit.store.database's
    connect_for_queries is (the lake's files, and with `allow_files` the user's own, to read)."""
    for attempt in range(_OPEN_TRIES):
        try:
            return _connect(lake, allow_files)
        except _SnapshotMoved:
            if attempt == _OPEN_TRIES - 1:
                raise LakeError(f"{lake}: its traces changed while it was opened, {_OPEN_TRIES} times; "
                                "open it again") from None


class _SnapshotMoved(Exception):
    """A file of the lake's snapshot was removed before the connection read it."""


def _connect(lake, allow_files):
    from tracekit.store.sql_sandbox import lock_down
    from tracekit.store.database import create_views, prepare

    folder = Path(lake).resolve()
    stored = read_meta(lake)
    con = duckdb.connect(":memory:")
    try:
        # Parquet footers read once per connection, not once per query.
        con.execute("SET parquet_metadata_cache = true")
        _create_tables(con, folder)
        con.execute("CREATE TABLE schema_info (key VARCHAR PRIMARY KEY, value VARCHAR)")
        con.executemany("INSERT INTO schema_info VALUES (?, ?)",
                        [[key, str(value)] for key, value in sorted(stored.items())])
        create_views(con)
        prepare(con)
        lock_down(con, allow_files=allow_files, allowed_directories=[f"{folder}/"])
    except duckdb.IOException as exc:
        con.close()
        if "No files found" in str(exc) or "No such file" in str(exc):
            raise _SnapshotMoved() from None
        raise LakeError(f"{lake}: cannot be read as a lake ({str(exc).splitlines()[0]})") from None
    except duckdb.Error as exc:
        con.close()
        raise LakeError(f"{lake}: cannot be read as a lake ({str(exc).splitlines()[0]})") from None
    except BaseException:
        con.close()
        raise
    return con


# Tables of a row per trace, step or kernel name: read into memory when the connection opens.
# The views join them over and over (every view joins trace_files), and each read of a table of
# 64 small files costs about 5 ms where a table in memory costs nothing: `summary` on 64 ranks
# took 0.98 s with them as views of the files, 0.29 s with them in memory (and opening, 0.94 s
# then, 0.25 s). The tables of a row per event stay views of the files.
IN_MEMORY = {"trace_files", "step_rows", "gpu_busy_rows", "kernel_classes"}


def _create_tables(con, lake):
    traces = whole_traces(lake)
    for table in per_trace_tables():
        columns = table_columns()[table]
        if not traces:
            con.execute(f"CREATE TABLE {_identifier(table)} ({_typed(columns)})")
            continue
        files = [str(partition(lake, table, name) / part) for name, part in traces]
        hive = ", hive_partitioning = true, hive_types = {'trace': 'VARCHAR'}" if table == "trace_files" else \
            ", hive_partitioning = false"
        selected = ", ".join(_identifier(column) for column, _ in columns)
        kind = "TABLE" if table in IN_MEMORY else "VIEW"
        con.execute(f"CREATE {kind} {_identifier(table)} AS SELECT {selected} "
                    f"FROM read_parquet({_list(files)}{hive})")
    present = {entry.name for entry in lake.iterdir()}
    add_missing(con, present)  # knowledge tables added since the lake was written
    for table in shared_tables():
        if table not in present and table in KNOWLEDGE_TABLES:
            continue
        own_folder(lake / table)
        part = lake / table / SHARED_PART
        if not part.is_file():
            raise LakeError(f"{lake}: a lake without its {table} table (was it copied in part?)")
        con.execute(f"CREATE VIEW {_identifier(table)} AS SELECT * FROM read_parquet({_list([str(part)])})")


def _typed(columns):
    return ", ".join(f"{_identifier(c)} {'BIGINT' if c == 'trace_id' else t}" for c, t in columns)


def _identifier(name):
    return '"' + name.replace('"', '""') + '"'


def _list(paths):
    return "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"
