"""Per-step figures on ordinary loops (issue [14]): H200 captures under a profiler schedule with no
per-step sync, where the GPU runs behind the CPU (tests/data/h200/loops, with each loop's truth
measured without the profiler in truth.csv)."""

import csv

import pytest

import duckdb

from conftest import TEST_DATA, invoke_cli

LOOPS = TEST_DATA / "h200" / "loops"
TRUTH = {row["loop"]: row for row in csv.DictReader(open(LOOPS / "truth.csv"))}
# The loops whose pace the GPU sets (GPT-2's training keeps the CPU about as busy): their busy time
# per step is the time per step CUDA events measure.
GPU_BOUND = ["infer_naive", "infer_inplace", "infer_naive_rerun", "infer_gpt2", "train_gpt2", "train_naive",
             "train_inplace", "train_stall", "train_no_stall", "copy_pinned"]


def db_rows(db, sql, params=()):
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def activities_by_step(db, trace):
    """{step: kernels, copies and fills the step owns} of a trace's ProfilerSteps."""
    return dict(db_rows(db, """
        SELECT step, count(*) FROM (SELECT trace_id, step FROM kernel_rows UNION ALL
                                    SELECT trace_id, step FROM transfer_rows)
        JOIN trace_files USING (trace_id)
        WHERE trace = ? AND step IS NOT NULL GROUP BY step""", [trace]))


@pytest.mark.parametrize("trace", ["infer_naive", "infer_inplace", "infer_naive_rerun", "train_naive",
                                   "train_inplace", "copy_pageable", "copy_pinned", "infer_gpt2"])
def test_each_step_owns_the_work_launched_in_it(loops_db, trace):
    """Every profiled step owns exactly what one step launches (counted in a synced profile),
    though work launched in the profiler's warmup ran inside the first steps' CPU spans."""
    expected = float(TRUTH[trace]["kernels_per_step"])
    assert activities_by_step(loops_db, trace) == {step: expected for step in range(3, 8)}


@pytest.mark.parametrize("trace", ["train_gpt2", "train_stall", "train_no_stall"])
def test_each_training_step_of_gpt2_owns_its_680_kernels(loops_db, trace):
    # The synced profile counts 681 a step: one more than a step launches without the sync.
    assert activities_by_step(loops_db, trace) == {step: 680 for step in range(3, 8)}
    assert float(TRUTH[trace]["kernels_per_step"]) == 681


@pytest.mark.parametrize("trace", GPU_BOUND)
def test_gpu_time_per_step_is_the_gpus_pace(loops_db, trace):
    import tracekit

    summary = \
        tracekit.query("summary", db=loops_db).set_index("trace")
    gpu_us, cpu_us = summary.loc[trace, "gpu_us_per_step"], summary.loc[trace, "cpu_us_per_step"]
    truth = float(TRUTH[trace]["step_us"])
    assert gpu_us == pytest.approx(truth, rel=0.03)
    if trace.startswith("infer"):
        assert cpu_us < 0.6 * truth  # the CPU runs far ahead: its spans say nothing of the GPU's time


def test_work_launched_in_the_warmup_takes_the_gpu_side_step_or_none(loops_db):
    """6 kernels of infer_naive were launched in the profiler's warmup and ran inside the active
    window (inside step 3's CPU span), before the GPU began step 3: they belong to no step."""
    rows = db_rows(loops_db, """
        SELECT k.step IS NULL, count(*) FROM kernel_rows k JOIN trace_files t USING (trace_id)
        WHERE t.trace = 'infer_naive' AND k.correlation NOT IN (SELECT correlation FROM runtime_rows r
                                                                WHERE r.trace_id = k.trace_id AND correlation IS NOT NULL)
        GROUP BY ALL""")
    assert dict(rows) == {True: 6}


def test_iterations_marked_with_record_function_are_the_steps_of_a_trace_without_profiler_steps(loops_db):
    rows = db_rows(loops_db, """SELECT step, source, round(dur_us) FROM steps s JOIN trace_files t USING (trace)
                                WHERE t.trace = 'iterations_no_profiler_step' ORDER BY step""")
    assert [row[:2] for row in rows] == [(step, "inferred") for step in range(6)]
    assert rows[0][2] == 783230  # iteration_0: cuDNN builds its plan
    import tracekit

    summary = tracekit.query("summary", db=loops_db).set_index("trace").loc["iterations_no_profiler_step"]
    assert (summary["steps"], summary["steps_averaged"]) == (5, "1-5 (inferred)")
    assert summary["gpu_us_per_step"] == pytest.approx(float(TRUTH["iterations_no_profiler_step"]["step_us"]),
                                                       rel=0.03)
    cold = tracekit.findings(db=loops_db, trace="iterations_no_profiler_step", rule="cold_start")
    assert list(cold["title"]) == ["The first step's CPU span lasts 783.2 ms against 0.089 ms in a steady one: cuDNN"]


def test_a_stub_last_step_is_not_averaged(loops_db):
    import tracekit

    summary = tracekit.query("summary", db=loops_db).set_index("trace").loc["stub_last_step"]
    assert (summary["steps"], summary["steps_averaged"], summary["kernels_per_step"]) == (3, "4-6", 7)
    assert summary["gpu_us_per_step"] == pytest.approx(float(TRUTH["stub_last_step"]["step_us"]), rel=0.03)


@pytest.fixture(scope="module")
def unmarked_db(tmp_path_factory):
    """iterations_no_profiler_step without its iteration_N ranges: a trace with no steps at all."""
    import gzip
    import json

    folder = tmp_path_factory.mktemp("unmarked")
    trace = json.loads(gzip.decompress((LOOPS / "iterations_no_profiler_step.json.gz").read_bytes()))
    trace["traceEvents"] = [e for e in trace["traceEvents"]
                            if not (e.get("cat") == "user_annotation" and e.get("name", "").startswith("iteration_"))]
    (folder / "unmarked.json").write_text(json.dumps(trace))
    assert invoke_cli("load", folder / "unmarked.json", "--db", folder / "t.duckdb").exit_code == 0
    return folder / "t.duckdb"


def test_without_steps_cold_start_weighs_an_ops_first_call_and_nothing_is_per_step(unmarked_db):
    import tracekit

    summary = tracekit.query("summary", db=unmarked_db).set_index("trace").loc["unmarked"]
    assert (summary["steps"], summary["steps_averaged"]) == (1, "whole trace")
    found = tracekit.findings(db=unmarked_db).set_index("rule")
    assert found.loc["cold_start", "title"] == ("The first call of aten::_scaled_dot_product_cudnn_attention takes "
                                                "782.3 ms against 0.046 ms for its later calls: cuDNN")
    idle = found.loc[["gpu_idle"]]
    assert all("per step" not in title and "without steps" in title for title in idle["title"])
    assert idle["saving_us_per_step"].isna().all() and idle["estimate_us_per_step"].isna().all()


def test_a_plan_time_the_trace_does_not_hold_is_null(loops_db):
    """Under a schedule the trace's first cuDNN call is not the process's: its plan was built
    before the window (GPT-2's first calls cost 0.09-0.18 ms against 0.07-0.16 ms steady, some
    less): unknown, never a plan time of noise or below 0."""
    import tracekit

    plans = tracekit.query("cudnn_plan_time", db=loops_db).set_index("trace")
    assert plans.loc[["infer_gpt2", "train_gpt2", "train_stall", "train_no_stall"], "plan_ms"].isna().all()
    assert plans.loc["iterations_no_profiler_step", "plan_ms"] == pytest.approx(782.24, abs=0.01)
