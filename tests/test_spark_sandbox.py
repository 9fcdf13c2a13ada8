"""Spark's format() is DuckDB's, not Python's str.format (tracekit.spark.format_udf): no field
reaches an attribute or an item of a value, no width is unbounded, and what it writes is what
DuckDB's format() writes. The secret is in Spark's Python workers' environment, where the UDF runs.
One Spark (local[2]) over a lake of the sample traces serves the module.
"""

import os
import re
import shutil
from decimal import Decimal

import duckdb
import pytest

from tracekit.errors import QueryError
from tracekit.spark.format_udf import WIDEST, duckdb_format

pytest.importorskip("sqlglot")
pytest.importorskip("pyspark")
if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
    pytest.skip("Spark needs Java (17 or newer), which is not installed", allow_module_level=True)

SECRET = "tracekit-spark-secret-52c1"
# Spark passes spark.executorEnv.* to its Python workers' environment, where tk_format runs.
SETTINGS = {"spark.sql.shuffle.partitions": "2", "spark.executorEnv.TK_SECRET": SECRET}
ENVIRON = "{0.__class__.__new__.__globals__[sys].modules[os].environ[TK_SECRET]}"


@pytest.fixture(scope="module")
def sandboxed(sample_db, tmp_path_factory):
    """A SparkLake over a lake of the sample traces."""
    from tracekit.lake import export_database
    from tracekit.spark.engine import SparkLake

    folder = tmp_path_factory.mktemp("spark_sandbox")
    (folder / "secret.dtd").write_text(f'<!ENTITY secret "{SECRET}">\n')
    export_database(sample_db, folder / "lake")
    with SparkLake(folder / "lake", "local[2]", SETTINGS) as lake:
        lake.folder = folder
        yield lake


def _rows(lake, sql):
    return lake.rows(sql).rows


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
