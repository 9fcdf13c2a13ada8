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


def test_naive_uses_out_of_place_masked_fill(captured):
    out, _, _ = captured
    ops = {e["name"] for e in read_trace(out / "naive.json.gz")["traceEvents"]
           if e.get("cat") == "cpu_op"}
    assert {"aten::masked_fill", "aten::clone", "aten::copy_"} <= ops


def test_manifest_lists_gpu_variants_as_skipped_with_reasons(captured):
    _, manifest, _ = captured
    by_name = {v["variant"]: v for v in manifest["variants"]}
    assert list(by_name) == ["naive", "naive_inplace", "sdpa_math", "sdpa_efficient",
                             "sdpa_flash", "sdpa_cudnn", "sdpa_default", "flex"]
    for name in ("sdpa_cudnn", "flex"):
        assert by_name[name]["status"] == "skipped"
        assert by_name[name]["reason"] and by_name[name]["file"] is None
    assert "CUDA" in by_name["flex"]["reason"]


def test_manifest_records_accuracy_and_timing(captured):
    _, manifest, _ = captured
    naive = next(v for v in manifest["variants"] if v["variant"] == "naive")
    assert 0 < naive["max_rel_error"] < 1e-5  # fp32 against float64
    assert naive["steady_ms_per_call"] > 0 and naive["tflops"] > 0
    assert manifest["environment"]["device"] == "cpu"


def test_progress_line_per_variant(captured):
    _, _, result = captured
    lines = [l for l in result.output.splitlines() if l.startswith("[")]
    assert len(lines) == 8
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
