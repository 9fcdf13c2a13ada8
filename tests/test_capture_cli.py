"""`tracekit capture` on the CPU with a tiny shape: traces, metadata, steps, manifest."""

import json

import pytest
from click.testing import CliRunner

from conftest import read_trace
from tracekit.cli import cli

pytest.importorskip("torch")

TINY = ["--device", "cpu", "--batch", "1", "--heads", "2", "--seq-len", "64", "--head-dim", "16",
        "--steps", "3"]


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    out = tmp_path_factory.mktemp("capture")
    result = CliRunner().invoke(cli, ["capture", "--out", str(out), *TINY])
    assert result.exit_code == 0, result.output
    return out, json.loads((out / "manifest.json").read_text()), result


def test_cpu_variants_write_gzip_traces(captured):
    out, manifest, _ = captured
    ran = {v["variant"] for v in manifest["variants"] if v["status"] == "ran"}
    assert {"naive", "naive_inplace", "sdpa_math", "sdpa_default"} <= ran
    for name in ran:
        with open(out / f"{name}.json.gz", "rb") as f:
            assert f.read(2) == b"\x1f\x8b"


def test_trace_embeds_metadata(captured):
    out, _, _ = captured
    meta = read_trace(out / "naive.json.gz")["tracekit"]
    assert meta["variant"] == "naive"
    assert (meta["batch"], meta["heads"], meta["seq_len"], meta["head_dim"]) == (1, 2, 64, 16)
    assert meta["dtype"] == "fp32" and meta["causal"] is True and meta["device"] == "cpu"
    assert meta["torch"].startswith("2.")
    assert meta["command"].startswith("tracekit")


def test_trace_has_one_profiler_step_per_call(captured):
    out, _, _ = captured
    events = read_trace(out / "naive_inplace.json.gz")["traceEvents"]
    steps = sorted(e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#"))
    assert steps == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
    ops = {e["name"] for e in events if e.get("cat") == "cpu_op"}
    assert "aten::masked_fill_" in ops and "aten::masked_fill" not in ops


def test_naive_mul_inplace_scales_and_masks_in_place(captured):
    ops = {e["name"] for e in read_trace(captured[0] / "naive_mul_inplace.json.gz")["traceEvents"]
           if e.get("cat") == "cpu_op"}
    assert {"aten::mul_", "aten::masked_fill_"} <= ops and not {"aten::mul", "aten::masked_fill"} & ops


def test_memory_events_only_with_profile_memory(captured, tmp_path):
    """Without --profile-memory a trace holds no [memory] event; with it, each allocation and free
    of the step's tensors, and the metadata says so."""
    def memory_events(trace):
        return [e for e in trace["traceEvents"] if e.get("name") == "[memory]"]

    plain = read_trace(captured[0] / "naive_mul_inplace.json.gz")
    assert plain["tracekit"]["profile_memory"] is False and memory_events(plain) == []
    result = CliRunner().invoke(cli, ["capture", "--out", str(tmp_path), "--variants", "naive_mul_inplace",
                                      "--profile-memory", *TINY])
    assert result.exit_code == 0, result.output
    traced = read_trace(tmp_path / "naive_mul_inplace.json.gz")
    assert traced["tracekit"]["profile_memory"] is True
    allocated = sorted(e["args"]["Bytes"] for e in memory_events(traced) if e["args"]["Bytes"] > 0)
    # Per step at B=1 H=2 S=64 D=16 fp32: the scores (32,768 bytes) and softmax's output, the
    # output (8,192), and the scale as a 0-dim double (8) cast to float (4); 3 steps.
    assert allocated == sorted([32768, 32768, 8192, 8, 4] * 3)


def test_naive_uses_out_of_place_masked_fill(captured):
    out, _, _ = captured
    ops = {e["name"] for e in read_trace(out / "naive.json.gz")["traceEvents"]
           if e.get("cat") == "cpu_op"}
    assert {"aten::masked_fill", "aten::clone", "aten::copy_"} <= ops


def test_manifest_lists_gpu_variants_as_skipped_with_reasons(captured):
    _, manifest, _ = captured
    by_name = {v["variant"]: v for v in manifest["variants"]}
    assert list(by_name) == ["naive", "naive_inplace", "naive_mul_inplace", "sdpa_math", "sdpa_efficient",
                             "sdpa_flash", "sdpa_cudnn", "sdpa_default", "flex"]
    for name in ("sdpa_efficient", "sdpa_cudnn", "flex"):
        assert by_name[name]["status"] == "skipped"
        assert by_name[name]["file"] is None
        # Our reason, not PyTorch's "No available kernel" for a backend that has no CPU kernel.
        assert by_name[name]["reason"].startswith(f"needs CUDA: {name} ")


def test_manifest_records_accuracy_and_timing(captured):
    _, manifest, _ = captured
    naive = next(v for v in manifest["variants"] if v["variant"] == "naive")
    assert 0 < naive["max_rel_error"] < 1e-5  # fp32 against float64
    assert naive["steady_ms_per_call"] > 0 and naive["tflops"] > 0
    assert 0 < naive["steady_ms_min"] <= naive["steady_ms_per_call"] <= naive["steady_ms_max"]
    assert manifest["environment"]["device"] == "cpu"
    assert manifest["workload"] == "forward" and manifest["tf32"] is False  # PyTorch's default


def test_progress_line_per_variant(captured):
    _, _, result = captured
    lines = [l for l in result.output.splitlines() if l.startswith("[")]
    assert len(lines) == 9
    assert "skipped" in lines[-1]


def test_sweep_names_files_by_seq_len(tmp_path):
    args = ["capture", "--out", str(tmp_path), "--variants", "naive_inplace",
            *TINY[:-4], "--seq-len", "32,48", "--steps", "2"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.glob("*.json.gz")) == [
        "naive_inplace_s32.json.gz", "naive_inplace_s48.json.gz"]


@pytest.mark.parametrize("args, message", [
    (["--variants", "naive,bogus"], "unknown variant bogus"),
    (["--head-dim", "0"], "--head-dim"),
    (["--seq-len", "12,x"], "not a comma-separated list"),
    (["--dtype", "int8"], "--dtype"),
])
def test_bad_options_give_one_line_error_and_exit_2(tmp_path, args, message):
    result = CliRunner().invoke(cli, ["capture", "--out", str(tmp_path), *args])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0]


