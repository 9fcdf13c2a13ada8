"""`tracekit hta`: HTA's analyses stored as tables, checked against tracekit's own views.

HTA takes seconds per run, so one module fixture runs `tracekit hta` and `tracekit hta
diff` once on a copy of the session's sample database plus the CPU-only trace.
"""

import hashlib
import shutil
import subprocess
import sys
from types import SimpleNamespace

import duckdb
import pytest

from conftest import CPU_TRACE, SAMPLE_TRACES, invoke_cli as invoke

pytest.importorskip("hta", reason="needs HTA: pip install 'tracekit[hta]'")

SAMPLES = sorted(path.name.split(".")[0] for path in SAMPLE_TRACES.glob("*.json.gz"))
HTA_TABLES = ("hta_kernel_breakdown", "hta_kernel_type_breakdown", "hta_temporal_breakdown",
              "hta_idle_time", "hta_launch_stats", "hta_trace_diff", "hta_runs")
# HTA's CUDA launch stats look only at these runtime calls: driver launches
# (cuLaunchKernelEx: nvjet GEMMs, cuDNN, Triton) are not in them.
HTA_LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync")


def rows(db, sql, params=None):
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def one(db, sql, params=None):
    return rows(db, sql, params)[0]


def file_hashes():
    paths = sorted(SAMPLE_TRACES.glob("*.json.gz")) + [CPU_TRACE]
    return {path.name: (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns) for path in paths}


@pytest.fixture(scope="module")
def hta_run(sample_db, tmp_path_factory):
    """`tracekit hta` then `tracekit hta diff naive naive_inplace` on the samples and the CPU trace."""
    from tracekit.store.database import connect
    from tracekit.ingest.loader import load_file

    db = tmp_path_factory.mktemp("hta") / "hta.duckdb"
    shutil.copyfile(sample_db, db)
    con = connect(db)
    assert load_file(con, CPU_TRACE).status == "loaded"
    con.close()
    before = file_hashes()
    run = invoke("hta", "--db", db)
    diff = invoke("hta", "diff", "naive", "naive_inplace", "--db", db)
    return SimpleNamespace(db=db, run=run, diff=diff, hashes_before=before)


def test_hta_stores_every_table_and_a_line_per_trace(hta_run):
    assert hta_run.run.exit_code == 0, hta_run.run.output
    tables = {r[0] for r in rows(hta_run.db, "SELECT table_name FROM information_schema.tables")}
    assert set(HTA_TABLES) <= tables
    out = hta_run.run.stdout
    assert "naive: kernel_breakdown 7 rows, temporal_breakdown 1 row, idle_time 3 rows, launch_stats 30 rows in " in out
    assert "sdpa_math: kernel_breakdown 13 rows, temporal_breakdown 1 row, idle_time 3 rows, launch_stats 120 rows in " in out
    assert sorted(r[0] for r in rows(hta_run.db, "SELECT DISTINCT trace FROM hta_kernel_breakdown")) == sorted(SAMPLES)
    assert sorted(r[0] for r in rows(hta_run.db, "SELECT DISTINCT trace FROM hta_temporal_breakdown")) == sorted(SAMPLES)
    assert one(hta_run.db, "SELECT count(*) FROM hta_runs WHERE test_trace IS NULL") == (9 * 5,)


def _ours(db, trace):
    """Per kernel name: (calls, total us) from tracekit's kernels, memcpy and memset views."""
    found = rows(db, """
        SELECT name, 'kernel' AS kind, count(*), sum(dur_us) FROM kernels WHERE trace = $t GROUP BY name
        UNION ALL SELECT name, 'memory', count(*), sum(dur_us) FROM memcpy WHERE trace = $t GROUP BY name
        UNION ALL SELECT name, 'memory', count(*), sum(dur_us) FROM memset WHERE trace = $t GROUP BY name""",
                 {"t": trace})
    return {name: (kind, calls, us) for name, kind, calls, us in found}


def _gpu_tagged_cpu_ops(db, trace):
    """CPU ops carrying a `stream` arg: torch.compile's Triton launch op does, and HTA counts any
    event with a stream as GPU work, so its breakdown adds the launch's CPU span to the kernel's."""
    return {name: (calls, us) for name, calls, us in rows(db, """
        SELECT name, count(*), sum(dur_us) FROM events
        WHERE trace = ? AND cat = 'cpu_op' AND json_extract(args, '$.stream') IS NOT NULL GROUP BY name""",
                                                          [trace])}


