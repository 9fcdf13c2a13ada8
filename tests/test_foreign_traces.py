"""Traces other people recorded on other GPUs (tests/data/foreign/README.md says where from)."""

import pytest

from tracekit.store.database import connect
from tracekit.analysis.named_queries import run_named, run_sql
from tracekit.outputs.render import records


@pytest.fixture(scope="module")
def foreign_con(foreign_db):
    con = connect(foreign_db, read_only=True)
    yield con
    con.close()


def kernel_table(con, trace):
    return records(run_sql(con, "SELECT name, kernel_class, gemm_class, count(*) AS n, any_value(cpu_op) AS op "
                                "FROM kernels WHERE trace = $t GROUP BY ALL ORDER BY name", {"t": trace}))


# Every foreign trace, with what its header (or, lacking one, its events) says of the device.
EXPECTED = {
    "a100_sxm4_80gb_fp16_gemm_ampere": ("NVIDIA A100-SXM4-80GB", "nvidia", "sm_80", "8.0", 104),
    "a100_sxm4_80gb_fp16_gemm_cutlass": ("NVIDIA A100-SXM4-80GB", "nvidia", "sm_80", "8.0", 104),
    "amd_mi300_gfx942_bf16_gemm": (None, "amd", "gfx942", None, 275),
    "cpu_only_linear_train_step": (None, None, None, None, 126),
    "l4_square_memcpy_two_steps": ("NVIDIA L4", "nvidia", "sm_89", "8.9", 109),
    "old_schema_operator_only_no_gpu_events": (None, None, None, None, 182),
    "rtx4060_runtime_without_gpu_events": ("NVIDIA GeForce RTX 4060", "nvidia", "sm_89", "8.9", 97),
    "rtx4090_tp2_rank0_nccl_allreduce": ("NVIDIA GeForce RTX 4090", "nvidia", "sm_89", "8.9", 328),
    "rtx4090_tp2_rank1_nccl_allreduce": ("NVIDIA GeForce RTX 4090", "nvidia", "sm_89", "8.9", 330),
    "rtx5080_cuda_graph_replay_manual_capture": ("NVIDIA GeForce RTX 5080", "nvidia", "sm_120", "12.0", 2577),
    # No deviceProperties: the CUDA calls say NVIDIA, nothing says which GPU.
    "sm80_backward_thread_extid_eq_correlation": (None, "nvidia", None, None, 7),
    # 2021's Kineto writes computeProperties.
    "t4_resnet50_train": ("Tesla T4", "nvidia", "sm_75", "7.5", 6146),
    "v100_dgxs_mlp_train_step": ("Tesla V100-DGXS-32GB", "nvidia", "sm_70", "7.0", 340),
    "windows_cnn_cpu_ops_cuda_memory_events": (None, None, None, None, 81),
}


def test_every_foreign_trace_loads_with_every_event(foreign_con):
    loaded = {r["trace"]: (r["device_name"], r["vendor"], r["gpu_arch"], r["compute_capability"], r["events"])
              for r in records(run_sql(foreign_con, "SELECT * FROM traces"))}
    assert loaded == EXPECTED


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


def test_a_kernel_whose_external_id_is_its_correlation_belongs_to_the_op_that_launched_it(foreign_con):
    # HTA's backward-thread trace: kernel and launch carry External id = correlation = 2131433;
    # the launch runs inside aten::mm (External id 67247) on the autograd thread.
    (kernel,) = records(run_sql(foreign_con, "SELECT external_id, correlation, cpu_op, cpu_op_path, step FROM kernels"
                                             " WHERE trace = 'sm80_backward_thread_extid_eq_correlation'"))
    assert kernel == {"external_id": 2131433, "correlation": 2131433, "cpu_op": "aten::mm", "step": 552,
                      "cpu_op_path": "autograd::engine::evaluate_function: AddmmBackward0 → AddmmBackward0 → aten::mm"}


