"""A query on Spark reaches the lake's tables and views through pure functions, and nothing else
(tracekit.spark.sandbox; docs/query.md: What a query can reach); and Spark's format() is DuckDB's, not
Python's str.format (tracekit.spark.format_udf).

Each attack runs for real: a listener on 127.0.0.1 records every request it gets, a DTD file
defines an entity whose text shows wherever the file was read, and Spark's Python workers hold a
secret in their environment. Both locks are tested on their own: tracekit's check through
SparkLake.rows (and the CLI), the session's pruned registries by running the attacks straight on
the session with spark.sql(). One Spark (local[2]) over a lake of the sample traces serves the module.
"""

import http.server
import os
import re
import shutil
import threading
from decimal import Decimal

import duckdb
import pytest

from conftest import SPARK_SECRET, SPARK_TEST_SETTINGS, invoke_cli
from tracekit.errors import QueryError
from tracekit.spark.format_udf import WIDEST, duckdb_format

pytest.importorskip("sqlglot")
pytest.importorskip("pyspark")
if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
    pytest.skip("Spark needs Java (17 or newer), which is not installed", allow_module_level=True)

SECRET = SPARK_SECRET
# Spark passes spark.executorEnv.* to its Python workers' environment, where tk_format runs.
SETTINGS = SPARK_TEST_SETTINGS
ENVIRON = "{0.__class__.__new__.__globals__[sys].modules[os].environ[TK_SECRET]}"


@pytest.fixture(scope="module")
def listener():
    """An HTTP server on 127.0.0.1 that answers every GET with a DTD and records its path."""
    got = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            got.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'<!ENTITY secret "' + SECRET.encode() + b'">')

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], got
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def sandboxed(sample_db, tmp_path_factory, spark_session):
    """A SparkLake over a lake of the sample traces, and the folder beside it (a DTD file in it)."""
    from tracekit.lake import export_database
    from tracekit.spark.engine import SparkLake

    folder = tmp_path_factory.mktemp("spark_sandbox")
    (folder / "secret.dtd").write_text(f'<!ENTITY secret "{SECRET}">\n')
    export_database(sample_db, folder / "lake")
    with SparkLake(folder / "lake", "local[2]", SETTINGS) as lake:
        lake.folder = folder
        yield lake


# Calls that reach outside the lake, each with the function its refusal names; {http_dtd} and
# {file_dtd} are documents whose DTD is the listener's, or the DTD file's.
CALLS = {
    "xpath_string fetches a DTD over http": ("SELECT xpath_string('{http_dtd}', '/a') AS v", "xpath_string"),
    "xpath reads a file: DTD": ("SELECT xpath('{file_dtd}', '/a/text()') AS v", "xpath"),
    "xpath_int over http": ("SELECT xpath_int('{http_dtd}', '1') AS v", "xpath_int"),
    "reflect calls a Java method": ("SELECT reflect('java.lang.System', 'getenv', 'TK_SECRET') AS v", "reflect"),
    "java_method": ("SELECT java_method('java.lang.System', 'getenv', 'TK_SECRET') AS v", "java_method"),
    "try_reflect": ("SELECT try_reflect('java.lang.System', 'getenv', 'TK_SECRET') AS v", "try_reflect"),
    # made on the driver: randstr(2000000000) killed Spark's JVM
    "randstr kills the JVM": ("SELECT length(randstr(5)) AS v", "randstr"),
}


def _call(attack, listener, lake):
    """The attack's SQL, its documents' DTD on the listener or in the DTD file, and its function."""
    sql, name = CALLS[attack]
    http_dtd = f'<!DOCTYPE a SYSTEM "http://127.0.0.1:{listener[0]}/x.dtd"><a>&secret;</a>'
    file_dtd = f'<!DOCTYPE a SYSTEM "{(lake.folder / "secret.dtd").as_uri()}"><a>&secret;</a>'
    return sql.format(http_dtd=http_dtd, file_dtd=file_dtd), name


def _rows(lake, sql):
    return lake.rows(sql).rows


@pytest.mark.parametrize("attack", CALLS)
def test_tracekit_refuses_a_call_that_reaches_out_before_spark_reads_it(sandboxed, listener, attack):
    sql, name = _call(attack, listener, sandboxed)
    with pytest.raises(QueryError) as refused:
        sandboxed.rows(sql)
    assert str(refused.value) == (f"{name} is not allowed on Spark: a query may call only pure functions "
                                  "(see docs/query.md: What a query can reach)")
    assert listener[1] == []