@pytest.mark.parametrize("trace", SAMPLES)
def test_kernel_count_and_time_equal_htas_kernel_breakdown(hta_run, trace):
    db = hta_run.db
    calls, us = one(db, "SELECT count(*), sum(dur_us) FROM kernels WHERE trace = ?", [trace])
    launch_calls, launch_us = one(db, """SELECT count(*), coalesce(sum(dur_us), 0) FROM events
        WHERE trace = ? AND cat = 'cpu_op' AND json_extract(args, '$.stream') IS NOT NULL""", [trace])
    hta_calls, hta_us = one(db, """SELECT sum(calls), sum(sum_us) FROM hta_kernel_breakdown
        WHERE trace = ? AND kernel_type <> 'MEMORY'""", [trace])
    assert calls > 0
    assert hta_calls == calls + launch_calls
    assert hta_us == pytest.approx(us + launch_us, rel=1e-4)
    # Per kernel name too; memcpy and memset are HTA's MEMORY kernels.
    extra = _gpu_tagged_cpu_ops(db, trace)
    expected = {}
    for name, (kind, n, total) in _ours(db, trace).items():
        more_n, more_us = extra.get(name, (0, 0.0))
        expected[name] = ("MEMORY" if kind == "memory" else "COMPUTATION", n + more_n, pytest.approx(total + more_us, rel=1e-4))
    got = {name: (kind, n, total) for name, kind, n, total in rows(
        db, "SELECT name, kernel_type, calls, sum_us FROM hta_kernel_breakdown WHERE trace = ?", [trace])}
    assert got == expected


def test_htas_breakdown_counts_the_triton_launch_op_of_flex_as_gpu_time(hta_run):
    # The one place HTA and tracekit part: 6 Triton launch ops (cpu_op with args.stream = 0).
    assert _gpu_tagged_cpu_ops(hta_run.db, "flex") == {"triton_tem_fused_flex_attention_0": (6, pytest.approx(262.313))}
    assert one(hta_run.db, "SELECT calls, round(sum_us, 3) FROM hta_kernel_breakdown WHERE trace = 'flex' "
                           "AND name = 'triton_tem_fused_flex_attention_0'") == (12, 1072.707)
    assert one(hta_run.db, "SELECT round(sum(dur_us), 3) FROM kernels WHERE trace = 'flex'") == (810.394,)


@pytest.mark.parametrize("trace", [name for name in SAMPLES if name != "flex"])
def test_temporal_breakdown_compute_time_is_the_kernel_time_on_one_stream(hta_run, trace):
    compute_us, kernel_time_us = one(hta_run.db, """SELECT compute_time_us, kernel_time_us
        FROM hta_temporal_breakdown WHERE trace = ?""", [trace])
    busy_us, span_us = one(hta_run.db, """
        WITH gpu AS (SELECT ts_us, dur_us, 1 AS is_kernel FROM kernels WHERE trace = $t
                     UNION ALL SELECT ts_us, dur_us, 0 FROM memcpy WHERE trace = $t
                     UNION ALL SELECT ts_us, dur_us, 0 FROM memset WHERE trace = $t)
        SELECT sum(dur_us) FILTER (WHERE is_kernel = 1), max(ts_us + dur_us) - min(ts_us) FROM gpu""",
                               {"t": trace})
    assert compute_us == pytest.approx(busy_us, rel=1e-4)
    assert kernel_time_us == pytest.approx(span_us, rel=1e-6)


@pytest.mark.parametrize("trace", SAMPLES)
def test_launch_stats_have_a_row_per_runtime_launch_hta_knows(hta_run, trace):
    expected = one(hta_run.db, f"""
        SELECT count(*) FROM runtime r WHERE r.trace = $t AND r.name IN {HTA_LAUNCH_CALLS}
          AND (r.correlation IN (SELECT correlation FROM kernels WHERE trace = $t)
               OR r.correlation IN (SELECT correlation FROM memcpy WHERE trace = $t)
               OR r.correlation IN (SELECT correlation FROM memset WHERE trace = $t))""", {"t": trace})[0]
    assert one(hta_run.db, "SELECT count(*) FROM hta_launch_stats WHERE trace = ?", [trace]) == (expected,)


def test_the_cpu_only_trace_reports_the_failed_analyses_and_stores_the_others(hta_run):
    db = hta_run.db
    err = hta_run.run.stderr
    assert "naive_cpu: temporal_breakdown failed: the trace has no GPU kernels (HTA raised IndexError" in err
    assert "naive_cpu: idle_time failed: the trace has no GPU kernels (HTA raised ValueError" in err
    assert "naive_cpu: kernel_breakdown 0 rows, launch_stats 0 rows in " in hta_run.run.stdout
    status = dict(rows(db, "SELECT analysis, status FROM hta_runs WHERE trace = 'naive_cpu'"))
    assert status == {"parse": "ok", "kernel_breakdown": "ok", "launch_stats": "ok",
                      "temporal_breakdown": "failed", "idle_time": "failed"}
    assert one(db, "SELECT count(*) FROM hta_temporal_breakdown WHERE trace = 'naive_cpu'") == (0,)


