"""What a trace holds is shown as text and nothing more: kernel, op and trace names carrying HTML,
images, terminal escapes, line breaks and spreadsheet formulas (the real naive sample with its names
rewritten, and a built trace) come out escaped in every format: markdown (rendered by mistune, as a
pull-request page would render it), the HTML report, terminal tables, lines and errors, CSV."""

import csv
import gzip
import io
import json
import re
from html.parser import HTMLParser

import pytest

import trace_builder as tb
from conftest import SAMPLE_TRACES, invoke_cli, read_trace

SCRIPT = "<script>alert(1)</script>"
SVG_AND_IMAGE = "<svg onload=alert(2)>![t](http://evil.example/t.png)"
# ESC ] ... BEL sets a terminal's title, ESC [2J clears it; the CR and | would end a markdown row.
CONTROL_OP = "aten::masked_fill\x1b]0;owned\x07\x1b[2J|\rX"
# A backtick ends the heading's code span, <img> is HTML, ESC colours, | and CR break a table row.
TRACE_NAME = "na`ive<img src=x onerror=alert(4)>\x1b[31m|\rrow"
INJECTED_TAGS = ("script", "img", "svg", "iframe")
# C0 but newline, DEL, C1, the Unicode line separators and the bidi controls: never printed raw.
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def rewritten(source, names, target):
    """`source` (a real trace) with the events named as keys of `names` renamed, written to `target`."""
    content = read_trace(source)
    for event in content["traceEvents"]:
        if event.get("name") in names:
            event["name"] = names[event["name"]]
    target.write_bytes(gzip.compress(json.dumps(content).encode(), mtime=0))
    return target


@pytest.fixture(scope="module")
def evil(tmp_path_factory):
    """(database, folder): the naive sample with a script and an image as kernel names, control
    characters in an op's name, all of it in a file named TRACE_NAME; naive_inplace beside it."""
    folder = tmp_path_factory.mktemp("evil")
    path = rewritten(SAMPLE_TRACES / "naive.json.gz", {
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT": SCRIPT,
        "nvjet_sm90_tst_64x512_64x2_1x2_h_bz_coopB_NNT": SVG_AND_IMAGE,
        "aten::masked_fill": CONTROL_OP}, folder / f"{TRACE_NAME}.json.gz")
    db = folder / "evil.duckdb"
    result = invoke_cli("load", path, SAMPLE_TRACES / "naive_inplace.json.gz", "--db", db)
    assert result.exit_code == 0, result.output
    return db, folder


class _Elements(HTMLParser):
    """The tags of an HTML page with their attributes, and its text."""

    def __init__(self, page):
        super().__init__(convert_charrefs=True)
        self.tags, self.text = [], []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def rendered_markdown(text):
    """The markdown as the HTML a page shows (raw HTML passed through, as GitHub passes its safe part)."""
    mistune = pytest.importorskip("mistune")
    return _Elements(mistune.create_markdown(escape=False, plugins=["table", "strikethrough"])(text))


def assert_no_markup_from_the_trace(page):
    assert not [tag for tag, _ in page.tags if tag in INJECTED_TAGS], page.tags
    assert not [(tag, a) for tag, attrs in page.tags for a in attrs if a.startswith("on")]
    assert not [attrs for tag, attrs in page.tags if tag == "a" and "evil.example" in attrs.get("href", "")]


# --- markdown and HTML ----------------------------------------------------------------------------

def test_report_markdown_shows_the_trace_s_markup_as_text(evil):
    db, _ = evil
    result = invoke_cli("report", "--db", db, "-f", "markdown")
    assert result.exit_code == 0, result.output
    assert not RAW_CONTROL.search(result.stdout)
    page = rendered_markdown(result.stdout)
    assert_no_markup_from_the_trace(page)
    text = "".join(page.text)
    assert SCRIPT in text and SVG_AND_IMAGE in text  # the low_occupancy findings' titles, as written
    # The variants table: its header and separator, then one row per trace, each row one line.
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + 2 and any("| na\\`ive\\<img src=x onerror=alert(4)>\\\\x1b\\[31m\\| row |" in row
                                      for row in rows), rows


def test_diff_markdown_keeps_a_backtick_inside_the_heading_s_code_span(evil):
    db, _ = evil
    result = invoke_cli("diff", "naive_inplace", TRACE_NAME, "--db", db, "--by", "op", "-f", "markdown")
    assert result.exit_code == 0, result.output
    assert not RAW_CONTROL.search(result.stdout)
    page = rendered_markdown(result.stdout)
    assert_no_markup_from_the_trace(page)
    heading = result.stdout.splitlines()[0]
    # Two backticks fence the name's one; its ESC escaped, its CR a space.
    # (no verdict after it: nothing was gated)
    assert heading == "### tracekit diff: `naive_inplace` → ``na`ive<img src=x onerror=alert(4)>\\x1b[31m| row``"
    # The op's name in the finding that appeared: ESC and BEL escaped, | and CR no markup.
    assert "- appeared: hidden_copy: 1 Memcpy DtoD of 512 MiB per step from " \
           "aten::masked_fill\\\\x1b\\]0;owned\\\\x07\\\\x1b\\[2J\\| X" in result.stdout.splitlines()


def test_query_markdown_cells_never_split_on_a_lone_cr(evil):
    db, _ = evil
    result = invoke_cli("query", "--db", db, "-f", "markdown", "--sql",
                        "SELECT DISTINCT trace, name FROM cpu_ops WHERE name LIKE 'aten::masked_fill%' ORDER BY ALL")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 2 + 3 and all(line.startswith("| ") and line.endswith(" |") for line in lines[2:])
    assert not RAW_CONTROL.search(result.stdout)


