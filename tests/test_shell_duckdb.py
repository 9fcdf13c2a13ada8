"""`tracekit shell` made like DuckDB's shell (issue [16] item 11): .mode line, box and markdown,
.maxrows with the middle rows elided, .timer, .read, .output and .once through the -o guard, EXPLAIN
printed as DuckDB draws it, named queries as tables, and Tab completion (the completer here, readline
at a pty in test_shell.py)."""

import re
import shutil

import pytest
from click.testing import CliRunner

from conftest import SAMPLE_TRACES
from tracekit.cli import cli

RUN_TIME = re.compile(r"^Run Time \(s\): real \d+\.\d{3} user \d+\.\d{3} sys \d+\.\d{3}$")


def shell(db, script, *args, columns=None):
    env = {"COLUMNS": str(columns)} if columns else {}
    return CliRunner().invoke(cli, ["shell", "--db", str(db), *args], input=script, env=env)


def query(db, sql, *args):
    return CliRunner().invoke(cli, ["query", "--db", str(db), *args, "--sql", sql])


def test_mode_line_and_the_table_footer_names_it(sample_db):
    result = shell(sample_db, "SELECT trace, name FROM kernels WHERE trace = 'naive' LIMIT 1;\n"
                              ".mode line\nSELECT trace, count(*) AS kernels FROM kernels GROUP BY trace "
                              "ORDER BY trace LIMIT 2;\n", columns=40)
    assert result.exit_code == 0, result.stderr
    assert "to fit 40 columns: long values cut with …; .mode line shows all)" in result.stdout
    assert result.stdout.endswith("  trace = flex\nkernels = 6\n\n  trace = naive\nkernels = 30\n")


def test_the_shell_takes_every_text_format_the_renderer_has():
    from tracekit.cli.shell_cmd import TEXT_FORMATS
    from tracekit.outputs import sql_shell

    assert TEXT_FORMATS == sql_shell.TEXT_FORMATS == ("table", "box", "line", "csv", "tsv", "json", "ndjson",
                                                      "markdown", "html")


def test_a_long_table_shows_its_first_and_last_20_rows(sample_db):
    result = shell(sample_db, "SELECT trace, correlation FROM kernels ORDER BY trace, ts_us;\n"
                              ".maxrows 4\nSELECT trace, correlation FROM kernels ORDER BY trace, ts_us;\n"
                              ".maxrows 0\nSELECT trace, correlation FROM kernels ORDER BY trace, ts_us;\n"
                              ".maxrows\n.maxrows x\n")
    assert result.exit_code == 1
    every = query(sample_db, "SELECT trace, correlation FROM kernels ORDER BY trace, ts_us").stdout.splitlines()
    assert every[-1] == "(210 rows)"
    elided, four, whole = result.stdout.split("(210 rows")[:3]
    lines = [" ".join(line.split()) for line in elided.splitlines()]  # its columns fit the rows it shows
    every = [" ".join(line.split()) for line in every]
    assert lines[0] == every[0] and lines[2:22] == every[2:22] and lines[23:] == every[-21:-1]  # 20 rows, …, 20 rows
    assert lines[22] == "… …"
    assert four.startswith(", 40 shown)\n") and len(four.splitlines()) == 1 + 2 + 5
    assert whole.startswith(", 4 shown)\n") and len(whole.splitlines()) == 1 + 2 + 210
    assert "maxrows: all (a table with more rows" in result.stdout
    assert result.stderr == "Error: .maxrows takes a whole number of rows, 0 for all (got 'x')\n"


def test_read_keeps_line_separators_inside_string_literals(sample_db, tmp_path):
    """U+2028, U+0085 and \\x1c end a line for str.splitlines(), not for SQL: read as line ends, the
    literal's character became a newline and the comparison false."""
    script = tmp_path / "separators.sql"
    script.write_text("SELECT 'a\u2028b' = 'a' || chr(8232) || 'b' AS u2028, 'a\x85b' = 'a' || chr(133) || 'b' AS nel,\r\n"
                      "  'a\x1cb' = 'a' || chr(28) || 'b' AS fs;", encoding="utf-8")
    result = shell(sample_db, f".mode csv\n.read {script}\n")
    assert result.stderr == "" and result.stdout.splitlines() == ["u2028,nel,fs", "true,true,true"]


