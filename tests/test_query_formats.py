"""`tracekit query`'s output formats: each parses back to DuckDB's own values, numbers exact, JSON
strict, and -o FILE's extension picks the format (report -o too)."""

import csv
import io
import json
import math
import re
from decimal import Decimal
from html.parser import HTMLParser

import duckdb
import pytest

from tracekit.analysis.named_queries import named_queries, named_sql
from conftest import invoke_cli as invoke
from table_checks import duckdb_rows, same

QUERIES = sorted(named_queries())
# Every type of value the renderer knows, with the values that used to lose digits or break JSON.
EVERY_KIND_SQL = (
    "SELECT 1733221234567890.123 AS ts_decimal, 5405970123456.789::DOUBLE AS ts_double, "
    "9007199254740993::BIGINT AS past_2_53, (2::HUGEINT ** 100)::HUGEINT AS huge, 1e16::DOUBLE AS big_double, "
    "1.5e-7::DOUBLE AS tiny, 0.1::DOUBLE + 0.2::DOUBLE AS noisy, 'nan'::DOUBLE AS not_a_number, "
    "'inf'::DOUBLE AS infinite, '-inf'::DOUBLE AS minus_infinite, NULL::INTEGER AS nothing, "
    "true AS yes, 'a|b, \"c\"\tend' AS awkward_text, '\\xAA\\xBB'::BLOB AS blob, [1.5, 2.25] AS list, "
    "{'k': 7} AS struct, '{\"a\": NaN, \"b\": 1.000000000000000001}'::JSON AS json_value"
)
# The DOUBLEs of EVERY_KIND_SQL as the exact text every format prints.
EXACT_TEXT = ["1733221234567890.123", "5405970123456.789", "9007199254740993", str(2 ** 100),
              "10000000000000000.0", "1.5e-07", "0.30000000000000004"]


def parse(fmt, output, path=None):
    """(header, rows) read back from `output` (or the file `path`) with the format's own reader."""
    if fmt == "parquet":
        return duckdb_rows(":memory:", f"SELECT * FROM '{path}'")
    if fmt in ("json", "ndjson"):
        objects = json.loads(output, parse_float=Decimal) if fmt == "json" else \
            [json.loads(line, parse_float=Decimal) for line in output.splitlines()]
        return (list(objects[0]) if objects else None), [list(o.values()) for o in objects]
    table = list(csv.reader(io.StringIO(output), delimiter="," if fmt == "csv" else "\t"))
    return table[0], table[1:]


@pytest.mark.parametrize("fmt", ["json", "ndjson", "csv", "tsv", "parquet"])
@pytest.mark.parametrize("name", QUERIES)
def test_every_named_query_reads_back_as_duckdbs_own_values(sample_db, tmp_path, name, fmt):
    sql, params = named_sql(name)
    columns, expected = duckdb_rows(sample_db, sql, params)
    out = tmp_path / f"out.{fmt}"
    result = invoke("query", name, "--db", sample_db, "-f", fmt, *(["-o", out] if fmt == "parquet" else []))
    assert result.exit_code == 0, result.output
    header, rows = parse(fmt, result.stdout, out)
    assert header in (columns, None if not expected else columns)
    assert len(rows) == len(expected)
    for got, want in zip(rows, expected):
        assert all(same(g, w) for g, w in zip(got, want)), (got, want)


def test_numbers_keep_every_digit_in_every_text_format(sample_db):
    for fmt in ("table", "box", "line", "csv", "tsv", "json", "ndjson", "markdown", "html"):
        result = invoke("query", "--db", sample_db, "-f", fmt, "--sql", EVERY_KIND_SQL)
        assert result.exit_code == 0, result.output
        for exact in EXACT_TEXT:
            assert exact in result.stdout, (fmt, exact)
        assert "e+" not in result.stdout, fmt


