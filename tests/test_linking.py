"""Which op launched each kernel, what GPU time a step really took, what a device is: on minimal
traces built by tests/trace_builder.py, each holding one situation that foreign traces showed."""

import json

import pytest

import trace_builder as tb
from conftest import TEST_DATA, invoke_cli
from tracekit.store.database import connect
from tracekit.ingest.loader import load_file
from tracekit.analysis.named_queries import run_named, run_sql
from tracekit.outputs.render import records


@pytest.fixture
def load(tmp_path):
    """load(name, trace) -> a read-only connection to a database holding just that trace."""
    opened = []

    def _load(name, content, layout="kineto"):
        db = tmp_path / f"{name}.duckdb"
        con = connect(db)
        assert load_file(con, tb.write(tmp_path, name, content, layout)).status == "loaded"
        con.close()
        con = connect(db, read_only=True)
        opened.append(con)
        return con

    yield _load
    for con in opened:
        con.close()


def kernel_ops(con):
    return {r["name"]: (r["cpu_op"], r["cpu_op_path"]) for r in
            records(run_sql(con, "SELECT name, cpu_op, cpu_op_path FROM kernels ORDER BY ts_us"))}


def test_a_launch_after_a_deep_chain_belongs_to_the_outer_range(load):
    # A chain four deep ends, then the step itself and a record_function launch: the op is the
    # innermost range still open, however far up it is.
    events = [
        tb.step(1, 0, 1000),
        tb.op("aten::linear", 10, 100), tb.op("aten::addmm", 20, 80), tb.op("aten::mm", 30, 60),
        tb.op("aten::_mm_inner", 40, 40), tb.op("aten::_deepest", 50, 10),
        tb.launch(55, 1), tb.kernel("deep_kernel", 60, 5, 1),
        tb.launch(200, 2), tb.kernel("under_step", 205, 5, 2),
        tb.annotation("my_range", 300, 300), tb.op("aten::add", 310, 20), tb.op("aten::fill_", 312, 5),
        tb.launch(400, 3), tb.kernel("under_range", 405, 5, 3),
    ]
    con = load("deep", tb.trace(events))
    assert kernel_ops(con) == {
        "deep_kernel": ("aten::_deepest", "aten::linear → aten::addmm → aten::mm → aten::_mm_inner → aten::_deepest"),
        "under_step": ("ProfilerStep#1", "ProfilerStep#1"),
        "under_range": ("my_range", "my_range"),
    }
    depth = dict(run_sql(con, "SELECT name, depth FROM cpu_ops").itertuples(index=False))
    assert depth["aten::_deepest"] == 5 and depth["my_range"] == 1 and depth["aten::fill_"] == 3


def test_an_external_id_that_names_an_unrelated_op_is_not_trusted(load):
    # The runtime call and its kernel carry External id 5, equal to their correlation id; op 5 is
    # an unrelated op that ended long before. The launch is inside aten::copy_ (External id 9).
    events = [
        tb.op("aten::unrelated", 0, 10, external_id=5),
        tb.op("aten::to", 100, 100, external_id=8), tb.op("aten::copy_", 110, 80, external_id=9),
        tb.launch(150, 5, name="cudaMemcpyAsync", external_id=5),
        tb.memcpy(160, 20, 5, kind="HtoD", nbytes=4096, external_id=5),
        tb.launch(170, 6, external_id=9), tb.kernel("copy_kernel", 190, 5, 6, external_id=9),
    ]
    con = load("collide", tb.trace(events))
    assert kernel_ops(con) == {"copy_kernel": ("aten::copy_", "aten::to → aten::copy_")}
    (row,) = records(run_sql(con, "SELECT cpu_op, cpu_op_path, bytes FROM memcpy"))
    assert row == {"cpu_op": "aten::copy_", "cpu_op_path": "aten::to → aten::copy_", "bytes": 4096}
    assert records(run_sql(con, "SELECT name, cpu_op FROM runtime ORDER BY ts_us")) == [
        {"name": "cudaMemcpyAsync", "cpu_op": "aten::copy_"}, {"name": "cudaLaunchKernel", "cpu_op": "aten::copy_"}]


def test_gpu_time_of_a_step_is_busy_time_not_the_sum_over_streams(load):
    # Three streams overlap inside one 100 us step: busy 10..90 (80 us), plain sum 125 us.
    events = [
        tb.step(0, 0, 100),
        tb.op("aten::mm", 1, 8), tb.launch(2, 1), tb.launch(3, 2), tb.launch(4, 3),
        tb.kernel("gemm_a", 10, 50, 1, stream=7), tb.kernel("gemm_b", 20, 50, 2, stream=13),
        tb.kernel("nccl_allreduce", 65, 25, 3, stream=21),
    ]
    con = load("streams", tb.trace(events))
    (busy,) = records(run_sql(con, "SELECT step, device, busy_us, kernel_sum_us, kernels, span_us FROM gpu_busy"))
    assert busy == {"step": 0, "device": 0, "busy_us": 80.0, "kernel_sum_us": 125.0, "kernels": 3, "span_us": 80.0}
    (summary,) = records(run_named(con, "summary"))
    assert summary["gpu_us_per_step"] == 80.0 and summary["kernel_sum_us_per_step"] == 125.0
    assert summary["gpu_us_per_step"] <= summary["cpu_us_per_step"]


