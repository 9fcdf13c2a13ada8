"""A query's result as the renderer takes it: column names and rows of plain Python values.

DuckDB hands rows over as Python values that keep every digit (int, Decimal, float), so
`tracekit query` renders them without pandas; a DataFrame (the Python API's, the report's) is
turned into the same shape by `Rows.from_frame`.
"""

from dataclasses import dataclass, field

from tracekit.analysis.cells import Float32, JsonText, is_number
from tracekit.errors import TracekitError


@dataclass
class Rows:
    columns: list
    rows: list  # of tuples, one value per column
    types: list = field(default=None)  # DuckDB type names, where known

    @classmethod
    def from_cursor(cls, cursor):
        """The rows of an executed DuckDB statement (a connection after execute, or a relation)."""
        description = cursor.description or []
        types = [str(d[1]) for d in description]
        rows = cursor.fetchall()
        json_at = [i for i, t in enumerate(types) if t == "JSON"]
        if json_at:
            rows = [_mark_json(row, json_at) for row in rows]
        float_at = [i for i, t in enumerate(types) if t == "FLOAT"]
        if float_at:
            rows = [_mark(row, float_at, Float32) for row in rows]
        return cls([d[0] for d in description], rows, types)

    @classmethod
    def from_frame(cls, frame):
        """A pandas DataFrame's rows, NaN and NA as NULL (pandas' missing value), numpy as Python."""
        columns = list(frame.columns)
        return cls(columns, [tuple(r[c] for c in columns) for r in records(frame)])

    def numeric(self):
        """Per column: True when every value in it is a number (right-aligned in tables)."""
        return [all(row[i] is None or is_number(row[i]) for row in self.rows)
                and any(row[i] is not None for row in self.rows) for i in range(len(self.columns))]

    def select(self, names):
        """Only the columns `names`, in that order (--columns a,b)."""
        check_columns(self.columns, names)
        at = [self.columns.index(n) for n in names]
        types = [self.types[i] for i in at] if self.types else None
        return Rows(list(names), [tuple(row[i] for i in at) for row in self.rows], types)


def check_columns(available, names):
    """Raises TracekitError naming the columns of `names` that are not in `available`."""
    missing = [n for n in names if n not in available]
    if missing:
        raise TracekitError(f"--columns: no column {', '.join(map(repr, missing))} in the result "
                            f"(its columns: {', '.join(available)})")


def _mark_json(row, json_at):
    return _mark(row, json_at, JsonText)


def _mark(row, at, kind):
    row = list(row)
    for i in at:
        if row[i] is not None:
            row[i] = kind(row[i])
    return tuple(row)


def _plain(value):
    """A DataFrame cell as a plain Python value (numpy scalars and arrays, NaN, NA, timestamps)."""
    import numpy as np
    import pandas as pd

    if value is None:
        return None
    if isinstance(value, (np.ndarray, list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None  # NaN: pandas' missing value in a float column
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    if value is pd.NaT or value is pd.NA:
        return None  # a NULL integer arrives as pandas' NA: unknown, printed as null or blank
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def records(frame):
    """The frame as a list of row dicts of plain Python values."""
    columns = list(frame.columns)
    return [{c: _plain(v) for c, v in zip(columns, row)} for row in frame.itertuples(index=False, name=None)]
