"""SQL from anywhere: `--sql -` (stdin), `--sql @file.sql`, an .sql path as the query name, and
`-p NAME VALUE` for ad hoc SQL, bound by DuckDB, never pasted into it."""

import json

import pytest

from conftest import db_rows, invoke_cli as invoke

BIG_KERNELS = "SELECT trace, count(*) AS kernels FROM kernels WHERE dur_us > $min_us GROUP BY ALL ORDER BY trace"


def rows_of(result):
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def expected_big_kernels(db, min_us):
    return [{"trace": t, "kernels": n} for t, n in db_rows(
        db, f"SELECT trace, count(*) FROM kernels WHERE dur_us > {min_us} GROUP BY ALL ORDER BY trace")]


def test_sql_from_standard_input(sample_db):
    result = invoke("query", "--db", sample_db, "-f", "json", "--sql", "-", "-p", "min_us", "1000",
                    stdin=BIG_KERNELS + ";\n")
    assert rows_of(result) == expected_big_kernels(sample_db, 1000)


@pytest.mark.parametrize("how", ["@file", "name"])
def test_sql_from_a_file_with_parameters(sample_db, tmp_path, how):
    path = tmp_path / "big_kernels.sql"
    path.write_text(f"-- kernels longer than $min_us, per trace\n{BIG_KERNELS}\n")
    query = ["--sql", f"@{path}"] if how == "@file" else [path]
    for min_us in ("100", "1000"):
        result = invoke("query", *query, "--db", sample_db, "-f", "json", "-p", "min_us", min_us)
        assert rows_of(result) == expected_big_kernels(sample_db, min_us)
    assert expected_big_kernels(sample_db, 100) != expected_big_kernels(sample_db, 1000)


def test_a_parameter_is_bound_never_pasted_into_the_sql(sample_db):
    sql = "SELECT count(*) AS n FROM kernels WHERE trace = $trace"
    naive = rows_of(invoke("query", "--db", sample_db, "-f", "json", "--sql", sql, "-p", "trace", "naive"))
    assert naive == [{"n": 30}]
    injected = invoke("query", "--db", sample_db, "-f", "json", "--sql", sql, "-p", "trace", "naive' OR '1'='1")
    assert rows_of(injected) == [{"n": 0}]


@pytest.mark.parametrize("args, message", [
    (["--sql", "@{tmp}/missing.sql"], "{tmp}/missing.sql: no such file"),
    (["{tmp}/missing.sql"], "{tmp}/missing.sql: no such file"),
    (["--sql", "@{tmp}"], "{tmp}: is a folder, not a file of SQL"),
    (["--sql", "@{tmp}/empty.sql"], "{tmp}/empty.sql: the SQL is empty"),
    (["--sql", "@{tmp}/blank.sql"], "{tmp}/blank.sql: the file is empty"),
    (["--sql", "@{tmp}/two.sql"], "{tmp}/two.sql: the SQL holds 2 statements: a query runs one SELECT"),
    (["--sql", "@{tmp}/write.sql"], "{tmp}/write.sql: DELETE is not allowed: a query is read-only"),
    (["--sql", "@{tmp}/typo.sql"], "{tmp}/typo.sql: Binder Error"),
    (["--sql", "-"], "standard input: no SQL came"),
    (["--sql", BIG_KERNELS], "the SQL uses $min_us: give it a value with -p min_us VALUE"),
    (["--sql", BIG_KERNELS, "-p", "min_us", "1", "-p", "max_us", "9"], "-p max_us: the SQL has no $max_us"),
    (["--sql", "SELECT 1", "-p", "x", "1"], "-p x: the SQL has no $x (it uses no $parameters)"),
])
def test_bad_sql_sources_are_one_line_errors_naming_the_file(sample_db, tmp_path, args, message):
    (tmp_path / "empty.sql").write_text("-- nothing here\n")
    (tmp_path / "blank.sql").write_text("\n")
    (tmp_path / "two.sql").write_text("SELECT count(*) FROM kernels;\nSELECT count(*) FROM memcpy;\n")
    (tmp_path / "write.sql").write_text("DELETE FROM trace_files;\n")
    (tmp_path / "typo.sql").write_text("SELECT no_such_column FROM kernels;\n")
    result = invoke("query", "--db", sample_db, *[a.format(tmp=tmp_path) for a in args], stdin="")
    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"Error: {message.format(tmp=tmp_path)}"), result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert db_rows(sample_db, "SELECT count(*) FROM trace_files") == [(8,)]


def test_export_reads_its_sql_from_a_file_and_from_stdin(sample_db, tmp_path):
    sql = "SELECT * FROM events WHERE trace = 'naive' AND cat = 'kernel'"
    (tmp_path / "kernels.sql").write_text(sql + ";\n")
    from_file = invoke("export", "--db", sample_db, "--sql", f"@{tmp_path / 'kernels.sql'}", "-o", tmp_path / "a.json")
    from_stdin = invoke("export", "--db", sample_db, "--sql", "-", "-o", tmp_path / "b.json", stdin=sql)
    assert from_file.exit_code == 0 and from_stdin.exit_code == 0, from_file.output + from_stdin.output
    kernels = db_rows(sample_db, "SELECT count(*) FROM kernels WHERE trace = 'naive'")[0][0]
    for name in ("a.json", "b.json"):
        events = json.loads((tmp_path / name).read_text())["traceEvents"]
        assert sum(e["ph"] == "X" for e in events) == kernels == 30
    wrong = tmp_path / "not_events.sql"
    wrong.write_text("SELECT 1 AS x")
    result = invoke("export", "--db", sample_db, "--sql", f"@{wrong}", "-o", tmp_path / "c.json")
    assert result.exit_code == 1 and result.output.startswith(f"Error: {wrong}: the SQL must select events")


@pytest.mark.parametrize("command, stdin, says", [
    ([b"query", b"--sql", b"SELECT '\xff' AS x"], b"", "Error: the SQL is not UTF-8 text (byte 0xff at character 9)"),
    ([b"query", b"--sql", b"-"], b"SELECT 'caf\xe9' AS x", "Error: standard input: the SQL is not UTF-8 text (byte 0xe9 at character 12)"),
    ([b"export", b"-o", b"out.json", b"--sql", b"SELECT * FROM events WHERE name = '\xfe'"], b"",
     "Error: the SQL is not UTF-8 text (byte 0xfe at character 36)"),
    ([b"shell"], b"SELECT 'caf\xe9';\nSELECT 42 AS a;\n", "Error: the line is not UTF-8 text (byte 0xe9 at character 12)"),
], ids=["argument", "stdin", "export", "shell"])
def test_sql_that_is_not_utf8_is_one_line_not_a_traceback(sample_db, tmp_path, command, stdin, says):
    """Bytes that are not UTF-8 (a Latin-1 file, a terminal in another encoding) reached DuckDB's
    parser as lone surrogates: a TypeError or UnicodeEncodeError traceback. The shell goes on."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable.encode(), b"-m", b"tracekit", *command, b"--db", str(sample_db).encode()],
                          input=stdin, capture_output=True, cwd=tmp_path, timeout=120)
    err = done.stderr.decode()
    assert done.returncode == 1 and "Traceback" not in err, err
    assert err.strip().startswith(says), err
    assert (b"42" in done.stdout) == (command == [b"shell"]) and not (tmp_path / "out.json").exists()