@pytest.mark.parametrize("attack", CALLS)
def test_sparks_own_registry_has_no_such_function(sandboxed, listener, attack):
    """The second lock alone: the SQL straight to the session's spark.sql(), past tracekit's check."""
    from tracekit.spark.dialect import to_spark

    sql, name = _call(attack, listener, sandboxed)
    got = listener[1]
    with pytest.raises(Exception, match=f"(?i)UNRESOLVED_ROUTINE.*`{name}`") as refused:
        sandboxed.spark.sql(to_spark(sql)).collect()
    assert got == [] and SECRET not in str(refused.value)
    # Qualified by Spark's own catalog of built-ins, it is not found either.
    with pytest.raises(Exception, match="REQUIRES_SINGLE_PART_NAMESPACE|UNRESOLVED_ROUTINE"):
        sandboxed.spark.sql(to_spark(sql).replace(name.upper() + "(", f"system.builtin.{name}(", 1)).collect()
    assert got == []


def test_the_registries_pruned_are_the_lake_sessions_alone(sandboxed):
    """A notebook's session of the same Spark keeps xpath_string; the lake's session has none."""
    sql = "SELECT xpath_string('<a>1</a>', '/a') AS v"
    with pytest.raises(Exception, match="UNRESOLVED_ROUTINE"):
        sandboxed.spark.sql(sql).collect()
    assert sandboxed.spark.newSession().sql(sql).collect()[0].v == "1"


@pytest.mark.parametrize("sql, says", [
    ('SELECT * FROM parquet."{lake}/gpu_specs"', "parquet.`{lake}/gpu_specs` is not a table of the lake"),
    ('SELECT * FROM json."file:///etc/passwd"', "json.`file:///etc/passwd` is not a table of the lake"),
    ("SELECT * FROM read_parquet('{lake}/gpu_specs/*.parquet')", "read_parquet is not allowed on Spark"),
    ("SELECT * FROM read_csv('/etc/passwd')", "read_csv is not allowed on Spark"),
    ("SELECT * FROM read_files('/etc/passwd')", "read_files is not allowed on Spark"),
    ("SELECT * FROM 'secret.dtd'", "`secret.dtd` is not a table of the lake"),
    ("SELECT * FROM global_temp.elsewhere", "global_temp.elsewhere is not a table of the lake"),
    ("SELECT * FROM elsewhere", "elsewhere is not a table of the lake"),
    ("SELECT spark_catalog.default.abs(-1) AS v", "spark_catalog.default.abs() is not allowed on Spark"),
    ("SHOW TABLES", "SHOW is not allowed on Spark"),
    ('SET "spark.sql.runSQLOnFiles" = true', "SET is not allowed"),
    ("ADD JAR '/tmp/x.jar'", "syntax error"),
    ("CREATE TEMPORARY FUNCTION f AS 'x.Y' USING JAR '/tmp/x.jar'", "syntax error"),
    ("CACHE TABLE kernels", "syntax error"),
    ("REFRESH TABLE kernels", "syntax error"),
    ("SELECT 1; SELECT * FROM kernels", "holds 2 statements"),
])
def test_files_other_tables_and_other_statements_are_refused(sandboxed, sql, says):
    """(The statements were refused before Spark came: check_sql's one-SELECT rule; they stay so.)"""
    sandboxed.spark.range(3).createOrReplaceGlobalTempView("elsewhere")  # a view of another session's
    lake = str(sandboxed.folder / "lake")
    with pytest.raises(QueryError) as refused:
        sandboxed.rows(sql.format(lake=lake))
    assert says.format(lake=lake) in str(refused.value) and "\n" not in str(refused.value)
    assert sandboxed.spark.conf.get("spark.sql.runSQLOnFiles") == "false"
    assert sandboxed.spark.sparkContext._jsc.sc().listJars().isEmpty()


@pytest.mark.parametrize("variable", ["${system:user.home}", "${sparkconf:spark.app.name}", "${spark:spark.app.id}",
                                      "${env:PATH}", "${hiveconf:x}"])
