"""Tables fit the terminal by keeping the columns that matter: each named query's `-- keys:`
columns and findings' FINDING_KEYS stay, numbers whole; other columns go first (named in the
footer); kernel names are shortened as the report shortens them, distinct."""

import json

import pytest

from conftest import invoke_cli as invoke
from table_checks import check_fitted, duckdb_rows
from tracekit.analysis.findings_engine import FINDING_KEYS
from tracekit.analysis.kernel_names import short_kernel_names
from tracekit.analysis.named_queries import named_queries, named_sql
from tracekit.outputs.table_fit import table
from tracekit.analysis.rows import Rows

QUERIES = sorted(named_queries())
WIDTHS = [80, 100, 120]


@pytest.mark.parametrize("name", QUERIES)
def test_every_named_query_declares_keys_among_its_columns(name):
    query = named_queries()[name]
    assert query.keys, f"queries/{name}.sql: no `-- keys:` line"
    assert set(query.keys) <= set(query.columns), set(query.keys) - set(query.columns)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", QUERIES)
def test_a_named_query_keeps_its_keys_at_every_width(sample_db, name, width):
    sql, params = named_sql(name)
    columns, expected = duckdb_rows(sample_db, sql, params)
    result = invoke("query", name, "--db", sample_db, env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    check_fitted(result.stdout, columns, expected, named_queries()[name].keys, width)


@pytest.fixture(scope="module")
def findings_json(sample_db):
    """`tracekit findings -f json` on the samples, run once for every width (the tests only read it)."""
    return json.loads(invoke("findings", "--db", sample_db, "-f", "json").stdout)


@pytest.mark.parametrize("width", WIDTHS)
def test_findings_keep_trace_rule_title_and_saving(sample_db, findings_json, width):
    rows = findings_json
    columns = [c for c in rows[0] if c != "evidence"]
    expected = [tuple(r[c] for c in columns) for r in rows]
    result = invoke("findings", "--db", sample_db, env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    header = check_fitted(result.stdout, columns, expected, FINDING_KEYS, width)
    assert "rule" in header and "saving_us_per_step" in header


def test_summary_at_80_leaves_out_variant_as_a_copy_of_trace_and_keeps_the_speedup(sample_db):
    output = invoke("query", "summary", "--db", sample_db, env={"COLUMNS": "80"}).stdout
    header = output.splitlines()[0].split()
    assert header[0] == "trace" and "variant" not in header
    assert header[-2:] == ["gpu_us_per_step", "speedup_vs_naive"]
    assert "left out: variant (= trace)," in output.splitlines()[-1]
    lines = {line.split()[0]: line.split() for line in output.splitlines()[2:-1]}
    # The sample's figures, whole: sdpa_efficient keeps its full name, sdpa_default its 22.64×.
    assert lines["sdpa_default"][-2:] == ["100.6", "22.64"]
    assert lines["sdpa_efficient"][-2:] == ["337.5", "6.75"]


def test_occupancy_at_80_keeps_the_occupancy_and_whole_trace_names(sample_db):
    output = invoke("query", "occupancy", "--db", sample_db, env={"COLUMNS": "80"}).stdout
    lines = output.splitlines()
    assert lines[0].split() == ["trace", "kernel", "total_us", "est_occupancy_pct"]
    assert {line.split()[0] for line in lines[2:-1]} == {
        "flex", "naive", "naive_inplace", "sdpa_cudnn", "sdpa_default", "sdpa_efficient", "sdpa_flash", "sdpa_math"}
    assert "kernel names shortened" in lines[-1]
    assert "triton_tem_fused_flex_attention_0" in output and "pytorch_flash::flash_fwd_kernel" in output


@pytest.mark.parametrize("limit", [48, 34, 24, 16, 12])
def test_short_kernel_names_stay_distinct(sample_con, limit):
    names = [r[0] for r in sample_con.execute("SELECT DISTINCT name FROM kernels").fetchall()]
    short = short_kernel_names(names, limit)
    assert len(short) == len(names) == 22
    assert len(set(short.values())) == 22
    assert max(len(s) for s in short.values()) <= limit


def test_short_kernel_names_tell_template_instances_apart_by_where_they_differ(sample_con):
    names = [r[0] for r in sample_con.execute(
        "SELECT DISTINCT name FROM kernels WHERE name LIKE '%vectorized_elementwise_kernel<4, at::native::FillFunctor%'"
    ).fetchall()]
    short = sorted(short_kernel_names(names, 48).values())
    assert short == ["at::native::…ise_kernel…FillFunctor<bool>, arra…",
                     "at::native::…ise_kernel…FillFunctor<float>, arr…"]


def test_the_report_and_the_table_shorten_a_kernel_alike(sample_con):
    from tracekit.outputs.report import units

    name = sample_con.execute("SELECT name FROM kernels WHERE name LIKE '%flash_fwd_kernel%' LIMIT 1").fetchone()[0]
    assert units.short_kernel(name) == short_kernel_names([name], 48)[name] == "pytorch_flash::flash_fwd_kernel"


def test_a_number_that_does_not_fit_is_left_out_not_cut():
    rows = Rows(["name", "big_us"], [("a" * 30, 123456789012.5)])
    output = table(rows, width=20, keys=["name"])
    assert "1234567" not in output and "big_us" in output.splitlines()[-1]
    assert output.splitlines()[0].split() == ["name"]


def test_an_empty_result_leaves_out_no_column_as_a_copy_of_another(sample_db):
    # collective_skew finds no collective among the samples: no column "repeats" another then.
    output = invoke("query", "collective_skew", "--db", sample_db, env={"COLUMNS": "80"}).stdout
    assert output.splitlines()[-1].startswith("(0 rows; to fit 80 columns:") and "(= " not in output
