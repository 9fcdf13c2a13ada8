"""One renderer for every output format of rows: table, line, csv, tsv, json, ndjson, markdown,
html (and parquet, which is a file: tracekit.outputs.parquet_out).

It takes a Rows (column names, rows of plain Python values) and imports neither pandas nor numpy,
so `tracekit query` starts fast. Every value goes through tracekit.outputs.cells: numbers exact in every
format, JSON strict.
"""

import csv
import html
import io

from tracekit.outputs.cells import json_value, text
from tracekit.errors import TracekitError
from tracekit.outputs.rows import records  # noqa: F401  (the API's DataFrames as row dicts, for tests and scripts)
from tracekit.outputs.table_fit import table

FORMATS = ("table", "line", "csv", "tsv", "json", "ndjson", "markdown", "html", "parquet")


def as_table(rows, width=None):
    """An aligned text table fitted to `width` characters (None: every value whole)."""
    return table(rows, width)


def as_line(rows):
    """One `column = value` line per column and a blank line between rows, as DuckDB's `.mode line`."""
    name_width = max((len(c) for c in rows.columns), default=0)
    blocks = ["\n".join(_name_value(c.rjust(name_width), v) for c, v in zip(rows.columns, row))
              for row in rows.rows]
    return "\n".join(block + "\n" for block in blocks)


def _name_value(name, value):
    return f"{name} =" if value is None else f"{name} = {text(value)}"  # NULL: nothing after the =


def _delimited(rows, delimiter):
    out = io.StringIO()
    writer = csv.writer(out, delimiter=delimiter, lineterminator="\n")
    writer.writerow(rows.columns)
    writer.writerows([text(v) for v in row] for row in rows.rows)
    return out.getvalue()


def as_csv(rows):
    return _delimited(rows, ",")


def as_tsv(rows):
    """Tab-separated; a value holding a tab, newline or quote is quoted as in CSV."""
    return _delimited(rows, "\t")


def _json_object(columns, row):
    return "{" + ", ".join(f"{json_value(c)}: {json_value(v)}" for c, v in zip(columns, row)) + "}"


def as_json(rows):
    """One JSON array of row objects, a row per line."""
    if not rows.rows:
        return "[]\n"
    return "[\n" + ",\n".join(_json_object(rows.columns, row) for row in rows.rows) + "\n]\n"


def as_ndjson(rows):
    """One JSON object per line (newline-delimited JSON), nothing for no rows."""
    return "".join(_json_object(rows.columns, row) + "\n" for row in rows.rows)


def as_markdown(rows):
    numeric = rows.numeric()

    def cell(value):
        return text(value).replace("|", "\\|").replace("\r\n", " ").replace("\n", " ")

    head = "| " + " | ".join(cell(c) for c in rows.columns) + " |"
    align = "|" + "|".join("---:" if n else "---" for n in numeric) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows.rows]
    return "\n".join([head, align] + body) + "\n"


def as_html(rows):
    """A standalone HTML page holding the rows as one table, numbers right-aligned."""
    numeric = rows.numeric()

    def cells(values, tag):
        return "".join(f"<{tag}{' class=n' if num else ''}>{html.escape(text(v))}</{tag}>"
                       for v, num in zip(values, numeric))

    lines = ["<!doctype html>", '<meta charset="utf-8">', "<title>tracekit query</title>",
             "<style>table{border-collapse:collapse;font:13px system-ui,sans-serif}"
             "th,td{border:1px solid #ccc;padding:2px 6px;text-align:left}.n{text-align:right}</style>",
             "<table>", f"<thead><tr>{cells(rows.columns, 'th')}</tr></thead>", "<tbody>"]
    lines += [f"<tr>{cells(row, 'td')}</tr>" for row in rows.rows]
    return "\n".join(lines + ["</tbody>", "</table>"]) + "\n"


_TEXT_FORMATS = {"line": as_line, "csv": as_csv, "tsv": as_tsv, "json": as_json, "ndjson": as_ndjson,
                 "markdown": as_markdown, "html": as_html}


def render(rows, fmt, width=None):
    """`rows` as text in `fmt` (every format but parquet, which needs a file); `width` fits a table."""
    if fmt == "table":
        return as_table(rows, width)
    if fmt in _TEXT_FORMATS:
        return _TEXT_FORMATS[fmt](rows)
    if fmt == "parquet":
        raise TracekitError("parquet is binary: give a file with -o FILE")
    raise TracekitError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")


def write(rows, fmt, path):
    """Writes `rows` in `fmt` to `path`, every value whole."""
    if fmt == "parquet":
        from tracekit.outputs.parquet_out import write_rows
        write_rows(rows, path)
        return
    content = render(rows, fmt)
    try:
        with open(path, "w", encoding="utf-8", newline="") as handle:
            handle.write(content)
    except OSError as exc:
        raise TracekitError(f"{path}: cannot write ({exc.strerror})") from None