def test_calls_whose_external_id_names_no_enclosing_op_get_none(foreign_con):
    # RTX 4090 rank 1: cudaEventQuery / cudaDeviceSynchronize carry External id = correlation on a
    # thread with no ops at all; the NCCL kernel is launched under record_param_comms.
    calls = records(run_sql(foreign_con, "SELECT correlation, cpu_op FROM runtime WHERE trace = $t"
                                         " AND name IN ('cudaEventQuery', 'cudaDeviceSynchronize') ORDER BY correlation",
                            {"t": "rtx4090_tp2_rank1_nccl_allreduce"}))
    assert calls == [{"correlation": c, "cpu_op": None} for c in (1333, 1343, 1347, 1351, 1432)]
    (nccl,) = records(run_sql(foreign_con, "SELECT stream, cpu_op_path FROM kernels WHERE trace = $t AND name LIKE 'nccl%'",
                              {"t": "rtx4090_tp2_rank1_nccl_allreduce"}))
    assert nccl == {"stream": 17, "cpu_op_path": "Redistribute → _c10d_functional::all_reduce → c10d::allreduce_"
                                                 " → record_param_comms"}


def test_busy_time_per_step_on_the_l4_trace(foreign_con):
    # One pow kernel and one 400 MB pageable HtoD copy per step, back to back on stream 7.
    busy = records(run_sql(foreign_con, "SELECT b.step, b.busy_us, b.kernel_sum_us, b.memcpy_us, s.dur_us AS step_us"
                                        " FROM gpu_busy b JOIN steps s USING (trace, step) WHERE trace = $t ORDER BY step",
                           {"t": "l4_square_memcpy_two_steps"}))
    assert [(b["step"], b["busy_us"], b["kernel_sum_us"], b["memcpy_us"]) for b in busy] == [
        (2, 33794.736, 3432.069, 30362.667), (3, 33763.984, 3415.908, 30348.076)]
    assert all(b["busy_us"] <= b["step_us"] for b in busy)
    copies = records(run_named(foreign_con, "memcpy", {"trace": "l4_square_memcpy_two_steps"}))
    assert [(c["kind"], c["caused_by"], c["memcpy_count"], c["memcpy_bytes"]) for c in copies] == [
        ("HtoD", "aten::to → aten::_to_copy → aten::copy_", 2, 800_000_000)]


def test_launches_whose_gpu_side_was_lost_are_flagged(foreign_con):
    anomalies = records(run_named(foreign_con, "anomalies", {"trace": "rtx4060_runtime_without_gpu_events"}))
    assert [(a["oddity"], a["events"]) for a in anomalies] == [("launches but no GPU events", 2)]
    # what the lost GPU events held is unknown, not none: NULL (it was 0); a CPU-only trace's is 0
    summary = {row["trace"]: row for row in records(run_named(foreign_con, "summary"))}
    lost, cpu = summary["rtx4060_runtime_without_gpu_events"], summary["cpu_only_linear_train_step"]
    assert [lost[c] for c in ("kernels_per_step", "memcpy_per_step", "memcpy_bytes_per_step", "gpu_us_per_step")] == \
        [None] * 4
    assert [cpu[c] for c in ("kernels_per_step", "memcpy_per_step", "memcpy_bytes_per_step")] == [0, 0, 0]
    # and the critical path cannot say what bound a step whose GPU work it cannot see (it said cpu-bound, 80.7%)
    bounds = foreign_con.execute("SELECT step, kernel_us, memcpy_us, bound, bound_pct, cpu_us > 0 FROM step_bounds "
                                 "WHERE trace = 'rtx4060_runtime_without_gpu_events' ORDER BY step").fetchall()
    assert bounds == [(2, None, None, None, None, True), (3, None, None, None, None, True)]


def test_operators_written_before_their_parents_nest_by_time(foreign_con):
    # 2021's schema, children written before their parents: nesting comes from the spans alone.
    depths = run_sql(foreign_con, "SELECT depth, count(*) AS n FROM cpu_ops WHERE trace = $t GROUP BY depth ORDER BY depth",
                     {"t": "old_schema_operator_only_no_gpu_events"})
    assert list(depths.itertuples(index=False, name=None)) == [(0, 30), (1, 50), (2, 20), (3, 50), (4, 10)]
    escaped = run_sql(foreign_con, "SELECT count(*) AS n FROM cpu_ops c JOIN cpu_ops p ON p.trace = c.trace"
                                   " AND p.op_id = c.parent_id WHERE c.trace = $t AND NOT (p.ts_us <= c.ts_us"
                                   " AND p.ts_us + p.dur_us >= c.ts_us + c.dur_us)",
                      {"t": "old_schema_operator_only_no_gpu_events"})
    assert escaped.iloc[0]["n"] == 0


