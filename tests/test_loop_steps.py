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


@pytest.fixture(scope="module")
def loops_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("loops") / "loops.duckdb"
    result = invoke_cli("load", LOOPS, "--db", db)
    assert result.exit_code == 0, result.output
    return db


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
