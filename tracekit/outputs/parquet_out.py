"""Rows into a Parquet file, every value exact and every column of its DuckDB type.

A query's connection cannot write files (it may be locked to the database alone), so the rows
cross to a fresh in-memory DuckDB as a pandas DataFrame, which DuckDB reads and writes without a
Python loop; pandas is imported here only, for `-f parquet`. pandas would turn DECIMALs and HUGEINTs
into float64 and NaN into NULL, so every column whose type pandas does not carry exactly crosses as
DuckDB's own text of it and is cast back to its type before the COPY.
"""

import duckdb

from tracekit.errors import TracekitError

# Types a DataFrame carries exactly, NULLs included (DuckDB gives nullable integer columns).
_EXACT_IN_PANDAS = {"BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT",
                    "UINTEGER", "UBIGINT", "VARCHAR", "BLOB"}


def _quoted(name):
    return '"' + name.replace('"', '""') + '"'


def _copy(frame, casts, path):
    """COPY the registered frame to `path`, each column cast as `casts` says."""
    con = duckdb.connect()
    try:
        con.register("result_rows", frame)
        select = ", ".join(casts) or "*"
        con.execute(f"COPY (SELECT {select} FROM result_rows) TO ? (FORMAT parquet)", [str(path)])
    except duckdb.Error as exc:
        raise TracekitError(f"{path}: cannot write parquet ({str(exc).splitlines()[0]})") from None
    finally:
        con.close()


def write_relation(relation, path):
    """Runs the DuckDB `relation` and writes its rows to `path`; returns the number of rows.
    A failure of the query itself raises duckdb.Error, for the caller to word."""
    columns, types = relation.columns, [str(t) for t in relation.types]
    crossing = [f"{_quoted(c)}" if t in _EXACT_IN_PANDAS else f"CAST({_quoted(c)} AS VARCHAR) AS {_quoted(c)}"
                for c, t in zip(columns, types)]
    frame = relation.project(", ".join(crossing)).df()
    _copy(frame, [f"CAST({_quoted(c)} AS {t}) AS {_quoted(c)}" for c, t in zip(columns, types)], path)
    return len(frame)


def write_query(con, sql, params, path, columns=None):
    """Runs one checked SELECT on `con` (only `columns`, when given) and writes its rows to `path`,
    types and values exact; returns the number of rows."""
    from tracekit.analysis.named_queries import friendly_error, query_relation

    relation = query_relation(con, sql, params, columns)
    try:
        return write_relation(relation, path)
    except duckdb.Error as exc:
        raise friendly_error(exc, sql) from None


def write_rows(rows, path):
    """Writes a small Rows of plain values (`tracekit query --list`, rows Spark returned) to `path`,
    each column cast to the DuckDB type rows.types gives it (where it gives one)."""
    import pandas as pd

    frame = pd.DataFrame(rows.rows, columns=rows.columns, dtype=object)
    types = rows.types or [None] * len(rows.columns)
    casts = [f"CAST({_quoted(c)} AS {t}) AS {_quoted(c)}" if t else _quoted(c) for c, t in zip(rows.columns, types)]
    _copy(frame, casts if rows.types else [], path)
    return len(frame)
