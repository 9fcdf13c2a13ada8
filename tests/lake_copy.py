"""A Parquet lake copied from a tracekit database with DuckDB, in the lake's layout:
LAKE/<table>/trace=<name, percent-encoded>/part-<uuid>.parquet for each table of per-trace rows,
LAKE/<table>/part-<uuid>.parquet for the shared ones. The Spark tests read such lakes until
`tracekit load --lake` (another branch) writes them; its writer replaces this one then.
"""

import uuid
from pathlib import Path

import duckdb

PER_TRACE = ("trace_files", "event_rows", "step_rows", "cpu_op_rows", "runtime_rows", "kernel_rows",
             "transfer_rows", "gpu_busy_rows", "kernel_classes")
SHARED = ("kernel_rules", "gpu_specs", "gpu_arch_limits")


def copy_to_lake(db, lake):
    """Writes the tables of the database `db` to the folder `lake` (created)."""
    lake = Path(lake)
    lake.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(db), read_only=True)
    try:
        for table in PER_TRACE:
            rows = ("SELECT * FROM trace_files" if table == "trace_files"
                    else f"SELECT t.*, f.trace FROM {table} t JOIN trace_files f USING (trace_id)")
            con.execute(f"COPY ({rows}) TO '{lake / table}' "
                        "(FORMAT parquet, PARTITION_BY (trace), FILENAME_PATTERN 'part-{uuid}')")
        for table in SHARED:
            (lake / table).mkdir(exist_ok=True)
            con.execute(f"COPY {table} TO '{lake / table / f'part-{uuid.uuid4()}.parquet'}' (FORMAT parquet)")
    finally:
        con.close()
    return lake