@pytest.mark.parametrize("fmt", ["json", "ndjson"])
def test_json_is_strict(sample_db, fmt):
    result = invoke("query", "--db", sample_db, "-f", fmt, "--sql", EVERY_KIND_SQL)

    def refuse(token):
        raise AssertionError(f"{token} is not JSON")

    text = result.stdout if fmt == "ndjson" else result.stdout.strip()[1:-1].strip()
    (row,) = [json.loads(line, parse_constant=refuse, parse_float=Decimal) for line in text.splitlines()]
    assert row["not_a_number"] is row["infinite"] is row["minus_infinite"] is row["nothing"] is None
    assert row["ts_decimal"] == Decimal("1733221234567890.123") and row["huge"] == 2 ** 100
    assert row["blob"] == "qrs=" and row["yes"] is True   # base64 of AA BB
    assert row["list"] == [Decimal("1.5"), Decimal("2.25")] and row["struct"] == {"k": 7}
    assert row["json_value"] == {"a": None, "b": Decimal("1.000000000000000001")}
    assert row["awkward_text"] == 'a|b, "c"\tend'


def test_an_empty_result_in_every_format(sample_db, tmp_path):
    sql = "SELECT trace, step FROM steps WHERE false"
    assert invoke("query", "--db", sample_db, "-f", "json", "--sql", sql).stdout == "[]\n"
    assert invoke("query", "--db", sample_db, "-f", "ndjson", "--sql", sql).stdout == ""
    assert invoke("query", "--db", sample_db, "-f", "csv", "--sql", sql).stdout == "trace,step\n"
    assert invoke("query", "--db", sample_db, "-f", "line", "--sql", sql).stdout == ""
    assert invoke("query", "--db", sample_db, "--sql", sql).stdout.endswith("(0 rows)\n")
    invoke("query", "--db", sample_db, "--sql", sql, "-o", tmp_path / "e.parquet")
    assert duckdb_rows(":memory:", f"SELECT * FROM '{tmp_path / 'e.parquet'}'") == (["trace", "step"], [])


def test_parquet_is_what_duckdbs_own_copy_writes(sample_db, tmp_path):
    # Every type and value as DuckDB's COPY writes them (which stores a HUGEINT as a DOUBLE),
    # though the rows cross from the query's connection to another one to be written.
    out, reference = tmp_path / "kinds.parquet", tmp_path / "reference.parquet"
    assert invoke("query", "--db", sample_db, "--sql", EVERY_KIND_SQL, "-o", out).exit_code == 0
    duckdb.connect().execute(f"COPY ({EVERY_KIND_SQL}) TO '{reference}' (FORMAT parquet)")
    got, want = (duckdb.connect().execute(f"SELECT * FROM '{path}'") for path in (out, reference))
    columns = [(d[0], str(d[1])) for d in want.description]
    assert [(d[0], str(d[1])) for d in got.description] == columns
    (got_row,), (want_row,) = got.fetchall(), want.fetchall()
    for column, g, w in zip(columns, got_row, want_row):
        assert g == w or (isinstance(w, float) and math.isnan(w) and math.isnan(g)), column
    assert str(want_row[0]) == "1733221234567890.123" and want_row[2] == 9007199254740993


