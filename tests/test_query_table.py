"""`tracekit query`'s table on a terminal (COLUMNS or the tty's width), `-f line`, `--columns`, and
a start without pandas."""

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios

import pytest

from conftest import invoke_cli as invoke, read_until_closed
from table_checks import check_fitted, duckdb_rows, fitted_table as read_table
from tracekit.analysis.cells import text
from tracekit.analysis.named_queries import named_queries, named_sql

QUERIES = sorted(named_queries())
WIDE = ["summary", "occupancy", "gemm_classes", "top_kernels", "memcpy"]


@pytest.mark.parametrize("width", [60, 100, 160])
@pytest.mark.parametrize("name", WIDE)
def test_a_table_fits_the_width_numbers_whole_text_cut_columns_left_out(sample_db, name, width):
    sql, params = named_sql(name)
    columns, expected = duckdb_rows(sample_db, sql, params)
    result = invoke("query", name, "--db", sample_db, env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    header = check_fitted(result.stdout, columns, expected, named_queries()[name].keys, width)
    footer = result.stdout.splitlines()[-1]
    assert footer.startswith(f"({len(expected)} row")
    assert header == columns or "-f line shows all" in footer


@pytest.mark.parametrize("name", QUERIES)
def test_without_a_terminal_or_columns_every_value_is_whole(sample_db, name):
    sql, params = named_sql(name)
    columns, expected = duckdb_rows(sample_db, sql, params)
    header, rows, footer = read_table(invoke("query", name, "--db", sample_db).stdout)
    assert header == columns and footer == f"({len(expected)} row{'s' if len(expected) != 1 else ''})"
    assert rows == [[text(v) for v in row] for row in expected]


def test_the_footer_names_what_was_left_out(sample_db):
    footer = invoke("query", "summary", "--db", sample_db, env={"COLUMNS": "100"}).stdout.splitlines()[-1]
    assert re.fullmatch(r"\(8 rows; to fit 100 columns: \d+ of 17 columns shown, left out: variant \(= trace\), "
                        r"[a-z_, ]+(; long values cut with …)?; -f line shows all\)", footer)


def test_a_terminal_is_measured_when_columns_is_unset(sample_db):
    # A real pseudo-terminal 70 columns wide as standard output, COLUMNS unset.
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 70, 0, 0))
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    process = subprocess.Popen([sys.executable, "-m", "tracekit", "query", "occupancy", "--db", str(sample_db)],
                               stdout=follower, stderr=subprocess.PIPE, env=env)
    os.close(follower)
    output = read_until_closed(leader)
    assert process.wait(timeout=60) == 0, process.stderr.read()
    lines = output.decode().replace("\r\n", "\n").splitlines()
    assert lines[-1].startswith("(28 rows;") and "to fit 70 columns" in lines[-1]
    assert max(len(line) for line in lines[:-1]) <= 70


@pytest.mark.parametrize("name", QUERIES)
def test_line_mode_shows_every_column_whole_as_duckdbs_mode_line(sample_db, name):
    sql, params = named_sql(name)
    columns, expected = duckdb_rows(sample_db, sql, params)
    output = invoke("query", name, "--db", sample_db, "-f", "line", env={"COLUMNS": "40"}).stdout
    blocks = [block for block in output.split("\n\n") if block.strip()]
    assert len(blocks) == len(expected)
    width = max(len(c) for c in columns)
    for block, want in zip(blocks, expected):
        lines = block.splitlines()
        assert [line[:width].strip() for line in lines] == columns
        assert all(line[width:width + 2] == " =" for line in lines)
        assert [line[width + 3:] for line in lines] == [text(v) for v in want]


def test_line_mode_reads_like_duckdbs():
    from tracekit.outputs.render import as_line
    from tracekit.analysis.rows import Rows

    assert as_line(Rows(["a", "bbb"], [(1, "x"), (None, "y")])) == "  a = 1\nbbb = x\n\n  a =\nbbb = y\n"