def test_nothing_captured_exits_1(tmp_path):
    result = CliRunner().invoke(cli, ["capture", "--out", str(tmp_path), "--device", "cpu",
                                      "--variants", "flex"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1].startswith("Error: ")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("train")
    args = ["capture", "--train", "--out", str(out), "--device", "cpu", "--variants", "naive,sdpa_default",
            "--batch", "2", "--heads", "2", "--seq-len", "32", "--head-dim", "8", "--steps", "3"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return out, json.loads((out / "manifest.json").read_text())


def test_train_profiles_one_training_step_per_profiler_step(trained):
    out, manifest = trained
    assert manifest["workload"] == "train"
    assert sorted(p.name for p in out.glob("*.json.gz")) == ["train_naive.json.gz", "train_sdpa_default.json.gz"]
    trace = read_trace(out / "train_naive.json.gz")
    meta = trace["tracekit"]
    assert (meta["variant"], meta["workload"], meta["attention"]) == ("train_naive", "train", "naive")
    events = trace["traceEvents"]
    steps = sorted(e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#"))
    assert steps == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
    ops = {e["name"] for e in events if e.get("cat") == "cpu_op"}
    # Forward with the naive attention, backward through autograd, and the optimizer's update.
    assert {"aten::masked_fill", "aten::layer_norm", "aten::cross_entropy_loss"} <= ops
    assert any(name.startswith("autograd::engine::evaluate_function") for name in ops)
    assert any("AdamW" in name or "adamw" in name for name in ops | {e["name"] for e in events})


def test_train_manifest_has_timings_without_flops(trained):
    _, manifest = trained
    for entry in manifest["variants"]:
        assert entry["status"] == "ran"
        assert 0 < entry["steady_ms_min"] <= entry["steady_ms_per_call"] <= entry["steady_ms_max"]
        assert entry["tflops"] is None and entry["max_rel_error"] is None


def test_tf32_is_recorded_and_put_back(tmp_path):
    import torch

    before = torch.backends.cuda.matmul.allow_tf32
    result = CliRunner().invoke(cli, ["capture", "--out", str(tmp_path), "--tf32", "--variants", "naive_inplace",
                                      *TINY[:-2], "--steps", "2"])
    assert result.exit_code == 0, result.output
    assert read_trace(tmp_path / "naive_inplace.json.gz")["tracekit"]["tf32"] is True
    assert json.loads((tmp_path / "manifest.json").read_text())["tf32"] is True
    assert torch.backends.cuda.matmul.allow_tf32 == before


def test_with_stack_records_python_frames_that_name_the_variants_forward(captured, tmp_path):
    out, _, _ = captured
    plain = read_trace(out / "naive.json.gz")
    assert plain["tracekit"]["with_stack"] is False
    assert not any(e.get("cat") == "python_function" for e in plain["traceEvents"])
    result = CliRunner().invoke(cli, ["capture", "--out", str(tmp_path), "--with-stack", "--variants", "naive",
                                      *TINY[:-2], "--steps", "2"])
    assert result.exit_code == 0, result.output
    traced = read_trace(tmp_path / "naive.json.gz")
    assert traced["tracekit"]["with_stack"] is True
    assert json.loads((tmp_path / "manifest.json").read_text())["with_stack"] is True
    # the naive forward's frame, named as torch names frames: path (as sys.path finds it), def line, function
    import torch

    from tracekit.capture.variants import VARIANTS, Shape

    forward = VARIANTS["naive"].build(Shape(1, 2, 64, 16, torch.float32, True, "cpu"))
    frames = {e["name"] for e in traced["traceEvents"] if e.get("cat") == "python_function"}
    expected = f"capture/variants.py({forward.__code__.co_firstlineno}): forward"
    assert any(name.endswith(expected) for name in frames), sorted(frames)[:20]
