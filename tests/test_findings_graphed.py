"""Findings on steps a CUDA graph already replays (torch.compile's CUDA graph trees, a
torch.cuda.CUDAGraph): their kernels have no launch of their own left to graph, so neither
launch_bound nor gpu_idle may advise capturing the step in a CUDA graph or replay that fix. The
GPU's idle between replays is the host's work around them, named as such, with no saving.

tests/data/h100/graph_in_trace (an H100): infer_compiled_graph, the launch loop (40 Linear+ReLU,
bf16) under torch.compile(mode="reduce-overhead"): its steady steps replay the graph tree's graph
(81 kernels a step, 1 cudaGraphLaunch); tests/data/h200/fixes/infer_launch_graph, the same loop
captured by hand (the fix of the launch_bound pair, which findings used to advise to graph again);
tests/data/h100/fix_rounds/infer_launch_eager, the loop eager, where the advice stands."""

import pytest

from conftest import TEST_DATA, load_named

IN_TRACE = TEST_DATA / "h100" / "graph_in_trace"
EAGER = TEST_DATA / "h100" / "fix_rounds" / "infer_launch_eager.json.gz"
GRAPH_CAUSE = "while the CPU prepared a CUDA graph's replay"


@pytest.fixture(scope="module")
def found(tmp_path_factory):
    import tracekit

    db = tmp_path_factory.mktemp("graphed") / "graphed.duckdb"
    load_named(db, {"compiled": IN_TRACE / "infer_compiled_graph.json.gz",
                    "captured": TEST_DATA / "h200" / "fixes" / "infer_launch_graph.json.gz", "eager": EAGER})
    return tracekit.findings(db=db)


def _rows(found, trace, rule):
    return found[(found["trace"] == trace) & (found["rule"] == rule)]


def test_a_step_a_graph_replays_is_not_launch_bound(found):
    # 81 kernels a step, all from one graph launch: under the profiler the GPU is busy a quarter
    # of the step's CPU span, but no launch is left to capture
    assert _rows(found, "compiled", "launch_bound").empty
    assert _rows(found, "captured", "launch_bound").empty
    assert not any(isinstance(w, str) and w.startswith("cuda-graph") for w in found[found["trace"] != "eager"]["whatif"])


@pytest.mark.parametrize("trace, idle_us", [("compiled", 369.9), ("captured", 48.2)])
def test_the_idle_between_replays_is_the_hosts_work_around_them_with_no_saving(found, trace, idle_us):
    idle = _rows(found, trace, "gpu_idle")
    assert len(idle) == 1
    row = idle.iloc[0]
    assert GRAPH_CAUSE in row["title"] and f"GPU idle {idle_us} µs per step" in row["title"]
    assert row["whatif"] is None or row["whatif"] != row["whatif"]  # no fix to replay
    assert row["saving_us_per_step"] != row["saving_us_per_step"]  # NULL, and the detail says why
    assert "no fix replayed: the step's kernels are already one CUDA graph launch" in row["detail"]
    assert "static buffers" in row["fix"]
    assert _rows(found, trace, "all_fixes").empty


def test_the_eager_loop_still_gets_the_cuda_graph_fix(found):
    bound = _rows(found, "eager", "launch_bound")
    assert len(bound) == 1 and bound.iloc[0]["whatif"] == "cuda-graph:1000"
    assert bound.iloc[0]["saving_us_per_step"] > 0
    assert not _rows(found, "eager", "gpu_idle")["title"].str.contains(GRAPH_CAUSE).any()
