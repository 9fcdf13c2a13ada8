"""What the query output tests hold tracekit's output against: DuckDB's own rows and values."""

import math
from decimal import Decimal

import duckdb


def duckdb_rows(db, sql, params=None):
    """(columns, rows) as DuckDB itself returns them, to hold tracekit's output against."""
    con = duckdb.connect(str(db), read_only=db != ":memory:")
    try:
        cursor = con.execute(sql, params) if params else con.execute(sql)
        return [d[0] for d in cursor.description], cursor.fetchall()
    finally:
        con.close()


def same(parsed, expected):
    """A value read back from text or JSON equals DuckDB's, exactly (NaN and NULL as read back)."""
    if expected is None:
        return parsed in (None, "")
    if isinstance(expected, float):
        return parsed is not None and (float(parsed) == expected or math.isnan(expected) and math.isnan(float(parsed)))
    if isinstance(expected, int) and not isinstance(expected, bool):
        return int(parsed) == expected
    if isinstance(expected, Decimal):
        return Decimal(str(parsed)) == expected
    return parsed == expected