def test_timer_prints_the_run_time_after_each_statement(sample_db):
    result = shell(sample_db, ".timer on\nSELECT 1 AS one; SELECT count(*) AS n FROM kernels;\n.timer\n"
                              ".timer off\nSELECT 3 AS three;\n.timer maybe\n")
    lines = [line.strip() for line in result.stdout.splitlines()]
    timed = [n for n, line in enumerate(lines) if RUN_TIME.match(line)]
    assert [lines[n - 2].strip() for n in timed] == ["1", "210"]  # each after its result's rows and footer
    assert "timer: on" in lines and "3" in lines and len(timed) == 2
    assert result.stderr == "Error: .timer takes on or off (got 'maybe')\n"


def test_read_runs_a_files_statements_and_names_the_file_and_line(sample_db, tmp_path):
    inner = tmp_path / "inner.sql"
    inner.write_text("SELECT 'é' AS e; -- µs\n", encoding="utf-8")
    script = tmp_path / "script.sql"
    script.write_text("-- a script\n.mode csv\nSELECT trace,\n  count(*) AS n\nFROM kernels GROUP BY trace\n"
                      "ORDER BY trace LIMIT 1;\n\nSELECT nope\n  FROM kernels;\n"
                      f".read {inner}\nSELECT 'no ;' AS last", encoding="utf-8")
    latin = tmp_path / "latin.sql"
    latin.write_bytes("SELECT 'é';\n".encode("latin-1"))
    loop = tmp_path / "loop.sql"
    loop.write_text(f".read {loop}\n")
    result = shell(sample_db, f".read {script}\nSELECT 'after' AS a;\n.read {tmp_path / 'none.sql'}\n"
                              f".read {latin}\n.read {loop}\n")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == ["trace,n", "flex,6", "e", "é", "last", "no ;", "a", "after"]
    errors = result.stderr.splitlines()
    assert errors[0].startswith(f"Error: {script}:8: Binder Error: Referenced column \"nope\" not found")
    assert errors[1:3] == [f"Error: {tmp_path / 'none.sql'}: no such file",
                           f"Error: {latin}: not UTF-8 text (byte 8 is not UTF-8)"]
    assert errors[3] == f"Error: {loop}:1: {loop}: .read nests 16 files deep (does a file read itself?)"


def test_output_sends_results_to_a_file_through_the_o_guard(sample_db, tmp_path):
    out, trace, data = tmp_path / "out.csv", tmp_path / "naive.json.gz", tmp_path / "data.json"
    shutil.copy(SAMPLE_TRACES / "naive.json.gz", trace)
    data.write_text('[{"a": 1}]\n')
    result = shell(sample_db, f".mode csv\n.output {out}\nSELECT 1 AS a;\nSELECT 'é' AS b;\n.output\n"
                              f"SELECT 3 AS c;\n.output {sample_db}\n.output {trace}\n.output {data}\n")
    assert result.stdout == "c\n3\n"
    assert out.read_text(encoding="utf-8") == "a\n1\nb\né\n"
    assert result.stderr.splitlines() == [
        f"Error: {sample_db}: is the database this command reads ({sample_db}); give another .output FILE",
        f"Error: {trace}: exists and holds a gzipped trace (Kineto's JSON), not csv; tracekit does not overwrite it (give another .output FILE)",
        f"Error: {data}: exists and holds JSON, not csv; tracekit does not overwrite it (give another .output FILE)"]
    assert trace.read_bytes() == (SAMPLE_TRACES / "naive.json.gz").read_bytes()


KERNELS_PER_TRACE = "SELECT trace, count(*) AS kernels FROM kernels GROUP BY trace ORDER BY kernels DESC, trace;\n"


