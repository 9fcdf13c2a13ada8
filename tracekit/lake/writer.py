"""A trace's tables as Parquet files in a writer's staging folder (tracekit.lake.publish), from a
trace file (the normal loader, into an in-memory DuckDB of its own) or from a database."""

import os
import shutil
import tempfile
import uuid
from pathlib import Path

import duckdb

from tracekit.ingest.scratch import scratch_prefix
from tracekit.lake.layout import SHARED_PART, per_trace_tables, shared_tables, table_columns, trace_id_for

# ZSTD as the database stores event args: most of a trace's bytes, and they compress well.
PARQUET_OPTIONS = "(FORMAT parquet, COMPRESSION zstd)"


def convert_file(path, staging, *, lenient, stop, progress):
    """Loads trace file `path` with the normal loader into an in-memory database and writes its
    tables into `staging`; returns the loader's LoadResult, its trace_id the lake's."""
    from tracekit.ingest.loader import load_file
    from tracekit.store.database import connect_scratch

    # Where DuckDB spills past its memory limit: the temp folder, named so that the next load
    # removes it if this process is killed (a lake may sit on a slow shared disk).
    spill = tempfile.mkdtemp(prefix=scratch_prefix("lake-"))
    con = connect_scratch()
    try:
        con.execute(f"SET temp_directory = {_literal(spill)}")
        result = load_file(con, path, lenient=lenient, progress=progress, stop=stop)
        with stop.interruptible(con, path):
            write_trace(con, result.trace_id, result.trace, result.sha256, staging)
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)
    result.trace_id = trace_id_for(result.sha256)
    return result


def write_trace(con, trace_id, name, sha256, staging):
    """Writes the rows of trace `trace_id` of each per-trace table of `con`'s database into
    `staging`, as trace `name` with the lake's trace_id (from `sha256`)."""
    lake_id = trace_id_for(sha256)
    for table in per_trace_tables():
        columns = ", ".join(f"CAST({lake_id} AS BIGINT) AS trace_id" if column == "trace_id" else _identifier(column)
                            for column, _ in table_columns()[table] if column != "trace")
        target = staging.file(table, name)
        con.execute(f"COPY (SELECT {columns} FROM {_identifier(table)} WHERE trace_id = {int(trace_id)}) "
                    f"TO {_literal(target)} {PARQUET_OPTIONS}")


def write_shared(lake):
    """Writes the tables every trace shares (kernel rules, GPU knowledge) into `lake`, each file
    put in place by one rename."""
    from tracekit.store.database import connect_scratch
    from tracekit.store.knowledge import sync_knowledge

    con = connect_scratch()
    try:
        sync_knowledge(con)
        for table in shared_tables():
            folder = Path(lake) / table
            folder.mkdir(exist_ok=True)
            scratch = folder / f".{uuid.uuid4().hex}.parquet"
            try:
                con.execute(f"COPY (SELECT * FROM {_identifier(table)}) TO {_literal(scratch)} {PARQUET_OPTIONS}")
                _put_in_place(scratch, folder / SHARED_PART)
            finally:
                scratch.unlink(missing_ok=True)
    finally:
        con.close()


def _put_in_place(scratch, target):
    os.replace(scratch, target)


def stored_trace_file(part):
    """(sha256, file_sha256, file_bytes, path) of the trace_files row in Parquet file `part`."""
    con = duckdb.connect(":memory:")
    try:
        return con.execute("SELECT sha256, file_sha256, file_bytes, path FROM read_parquet(?)", [str(part)]).fetchone()
    finally:
        con.close()


def _identifier(name):
    return '"' + name.replace('"', '""') + '"'


def _literal(path):
    return "'" + str(path).replace("'", "''") + "'"
