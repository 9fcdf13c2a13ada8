"""Traces other people recorded on other GPUs (tests/data/foreign/README.md says where from)."""

import pytest

from conftest import TEST_DATA
from tracekit.database import connect
from tracekit.loader import load_file
from tracekit.named_queries import run_named, run_sql
from tracekit.render import records

FOREIGN = TEST_DATA / "foreign"


@pytest.fixture(scope="module")
def foreign_con(tmp_path_factory):
    path = tmp_path_factory.mktemp("foreign") / "foreign.duckdb"
    con = connect(path)
    for trace in sorted(FOREIGN.glob("*.json.gz")):
        assert load_file(con, trace).status == "loaded", trace
    con.close()
    con = connect(path, read_only=True)
    yield con
    con.close()


def kernel_table(con, trace):
    return records(run_sql(con, "SELECT name, kernel_class, gemm_class, count(*) AS n, any_value(cpu_op) AS op "
                                "FROM kernels WHERE trace = $t GROUP BY ALL ORDER BY name", {"t": trace}))


def test_every_foreign_trace_loads_with_every_event(foreign_con):
    loaded = records(run_sql(foreign_con, "SELECT trace, device_name, compute_capability, events FROM traces "
                                          "ORDER BY trace"))
    assert loaded == [
        {"trace": "a100_sxm4_80gb_fp16_gemm_ampere", "device_name": "NVIDIA A100-SXM4-80GB",
         "compute_capability": "8.0", "events": 104},
        {"trace": "a100_sxm4_80gb_fp16_gemm_cutlass", "device_name": "NVIDIA A100-SXM4-80GB",
         "compute_capability": "8.0", "events": 104},
        {"trace": "amd_mi300_gfx942_bf16_gemm", "device_name": None, "compute_capability": None, "events": 275},
        {"trace": "cpu_only_linear_train_step", "device_name": None, "compute_capability": None, "events": 126},
        {"trace": "v100_dgxs_mlp_train_step", "device_name": None, "compute_capability": None, "events": 340},
    ]


@pytest.mark.parametrize("trace, kernel", [
    ("a100_sxm4_80gb_fp16_gemm_ampere", "ampere_fp16_s16816gemm_fp16_128x256_ldg8_f2f_stages_64x3_nn"),
    ("a100_sxm4_80gb_fp16_gemm_cutlass",
     "void cutlass::Kernel2<cutlass_80_tensorop_f16_s16816gemm_relu_f16_128x256_32x3_nn_align8>"
     "(cutlass_80_tensorop_f16_s16816gemm_relu_f16_128x256_32x3_nn_align8::Params)"),
])
def test_ampere_fp16_gemms_run_on_tensor_cores(foreign_con, trace, kernel):
    assert kernel_table(foreign_con, trace) == [
        {"name": kernel, "kernel_class": "gemm", "gemm_class": "tensor_core", "n": 5, "op": "aten::mm"}]
    (gemms,) = records(run_named(foreign_con, "gemm_classes", {"trace": trace}))
    assert (gemms["tensor_core_gemms"], gemms["simt_gemms"], gemms["tensor_core_pct"]) == (5, 0, 100.0)


def test_the_cutlass_gemm_is_linked_through_a_driver_launch(foreign_con):
    launches = records(run_sql(foreign_con, "SELECT r.name, r.cpu_op FROM runtime r JOIN kernels k "
                                            "USING (trace, correlation) WHERE r.trace = 'a100_sxm4_80gb_fp16_gemm_cutlass'"))
    assert {(r["name"], r["cpu_op"]) for r in launches} == {("cuLaunchKernel", "aten::mm")}


def test_volta_fp32_gemms_are_simt_and_old_category_names_load(foreign_con):
    trace = "v100_dgxs_mlp_train_step"
    table = {r["name"].split("<")[0]: r for r in kernel_table(foreign_con, trace)}
    assert table["volta_sgemm_128x32_nt"]["gemm_class"] == "simt"
    assert table["void gemmSN_TN_kernel_64addr"]["gemm_class"] == "simt"
    (gemms,) = records(run_named(foreign_con, "gemm_classes", {"trace": trace}))
    assert (gemms["tensor_core_gemms"], gemms["simt_gemms"]) == (0, 5)
    counts = records(run_sql(foreign_con, "SELECT count(*) AS kernels, count(cpu_op) AS with_op, count(step) AS "
                                          "with_step FROM kernels WHERE trace = $t", {"t": trace}))
    assert counts == [{"kernels": 30, "with_op": 30, "with_step": 30}]
    (copies,) = records(run_named(foreign_con, "memcpy", {"trace": trace}))
    assert (copies["kind"], copies["memcpy_count"], copies["memcpy_bytes"]) == ("HtoD", 2, 768)
    assert copies["caused_by"].endswith("aten::copy_")


def test_amd_kernels_link_to_their_op_without_a_correlation_id(foreign_con):
    table = kernel_table(foreign_con, "amd_mi300_gfx942_bf16_gemm")
    assert [(r["kernel_class"], r["gemm_class"], r["n"], r["op"]) for r in table] == [
        ("gemm", "tensor_core", 10, "aten::mm"),  # Cijk_..._MI16x16x16x1_...: matrix cores
        ("reduction", None, 10, "aten::mm"),      # Cijk_B_PostGSU2: sums split-GEMM partials
    ]
    assert records(run_named(foreign_con, "unclassified")) == []


def test_a_foreign_cpu_only_trace(foreign_con):
    (summary,) = records(run_named(foreign_con, "summary", {"trace": "cpu_only_linear_train_step"}))
    assert summary["kernels_per_step"] == 0 and summary["steps"] == 1
    ops = run_sql(foreign_con, "SELECT count(*) FROM cpu_ops WHERE trace = 'cpu_only_linear_train_step'").iloc[0, 0]
    assert ops > 0