def test_sql_text_is_read_as_written_not_with_sparks_variables_in_it(sandboxed, variable):
    """Spark would put the JVM's properties, its settings and the environment in place of these,
    in string literals and aliases too, before tracekit or its parser could see them."""
    from tracekit.spark.dialect import to_spark

    sql = f'SELECT \'{variable}\' AS v, 1 AS "{variable}"'
    assert sandboxed.rows(sql).columns == ["v", variable] and _rows(sandboxed, sql) == [(variable, 1)]
    # the session's own setting, past tracekit's check
    assert sandboxed.spark.sql(to_spark(sql)).collect()[0].v == variable


def test_a_running_session_keeps_its_own_settings(sandboxed):
    """A notebook's Spark, found running, is used as it is: tracekit's settings go on a session of its own."""
    from tracekit.spark.engine import SparkLake

    notebook = sandboxed._base
    kept = {"spark.sql.session.timeZone": "America/New_York", "spark.sql.ansi.enabled": "true",
            "spark.sql.variable.substitute": "true"}
    before = {key: notebook.conf.get(key) for key in kept}
    try:
        for key, value in kept.items():
            notebook.conf.set(key, value)
        with SparkLake(sandboxed.folder / "lake", "local[2]", SETTINGS) as lake:
            assert lake.rows("SELECT count(*) AS n FROM traces").rows == [(8,)]
            assert lake.spark.conf.get("spark.sql.session.timeZone") == "UTC"
        assert {key: notebook.conf.get(key) for key in kept} == kept
    finally:
        for key, value in before.items():
            notebook.conf.set(key, value)


def test_what_a_query_may_still_do(sandboxed):
    """CTEs, table functions, lambdas, and the lake's own tables and views."""
    rows = _rows(sandboxed, "WITH t AS (SELECT trace FROM traces) SELECT count(*) AS n, "
                            "(SELECT count(*) FROM range(4)) AS r, list_transform([1, 2], v -> v * 2) AS l FROM t")
    assert rows == [(8, 4, [2, 4])]
    assert _rows(sandboxed, "DESCRIBE trace_files")


@pytest.mark.parametrize("template", [ENVIRON, "{0[__class__]}", "{:>300000000}", "{:.300000000f}"])
@pytest.mark.parametrize("computed", [False, True], ids=["literal", "computed"])
def test_format_reaches_nothing_and_writes_nothing_huge_on_spark(sandboxed, template, computed):
    """A literal template is refused as the SQL is translated; one the query computes, by the UDF
    as it runs: either way one line, no secret, and Spark still answers."""
    quoted = "'" + template.replace("'", "''") + "'"
    sql = f"SELECT format({f'concat({quoted}, lower(trace))' if computed else quoted}, struct_pack(a := 1)) AS f " \
          "FROM traces WHERE trace = 'naive'"
    with pytest.raises(QueryError) as refused:
        sandboxed.rows(sql)
    message = str(refused.value)
    assert message.startswith("Spark: format(): " if computed else "format(): ") and "\n" not in message
    assert SECRET not in message
    assert _rows(sandboxed, "SELECT format('{} took {:.1f} us', 'x', 0.25) AS f") == [("x took 0.2 us",)]


def test_the_cli_says_one_line(sandboxed, listener):
    sql, _ = _call("xpath_string fetches a DTD over http", listener, sandboxed)
    result = invoke_cli("query", "--lake", sandboxed.folder / "lake", "--engine", "spark", "--sql", sql)
    assert result.exit_code == 1 and listener[1] == []
    assert result.output == ("Error: xpath_string is not allowed on Spark: a query may call only pure functions "
                             "(see docs/query.md: What a query can reach)\n")


def test_every_allowed_function_is_one_of_sparks(sandboxed):
    """The allow-list names Spark's own functions (a misspelt or retired name would allow nothing)."""
    from tracekit.spark.allowed_functions import ALLOWED, SYNTAX

    state = sandboxed.spark.newSession()._jsparkSession.sessionState()
    spark_names = set()
    for registry in (state.functionRegistry(), state.tableFunctionRegistry()):
        names = registry.listFunction().iterator()
        while names.hasNext():
            spark_names.add(names.next().funcName())
    assert ALLOWED - set(SYNTAX.split()) <= spark_names
    assert not {"xpath", "xpath_string", "from_xml", "reflect", "java_method", "try_reflect",
                "from_protobuf", "python_worker_logs"} & ALLOWED


