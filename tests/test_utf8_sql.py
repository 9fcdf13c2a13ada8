"""SQL in UTF-8 ('é' in a string, 'µ' in a comment) works wherever SQL comes in: DuckDB's tokenizer
counts bytes, and code that took its offsets for characters crashed (issue [16] item 1)."""

import pytest
from click.testing import CliRunner

from conftest import TEST_DATA, invoke_cli
from tracekit.cli import cli

SQL = "SELECT 'é' AS e, count(*) AS n FROM kernels -- time in µs"


@pytest.mark.parametrize("form", ["text", "text;", "stdin", "file"])
def test_query_takes_utf8_sql_in_every_form(sample_db, tmp_path, form):
    sql = SQL.replace(" -- ", "; -- ") if form == "text;" else SQL
    args, stdin = ["query", "--db", str(sample_db), "-f", "csv", "--sql"], None
    if form == "stdin":
        args, stdin = args + ["-"], sql
    elif form == "file":
        path = tmp_path / "q.sql"
        path.write_text(sql + "\n", encoding="utf-8")
        args.append(f"@{path}")
    else:
        args.append(sql)
    result = CliRunner().invoke(cli, args, input=stdin)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1].startswith("é,")


def test_query_writes_utf8_sql_to_a_file(sample_db, tmp_path):
    out = tmp_path / "out.csv"
    result = invoke_cli("query", "--db", sample_db, "--sql", SQL + "\n", "-o", out)
    assert result.exit_code == 0, result.output
    assert out.read_text(encoding="utf-8").splitlines()[1].startswith("é,")


def test_a_parameter_in_utf8(sample_db):
    result = invoke_cli("query", "--db", sample_db, "--sql", "SELECT $v AS v -- µs", "-p", "v", "µs é", "-f", "csv")
    assert result.exit_code == 0 and result.output.splitlines() == ["v", "µs é"], result.output


def test_the_shell_splits_utf8_statements(sample_db):
    script = "-- time in µs\nSELECT 1 AS x;\nSELECT 'é' AS e; -- é\nSELECT 'ü;' AS u;\n"
    result = CliRunner().invoke(cli, ["shell", "--db", str(sample_db)], input=script)
    assert result.exit_code == 0, result.output
    assert [line for line in result.output.splitlines() if line in ("1", "é", "ü;")] == ["1", "é", "ü;"]


def test_export_selects_events_with_utf8_sql(sample_db, tmp_path):
    out = tmp_path / "t.json"
    result = invoke_cli("export", "--db", sample_db, "-o", out, "--sql",
                        "SELECT * FROM events WHERE name <> 'é' AND trace = 'naive' -- µs")
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 1000


def test_a_lake_query_in_utf8(tmp_path):
    lake = tmp_path / "lake"
    assert invoke_cli("load", TEST_DATA / "h200" / "side_streams", "--lake", lake).exit_code == 0
    result = invoke_cli("query", "--lake", lake, "--sql", SQL, "-f", "csv")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1].startswith("é,")
