"""Source lines: each op's innermost frame of the user's code, from traces recorded with the Python
stack (tests/data/cpu/stack, captured by tracekit; two foreign GPU traces), carried by the kernels
and copies the op launched, and named by the memcpy query and the hidden_copy finding."""

import json

import pytest

from conftest import TEST_DATA, invoke_cli
from tracekit.analysis.named_queries import run_named, run_sql
from tracekit.outputs.render import records
from tracekit.store.database import connect

STACK = TEST_DATA / "cpu" / "stack"
FOREIGN = TEST_DATA / "foreign"
TRACES = [STACK / "naive.json.gz", STACK / "naive_inplace.json.gz", STACK / "train" / "train_naive.json.gz",
          FOREIGN / "rtx5080_cuda_graph_replay_manual_capture.json.gz", FOREIGN / "amd_mi300_gfx942_bf16_gemm.json.gz",
          # without stacks: an old trace whose ops carry an empty `Call stack`, a CPU capture, a GPU one
          FOREIGN / "old_schema_operator_only_no_gpu_events.json.gz", TEST_DATA / "cpu" / "naive_cpu.json.gz",
          FOREIGN / "l4_square_memcpy_two_steps.json.gz"]
FRAME = "source_file, source_line, source_function"


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    db = tmp_path_factory.mktemp("stack") / "stack.duckdb"
    result = invoke_cli("load", *TRACES, "--db", db)
    assert result.exit_code == 0, result.output
    con = connect(db, read_only=True)
    yield con
    con.close()


def rows(con, sql, **params):
    return records(run_sql(con, sql, params or None))


def frames_of(con, trace, where):
    return rows(con, f"SELECT {FRAME}, count(*) AS ops FROM cpu_ops WHERE trace = $t AND {where} "
                     "GROUP BY ALL ORDER BY ops DESC", t=trace)


def test_naive_masked_fill_and_its_hidden_copy_come_from_forward(con):
    # The out-of-place masked_fill of each of the 6 steps, and the copy_ its clone makes (a Memcpy
    # DtoD on a GPU): both in `forward` of capture/variants.py, which torch records at its def line.
    expected = [{"source_file": "capture/variants.py", "source_line": 53, "source_function": "forward", "ops": 6}]
    assert frames_of(con, "naive", "name = 'aten::masked_fill'") == expected
    assert frames_of(con, "naive", "name = 'aten::copy_' AND parent = 'aten::clone'") == expected
    assert frames_of(con, "naive_inplace", "name = 'aten::masked_fill_'") == [
        {"source_file": "capture/variants.py", "source_line": 68, "source_function": "forward", "ops": 6}]


def test_every_op_of_a_stack_capture_has_the_frame_around_it(con):
    # The steps sit in _profile's `with profile(...)` (the line running when profiling began);
    # all 270 aten ops in forward. torch's own frames (torch/_ops.py, torch/profiler/...) never show.
    assert frames_of(con, "naive", "true") == [
        {"source_file": "capture/variants.py", "source_line": 53, "source_function": "forward", "ops": 270},
        {"source_file": "capture/runner.py", "source_line": 189, "source_function": "_profile", "ops": 12}]


def test_a_training_loop_skips_torch_autograd_and_optimizer_frames(con):
    found = frames_of(con, "train_naive", "true")
    assert [(f["source_file"], f["source_line"], f["source_function"], f["ops"]) for f in found] == [
        ("capture/training.py", 82, "step", 10251), ("capture/training.py", 33, "forward", 996),
        ("capture/variants.py", 53, "forward", 684), ("capture/training.py", 36, "<listcomp>", 108),
        ("capture/training.py", 54, "forward", 99), ("capture/runner.py", 189, "_profile", 6)]
    # AdamW's ops run in torch/optim: their frame is the training step that called it
    assert frames_of(con, "train_naive", "name = 'Optimizer.step#AdamW.step'") == [
        {"source_file": "capture/training.py", "source_line": 82, "source_function": "step", "ops": 3}]


def test_foreign_gpu_traces_name_their_scripts(con):
    assert frames_of(con, "amd_mi300_gfx942_bf16_gemm", "name = 'aten::mm'") == [
        {"source_file": "generate_all_traces.py", "source_line": 86, "source_function": "run_case", "ops": 10}]
    assert frames_of(con, "rtx5080_cuda_graph_replay_manual_capture", "name = 'aten::copy_'") == [
        {"source_file": "torch_cuda_graph_manual_capture.py", "source_line": 67,
         "source_function": "train_with_cuda_graph", "ops": 14}]


