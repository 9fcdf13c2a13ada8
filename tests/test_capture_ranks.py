"""`tracekit capture --ranks` on the CPU (gloo): a data-parallel job, one trace per rank, one rank
slowed on purpose. The same code runs over NCCL on GPUs (tests/test_capture_gpu.py)."""

import json

import pytest
from click.testing import CliRunner

from conftest import read_trace
from tracekit.cli import cli

pytest.importorskip("torch")

TINY = ["--device", "cpu", "--batch", "1", "--heads", "2", "--seq-len", "32", "--head-dim", "16", "--steps", "3"]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    out = tmp_path_factory.mktemp("ranks")
    result = CliRunner().invoke(cli, ["capture", "--out", str(out), "--variants", "naive_inplace", "--ranks", "2",
                                      "--slow-rank", "1", "--delay-ms", "25", *TINY])
    assert result.exit_code == 0, result.output
    return out, json.loads((out / "manifest.json").read_text()), result.output


def test_each_rank_writes_its_trace_with_distributed_info(job):
    out, manifest, _ = job
    for rank in (0, 1):
        trace = read_trace(out / f"train_naive_inplace_rank{rank}.json.gz")
        info = trace["distributedInfo"]
        assert (info["rank"], info["world_size"], info["backend"]) == (rank, 2, "gloo")
        assert trace["tracekit"]["rank"] == rank and trace["tracekit"]["variant"] == f"train_naive_inplace_rank{rank}"
        names = {e.get("name") for e in trace["traceEvents"]}
        # DDP's gradient all-reduce, which the slow rank makes the other wait on.
        assert "gloo:all_reduce" in names
    assert manifest["ranks"] == {"world_size": 2, "backend": "gloo", "slow_rank": 1, "delay_ms_per_step": 25.0}
    assert [v["file"] for v in manifest["variants"]] == [f"train_naive_inplace_rank{r}.json.gz" for r in (0, 1)]


def test_only_the_slow_rank_sleeps_and_its_trace_says_how_long(job):
    out, _, _ = job
    delays = {}
    for rank in (0, 1):
        trace = read_trace(out / f"train_naive_inplace_rank{rank}.json.gz")
        delays[rank] = [e["dur"] for e in trace["traceEvents"] if e.get("name") == "tracekit.injected_delay"]
        assert trace["tracekit"]["injected_delay_ms_per_step"] == (25.0 if rank == 1 else 0.0)
    assert delays[0] == [] and len(delays[1]) == 3
    assert all(25_000 <= us < 25_000 * 3 for us in delays[1])


def test_progress_names_each_rank(job):
    *_, output = job
    assert "on 2 ranks, rank 1 slowed by 25 ms a step" in output
    assert "[rank 0/2] naive_inplace:" in output and "[rank 1/2] naive_inplace:" in output


@pytest.mark.parametrize("args, message", [
    (["--slow-rank", "1"], "needs --ranks"),
    (["--ranks", "2", "--slow-rank", "2"], "rank 2 is not one of the 2 ranks (0 to 1)"),
    (["--ranks", "2", "--seq-len", "32,64"], "one sequence length with --ranks"),
    (["--ranks", "1"], "1 is not in the range x>=2"),
])
def test_bad_rank_options_are_one_line_errors(tmp_path, args, message):
    result = CliRunner().invoke(cli, ["capture", "--out", str(tmp_path), "--device", "cpu", *args])
    assert result.exit_code == 2 and message in result.output, result.output
