"""One renderer for every output format: table, csv, json, markdown, parquet."""

import io
import json
import math

import duckdb
import numpy as np
import pandas as pd

from tracekit.errors import TracekitError

FORMATS = ("table", "csv", "json", "markdown", "parquet")
# Kernel names run to hundreds of characters; a terminal table shows their start.
TABLE_CELL_CHARS = 60


def _plain(value):
    """A cell as a JSON-ready Python value (numpy scalars, arrays, NaN, timestamps)."""
    if value is None:
        return None
    if isinstance(value, (np.ndarray, list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
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


def _text(value, limit=None):
    value = _plain(value)
    if value is None:
        text = ""
    elif isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            text = str(int(value))
        else:
            text = f"{value:.6g}" if abs(value) >= 1e-4 else f"{value:.3e}"
    elif isinstance(value, (list, dict)):
        text = json.dumps(value, separators=(",", ":"))
    else:
        text = str(value)
    text = text.replace("\n", " ")
    if limit and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def _is_numeric(series):
    return pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)


def as_table(frame, cell_chars=TABLE_CELL_CHARS):
    columns = list(frame.columns)
    cells = [[_text(v, cell_chars) for v in row] for row in frame.itertuples(index=False, name=None)]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    numeric = [_is_numeric(frame[c]) for c in columns]

    def line(values):
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric)).rstrip()

    rule = "  ".join("-" * w for w in widths)
    count = f"{len(cells)} row{'s' if len(cells) != 1 else ''}"
    if cell_chars and any(len(_text(v)) > cell_chars for row in frame.itertuples(index=False, name=None) for v in row):
        count += f"; values cut at {cell_chars} characters, -f csv, json or markdown show them whole"
    footer = f"({count})"
    return "\n".join([line(columns), rule] + [line(r) for r in cells] + [footer]) + "\n"


def as_markdown(frame):
    columns = list(frame.columns)
    numeric = [_is_numeric(frame[c]) for c in columns]
    head = "| " + " | ".join(columns) + " |"
    align = "|" + "|".join("---:" if n else "---" for n in numeric) + "|"
    rows = ["| " + " | ".join(_text(v).replace("|", "\\|") for v in row) + " |"
            for row in frame.itertuples(index=False, name=None)]
    return "\n".join([head, align] + rows) + "\n"


def as_csv(frame):
    out = io.StringIO()
    plain = pd.DataFrame(records(frame), columns=frame.columns)
    for column in plain.columns:
        if plain[column].map(lambda v: isinstance(v, (list, dict))).any():
            plain[column] = plain[column].map(lambda v: json.dumps(v) if isinstance(v, (list, dict)) else v)
    plain.to_csv(out, index=False)
    return out.getvalue()


def as_json(frame):
    return json.dumps(records(frame), ensure_ascii=False, default=str) + "\n"


def write_parquet(frame, path):
    con = duckdb.connect()
    try:
        con.register("result_frame", frame)
        con.execute("COPY (SELECT * FROM result_frame) TO ? (FORMAT parquet)", [str(path)])
    except duckdb.Error as exc:
        raise TracekitError(f"{path}: cannot write parquet ({str(exc).splitlines()[0]})") from None
    finally:
        con.close()


def render(frame, fmt):
    """The frame as text in `fmt` (every format but parquet, which needs a file)."""
    if fmt == "table":
        return as_table(frame)
    if fmt == "markdown":
        return as_markdown(frame)
    if fmt == "csv":
        return as_csv(frame)
    if fmt == "json":
        return as_json(frame)
    if fmt == "parquet":
        raise TracekitError("parquet is binary: give a file with -o FILE")
    raise TracekitError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")


def write(frame, fmt, path):
    """Writes the frame in `fmt` to `path`."""
    if fmt == "parquet":
        write_parquet(frame, path)
        return
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(render(frame, fmt))
    except OSError as exc:
        raise TracekitError(f"{path}: cannot write ({exc.strerror})") from None
