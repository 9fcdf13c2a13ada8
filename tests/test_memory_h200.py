"""memory_steps against torch.cuda.max_memory_allocated on the H200 (tests/data/h200/memory, see its
README): capture/memory_check.py profiled each variant with profile_memory=True, then ran the same
calls outside the profiler and wrote measured.csv. Every steady step's peak, its peak over the step's
start and its peak reserved must be the measured ones to the byte."""

import csv
import gzip
import json

import pytest

from conftest import TEST_DATA, db_rows, invoke_cli

H200_MEMORY = TEST_DATA / "h200" / "memory"
VARIANTS = ["naive", "naive_inplace", "naive_mul_inplace", "sdpa_flash"]


@pytest.fixture(scope="module")
def h200_memory_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("h200_memory") / "memory.duckdb"
    result = invoke_cli("load", *[H200_MEMORY / f"{name}.json.gz" for name in VARIANTS], "--db", db)
    assert result.exit_code == 0, result.output
    return db


def _measured():
    rows = csv.DictReader(open(H200_MEMORY / "measured.csv"))
    return {(row["trace"], int(row["step"])): row for row in rows}


def test_every_steady_step_peaks_where_max_memory_allocated_says(h200_memory_db):
    measured = _measured()
    steps = db_rows(h200_memory_db, "SELECT trace, step, peak_allocated_bytes, peak_over_start_bytes, "
                                    "peak_reserved_bytes FROM memory_steps WHERE device_type = 'cuda' AND step >= 1")
    assert sorted({trace for trace, *_ in steps}) == VARIANTS
    assert len(steps) == 5 * len(VARIANTS)
    for trace, step, peak, over_start, reserved in steps:
        truth = measured[(trace, step)]
        assert peak == int(truth["max_memory_allocated_bytes"]), (trace, step)
        assert over_start == int(truth["max_memory_allocated_bytes"]) - int(truth["start_allocated_bytes"]), (trace, step)
        assert reserved == int(truth["max_memory_reserved_bytes"]), (trace, step)


def test_no_in_place_change_lowers_the_peak_on_the_h200(h200_memory_db):
    """Counted by hand from the shapes: two bf16 score matrices (B*H*S*S each) and the output (B*H*S*D)
    for every naive variant; the fused kernel holds its output and its fp32 logsumexp (B*H*S)."""
    meta = json.loads(gzip.decompress((H200_MEMORY / "naive.json.gz").read_bytes()))["tracekit"]
    assert (meta["dtype"], meta["device_name"]) == ("bf16", "NVIDIA H200")
    bf16, fp32 = 2, 4
    b, h, s, d = meta["batch"], meta["heads"], meta["seq_len"], meta["head_dim"]
    score, out = b * h * s * s * bf16, b * h * s * d * bf16
    peaks = dict(db_rows(h200_memory_db, "SELECT trace, max(peak_over_start_bytes) FROM memory_steps "
                                         "WHERE device_type = 'cuda' AND step >= 1 GROUP BY trace"))
    for variant in ("naive", "naive_inplace", "naive_mul_inplace"):
        assert peaks[variant] == 2 * score + out == 1_090_519_040
    # and a kilobyte of small blocks beside them (the live list names the two big ones)
    assert out + b * h * s * fp32 < peaks["sdpa_flash"] == 17_302_528 < out + b * h * s * fp32 + 4096