def test_kernels_of_a_cuda_graph_replay_belong_to_the_replay_range(foreign_con):
    # RTX 5080: each cudaGraphLaunch runs under a `## graph.replay ##` record_function, and the
    # graph's kernels carry the launch's correlation id. 69 kernels' launches are not in the trace.
    launches = records(run_sql(foreign_con, "SELECT cpu_op, count(*) AS n FROM runtime WHERE trace = $t"
                                            " AND name = 'cudaGraphLaunch' GROUP BY cpu_op",
                               {"t": "rtx5080_cuda_graph_replay_manual_capture"}))
    assert launches == [{"cpu_op": "## graph.replay ##", "n": 7}]
    (kernels,) = records(run_sql(foreign_con, "SELECT count(*) AS n, count(*) FILTER (WHERE cpu_op = '## graph.replay ##')"
                                              " AS under_replay, count(*) FILTER (WHERE cpu_op IS NULL) AS unlaunched"
                                              " FROM kernels WHERE trace = $t",
                                 {"t": "rtx5080_cuda_graph_replay_manual_capture"}))
    assert kernels == {"n": 321, "under_replay": 238, "unlaunched": 69}
    orphans = run_sql(foreign_con, "SELECT count(*) AS n FROM kernels k WHERE trace = $t AND cpu_op IS NULL AND EXISTS"
                                   " (SELECT 1 FROM runtime r WHERE r.trace = k.trace AND r.correlation = k.correlation)",
                      {"t": "rtx5080_cuda_graph_replay_manual_capture"})
    assert orphans.iloc[0]["n"] == 0  # NULL only where the trace has no launch to go by
    # They, and 4 memsets and 2 memcpys of the same replays, are flagged.
    anomalies = records(run_named(foreign_con, "anomalies", {"trace": "rtx5080_cuda_graph_replay_manual_capture"}))
    assert [(a["oddity"], a["events"]) for a in anomalies] == [("GPU events without their launch", 75)]


def test_resnet50_convolutions_are_their_own_class_and_belong_to_their_conv_ops(foreign_con):
    # T4 (sm_75) training in FP32: cuDNN convolutions on CUDA cores, under the convolution ops.
    classes = records(run_sql(foreign_con, "SELECT kernel_class, math_unit, count(*) AS n FROM kernels WHERE trace = $t"
                                           " AND kernel_class IN ('convolution', 'gemm') GROUP BY ALL ORDER BY ALL",
                              {"t": "t4_resnet50_train"}))
    assert classes == [{"kernel_class": "convolution", "math_unit": "simt", "n": 190},
                       {"kernel_class": "convolution", "math_unit": None, "n": 48},
                       {"kernel_class": "gemm", "math_unit": "simt", "n": 62}]
    ops = run_sql(foreign_con, "SELECT DISTINCT cpu_op FROM kernels WHERE trace = $t AND kernel_class = 'convolution'",
                  {"t": "t4_resnet50_train"})
    assert set(ops["cpu_op"]) == {"aten::cudnn_convolution", "aten::convolution_backward"}
    (summary,) = records(run_named(foreign_con, "summary", {"trace": "t4_resnet50_train"}))
    assert (summary["kernels_per_step"], summary["tensor_core_pct"]) == (751, 0.0)
    assert summary["gpu_us_per_step"] == 39600.0 and summary["kernel_sum_us_per_step"] == 39543.0


def test_the_two_ranks_of_a_tensor_parallel_all_reduce(foreign_con):
    # Rank 1 entered the all-reduce 11.3 ms before rank 0 and waited for it on stream 17.
    nccl = records(run_sql(foreign_con, "SELECT trace, tid, ts_ns, ts_ns + dur_ns AS end_ns FROM events"
                                        " WHERE cat = 'kernel' AND name LIKE 'ncclDevKernel_AllReduce%' ORDER BY trace"))
    rank0, rank1 = nccl
    assert (rank0["tid"], rank1["tid"]) == ("17", "17")
    assert rank0["ts_ns"] - rank1["ts_ns"] == 11_255_765
    assert rank1["end_ns"] - rank0["end_ns"] == 1_453  # they finish together, 1.5 us apart
