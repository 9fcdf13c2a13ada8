"""Kernels a CUDA graph replayed: their launch (cudaGraphLaunch) names no op, as the ops ran when
the graph was captured. Where the capture is in the trace, each replayed kernel takes the work of
the op that launched it at capture (work_source 'graph capture'). Where it is not, a replayed
kernel takes the work of the kernels of its name, grid and block launched outside a graph, where
all did the same work (work_source 'identical kernel'); else its work is NULL and work_missing
says why, never 0."""

import gzip
import json

import pytest

from conftest import TEST_DATA, db_rows, load_named

FIXES = TEST_DATA / "h200" / "fixes"
IN_TRACE = TEST_DATA / "h100" / "graph_in_trace"
EAGER = FIXES / "infer_launch_eager.json.gz"
GRAPH_MISSING = "a CUDA graph replay whose capture is not in the trace"


def _replay_last_step_as_a_graph(source, target):
    """`source` with its last ProfilerStep run as a CUDA graph replay whose capture the profiler did
    not see: the step's ops and launch calls are gone, one cudaGraphLaunch takes their place, and
    the step's kernels carry its correlation id, as Kineto records a replay (infer_launch_graph)."""
    trace = json.loads(gzip.open(source, "rt").read())
    events = trace["traceEvents"]
    step = max((e for e in events if e.get("cat") == "user_annotation" and str(e.get("name")).startswith("ProfilerStep#")),
               key=lambda e: e["ts"])
    start, end = step["ts"], step["ts"] + step["dur"]
    launches = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver") and start <= e["ts"] <= end
                and "Launch" in e["name"]]
    correlations = {e["args"]["correlation"] for e in launches}
    graph_id = max(e["args"]["correlation"] for e in events if "correlation" in e.get("args", {})) + 1
    first = min(launches, key=lambda e: e["ts"])
    replay = {**first, "name": "cudaGraphLaunch", "cat": "cuda_runtime",
              "dur": max(e["ts"] + e["dur"] for e in launches) - first["ts"], "args": {"correlation": graph_id}}
    kept = []
    for e in events:
        if e in launches or (e.get("cat") == "cpu_op" and start <= e["ts"] <= end) \
                or (e.get("cat") == "ac2g" and e.get("id") in correlations):
            continue
        if e.get("cat") == "kernel" and e["args"].get("correlation") in correlations:
            e = {**e, "args": {**e["args"], "correlation": graph_id, "External id": graph_id}}
        kept.append(e)
    trace["traceEvents"] = kept + [replay]
    with gzip.open(target, "wt") as f:
        json.dump(trace, f)
    return target


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    folder = tmp_path_factory.mktemp("graphs")
    files = {"eager": EAGER, "replayed": _replay_last_step_as_a_graph(EAGER, folder / "replayed.json.gz"),
             "infer_graph": FIXES / "infer_launch_graph.json.gz", "train_graph": FIXES / "train_launch_graph.json.gz",
             "infer_captured": IN_TRACE / "infer_graph_in_trace.json.gz",
             "train_captured": IN_TRACE / "train_graph_in_trace.json.gz"}
    return load_named(folder / "graphs.duckdb", files)


def test_a_replay_whose_capture_is_not_in_the_trace_has_no_work_and_says_why(db):
    # infer_launch_graph and train_launch_graph: every step a cudaGraphLaunch (80 and 296 kernels
    # each), and before the first, kernels of replays launched before the window; no kernel
    # launched outside a graph to take the work of.
    rows = db_rows(db, "SELECT trace, count(*), count(flops), count(bytes), count(work_source), "
                      "list(DISTINCT work_missing) FROM kernels WHERE trace LIKE '%_graph' GROUP BY ALL ORDER BY ALL")
    assert rows == [("infer_graph", 409, 0, 0, 0, [GRAPH_MISSING]), ("train_graph", 1482, 0, 0, 0, [GRAPH_MISSING])]


def test_a_replayed_kernel_takes_the_work_of_its_identical_eager_kernels(db):
    # infer_launch_eager, its last step replayed as a graph: the step's 80 kernels (Linear's GEMM and
    # ReLU's clamp, bf16) have no op (the replay's is ProfilerStep#7); each takes the work the other steps' identical kernels did,
    # which is the work its own op's shapes gave it in the trace as captured.
    rows = db_rows(db, """
        SELECT r.work_source, r.work_missing, r.flops = e.flops AND r.bytes = e.bytes AS same, count(*)
        FROM kernels r JOIN kernels e ON e.trace = 'eager' AND e.ts_us = r.ts_us AND e.name = r.name
        WHERE r.trace = 'replayed' AND r.step = 7
        GROUP BY ALL ORDER BY ALL""")
    assert rows == [("identical kernel", None, True, 80)]
    # the eager steps keep their own ops' work
    (eager,) = db_rows(db, "SELECT count(*) FILTER (WHERE work_source = 'op shapes'), count(*) FROM kernels "
                          "WHERE trace = 'replayed' AND step < 7")
    assert eager == (320, 320)