class _Cells(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows, self._in_cell = [], False

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        self._in_cell = tag in ("td", "th")
        if self._in_cell:
            self.rows[-1].append("")

    def handle_endtag(self, tag):
        self._in_cell = False

    def handle_data(self, data):
        if self._in_cell:
            self.rows[-1][-1] += data


@pytest.mark.parametrize("name", QUERIES)
def test_every_named_query_as_html_and_markdown_holds_every_value(sample_db, name):
    sql, params = named_sql(name)
    columns, expected = duckdb_rows(sample_db, sql, params)
    page = _Cells()
    page.feed(invoke("query", name, "--db", sample_db, "-f", "html").stdout)
    assert page.rows[0] == columns and len(page.rows) == len(expected) + 1
    markdown = invoke("query", name, "--db", sample_db, "-f", "markdown").stdout.splitlines()
    assert markdown[0] == "| " + " | ".join(columns) + " |" and len(markdown) == len(expected) + 2
    for cells, want, line in zip(page.rows[1:], expected, markdown[2:]):
        assert all(same(c, w) for c, w in zip(cells, want)), (cells, want)
        # A markdown cell escapes markup with backslashes (`\|`, `\_`, `\<`): read back, it is the value.
        assert [re.sub(r"\\(.)", r"\1", c.strip()) for c in line[2:-2].split(" | ")] == cells


@pytest.mark.parametrize("extension, reads_back", [
    (".csv", lambda text: next(csv.reader(io.StringIO(text)))),
    (".tsv", lambda text: next(csv.reader(io.StringIO(text), delimiter="\t"))),
    (".json", lambda text: list(json.loads(text)[0])),
    (".ndjson", lambda text: list(json.loads(text.splitlines()[0]))),
    (".md", lambda text: [c.strip() for c in text.splitlines()[0].strip("| ").split(" | ")]),
    (".html", lambda text: text.split("<thead>")[1].split("</thead>")[0].replace("<tr>", "").replace("</tr>", "")
     .replace("<th class=n>", "<th>").replace("</th>", "").split("<th>")[1:]),
    (".parquet", None),
])
def test_the_output_files_extension_picks_its_format(sample_db, tmp_path, extension, reads_back):
    out = tmp_path / f"memcpy{extension}"
    result = invoke("query", "memcpy", "--db", sample_db, "-o", out)
    assert result.exit_code == 0, result.output
    columns = list(named_queries()["memcpy"].columns)
    if reads_back is None:
        assert duckdb_rows(":memory:", f"SELECT * FROM '{out}' LIMIT 0")[0] == columns
    else:
        assert reads_back(out.read_text()) == columns


def test_f_wins_over_an_unknown_extension_and_table_is_the_default(sample_db, tmp_path):
    assert invoke("query", "memcpy", "--db", sample_db, "-o", tmp_path / "a.txt").exit_code == 0
    assert (tmp_path / "a.txt").read_text().splitlines()[-1].startswith("(9 rows")
    assert invoke("query", "memcpy", "--db", sample_db, "-f", "csv", "-o", tmp_path / "b.out").exit_code == 0
    assert (tmp_path / "b.out").read_text().startswith("trace,kind,")


@pytest.mark.parametrize("args, message", [
    (["-f", "csv", "-o", "x.parquet"], "-f csv but x.parquet is named as parquet"),
    (["-f", "json", "-o", "x.md"], "-f json but x.md is named as markdown"),
    (["-f", "table", "-o", "x.csv"], "-f table but x.csv is named as csv"),
    (["-f", "parquet"], "parquet is binary: give a file with -o FILE"),
])
def test_a_format_that_contradicts_the_file_name_is_refused(sample_db, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    result = invoke("query", "memcpy", "--db", sample_db, *args)
    assert result.exit_code == 1
    assert result.output.strip() == f"Error: {message}" or message in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name, fmt", [("r.md", "markdown"), ("r.markdown", "markdown"), ("r.html", "html")])
def test_report_o_picks_html_or_markdown_from_the_extension(sample_db, tmp_path, name, fmt):
    result = invoke("report", "--db", sample_db, "-o", tmp_path / name)
    assert result.exit_code == 0, result.output
    text = (tmp_path / name).read_text()
    assert text.startswith("# tracekit report") if fmt == "markdown" else text.lower().startswith("<!doctype html")


@pytest.mark.parametrize("args, message", [
    (["-f", "markdown", "-o", "r.html"], "-f markdown but r.html is named as html"),
    (["-o", "r.csv"], "r.csv: this command cannot write csv (it writes html, markdown)"),
    (["-o", "r.parquet"], "r.parquet: this command cannot write parquet"),
])
def test_report_refuses_a_file_name_of_another_format(sample_db, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    result = invoke("report", "--db", sample_db, *args)
    assert result.exit_code == 1 and message in result.output
    assert len(result.output.strip().splitlines()) == 1 and list(tmp_path.iterdir()) == []


def test_a_float_prints_as_duckdb_shows_it_not_as_the_double_nearest_it(sample_db):
    """1.1::FLOAT is the double 1.100000023841858 in Python; DuckDB shows 1.1, and so does every text format."""
    sql = "SELECT 1.1::FLOAT AS f, 0.1::FLOAT + 0.2::FLOAT AS g, 16777217::FLOAT AS big, 1.1 AS d"
    table = invoke("query", "--db", sample_db, "--sql", sql).stdout.splitlines()
    assert table[2].split() == ["1.1", "0.3", "16777216.0", "1.1"]
    assert invoke("query", "--db", sample_db, "--sql", sql, "-f", "csv").stdout.splitlines()[1] == "1.1,0.3,16777216.0,1.1"
    assert json.loads(invoke("query", "--db", sample_db, "--sql", sql, "-f", "json").stdout) == [
        {"f": 1.1, "g": 0.3, "big": 16777216.0, "d": 1.1}]
