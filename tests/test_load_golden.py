"""Golden answers on the real H200 sample traces, and the loader's accounting against the raw JSON."""

from decimal import Decimal

import pytest

from conftest import SAMPLE_TRACES, read_trace
from tracekit.analysis.named_queries import run_named, run_sql
from tracekit.outputs.render import records

VARIANTS = ["flex", "naive", "naive_inplace", "sdpa_cudnn", "sdpa_default", "sdpa_efficient",
            "sdpa_flash", "sdpa_math"]


def rows(con, name, **params):
    frame = run_named(con, name, {k: str(v) for k, v in params.items()})
    return records(frame)


def by_trace(records):
    return {r["trace"]: r for r in records}


def test_every_sample_trace_is_loaded_with_its_metadata(sample_con):
    traces = run_sql(sample_con, "SELECT trace, variant, device_name, compute_capability FROM traces ORDER BY trace")
    assert traces["trace"].tolist() == VARIANTS
    assert traces["variant"].tolist() == VARIANTS
    assert set(traces["device_name"]) == {"NVIDIA H200"}
    assert set(traces["compute_capability"]) == {"9.0"}


@pytest.mark.parametrize("variant", VARIANTS)
def test_event_and_kernel_accounting_matches_the_raw_json(sample_con, variant):
    raw = read_trace(SAMPLE_TRACES / f"{variant}.json.gz")["traceEvents"]
    kernels = [e for e in raw if e.get("cat") == "kernel"]
    raw_kernel_ns = sum(int(Decimal(str(e["dur"])) * 1000) for e in kernels)
    loaded = run_sql(sample_con, "SELECT (SELECT events FROM traces WHERE trace = $t) AS events, "
                     "(SELECT count(*) FROM events WHERE trace = $t) AS event_rows, "
                     "(SELECT count(*) FROM kernels WHERE trace = $t) AS kernels, "
                     "(SELECT sum(k.dur_ns) FROM kernel_rows k JOIN trace_files f USING (trace_id) "
                     " WHERE f.trace = $t) AS kernel_ns", {"t": variant}).iloc[0]
    assert loaded["events"] == loaded["event_rows"] == len(raw)
    assert loaded["kernels"] == len(kernels)
    assert loaded["kernel_ns"] == raw_kernel_ns


def test_timestamps_keep_their_nanosecond_fraction(sample_con):
    raw = read_trace(SAMPLE_TRACES / "naive.json.gz")["traceEvents"]
    step0 = next(e for e in raw if e.get("name") == "ProfilerStep#0")
    ts_ns = run_sql(sample_con, "SELECT e.ts_ns FROM event_rows e JOIN trace_files f USING (trace_id) "
                    "WHERE f.trace = 'naive' AND e.name = 'ProfilerStep#0'").iloc[0, 0]
    assert ts_ns == int(Decimal(str(step0["ts"])) * 1000) == 5405973117101569


def test_naive_memcpy_is_one_512_mib_dtod_per_step_from_masked_fill(sample_con):
    naive = [r for r in rows(sample_con, "memcpy") if r["trace"] == "naive"]
    assert len(naive) == 1
    (row,) = naive
    assert row["kind"] == "DtoD"
    assert row["caused_by"] == "aten::masked_fill → aten::clone → aten::copy_"
    assert row["memcpy_count"] == 6
    assert row["memcpy_bytes"] == 6 * 536870912
    assert row["steps_with_memcpy"] == 6
    assert 1400 < row["memcpy_us"] < 1700  # ~255 us each on the H200


def test_in_place_and_sdpa_variants_copy_nothing(sample_con):
    memcpy = by_trace(rows(sample_con, "memcpy"))
    for variant in ["naive_inplace", "sdpa_math", "sdpa_efficient", "sdpa_flash", "sdpa_cudnn", "sdpa_default"]:
        assert memcpy[variant]["memcpy_count"] == 0
        assert memcpy[variant]["caused_by"] is None


def test_gemm_classes_tensor_cores_for_naive_simt_for_math(sample_con):
    gemms = by_trace(rows(sample_con, "gemm_classes"))
    assert set(gemms) == {"naive", "naive_inplace", "sdpa_math"}
    for variant in ["naive", "naive_inplace"]:
        assert (gemms[variant]["tensor_core_gemms"], gemms[variant]["simt_gemms"]) == (12, 0)
        assert gemms[variant]["tensor_core_pct"] == 100.0
    math = gemms["sdpa_math"]
    assert (math["tensor_core_gemms"], math["simt_gemms"]) == (0, 12)
    assert math["tensor_core_pct"] == 0.0
    assert math["simt_kernels"].count("_ffma_") == 2


