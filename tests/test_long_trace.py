"""tests/data/h100/long: a real training trace of 135 MB (GPT-2 from its config, 6 layers, AdamW,
55 profiled steps on an H100, no per-step sync; capture/big_training_trace.py), the size issue
[18] measures load speed on (benchmarks/run.py --real). Its per-step figures hold over a long
GPU-bound loop: each steady step as the GPU ran it, against the loop's own time without the
profiler (truth.json: CUDA events around 30 free-running steps)."""

import json

import pytest

from conftest import TEST_DATA, cli_loaded, db_rows

LONG = TEST_DATA / "h100" / "long"


@pytest.fixture(scope="module")
def long_db(tmp_path_factory):
    return cli_loaded(tmp_path_factory, "long", LONG / "train_gpt2_long.json.gz")


def test_the_long_trace_loads_every_event(long_db):
    events, kernels = db_rows(long_db, "SELECT (SELECT count(*) FROM event_rows), (SELECT count(*) FROM kernel_rows)")[0]
    assert (events, kernels) == (403_352, 34_226)


def test_each_steady_step_runs_at_the_loops_own_pace(long_db):
    truth = json.loads((LONG / "truth.json").read_text())
    steps, mean_us, low_us, high_us = db_rows(
        long_db, "SELECT count(*), avg(step_us), min(step_us), max(step_us) FROM step_bounds JOIN steady_steps USING (trace, step)")[0]
    # 55 active steps: the first is left out of the steady ones
    assert steps == truth["schedule"]["active"] - 1 == 54
    # GPU-bound: each step as the GPU ran it, within 0.1% of the unprofiled 46,974 µs
    assert mean_us == pytest.approx(truth["step_us"], rel=1e-3)
    assert high_us - low_us < 100


def test_its_gpu_work_per_step_is_the_steps_kernels_and_fills(long_db):
    # truth.json's 681 GPU activities a step were counted in a profile that synchronised every step
    kernels, memsets, memcpys = db_rows(long_db, """
        SELECT (SELECT count(*) FROM kernels JOIN steady_steps USING (trace, step)) / 54,
               (SELECT count(*) FROM memset JOIN steady_steps USING (trace, step)) / 54,
               (SELECT count(*) FROM memcpy JOIN steady_steps USING (trace, step)) / 54""")[0]
    assert (kernels, memsets, memcpys) == (615, 65, 0)