def test_the_diff_of_naive_and_in_place_shows_the_memcpy(hta_run):
    assert hta_run.diff.exit_code == 0, hta_run.diff.output
    assert "naive vs naive_inplace: trace_diff 42 rows in " in hta_run.diff.stdout
    memcpy = one(hta_run.db, """SELECT control_counts, test_counts, diff_counts, control_total_duration_us,
        counts_change_categories FROM hta_trace_diff
        WHERE trace = 'naive' AND test_trace = 'naive_inplace' AND name = 'Memcpy DtoD (Device -> Device)'""")
    ours = one(hta_run.db, "SELECT count(*), sum(dur_us) FROM memcpy WHERE trace = 'naive'")
    assert memcpy[:3] == (6, 0, -6) and memcpy[4] == "-"
    assert memcpy[3] == pytest.approx(ours[1], rel=1e-6) and ours[0] == 6
    # The op that causes it is gone too.
    assert one(hta_run.db, "SELECT control_counts, test_counts FROM hta_trace_diff "
                           "WHERE test_trace = 'naive_inplace' AND name = 'aten::masked_fill'") == (6, 0)


def test_the_users_trace_files_are_unchanged(hta_run):
    assert hta_run.run.exit_code == 0
    assert file_hashes() == hta_run.hashes_before


def test_a_rerun_replaces_that_traces_rows_only(hta_run):
    db = hta_run.db
    counts = "SELECT trace, count(*) FROM {} GROUP BY trace ORDER BY trace"
    before = {table: rows(db, counts.format(table)) for table in HTA_TABLES}
    again = invoke("hta", "--db", db, "--trace", "naive")
    assert again.exit_code == 0, again.output
    assert again.stdout.startswith("naive: kernel_breakdown 7 rows")
    assert {table: rows(db, counts.format(table)) for table in HTA_TABLES} == before


@pytest.mark.parametrize("damage", ["delete", "append"])
def test_a_trace_file_gone_or_changed_is_named_and_nothing_is_stored(fresh_db, tmp_path, damage):
    copy = tmp_path / "naive.json.gz"
    shutil.copyfile(SAMPLE_TRACES / "naive.json.gz", copy)
    assert invoke("load", copy, "--db", fresh_db).exit_code == 0
    if damage == "delete":
        copy.unlink()
    else:
        with open(copy, "ab") as f:
            f.write(b"\0")
    result = invoke("hta", "--db", fresh_db)
    assert result.exit_code == 1
    why = "was loaded from is gone (moved or deleted)" if damage == "delete" else "changed since it was loaded"
    assert f"naive: not analysed: {copy}: " in result.stderr and why in result.stderr
    assert "Error: nothing stored" in result.stderr and "Traceback" not in result.output
    assert rows(fresh_db, "SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'hta_%'") == []


def test_no_database_and_unknown_trace_are_one_line_errors(isolated_cwd, fresh_db):
    result = invoke("hta")
    assert result.exit_code == 1 and "no database: load traces first" in result.output
    assert not (isolated_cwd / "tracekit.duckdb").exists()
    assert invoke("load", SAMPLE_TRACES / "naive.json.gz", "--db", fresh_db).exit_code == 0
    unknown = invoke("hta", "--db", fresh_db, "--trace", "nope")
    assert unknown.exit_code == 1 and "no trace named 'nope'" in unknown.output
    diff = invoke("hta", "diff", "naive", "nope", "--db", fresh_db)
    assert diff.exit_code == 1 and "no trace named 'nope'" in diff.output
    assert rows(fresh_db, "SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'hta_%'") == []


def test_without_hta_installed_it_says_how_to_install_it(fresh_db, monkeypatch):
    assert invoke("load", SAMPLE_TRACES / "naive.json.gz", "--db", fresh_db).exit_code == 0
    monkeypatch.setitem(sys.modules, "hta.trace_analysis", None)  # makes the import fail
    result = invoke("hta", "--db", fresh_db)
    assert result.exit_code == 1
    assert "HTA is not installed" in result.output and "pip install 'tracekit[hta]'" in result.output


def test_query_and_load_never_import_hta_or_torch(sample_db, tmp_path):
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom tracekit.cli import cli\n"
        f"r = CliRunner().invoke(cli, ['query', 'summary', '--db', {str(sample_db)!r}])\n"
        "assert r.exit_code == 0, r.output\n"
        f"r = CliRunner().invoke(cli, ['load', {str(CPU_TRACE)!r}, '--db', {str(tmp_path / 'n.duckdb')!r}])\n"
        "assert r.exit_code == 0, r.output\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('hta', 'torch', 'plotly')))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
