"""`tracekit query` and `schema` through the CLI: every named query in every format, errors, docs."""

import json
import re
import subprocess
import sys

import duckdb
import pytest

from tracekit.cli import all_commands, cli
from tracekit.analysis.named_queries import named_queries
from conftest import invoke_cli as invoke

QUERIES = sorted(named_queries())
TEXT_FORMATS = ["table", "csv", "json", "markdown"]


def test_the_named_queries_the_issue_asks_for_exist():
    assert {"memcpy", "gemm_classes", "occupancy", "cudnn_plan_time", "summary", "top_kernels",
            "unclassified"} <= set(QUERIES)


@pytest.mark.parametrize("name", QUERIES)
@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_every_named_query_in_every_text_format(sample_db, name, fmt):
    result = invoke("query", name, "--db", str(sample_db), "-f", fmt)
    assert result.exit_code == 0, result.output
    if fmt == "json":
        rows = json.loads(result.output)
        assert isinstance(rows, list)
        if rows:
            assert set(rows[0]) == set(named_queries()[name].columns)
    elif fmt == "markdown":
        assert result.output.startswith("| ") and "|---" in result.output
    elif fmt == "csv":
        assert result.output.splitlines()[0].split(",") == list(named_queries()[name].columns)
    else:
        assert re.match(r"\(\d+ rows?[;)]", result.output.rstrip().splitlines()[-1])


@pytest.mark.parametrize("name", QUERIES)
def test_every_named_query_writes_parquet(sample_db, tmp_path, name):
    out = tmp_path / f"{name}.parquet"
    result = invoke("query", name, "--db", str(sample_db), "-f", "parquet", "-o", str(out))
    assert result.exit_code == 0, result.output
    columns = [c[0] for c in duckdb.sql(f"SELECT * FROM '{out}' LIMIT 0").description]
    assert columns == list(named_queries()[name].columns)


@pytest.mark.parametrize("name", QUERIES)
def test_every_query_documents_its_question_and_each_column(sample_db, name):
    query = named_queries()[name]
    assert query.question.endswith("?") or query.question.endswith(".")
    result = invoke("query", name, "--db", str(sample_db), "-f", "csv")
    header = result.output.splitlines()[0].split(",")
    assert header == list(query.columns), "the header comment's columns: must list the output columns in order"
    assert all(meaning for meaning in query.columns.values())


def test_json_format_is_one_array_of_row_objects(sample_db):
    result = invoke("query", "memcpy", "--db", str(sample_db), "-f", "json", "-p", "trace", "naive")
    assert json.loads(result.output) == [{
        "trace": "naive", "kind": "DtoD", "caused_by": "aten::masked_fill → aten::clone → aten::copy_",
        "source": None, "memcpy_count": 6, "memcpy_bytes": 3221225472, "unknown_size_copies": 0, "memcpy_mib": 3072.0,
        "memcpy_us": 1523.9, "avg_bytes": 536870912, "steps_with_memcpy": 6}]


def test_list_shows_every_query_with_its_question():
    result = invoke("query", "--list")
    assert result.exit_code == 0
    for name in QUERIES:
        assert name in result.output
    assert "Where are the Memcpy kernels" in result.output


def test_ad_hoc_sql(sample_db):
    result = invoke("query", "--db", str(sample_db), "-f", "csv", "--sql",
                    "SELECT count(*) AS n FROM kernels WHERE gemm_class = 'simt'")
    assert result.exit_code == 0
    assert result.output.splitlines() == ["n", "12"]


def test_output_file(sample_db, tmp_path):
    out = tmp_path / "summary.md"
    result = invoke("query", "summary", "--db", str(sample_db), "-f", "markdown", "-o", str(out))
    assert result.exit_code == 0
    assert out.read_text().count("\n") == 2 + 8


def test_without_a_database_it_answers_from_the_bundled_samples(isolated_cwd):
    result = invoke("query", "gemm_classes", "-f", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output.split("\n", 1)[1]) if result.output.startswith("(") else json.loads(result.output)
    assert {r["trace"] for r in rows} == {"naive", "naive_inplace", "sdpa_math"}