def test_once_sends_the_next_statement_to_a_file_then_results_come_back(sample_db, tmp_path):
    once, after, kept, trace = tmp_path / "once.csv", tmp_path / "after.md", tmp_path / "kept.csv", tmp_path / "t.json.gz"
    shutil.copy(SAMPLE_TRACES / "naive.json.gz", trace)
    result = shell(sample_db, f".mode csv\n.once {once}\nSELECT 1 AS a; SELECT 'é' AS b;\nSELECT 3 AS c;\n"
                              f".output {kept}\nSELECT 4 AS d;\n.once '{after}'\n.mode markdown\nSELECT 5 AS e;\n"
                              f"SELECT 6 AS f;\n.once\n.once {sample_db}\n.once {trace}\nSELECT 7 AS g;\n")
    assert result.exit_code == 1  # the refused .once commands
    # the next line's statements go to the file (both, as DuckDB's shell sends them), the one after comes here
    assert once.read_text(encoding="utf-8") == "a\n1\nb\né\n"
    # .once ends an .output, as DuckDB's does: its file keeps what came before
    assert kept.read_text(encoding="utf-8") == "d\n4\n"
    assert after.read_text(encoding="utf-8") == "| e |\n|---:|\n| 5 |\n"  # in the mode of when it runs
    assert result.stdout == "c\n3\n| f |\n|---:|\n| 6 |\n| g |\n|---:|\n| 7 |\n"
    assert result.stderr.splitlines() == [
        "Error: .once takes a file: .once FILE",
        f"Error: {sample_db}: is the database this command reads ({sample_db}); give another .output FILE",
        f"Error: {trace}: exists and holds a gzipped trace (Kineto's JSON), not markdown; tracekit does not overwrite it "
        "(give another .output FILE)"]
    assert trace.read_bytes() == (SAMPLE_TRACES / "naive.json.gz").read_bytes()


def test_mode_box_draws_the_table_in_lines_fitted_and_elided_as_a_table(sample_db):
    result = shell(sample_db, f".mode box\n{KERNELS_PER_TRACE}.maxrows 4\n{KERNELS_PER_TRACE}"
                              ".maxrows 40\nSELECT trace, name, dur_us FROM kernels ORDER BY dur_us DESC LIMIT 2;\n",
                   columns=60)
    assert result.exit_code == 0, result.stderr
    whole, elided, fitted = result.stdout.split(")\n")[:3]
    assert whole.splitlines() == [
        "┌────────────────┬─────────┐",
        "│ trace          │ kernels │",
        "├────────────────┼─────────┤",
        "│ sdpa_math      │     120 │",
        "│ naive          │      30 │",
        "│ naive_inplace  │      30 │",
        "│ flex           │       6 │",
        "│ sdpa_cudnn     │       6 │",
        "│ sdpa_default   │       6 │",
        "│ sdpa_efficient │       6 │",
        "│ sdpa_flash     │       6 │",
        "└────────────────┴─────────┘",
        "(8 rows"]
    assert elided.splitlines()[3:8] == ["│ sdpa_math      │     120 │", "│ naive          │      30 │",
                                        "│ …              │       … │", "│ sdpa_efficient │       6 │",
                                        "│ sdpa_flash     │       6 │"]
    assert elided.endswith("(8 rows, 4 shown")
    table = query(sample_db, "SELECT trace, name, dur_us FROM kernels ORDER BY dur_us DESC LIMIT 2")
    longest = [line.split()[-1] for line in table.stdout.splitlines()[2:4]]
    lines = fitted.splitlines()
    assert all(len(line) == 60 for line in lines[:-1])  # the frame is fitted to the terminal, not past it
    assert [line.split("│")[3].strip() for line in lines[3:5]] == longest  # numbers whole
    assert lines[-1] == "(2 rows; to fit 60 columns: long values cut with …; .mode line shows all"
    boxed = query(sample_db, "SELECT 1 AS one", "-f", "box")  # the renderer's: `tracekit query -f box` too
    assert boxed.stdout == "┌─────┐\n│ one │\n├─────┤\n│   1 │\n└─────┘\n(1 row)\n"


def test_mode_markdown_prints_what_query_prints(sample_db):
    result = shell(sample_db, f".mode markdown\n{KERNELS_PER_TRACE}")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == query(sample_db, KERNELS_PER_TRACE.strip().rstrip(";"), "-f", "markdown").stdout
    assert result.stdout.startswith("| trace | kernels |\n|---|---:|\n| sdpa_math | 120 |\n")