def test_the_html_report_escapes_the_trace_s_markup(evil, tmp_path):
    db, _ = evil
    out = tmp_path / "r.html"
    result = invoke_cli("report", "--db", db, "-o", out)
    assert result.exit_code == 0, result.output
    page = _Elements(out.read_text())
    assert not [tag for tag, _ in page.tags if tag in ("script", "img", "iframe")]
    assert not [(tag, a) for tag, attrs in page.tags for a in attrs if a.startswith("on")]
    assert SCRIPT in "".join(page.text)
    # Its text and attributes show a control character as the terminal does, not raw.
    assert not RAW_CONTROL.search(out.read_text())
    assert "aten::masked_fill\\x1b]0;owned\\x07" in "".join(page.text)


# --- a terminal --------------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["query", "--sql", "SELECT trace, name, cpu_op FROM kernels ORDER BY ALL"],
    ["query", "--sql", "SELECT trace, name, cpu_op FROM kernels ORDER BY ALL", "-f", "line"],
    ["query", "--sql", "SELECT DISTINCT trace AS \"the \x1b[31mtrace\" FROM kernels"],
    ["findings"],
    ["diff", "naive_inplace", TRACE_NAME, "--by", "op"],
])
def test_terminal_output_escapes_control_characters(evil, args):
    db, _ = evil
    result = invoke_cli(*args, "--db", db)
    assert result.exit_code == 0, result.output
    assert not RAW_CONTROL.search(result.stdout), [m.group() for m in RAW_CONTROL.finditer(result.stdout)]
    assert "\\x1b" in result.stdout


def test_an_error_naming_a_trace_escapes_it(evil):
    db, _ = evil
    result = invoke_cli("diff", "naive_inplace", TRACE_NAME + "\n2", "--db", db)
    assert result.exit_code == 1
    assert len(result.output.splitlines()) == 1 and not RAW_CONTROL.search(result.output)
    assert "'na`ive<img src=x onerror=alert(4)>\\x1b[31m|\\rrow\\n2'" in result.output


def test_a_file_name_with_a_newline_never_reads_as_a_loaded_line(tmp_path):
    good = tmp_path / "ok\nloaded evil: 1 events, 1 kernels from x.json in 0.01 s.json.gz"
    good.write_bytes((SAMPLE_TRACES / "naive.json.gz").read_bytes())
    bad = tmp_path / "cut\nloaded fake: 1 events, 1 kernels from y.json in 0.01 s.json"
    bad.write_text('{"traceEvents": [')
    result = invoke_cli("load", good, bad, "--db", tmp_path / "t.duckdb")
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert len(lines) == 4, lines
    assert [line.split(" ")[0] for line in lines] == ["loaded", "Error:", "into", "Error:"]
    assert lines[0].startswith("loaded ok\\nloaded evil: 1 events") and not RAW_CONTROL.search(result.output)


# --- a spreadsheet -----------------------------------------------------------------------------------

FORMULAS = ['=HYPERLINK("http://evil.example","x")', "+1+cmd|' /C calc'!A0", "@SUM(A1)", "-2+3+cmd", "\t=1",
            "\r=1"]


@pytest.fixture(scope="module")
def formulas_db(tmp_path_factory):
    """A built trace whose kernels are named as spreadsheet formulas."""
    folder = tmp_path_factory.mktemp("formulas")
    events = [tb.step(1, 0, 1000)]
    for i, name in enumerate(FORMULAS):
        events += [tb.launch(10 + 100 * i, i + 1), tb.kernel(name, 20 + 100 * i, 50, i + 1)]
    path = tb.write(folder, "formulas", tb.trace(events))
    db = folder / "f.duckdb"
    assert invoke_cli("load", path, "--db", db).exit_code == 0
    return db


@pytest.mark.parametrize("fmt, delimiter", [("csv", ","), ("tsv", "\t")])
def test_csv_cells_that_are_formulas_get_a_quote_and_numbers_do_not(formulas_db, fmt, delimiter):
    sql = "SELECT name, -dur_us AS minus_us, '-1.5' AS text_number FROM kernels ORDER BY ts_us"
    result = invoke_cli("query", "--db", formulas_db, "--sql", sql, "-f", fmt)
    assert result.exit_code == 0, result.output
    rows = list(csv.reader(io.StringIO(result.stdout, newline=""), delimiter=delimiter))
    assert rows[0] == ["name", "minus_us", "text_number"]
    assert [row[0] for row in rows[1:]] == ["'" + name for name in FORMULAS]
    assert {row[1] for row in rows[1:]} == {"-50.0"} and {row[2] for row in rows[1:]} == {"-1.5"}

    raw = invoke_cli("query", "--db", formulas_db, "--sql", sql, "-f", fmt, "--no-escape-formulas")
    assert [row[0] for row in list(csv.reader(io.StringIO(raw.stdout, newline=""), delimiter=delimiter))[1:]] == FORMULAS


def test_csv_written_to_a_file_escapes_formulas_too(formulas_db, tmp_path):
    out = tmp_path / "k.csv"
    assert invoke_cli("query", "--db", formulas_db, "--sql", "SELECT name FROM kernels ORDER BY ts_us",
                      "-o", out).exit_code == 0
    assert [row[0] for row in list(csv.reader(out.open(newline="")))[1:]] == ["'" + name for name in FORMULAS]