def test_python_api_returns_a_dataframe(isolated_cwd):
    import tracekit

    frame = tracekit.query("cudnn_plan_time")
    assert frame.loc[frame["trace"] == "sdpa_cudnn", "plan_ms"].iloc[0] > 100
    assert tracekit.query(sql="SELECT count(*) AS n FROM traces")["n"].iloc[0] == 8


def test_the_database_is_read_only(sample_db):
    result = invoke("query", "--db", str(sample_db), "--sql", "DELETE FROM trace_files")
    assert result.exit_code == 1
    assert "read-only" in result.output
    assert "Traceback" not in result.output
    assert duckdb.connect(str(sample_db), read_only=True).execute("SELECT count(*) FROM trace_files").fetchone()[0] == 8


def test_an_sql_error_shows_duckdb_message_and_the_query(sample_db):
    result = invoke("query", "--db", str(sample_db), "--sql", "SELECT no_such_column FROM kernels")
    assert result.exit_code == 1
    assert "no_such_column" in result.output and "SELECT no_such_column FROM kernels" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize("args, message", [
    (["query", "no_such_query", "--db", "{db}"], "no named query 'no_such_query'"),
    (["query", "memcpy", "-p", "nope", "1", "--db", "{db}"], "has no parameter nope"),
    (["query", "--db", "/nonexistent/x.duckdb", "memcpy"], "no such database"),
])
def test_bad_requests_get_one_line_errors(sample_db, args, message):
    result = invoke(*[a.format(db=sample_db) for a in args])
    assert result.exit_code == 1
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_query_and_name_together_is_a_usage_error():
    result = invoke("query", "memcpy", "--sql", "SELECT 1")
    assert result.exit_code == 2


def test_parquet_needs_an_output_file(sample_db):
    result = invoke("query", "memcpy", "--db", str(sample_db), "-f", "parquet")
    assert result.exit_code == 1 and "-o FILE" in result.output


def test_schema_documents_every_view():
    result = invoke("schema")
    assert result.exit_code == 0
    for view in ["traces", "events", "kernels", "memcpy", "memset", "cpu_ops", "runtime", "steps"]:
        assert f"\n{view}:" in "\n" + result.output
    for column in ["est_occupancy_pct", "gemm_class", "kernel_class", "registers_per_thread", "external_id"]:
        assert any(line.startswith("  ") and column in line.split(":")[0] for line in result.output.splitlines())


def test_every_documented_view_column_exists(sample_con):
    from tracekit.store.database import schema_doc

    view, documented = None, {}
    for line in schema_doc().splitlines():
        if line and not line.startswith(" "):
            view = line.split(":")[0].split(" ")[0]
            documented[view] = set()
        elif line.startswith("  ") and ":" in line and view:
            for name in line.split(":")[0].strip().split(","):
                documented[view].add(name.strip())
    for view, columns in documented.items():
        if view == "kernel_rules":
            view = "kernel_rules"
        actual = {d[0] for d in sample_con.execute(f"SELECT * FROM {view} LIMIT 0").description}
        assert {c for c in columns if " " not in c and c.isidentifier()} <= actual, view


def test_each_command_is_in_the_module_the_cli_imports_for_it():
    # the CLI imports a command's module when the command is asked for (COMMAND_MODULES): a
    # command missing from the table, or filed under another module, would not be found
    from importlib import import_module

    from tracekit.cli import COMMAND_MODULES

    for module_name in set(COMMAND_MODULES.values()):
        for command in import_module(f"tracekit.cli.{module_name}").COMMANDS:
            assert COMMAND_MODULES.get(command.name) == module_name, command.name
    assert sorted(all_commands()) == sorted(COMMAND_MODULES)


def test_every_command_has_help():
    for name, command in all_commands().items():
        assert command.help and len(command.help) > 20, name
        assert invoke(name, "--help").exit_code == 0