def test_a_copy_of_unknown_size_has_null_bytes_never_zero(load, tmp_path):
    # ROCm writes no `bytes` on memcpy events.
    events = [tb.op("aten::copy_", 0, 50), tb.launch(10, 1, name="hipMemcpyWithStream"),
              tb.memcpy(20, 10, 1, kind="HtoD"), tb.launch(30, 2, name="hipMemcpyWithStream"),
              tb.memcpy(40, 10, 2, kind="HtoD")]
    con = load("rocm_copy", tb.trace(events))
    (row,) = records(run_named(con, "memcpy"))
    assert row["memcpy_count"] == 2 and row["memcpy_bytes"] is None and row["unknown_size_copies"] == 2
    result = invoke_cli("query", "memcpy", "--db", tmp_path / "rocm_copy.duckdb", "-f", "json")
    assert result.exit_code == 0, result.output
    (printed,) = json.loads(result.output)
    assert printed["memcpy_bytes"] is None and printed["avg_bytes"] is None


@pytest.mark.parametrize("props, expected", [
    # HIP fills computeMajor/Minor with its own numbers: gfx90a says 9.0, like Hopper.
    ({"id": 0, "name": "AMD Instinct MI210", "computeMajor": 9, "computeMinor": 0,
      "gcnArchName": "gfx90a:sramecc+:xnack-"}, ("AMD Instinct MI210", "amd", "gfx90a", None)),
    ({"id": 0, "name": "", "computeMajor": 9, "computeMinor": 4, "gcnArchName": "gfx942:sramecc+:xnack-"},
     (None, "amd", "gfx942", None)),
    ({"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0},
     ("NVIDIA H100 80GB HBM3", "nvidia", "sm_90", "9.0")),
])
def test_device_vendor_and_architecture(load, props, expected):
    events = [tb.op("aten::mm", 0, 10), tb.launch(1, 1), tb.kernel("k", 2, 3, 1)]
    con = load("device", tb.trace(events, devices=(props,)))
    (row,) = run_sql(con, "SELECT device_name, vendor, gpu_arch, compute_capability FROM traces").itertuples(index=False)
    assert tuple(row) == expected


def test_hip_calls_make_a_trace_amd_even_when_the_header_says_nothing(load):
    events = [tb.op("aten::mm", 0, 10), tb.launch(1, 1, name="hipExtModuleLaunchKernel"),
              tb.kernel("Cijk_Ailk_Bljk_BBS_BH_MT256x128x64_MI16x16x16x1_ISA90a_WG64", 2, 3, 1)]
    content = tb.trace(events, devices=({"id": 0, "name": "", "computeMajor": 9, "computeMinor": 0},))
    con = load("hip", content)
    (row,) = run_sql(con, "SELECT device_name, vendor, gpu_arch, compute_capability FROM traces").itertuples(index=False)
    assert tuple(row) == (None, "amd", "gfx90a", None)


def test_the_real_mi300_trace_is_gfx942_and_the_2021_v100_trace_has_no_step_in_its_paths(tmp_path):
    con = connect(tmp_path / "f.duckdb")
    for name in ("amd_mi300_gfx942_bf16_gemm", "v100_dgxs_mlp_train_step"):
        load_file(con, TEST_DATA / "foreign" / f"{name}.json.gz")
    devices = records(run_sql(con, "SELECT trace, vendor, gpu_arch, compute_capability FROM traces ORDER BY trace"))
    assert devices == [
        {"trace": "amd_mi300_gfx942_bf16_gemm", "vendor": "amd", "gpu_arch": "gfx942", "compute_capability": None},
        {"trace": "v100_dgxs_mlp_train_step", "vendor": "nvidia", "gpu_arch": "sm_70", "compute_capability": "7.0"}]
    # 2021's Kineto writes ProfilerStep#2 as an Operator: a step, not an op of any path.
    paths = run_sql(con, "SELECT count(*) AS n, count(*) FILTER (WHERE cpu_op_path LIKE '%ProfilerStep%') AS with_step,"
                         " count(*) FILTER (WHERE step = 2) AS in_step FROM kernels"
                         " WHERE trace = 'v100_dgxs_mlp_train_step'").iloc[0]
    assert (paths["n"], paths["with_step"], paths["in_step"]) == (30, 0, 30)
    con.close()


def test_lost_gpu_events_and_missing_cpu_ops_are_anomalies(load):
    lost = load("lost", tb.trace([tb.op("aten::mm", 0, 10), tb.launch(1, 1), tb.launch(4, 2)]))
    assert [(r["oddity"], r["events"], r["example"]) for r in records(run_named(lost, "anomalies"))] == [
        ("launches but no GPU events", 2, "cudaLaunchKernel")]
    no_ops = load("no_ops", tb.trace([tb.kernel("k", 2, 3, 1), tb.kernel("k", 6, 3, 2)]))
    assert [(r["oddity"], r["events"]) for r in records(run_named(no_ops, "anomalies"))] == [
        ("GPU events but no CPU ops", 2)]


def test_a_chain_deeper_than_64_ops_keeps_its_innermost_64_and_marks_the_cut(load):
    # 100 nested ops (as when one trace's events are written many times over): the path keeps the
    # 64 nearest the launch, starting with '… → ', instead of holding every level.
    depth = 100
    events = [tb.step(1, 0, 10_000)]
    events += [tb.op(f"aten::level{i}", 1 + i, 5_000 - 2 * i) for i in range(depth)]
    events += [tb.launch(1 + depth + 10, 7), tb.kernel("k", 4_000, 5, 7)]
    con = load("deep", tb.trace(events))
    op, path = kernel_ops(con)["k"]
    assert op == f"aten::level{depth - 1}"
    frames = path.split(" → ")
    assert frames[0] == "…" and len(frames) == 1 + 64
    assert frames[1:] == [f"aten::level{i}" for i in range(depth - 64, depth)]
    (deepest,) = con.execute("SELECT max(depth) FROM cpu_ops").fetchone()
    assert deepest == depth  # the nesting itself is whole: ProfilerStep#1 at 0, then 100 levels
