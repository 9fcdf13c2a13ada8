"""What tracekit knows about GPUs and Python's libraries, kept as CSV files beside this module
(tracekit/store/knowledge/), one row per GPU, architecture or module with its source, and stored in
the database as tables the views and the loader join."""

import csv
import io
from importlib import resources

# table -> (CSV file, column types in CSV order)
TABLES = {
    "gpu_specs": ("gpu_specs.csv", {
        "name_pattern": "VARCHAR", "gpu": "VARCHAR", "arch": "VARCHAR", "tf32_tflops": "DOUBLE",
        "bf16_tflops": "DOUBLE", "fp16_tflops": "DOUBLE", "fp8_tflops": "DOUBLE", "vector_tflops": "DOUBLE",
        "memory_tb_s": "DOUBLE", "source": "VARCHAR"}),
    "gpu_arch_limits": ("gpu_arch_limits.csv", {
        "arch": "VARCHAR", "max_blocks_per_sm": "INTEGER", "max_warps_per_sm": "INTEGER",
        "registers_per_sm": "INTEGER", "register_alloc_unit": "INTEGER", "max_registers_per_thread": "INTEGER",
        "shared_memory_per_sm": "INTEGER", "reserved_shared_memory_per_block": "INTEGER", "source": "VARCHAR"}),
    "interconnects": ("interconnects.csv", {
        "name_pattern": "VARCHAR", "gpu": "VARCHAR", "link": "VARCHAR", "per_direction_gb_s": "DOUBLE",
        "bidirectional_gb_s": "DOUBLE", "per_peer_gb_s": "DOUBLE", "assumption": "VARCHAR", "source": "VARCHAR"}),
    # The top-level modules whose frames are not the user's code (see derive_1_ops.sql, source lines).
    "library_modules": ("library_modules.csv", {
        "module": "VARCHAR", "library": "VARCHAR", "source": "VARCHAR"}),
}
_CASTS = {"DOUBLE": float, "INTEGER": int, "VARCHAR": str}


def rows(table):
    """The rows of a knowledge table, typed, in the CSV's order (an empty cell is NULL)."""
    file_name, columns = TABLES[table]
    text = resources.files("tracekit.store").joinpath("knowledge", file_name).read_text(encoding="utf-8")
    return [tuple(_CASTS[kind](record[name]) if record[name] != "" else None for name, kind in columns.items())
            for record in csv.DictReader(io.StringIO(text))]


def create_statements():
    return [f"CREATE TABLE IF NOT EXISTS {table} ({', '.join(f'{c} {t}' for c, t in columns.items())})"
            for table, (_, columns) in TABLES.items()]


def add_missing(con, present):
    """Makes each knowledge table that `present` (the names the store has) lacks a temporary table
    of this tracekit's rows: a store written before the table existed (a read-only database, a
    lake) still answers the views that read it."""
    for table, (_, columns) in TABLES.items():
        if table not in present:
            con.execute(f"CREATE TEMP TABLE {table} ({', '.join(f'{c} {t}' for c, t in columns.items())})")
            insert_rows(con, table, rows(table))


def sync_knowledge(con):
    """Creates the knowledge tables and stores this tracekit's rows when they differ."""
    for statement in create_statements():
        con.execute(statement)
    for table, (_, columns) in TABLES.items():
        current = rows(table)
        stored = [tuple(r) for r in con.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()]
        if stored != current:
            con.execute(f"DELETE FROM {table}")
            insert_rows(con, table, current)


def create_with_rows(con, table):
    """Creates knowledge table `table` in a fresh database (a lake writer's scratch) with its rows,
    in one statement: an insert per row would cost most of a scratch database's set-up."""
    file_name, columns = TABLES[table]
    con.execute(f"CREATE TABLE {table} ({', '.join(f'{c} {t}' for c, t in columns.items())})")
    insert_rows(con, table, rows(table))


def insert_rows(con, table, values):
    """Inserts `values` (tuples of one width) into `table` in one statement: executemany runs a
    statement per row, 0.05 s for the knowledge tables of a new database."""
    if not values:
        return
    row = f"({', '.join('?' * len(values[0]))})"
    con.execute(f"INSERT INTO {table} VALUES " + ", ".join([row] * len(values)),
                [value for one in values for value in one])