@pytest.mark.parametrize("view", ["kernels", "memcpy", "memset"])
@pytest.mark.parametrize("trace", ["rtx5080_cuda_graph_replay_manual_capture", "amd_mi300_gfx942_bf16_gemm"])
def test_gpu_work_carries_its_launching_ops_frame(con, view, trace):
    (counts,) = rows(con, f"""
        SELECT count(*) AS work, count(w.cpu_op_id) AS launched_in_trace, count(w.source_file) AS with_frame,
               count(*) FILTER (WHERE w.source_file IS NOT DISTINCT FROM o.source_file
                                  AND w.source_line IS NOT DISTINCT FROM o.source_line
                                  AND w.source_function IS NOT DISTINCT FROM o.source_function) AS same
        FROM {view} w LEFT JOIN cpu_ops o ON o.trace = w.trace AND o.op_id = w.cpu_op_id
        WHERE w.trace = $t""", t=trace)
    assert counts["same"] == counts["work"]
    # every piece whose launch the trace holds has a frame; the rest were launched before the
    # trace began (no op: NULL)
    assert counts["with_frame"] == counts["launched_in_trace"]
    expected = {("rtx5080_cuda_graph_replay_manual_capture", "kernels"): (321, 252),
                ("rtx5080_cuda_graph_replay_manual_capture", "memcpy"): (16, 14),
                ("rtx5080_cuda_graph_replay_manual_capture", "memset"): (18, 14),
                ("amd_mi300_gfx942_bf16_gemm", "kernels"): (20, 20),
                ("amd_mi300_gfx942_bf16_gemm", "memcpy"): (0, 0), ("amd_mi300_gfx942_bf16_gemm", "memset"): (0, 0)}
    assert (counts["work"], counts["with_frame"]) == expected[trace, view]


@pytest.mark.parametrize("trace", ["old_schema_operator_only_no_gpu_events", "naive_cpu", "l4_square_memcpy_two_steps"])
def test_no_stack_no_frame(con, trace):
    for view in ("cpu_ops", "kernels", "memcpy"):
        (row,) = rows(con, f"SELECT count(*) AS n, count(source_file) + count(source_line) + count(source_function) "
                           f"AS known FROM {view} WHERE trace = $t", t=trace)
        assert row["known"] == 0 and (row["n"] > 0 or view != "cpu_ops")


def test_memcpy_query_names_the_line(con):
    found = records(run_named(con, "memcpy", {"trace": "rtx5080_cuda_graph_replay_manual_capture"}))
    assert [(r["caused_by"], r["source"], r["memcpy_count"], r["memcpy_bytes"]) for r in found] == [
        ("aten::copy_", "torch_cuda_graph_manual_capture.py:67 in train_with_cuda_graph", 14, 77987840),
        (None, None, 2, 11141120)]  # launched before the trace began: no op, no line
    l4 = records(run_named(con, "memcpy", {"trace": "l4_square_memcpy_two_steps"}))
    assert sum(r["memcpy_count"] for r in l4) > 0 and {r["source"] for r in l4} == {None}


def test_hidden_copy_names_the_line_in_its_title_and_evidence(con):
    result = invoke_cli("findings", "--db", con_path(con), "--rule", "hidden_copy", "-p", "min_bytes", "0",
                        "-p", "trace", "rtx5080_cuda_graph_replay_manual_capture", "-f", "json", "--evidence")
    assert result.exit_code == 0, result.output
    (finding,) = json.loads(result.output)
    assert finding["title"] == ("2 Memcpy DtoD of 5 MiB per step from aten::copy_ at "
                                "torch_cuda_graph_manual_capture.py:67 in train_with_cuda_graph")
    assert finding["detail"].endswith("made by aten::copy_ at torch_cuda_graph_manual_capture.py:67 in train_with_cuda_graph")
    assert {(e["source_file"], e["source_line"], e["source_function"]) for e in finding["evidence"]} == {
        ("torch_cuda_graph_manual_capture.py", 67, "train_with_cuda_graph")}


def con_path(con):
    return con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchone()[0]


def test_a_lake_keeps_the_frames(tmp_path):
    # A lake's loads run in a scratch database of their own: the library rule must be there too.
    lake = tmp_path / "lake"
    result = invoke_cli("load", FOREIGN / "rtx5080_cuda_graph_replay_manual_capture.json.gz", "--lake", lake)
    assert result.exit_code == 0, result.output
    result = invoke_cli("query", "memcpy", "--lake", lake, "-f", "json")
    assert result.exit_code == 0, result.output
    assert [r["source"] for r in json.loads(result.output)] == [
        "torch_cuda_graph_manual_capture.py:67 in train_with_cuda_graph", None]