def test_query_load_and_diff_never_import_torch(sample_db, tmp_path):
    script = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from tracekit.cli import cli\n"
        f"r = CliRunner().invoke(cli, ['query', 'summary', '--db', {str(sample_db)!r}])\n"
        "assert r.exit_code == 0, r.output\n"
        f"r = CliRunner().invoke(cli, ['diff', 'sdpa_flash', 'sdpa_cudnn', '--db', {str(sample_db)!r}])\n"
        "assert r.exit_code == 0, r.output\n"
        f"r = CliRunner().invoke(cli, ['load', {str(tmp_path / 'none.json')!r}, '--db', {str(tmp_path / 'x.duckdb')!r}])\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _rounded_as_people_read_them(column, value):
    """The rule the named queries keep, by a column's name: µs to 0.1 (a timestamp to the ns), ms
    to 0.001 (a µs), a share to 0.1 and at most 100, bytes whole."""
    if not isinstance(value, float):
        return True
    if column.endswith("ts_us"):  # a timestamp locates an event: to its nanosecond
        return round(value, 3) == value
    if column.endswith("_us") or "_us_" in column or column.endswith("_pct") or column.startswith("pct_"):
        return round(value, 1) == value and (not column.endswith("_pct") or value <= 100)
    if column.endswith("_ms"):
        return round(value, 3) == value
    if column.endswith("bytes") or "_bytes_" in column:
        return value.is_integer()
    return True


def test_numbers_people_read_are_rounded_to_what_they_measure(sample_db, foreign_db, launch_bound_db):
    """Named queries are read by people (issue [16]): summary printed 100.60739999999998 and a
    tensor_core_pct of 100.00000000000001; --sql stays exact."""
    checked = set()
    for db in (sample_db, foreign_db, launch_bound_db):
        for name in QUERIES:
            rows = json.loads(invoke("query", name, "--db", str(db), "-f", "json").output)
            for row in rows:
                bad = {c: v for c, v in row.items() if not _rounded_as_people_read_them(c, v)}
                assert not bad, (name, bad)
                checked |= {(name, c) for c, v in row.items() if isinstance(v, float)}
    assert {name for name, _ in checked} >= {"summary", "top_kernels", "occupancy", "memcpy", "gemm_classes",
                                             "cudnn_plan_time", "comm_overlap", "rank_steps"}
    exact = invoke("query", "--db", str(sample_db), "-f", "json", "--sql",
                   "SELECT avg(dur_us) AS avg_us FROM kernels WHERE trace = 'flex'").output
    assert not _rounded_as_people_read_them("avg_us", json.loads(exact)[0]["avg_us"])


def test_tables_lists_every_relation_a_line_each_with_its_rows(sample_db):
    """`tracekit tables` (sqlite-utils' habit, issue [16] item 12): every table and view `schema`
    knows, a one-line description each, a table's row count; a view's with --counts."""
    from tracekit.analysis.schema_listing import relation_names
    from tracekit.store.database import connect_for_queries

    listed = json.loads(invoke("tables", "--db", str(sample_db), "-f", "json").output)
    con = connect_for_queries(sample_db)
    try:
        names = relation_names(con)
        counts = {n: con.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in ("kernels", "kernel_rows")}
    finally:
        con.close()
    assert sorted(row["name"] for row in listed) == names
    by_name = {row["name"]: row for row in listed}
    assert by_name["kernel_rows"] == {"name": "kernel_rows", "kind": "table", "rows": counts["kernel_rows"],
                                      "about": "storage: query the views, whose columns are the contract"}
    assert by_name["kernels"] == {"name": "kernels", "kind": "view", "rows": None, "about": "one row per GPU kernel execution"}
    assert [row["name"] for row in listed][:2] == ["traces", "events"]  # the documented views first, as schema has them
    counted = {row["name"]: row["rows"] for row in json.loads(
        invoke("tables", "--db", str(sample_db), "--counts", "-f", "json").output)}
    assert counted["kernels"] == counts["kernels"] == 210
