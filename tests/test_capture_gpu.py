"""Capture on a real GPU (skipped without CUDA): every variant runs and shows the article's signs."""

import json

import pytest
from click.testing import CliRunner

from conftest import read_trace
from tracekit.store.classify import classify
from tracekit.cli import cli

pytestmark = pytest.mark.gpu
SMALL = ["--device", "cuda", "--batch", "1", "--heads", "4", "--seq-len", "512",
         "--head-dim", "64", "--steps", "3"]


@pytest.fixture(scope="module")
def gpu_capture(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu")
    result = CliRunner().invoke(cli, ["capture", "--out", str(out), *SMALL])
    assert result.exit_code == 0, result.output
    return out, {v["variant"]: v for v in json.loads((out / "manifest.json").read_text())["variants"]}


def _events(out, variant, cat):
    return [e for e in read_trace(out / f"{variant}.json.gz")["traceEvents"] if e.get("cat") == cat]


def test_every_variant_runs_in_bf16(gpu_capture):
    _, variants = gpu_capture
    assert all(v["status"] == "ran" for v in variants.values()), variants
    assert all(v["max_rel_error"] < 2e-2 for v in variants.values())


def test_naive_copies_and_inplace_does_not(gpu_capture):
    out, _ = gpu_capture
    assert any("DtoD" in e["name"] for e in _events(out, "naive", "gpu_memcpy"))
    assert not any("DtoD" in e["name"] for e in _events(out, "naive_inplace", "gpu_memcpy"))


def test_fused_backends_run_one_attention_kernel_per_step(gpu_capture):
    out, _ = gpu_capture
    for variant in ("sdpa_efficient", "sdpa_cudnn"):
        kernels = _events(out, variant, "kernel")
        assert len(kernels) == 3, (variant, [k["name"] for k in kernels])


def test_flash_runs_only_flash_kernels(gpu_capture):
    # At this small shape (seen on the H200) flash splits KV: splitkv + combine, 2 per call.
    out, _ = gpu_capture
    names = [k["name"] for k in _events(out, "sdpa_flash", "kernel")]
    assert len(names) in (3, 6) and all("pytorch_flash::" in n for n in names)


def test_cudnn_first_call_builds_a_plan(gpu_capture):
    out, _ = gpu_capture
    calls = sorted((e["ts"], e["dur"]) for e in _events(out, "sdpa_cudnn", "cpu_op")
                   if e["name"] == "aten::_cudnn_attention_forward")
    assert len(calls) == 3 and calls[0][1] > 10 * calls[-1][1]


def test_trace_records_the_gpu(gpu_capture):
    out, _ = gpu_capture
    trace = read_trace(out / "sdpa_flash.json.gz")
    assert trace["deviceProperties"] and trace["tracekit"]["compute_capability"]


def test_fp32_flash_is_skipped_with_a_reason(tmp_path):
    result = CliRunner().invoke(cli, ["capture", "--out", str(tmp_path), *SMALL,
                                      "--dtype", "fp32", "--variants", "sdpa_flash,naive"])
    assert result.exit_code == 0, result.output
    flash = json.loads((tmp_path / "manifest.json").read_text())["variants"][0]
    assert flash["status"] == "skipped" and flash["reason"]


def _gemm_math_units(path):
    units = {}
    for event in read_trace(path)["traceEvents"]:
        if event.get("cat") == "kernel":
            kernel_class, math_unit, _ = classify(event["name"])
            if kernel_class == "gemm":
                units[event["name"]] = math_unit
    return units


def test_fp32_matmuls_leave_tensor_cores_without_tf32_and_use_them_with_it(tmp_path):
    # Without TF32 (PyTorch's default for matmuls) the fp32 GEMMs are FFMA (SIMT) kernels; --tf32
    # gives Tensor Core kernels (on the H200: cutlass_80_tensorop_s1688gemm_*, tf32 nvjet).
    for flag in ("--no-tf32", "--tf32"):
        result = CliRunner().invoke(cli, ["capture", "--out", str(tmp_path / flag), *SMALL, "--dtype", "fp32",
                                          "--variants", "naive_inplace", flag])
        assert result.exit_code == 0, result.output
    simt = _gemm_math_units(tmp_path / "--no-tf32" / "naive_inplace.json.gz")
    tensor = _gemm_math_units(tmp_path / "--tf32" / "naive_inplace.json.gz")
    assert simt and set(simt.values()) == {"simt"}, simt
    assert tensor and set(tensor.values()) == {"tensor_core"}, tensor


def test_training_steps_launch_many_kernels(tmp_path):
    result = CliRunner().invoke(cli, ["capture", "--train", "--out", str(tmp_path), "--device", "cuda",
                                      "--variants", "sdpa_default", "--steps", "3"])
    assert result.exit_code == 0, result.output
    trace = read_trace(tmp_path / "train_sdpa_default.json.gz")
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    # Forward, backward and AdamW over 4 layers: hundreds of kernels per step.
    assert len(kernels) > 3 * 200
    assert trace["tracekit"]["workload"] == "train"


def test_two_ranks_over_nccl_all_reduce_and_the_slow_rank_makes_the_other_wait(tmp_path):
    import torch
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    result = CliRunner().invoke(cli, ["capture", "--out", str(tmp_path), "--ranks", "2", "--variants", "sdpa_default",
                                      "--dtype", "bf16", "--steps", "6", "--slow-rank", "1", "--delay-ms", "20"])
    assert result.exit_code == 0, result.output
    nccl = {}
    for rank in (0, 1):
        trace = read_trace(tmp_path / f"train_sdpa_default_rank{rank}.json.gz")
        assert trace["distributedInfo"]["backend"] == "nccl" and trace["distributedInfo"]["rank"] == rank
        nccl[rank] = [e["dur"] for e in trace["traceEvents"]
                      if e.get("cat") == "kernel" and e["name"].startswith("ncclDevKernel_AllReduce")]
    assert len(nccl[0]) == len(nccl[1]) > 0
    # Rank 0 waits in its all-reduce for rank 1's late launch: most of the 20 ms a step.
    assert sorted(nccl[0])[len(nccl[0]) // 2] > 10_000 > sorted(nccl[1])[len(nccl[1]) // 2]


def test_profiled_memory_peaks_equal_max_memory_allocated(tmp_path):
    """capture/memory_check.py profiles each variant with profile_memory, then measures the same
    calls outside the profiler: every steady profiled step's peak (Kineto's totals, summed up as
    memory_steps does: tests/test_memory.py checks the two agree) is max_memory_allocated's."""
    import csv

    from memory_checks import peaks_from_json
    from tracekit.capture.memory_check import DEFAULT_VARIANTS, main

    main(["--out", str(tmp_path), "--batch", "1", "--heads", "4", "--seq-len", "512", "--steps", "3"])
    with open(tmp_path / "measured.csv") as source:
        measured = {(r["trace"], int(r["step"])): r for r in csv.DictReader(source)}
    for variant in DEFAULT_VARIANTS:
        profiled = {step: (start, peak) for step, device, start, peak, _ in peaks_from_json(tmp_path / f"{variant}.json.gz")
                    if device == 0}
        for step in (1, 2):
            row = measured[(variant, step)]
            assert profiled[step] == (int(row["start_allocated_bytes"]), int(row["max_memory_allocated_bytes"])), variant