def test_tracekits_own_sql_calls_only_allowed_functions():
    """Every named query and finding rule passes the first lock as it stands (test_spark.py runs
    them, and the views, on Spark under both)."""
    from tracekit.analysis.findings_engine import rules
    from tracekit.analysis.named_queries import named_queries, named_sql
    from tracekit.lake.layout import per_trace_tables, shared_tables
    from tracekit.spark.dialect import spark_tree, view_selects
    from tracekit.spark.sandbox import check_reach
    from tracekit.store.database import views_sql

    views = [name for name, _ in view_selects(views_sql())]
    tables = [*per_trace_tables(), *shared_tables(), *views]
    for sql in [named_sql(name)[0] for name in named_queries()] + [rule.sql for rule in rules().values()]:
        check_reach(spark_tree(sql), tables)


# The format specs tracekit's SQL uses, and the rest of what tk_format writes, against DuckDB's format().
SPECS = ["", ":.0f", ":.1f", ":.3f", ":d", ":s", ":f", ":>8", ":<8", ":^9", ":*^9", ":0<6", ":,>8", ":+", ": ",
         ":08.3f", ":+.2f", ":,", ":_", ":,.2f", ":_.1f", ":,d", ":_d", ":10.1f", ":010", ":.2s", ":5s", ":08",
         f":>{WIDEST}", f":.{WIDEST}f"]
VALUES = [0, 7, -5, 1234567, 2**53 + 1, 0.25, 2.675, -0.04, 0.0, -0.0, 1e20, 1e-7, 100.0, 1234567.891,
          float("nan"), float("inf"), "ab", "", True, False, Decimal("1.25"), Decimal("100.00")]


@pytest.mark.parametrize("spec", SPECS)
def test_tk_format_writes_what_duckdb_writes(spec):
    """Where DuckDB writes a value, tk_format writes the same, letter for letter (where DuckDB
    refuses a spec for a value, as {:.1f} for an integer, tk_format may write it)."""
    con = duckdb.connect()
    template = "{" + spec + "}"
    written = 0
    for value in VALUES:
        try:
            want = con.execute("SELECT format(?, ?)", [template, value]).fetchone()[0]
        except duckdb.Error:
            continue
        assert duckdb_format(template, value) == want, (template, value)
        written += 1
    assert written >= 2  # the text values, at least
    con.close()


@pytest.mark.parametrize("template, values, says", [
    (ENVIRON, ("row",), "looks up a name, an attribute or an item"),
    ("{0[0]}", ([1],), "looks up a name, an attribute or an item"),
    ("{a}", (1,), "looks up a name"),
    ("{:>300000000}", (1,), f"has a width over {WIDEST}"),
    ("{:.1001f}", (1.0,), f"has a precision over {WIDEST}"),
    ("{:>{}}", (1, 5), "takes its width or precision from a value"),
    ("{:x}", (255,), "has a spec Spark's format() does not write"),
    ("{:.2}", (1e20,), "a precision without type f or s"),
    ("{} {0}", (1,), "mix {} and {N}"),
    ("{1}", (1,), "has no value"),
    ("{:>1000}" * 1001, (1,) * 1001, "longer than 1,000,000 characters"),
])
def test_tk_format_refuses_what_str_format_would_reach(monkeypatch, template, values, says):
    from pyspark.sql import Row

    monkeypatch.setenv("TK_SECRET", SECRET)
    values = tuple(Row(a=1) if value == "row" else value for value in values)
    with pytest.raises(ValueError, match=re.escape(says)) as refused:
        duckdb_format(template, *values)
    assert SECRET not in str(refused.value)


@pytest.mark.parametrize("said", [
    "org.apache.spark.SparkException: Job 1 cancelled because SparkContext was shut down",
    "[Errno 111] Connection refused",
    "An error occurred while calling o87.collectToPython: Error while sending or receiving",
])
def test_a_query_that_ends_sparks_jvm_says_so(said):
    """`lpad('x', 2000000000 + cast(rand() AS int), 'y')`, made row by row, ran a task out of memory,
    and in local mode that ended the JVM (`tracekit query` ran it in 55 s: these are what py4j and
    Spark said, then and to the next queries): 'Connection refused' told nothing of why."""
    from tracekit.spark.engine import _query_error

    message = str(_query_error(RuntimeError(said), "SELECT 1 AS n"))
    assert message.startswith("Spark stopped: its JVM ended while it ran the query (out of memory?") and \
        message.endswith("start Spark again (a new command, or a new SparkLake) — in SQL: SELECT 1 AS n")
