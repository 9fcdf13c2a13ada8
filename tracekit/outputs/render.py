"""One renderer for every output format of rows: table, box, line, csv, tsv, json, ndjson, markdown,
html (and parquet, which is a file: tracekit.outputs.parquet_out).

It takes a Rows (column names, rows of plain Python values) and imports neither pandas nor numpy,
so `tracekit query` starts fast. Every value goes through tracekit.analysis.cells: numbers exact in every
format, JSON strict; and text from a trace through tracekit.outputs.safe_text: no control character
reaches a terminal, no markup a markdown page, no formula a spreadsheet (unless asked).
"""

from tracekit.analysis.cells import json_value, text
from tracekit.errors import TracekitError
from tracekit.analysis.rows import records  # noqa: F401  (the API's DataFrames as row dicts, for tests and scripts)
from tracekit.outputs.formats import FORMATS
from tracekit.outputs.safe_text import html_text, markdown_text, printable, spreadsheet_safe
from tracekit.outputs.table_fit import table


def as_table(rows, width=None, keys=None, max_rows=None, whole="-f line", box=False):
    """An aligned text table fitted to `width` characters (None: every value whole), keeping the
    columns `keys` first; `max_rows`, `whole` and `box` (drawn in box lines, as DuckDB's `.mode box`):
    see tracekit.outputs.table_fit.table."""
    if is_plan(rows):
        return plan_text(rows)
    return table(rows, width, keys, max_rows, whole, box)


def is_plan(rows):
    """Whether `rows` are what DuckDB's EXPLAIN (ANALYZE) gives: a plan drawn as text in a column."""
    return list(rows.columns) == ["explain_key", "explain_value"]


def plan_text(rows):
    """An EXPLAIN's plan as DuckDB drew it: a box table would cut it at the terminal's width."""
    return "".join(printable_plan(value) + "\n" for _, value in rows.rows)


def printable_plan(value):
    """A plan's lines, each made printable (a plan quotes the SQL's strings, which may hold anything)."""
    return "\n".join(printable(line) for line in str(value).splitlines())


def as_line(rows):
    """One `column = value` line per column and a blank line between rows, as DuckDB's `.mode line`."""
    name_width = max((len(printable(c)) for c in rows.columns), default=0)
    blocks = ["\n".join(_name_value(printable(c).rjust(name_width), v) for c, v in zip(rows.columns, row))
              for row in rows.rows]
    return "\n".join(block + "\n" for block in blocks)


def _name_value(name, value):
    return f"{name} =" if value is None else f"{name} = {printable(text(value))}"  # NULL: nothing after the =


def _delimited(rows, delimiter, escape_formulas):
    guard = spreadsheet_safe if escape_formulas else (lambda value: value)
    lines = [[text(guard(c)) for c in rows.columns]] + [[text(guard(v)) for v in row] for row in rows.rows]
    return "".join(_record(fields, delimiter) + "\n" for fields in lines)


def _record(fields, delimiter):
    if fields == [""]:
        return '""'  # one empty field: a blank line would read as no row at all
    return delimiter.join(_field(f, delimiter) for f in fields)


def _field(value, delimiter):
    # Quoted as RFC 4180 says, a lone CR too: Python's csv module leaves one bare, and readers
    # (Python's own, spreadsheets) end the row there.
    if delimiter in value or any(c in value for c in '"\n\r'):
        return '"' + value.replace('"', '""') + '"'
    return value


def as_csv(rows, escape_formulas=True):
    """Comma-separated; `escape_formulas`: a text cell a spreadsheet would run as a formula (it
    starts with = + - @, a tab or a CR) starts with a `'` (safe_text.spreadsheet_safe)."""
    return _delimited(rows, ",", escape_formulas)


def as_tsv(rows, escape_formulas=True):
    """Tab-separated; a value holding a tab, newline or quote is quoted as in CSV; formulas as as_csv."""
    return _delimited(rows, "\t", escape_formulas)


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

    head = "| " + " | ".join(markdown_text(text(c)) for c in rows.columns) + " |"
    align = "|" + "|".join("---:" if n else "---" for n in numeric) + "|"
    body = ["| " + " | ".join(markdown_text(text(v)) for v in row) + " |" for row in rows.rows]
    return "\n".join([head, align] + body) + "\n"


def as_html(rows):
    """A standalone HTML page holding the rows as one table, numbers right-aligned."""
    numeric = rows.numeric()

    def cells(values, tag):
        return "".join(f"<{tag}{' class=n' if num else ''}>{html_text(text(v))}</{tag}>"
                       for v, num in zip(values, numeric))

    lines = ["<!doctype html>", '<meta charset="utf-8">', "<title>tracekit query</title>",
             "<style>table{border-collapse:collapse;font:13px system-ui,sans-serif}"
             "th,td{border:1px solid #ccc;padding:2px 6px;text-align:left}.n{text-align:right}</style>",
             "<table>", f"<thead><tr>{cells(rows.columns, 'th')}</tr></thead>", "<tbody>"]
    lines += [f"<tr>{cells(row, 'td')}</tr>" for row in rows.rows]
    return "\n".join(lines + ["</tbody>", "</table>"]) + "\n"


_TEXT_FORMATS = {"line": as_line, "csv": as_csv, "tsv": as_tsv, "json": as_json, "ndjson": as_ndjson,
                 "markdown": as_markdown, "html": as_html}


def render(rows, fmt, width=None, escape_formulas=True, keys=None, max_rows=None, whole="-f line"):
    """`rows` as text in `fmt` (every format but parquet, which needs a file); `width` fits a table,
    keeping the columns `keys` first; `max_rows` elides a long one's middle rows and `whole` is what
    its footer says shows it whole; `escape_formulas` as as_csv's, for csv and tsv."""
    if fmt in ("table", "box"):
        return as_table(rows, width, keys, max_rows, whole, box=fmt == "box")
    if fmt in ("csv", "tsv"):
        return _TEXT_FORMATS[fmt](rows, escape_formulas)
    if fmt in _TEXT_FORMATS:
        return _TEXT_FORMATS[fmt](rows)
    if fmt == "parquet":
        raise TracekitError("parquet is binary: give a file with -o FILE")
    raise TracekitError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")


def write(rows, fmt, path, escape_formulas=True):
    """Writes `rows` in `fmt` to `path`, every value whole (formulas as render's)."""
    if fmt == "parquet":
        from tracekit.outputs.parquet_out import write_rows
        write_rows(rows, path)
        return
    content = render(rows, fmt, escape_formulas=escape_formulas)
    try:
        with open(path, "w", encoding="utf-8", newline="") as handle:
            handle.write(content)
    except OSError as exc:
        raise TracekitError(f"{path}: cannot write ({exc.strerror})") from None