def test_a_replay_whose_capture_is_in_the_trace_takes_its_capture_ops_work(db):
    # tests/data/h100/graph_in_trace: the launch loop's graph captured inside the profiler's window,
    # then replayed 5 times (80 kernels a replay in inference, 247 in training); its eager warm-up
    # calls in the same step ran the same kernels with ops of their own. Each replayed kernel takes
    # the work of the op that launched it at capture, which is the work of the eager kernel of its
    # name, grid and block.
    rows = db_rows(db, """
        WITH eager AS (SELECT DISTINCT trace, name, grid, block, flops, bytes FROM kernels WHERE work_source = 'op shapes')
        SELECT r.trace, count(*), count(*) FILTER (WHERE r.flops = e.flops AND r.bytes = e.bytes)
        FROM kernels r JOIN eager e USING (trace, name, grid, block)
        WHERE r.work_source = 'graph capture' GROUP BY ALL ORDER BY ALL""")
    assert rows == [("infer_captured", 400, 400), ("train_captured", 1235, 1235)]
    # a replay's GEMM: addmm(bias [512], x [32,512], W^T [512,512]) in bf16, 2·32·512·512 + 32·512
    # FLOPs, its work not split over the 5 replays
    gemms = db_rows(db, "SELECT DISTINCT flops, bytes FROM kernels WHERE trace = 'infer_captured' "
                        "AND work_source = 'graph capture' AND work_family = 'gemm'")
    assert gemms == [(2 * 32 * 512 * 512 + 32 * 512, (512 + 32 * 512 + 512 * 512 + 32 * 512) * 2)]
    # no replayed kernel says its capture is missing
    assert db_rows(db, "SELECT count(*) FROM kernels WHERE trace LIKE '%_captured' AND work_missing = ?",
                   [GRAPH_MISSING]) == [(0,)]


def test_cold_start_names_the_graph_capture_of_its_first_step(db):
    # The captured traces' first profiled step warms the graph up, captures and instantiates it
    # (17.7 and 51.4 ms over a steady step); no op alone holds half of it: the cause is the capture.
    import tracekit

    found = tracekit.findings(db=db, rule="cold_start")
    rows = found[found["trace"].str.endswith("_captured")].sort_values("trace")
    assert list(rows["trace"]) == ["infer_captured", "train_captured"]
    assert all(title.endswith(": CUDA graph capture") for title in rows["title"])
    assert all("captures a CUDA graph" in detail and "ms of cudaGraphInstantiate" in detail for detail in rows["detail"])
    assert all(fix.startswith("capture the graph in the warm-up") for fix in rows["fix"])


def _with_an_earlier_capture(source, target, other_shapes):
    """`source` (a trace holding one CUDA graph's capture) with a copy of that capture made earlier,
    on a thread of its own: with the same shapes (`other_shapes` False) or with its ops' first dim
    doubled (True), as two graphs of one size and other work."""
    trace = json.loads(gzip.open(source, "rt").read())
    events = trace["traceEvents"]
    begin = next(e for e in events if e.get("name") == "cudaStreamBeginCapture")
    end = next(e for e in events if e.get("name") == "cudaStreamEndCapture")
    shift = end["ts"] - begin["ts"] + 1000
    copies = []
    for e in events:
        if e.get("cat") in ("cpu_op", "cuda_runtime", "cuda_driver") and e["pid"] == begin["pid"] \
                and e["tid"] == begin["tid"] and begin["ts"] <= e["ts"] <= end["ts"]:
            args = dict(e.get("args", {}))
            for key in ("correlation", "External id"):
                if key in args:
                    args[key] += 10_000_000
            if other_shapes and args.get("Input Dims") and args["Input Dims"][0]:
                args["Input Dims"] = [[2 * args["Input Dims"][0][0], *args["Input Dims"][0][1:]], *args["Input Dims"][1:]]
            copies.append({**e, "ts": e["ts"] - shift, "tid": 4242, "args": args})
    trace["traceEvents"] = events + copies
    with gzip.open(target, "wt") as f:
        json.dump(trace, f)
    return target


@pytest.mark.parametrize("other_shapes, captured", [(False, 400), (True, 0)])
def test_a_replay_two_captures_of_its_size_could_have_made_takes_neither(tmp_path, other_shapes, captured):
    # Which graph a cudaGraphLaunch replays is not in the trace: where two captures before it
    # launched as many kernels but ran other shapes, its kernels take no capture's work (here, their
    # eager twins' instead); where both ran the same, either's work is the same.
    path = _with_an_earlier_capture(IN_TRACE / "infer_graph_in_trace.json.gz", tmp_path / "two.json.gz", other_shapes)
    db = load_named(tmp_path / "two.duckdb", {"two": path})
    rows = dict(db_rows(db, "SELECT work_source, count(*) FROM kernels WHERE trace = 'two' AND correlation IN "
                            "(SELECT correlation FROM runtime WHERE trace = 'two' AND name = 'cudaGraphLaunch') GROUP BY 1"))
    assert rows.get("graph capture", 0) == captured
    assert sum(rows.values()) == 400


def test_a_replay_whose_capture_op_has_no_formula_says_so(tmp_path):
    # The same capture with every op renamed to one no formula matches: the replayed kernels find
    # their capture's op, and say that it has no formula, not that the capture is missing.
    trace = json.loads(gzip.open(IN_TRACE / "infer_graph_in_trace.json.gz", "rt").read())
    trace["traceEvents"] = [{**e, "name": "custom::" + e["name"].split("::")[-1]} if e.get("cat") == "cpu_op" else e
                            for e in trace["traceEvents"]]
    path = tmp_path / "unknown_ops.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(trace, f)
    db = load_named(tmp_path / "unknown.duckdb", {"unknown": path})
    assert db_rows(db, "SELECT k.work_missing, count(*), count(k.flops) FROM kernel_rows k JOIN runtime_rows r"
                       " ON r.correlation = k.correlation AND r.name LIKE '%GraphLaunch%' GROUP BY ALL") == [
        ("no formula for its op", 400, 0)]