def test_kernels_per_step_match_the_article(sample_con):
    summary = by_trace(rows(sample_con, "summary"))
    per_step = {t: r["kernels_per_step"] for t, r in summary.items()}
    assert per_step == {"naive": 5, "naive_inplace": 5, "sdpa_math": 20, "sdpa_efficient": 1,
                        "sdpa_flash": 1, "sdpa_cudnn": 1, "sdpa_default": 1, "flex": 1}
    assert all(r["steps"] == 5 for r in summary.values())
    assert summary["naive"]["memcpy_per_step"] == 1
    assert summary["naive"]["memcpy_bytes_per_step"] == 536870912
    assert summary["naive"]["speedup_vs_naive"] == 1.0
    assert summary["sdpa_cudnn"]["speedup_vs_naive"] > 20


def test_summary_is_sorted_by_gpu_time_per_step(sample_con):
    order = [r["trace"] for r in rows(sample_con, "summary")]
    assert order[-1] == "sdpa_math" and order[-2] == "naive"
    assert order.index("sdpa_flash") < order.index("sdpa_efficient") < order.index("naive_inplace")


def test_flash_kernel_occupancy(sample_con):
    (flash,) = rows(sample_con, "occupancy", trace="sdpa_flash")
    assert flash["kernel"].startswith("void pytorch_flash::flash_fwd_kernel<")
    assert flash["calls"] == 6
    assert flash["est_occupancy_pct"] == 13.0
    assert flash["registers_per_thread"] == 255
    assert flash["shared_memory_bytes"] == 49152
    assert flash["kernel_class"] == "attention"


def test_cudnn_first_call_builds_its_plan(sample_con):
    plans = by_trace(rows(sample_con, "cudnn_plan_time"))
    assert set(plans) == {"sdpa_cudnn", "sdpa_default"}  # default dispatched to cuDNN on the H200
    cudnn = plans["sdpa_cudnn"]
    assert cudnn["calls"] == 6 and cudnn["first_call_step"] == 0
    assert cudnn["plan_ms"] > 100
    assert cudnn["first_call_ms"] == pytest.approx(869.337529)
    assert cudnn["steady_call_ms"] < 1
    # The default run reused the plan the pinned run had cached in the same process.
    assert plans["sdpa_default"]["plan_ms"] < 5


def test_every_kernel_is_attributed_to_an_op_a_step_and_a_class(sample_con):
    missing = run_sql(sample_con, "SELECT count(*) FILTER (WHERE cpu_op IS NULL) AS no_op, "
                      "count(*) FILTER (WHERE step IS NULL) AS no_step, "
                      "count(*) FILTER (WHERE kernel_class IS NULL) AS no_class, count(*) AS n FROM kernels").iloc[0]
    assert (missing["no_op"], missing["no_step"], missing["no_class"]) == (0, 0, 0)
    assert missing["n"] == 30 + 30 + 120 + 5 * 6
    assert rows(sample_con, "unclassified") == []


def test_cpu_op_tree(sample_con):
    chain = run_sql(sample_con, "SELECT name, depth, parent FROM cpu_ops WHERE trace = 'naive' AND step = 1 "
                    "AND name IN ('ProfilerStep#1', 'tracekit.forward.naive', 'aten::masked_fill', "
                    "'aten::clone', 'aten::copy_') ORDER BY depth")
    chain = records(chain)
    assert [(r["name"], r["depth"], r["parent"]) for r in chain] == [
        ("ProfilerStep#1", 0, None),
        ("tracekit.forward.naive", 1, "ProfilerStep#1"),
        ("aten::masked_fill", 2, "tracekit.forward.naive"),
        ("aten::clone", 3, "aten::masked_fill"),
        ("aten::copy_", 4, "aten::clone"),
    ]


def test_steps_and_runtime_launches(sample_con):
    steps = run_sql(sample_con, "SELECT trace, list(step ORDER BY step) AS s FROM steps GROUP BY trace")
    assert all(list(s) == [0, 1, 2, 3, 4, 5] for s in steps["s"])
    launches = run_sql(sample_con, "SELECT count(*) FROM runtime r JOIN kernels k USING (trace, correlation) "
                       "WHERE r.trace = 'sdpa_math'").iloc[0, 0]
    assert launches == 120


def test_top_kernels_limit_and_shares(sample_con):
    top = rows(sample_con, "top_kernels", trace="naive", limit=2)
    assert [r["rank"] for r in top] == [1, 2]
    assert top[0]["kernel"].startswith("void (anonymous namespace)::softmax_warp_forward")
    everything = rows(sample_con, "top_kernels", trace="naive", limit=100)
    assert sum(r["pct_of_kernel_time"] for r in everything) == pytest.approx(100.0)