def test_explain_prints_the_plan_as_duckdb_draws_it(sample_db):
    result = shell(sample_db, "EXPLAIN SELECT kind, count(*) FROM memcpy GROUP BY ALL;\n"
                              "EXPLAIN ANALYZE SELECT count(*) FROM kernels;\n"
                              "EXPLAIN ANALYZE DELETE FROM trace_files;\n", columns=40)
    plan, analyzed = result.stdout.split("╭─ Summary")
    assert "explain_key" not in result.stdout and "╭─ Hash Group By" in plan
    assert max(len(line) for line in plan.splitlines()) > 40  # whole, not cut to the terminal's width
    assert "Total Time:" in analyzed and "Ungrouped Aggregate" in analyzed
    assert result.stderr.startswith("Error: DELETE is not allowed")
    table = query(sample_db, "EXPLAIN SELECT count(*) FROM kernels")  # tracekit query too
    assert table.exit_code == 0 and table.stdout.startswith("╭─ Ungrouped Aggregate")
    for refused, says in [("EXPLAIN ANALYZE COPY kernel_rows TO 'k.csv'", "COPY is not allowed"),
                          ("EXPLAIN (FORMAT json) SELECT 1", "EXPLAIN takes no options here")]:
        assert query(sample_db, refused).stderr.startswith(f"Error: {says}")
    csv = query(sample_db, "EXPLAIN SELECT 1", "-f", "csv")
    assert csv.stdout.startswith("explain_key,explain_value\nphysical_plan,")  # other formats: the rows as they are


def test_named_queries_are_tables_in_the_shell(sample_db):
    result = shell(sample_db, ".mode csv\nFROM summary;\nFROM top_kernels(trace := 'naive', \"limit\" := 1);\n")
    assert result.exit_code == 0, result.stderr
    summary = CliRunner().invoke(cli, ["query", "summary", "--db", str(sample_db), "-f", "csv"]).output
    top = CliRunner().invoke(cli, ["query", "top_kernels", "--db", str(sample_db), "-f", "csv",
                                   "-p", "trace", "naive", "-p", "limit", "1"]).output
    assert result.stdout == summary + top


@pytest.fixture(scope="module")
def complete(sample_db):
    from tracekit.outputs.shell_complete import Completer, database_words
    from tracekit.store.database import connect_for_queries

    def words():
        con = connect_for_queries(sample_db)
        try:
            return database_words(con)
        finally:
            con.close()

    return Completer(words)


def test_tab_completes_names_commands_keywords_and_files(complete, tmp_path):
    assert {"kernel_classes", "kernel_rows", "kernel_rules", "kernels", "kernel_us"} <= set(complete("kern", "FROM "))
    assert complete("unclass", "SELECT * FROM ") == ["unclassified"]  # a named query
    assert complete("summ", "FROM ") == ["summarize", "summary"]  # a keyword and a named query
    assert complete("k.dur_u", "SELECT ") == ["k.dur_us"]
    assert "est_occupancy_pct" in complete("est_", "SELECT ")  # a column of a view
    assert complete("sel", "") == ["select"] and complete("SEL", "") == ["SELECT"]
    assert complete(".m", "") == [".maxrows", ".mode"] and complete(".", "")[:2] == [".exit", ".help"]
    assert complete("summ", ".schema ") == ["summary"]
    (tmp_path / "q1.sql").write_text("")
    (tmp_path / "qdir").mkdir()
    assert complete(str(tmp_path / "q"), ".read ") == [str(tmp_path / "q1.sql"), str(tmp_path / "qdir") + "/"]
    assert complete(str(tmp_path / "q1"), ".once ") == [str(tmp_path / "q1.sql")]
    assert not any(name.startswith("_") for name in complete("_", "FROM "))


def test_completion_never_fails_when_the_database_cannot_be_read():
    from tracekit.outputs.shell_complete import Completer

    def locked():
        raise RuntimeError("locked")

    assert Completer(locked)("ker", "FROM ") == [] and Completer(locked)(".ti", "") == [".timer"]


def test_tables_takes_a_like_pattern_as_duckdbs_shell_does(sample_db):
    result = shell(sample_db, ".tables gpu%\n.tables %_kernel%\n.tables nothing_like_it\n")
    assert result.stdout.splitlines() == ["gpu_arch_limits  gpu_busy         gpu_busy_rows    gpu_specs",
                                          "top_kernels", "(no tables)"]