@pytest.mark.parametrize("fmt", ["table", "csv", "json", "line", "markdown"])
def test_columns_chooses_and_orders_the_columns(sample_db, fmt):
    full = invoke("query", "summary", "--db", sample_db, "-f", "json").stdout
    want = [{"gpu_us_per_step": r["gpu_us_per_step"], "trace": r["trace"]} for r in json.loads(full)]
    result = invoke("query", "summary", "--db", sample_db, "-f", fmt, "--columns", "gpu_us_per_step, trace")
    assert result.exit_code == 0, result.output
    if fmt == "json":
        assert json.loads(result.stdout) == want
    elif fmt == "csv":
        assert result.stdout.splitlines()[0] == "gpu_us_per_step,trace"
    elif fmt == "table":
        assert read_table(result.stdout)[0] == ["gpu_us_per_step", "trace"]
    for row in want:
        assert row["trace"] in result.stdout and repr(row["gpu_us_per_step"]) in result.stdout


def test_columns_works_for_parquet_too(sample_db, tmp_path):
    out = tmp_path / "s.parquet"
    assert invoke("query", "summary", "--db", sample_db, "--columns", "steps,trace", "-o", out).exit_code == 0
    assert duckdb_rows(":memory:", f"SELECT * FROM '{out}'")[0] == ["steps", "trace"]


@pytest.mark.parametrize("args, code, message", [
    (["--columns", "trace,nope"], 1, "--columns: no column 'nope' in the result (its columns: trace, variant,"),
    (["--columns", "trace,nope", "-o", "x.parquet"], 1, "--columns: no column 'nope'"),
    (["--columns", "trace,,steps"], 2, "give column names separated by commas"),
])
def test_a_bad_columns_list_is_one_line_error(sample_db, tmp_path, monkeypatch, args, code, message):
    monkeypatch.chdir(tmp_path)
    result = invoke("query", "summary", "--db", sample_db, *args)
    assert result.exit_code == code and message in result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "x.parquet").exists()


def test_query_never_imports_pandas(sample_db, tmp_path):
    # pandas takes longer to import than all the rest of `tracekit query`; only parquet may use it.
    runs = [["query", "summary", "--db", str(sample_db), "-f", fmt]
            for fmt in ("table", "box", "line", "csv", "tsv", "json", "ndjson", "markdown", "html")]
    runs += [["query", "--list"], ["query", "--sql", "SELECT 42", "--db", str(sample_db)],
             ["query", "memcpy", "--db", str(sample_db), "-o", str(tmp_path / "m.csv")]]
    script = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from tracekit.cli import cli\n"
        f"for args in {runs!r}:\n"
        "    result = CliRunner().invoke(cli, args)\n"
        "    assert result.exit_code == 0, result.output\n"
        "print(sorted(m for m in ('pandas', 'numpy', 'torch') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_wide_characters_take_two_cells_and_the_table_still_fits(sample_db):
    """CJK and emoji take two terminal cells each: counted as one, a row came out 104 cells wide on 80."""
    import unicodedata

    def cells(line):
        return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in line)

    result = invoke("query", "--db", sample_db, "--sql", "SELECT 'a' || repeat('好', 50) AS wide, 'é' AS e, "
                    "repeat('🙂', 3) AS smile", env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(map(cells, lines)) <= 80 and lines[2].endswith("é  🙂🙂🙂") and "…" in lines[2]
    # the columns line up, by cells: each starts where its header's does
    assert cells(lines[2][:lines[2].index("é")]) == cells(lines[0][:lines[0].index(" e ") + 1])


def test_control_characters_in_a_table_are_escaped_as_line_mode_shows_them(sample_db):
    """A carriage return, newline or tab was shown as a space: 'a\\rb' and 'a b' looked alike."""
    result = invoke("query", "--db", sample_db, "--sql", "SELECT 'a' || chr(13) || 'b' AS cr, 'a b' AS space, "
                    "'x' || chr(10) || 'y' || chr(9) || 'z' AS nl_tab")
    assert result.stdout.splitlines()[2].split() == ["a\\rb", "a", "b", "x\\ny\\tz"]
    line = invoke("query", "--db", sample_db, "-f", "line", "--sql", "SELECT 'a' || chr(13) || 'b' AS cr").stdout
    assert "a\\rb" in line
