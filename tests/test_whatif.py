"""What-if replay (tracekit whatif, tracekit.whatif; issue [15]): the trace's dependency graph
replayed without change gives the trace back, and replayed with a fix predicts what the captured
fix saved (tests/data/h200/loops/truth.csv: each loop's time per step without the profiler)."""

import csv
import json

import pytest

from conftest import TEST_DATA, db_rows, invoke_cli

TRUTH = {row["loop"]: row for row in csv.DictReader(open(TEST_DATA / "h200" / "loops" / "truth.csv"))}


def whatif(db, trace, *fixes):
    import tracekit
    return tracekit.whatif(trace, fixes, db=db)


def traces(db):
    import duckdb
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [row[0] for row in con.execute("SELECT DISTINCT trace FROM steps ORDER BY trace").fetchall()]
    finally:
        con.close()


@pytest.mark.parametrize("db_name", ["sample_db", "loops_db", "launch_bound_db"])
def test_the_replay_without_change_gives_every_step_back(request, db_name):
    db = request.getfixturevalue(db_name)
    names = traces(db)
    assert len(names) >= 3
    for trace in names:
        result = whatif(db, trace)
        if len(result.ranks) > 1:
            # the gloo job's ranks, replayed together: each all_reduce ends on both at once, which CPU
            # threads do not (tests/test_job_replay.py holds them to what that allows)
            continue
        for step in result.steps:
            assert step.replayed_us == pytest.approx(step.trace_us, rel=0.001, abs=0.01), (trace, step)
            assert step.fixed_us == step.replayed_us


@pytest.mark.parametrize("naive, fixed", [("infer_naive", "infer_inplace"), ("train_naive", "train_inplace")])
def test_dropping_the_copies_masked_fill_makes_predicts_the_in_place_fix(loops_db, naive, fixed):
    """In training, masked_fill's backward copies too (a copy no user change removes): the fix
    drops the copies under the user's call alone, and predicts the saving within 5%."""
    result = whatif(loops_db, naive, "drop-copies:aten::masked_fill")
    measured = float(TRUTH[naive]["step_us"]) - float(TRUTH[fixed]["step_us"])
    assert result.saving_us == pytest.approx(measured, rel=0.05)
    assert result.fit_pct == pytest.approx(0, abs=0.1)
    every_copy = whatif(loops_db, naive, "drop:Memcpy DtoD")
    if naive.startswith("train"):  # both copies: about twice what the fix saved
        assert every_copy.saving_us == pytest.approx(2 * measured, rel=0.1)


def test_a_stall_the_gpu_hides_saves_nothing(loops_db):
    """train_stall sleeps 4 ms between forward and backward; removing it saved 88 µs of 41,244
    (0.2%, within run-to-run noise): the GPU was busy all along."""
    result = whatif(loops_db, "train_stall", "drop-cpu-gaps:3000")
    assert abs(result.saving_us) < 0.01 * result.mean("replayed_us")


def test_on_the_samples_the_copy_fix_predicts_naive_inplace(sample_db):
    """The samples sync every step: naive → naive_inplace saved 268 µs a step in the traces."""
    predicted = whatif(sample_db, "naive", "drop-copies:aten::masked_fill")
    measured = whatif(sample_db, "naive").mean("trace_us") - whatif(sample_db, "naive_inplace").mean("trace_us")
    assert predicted.saving_us == pytest.approx(measured, rel=0.1)


def test_in_training_the_main_thread_waits_for_autograds_thread(launch_bound_db):
    """The fp32 training step is CPU-bound, and its main thread's long gaps are backward(): waiting
    for autograd's thread, a handoff each way per step (the forward hands over, the backward hands
    back). They are no stall: dropping gaps of 1 ms or more saves under 2%, where taking autograd's
    backward ops off its thread saves a third, the main thread waiting that much less; removing
    the syncs saves little (the GPU is idle at them)."""
    from tracekit.replay.graph import read_graph
    from tracekit.store.database import connect_for_queries

    con = connect_for_queries(launch_bound_db)
    try:
        graph = read_graph(con, "train_naive")
    finally:
        con.close()
    handoffs = graph.call_after >= 0
    assert len(graph.lanes) == 2 and 2 * len(graph.steady) <= handoffs.sum() <= 2 * len(graph.steps) + 2
    assert set(graph.call_lane[handoffs]) == {0, 1}  # both ways
    gaps = whatif(launch_bound_db, "train_naive", "drop-cpu-gaps:1000")
    assert 0 <= gaps.saving_us < 0.02 * gaps.mean("replayed_us")
    backward = whatif(launch_bound_db, "train_naive", "drop-cpu:^autograd::engine::evaluate_function")
    assert 0.2 * backward.mean("replayed_us") < backward.saving_us < 0.5 * backward.mean("replayed_us")
    syncs = whatif(launch_bound_db, "train_naive", "drop-sync:Synchronize")
    assert 0 <= syncs.saving_us < 0.05 * syncs.mean("replayed_us")


def test_inference_has_one_thread_and_no_handoff(loops_db):
    from tracekit.replay.graph import read_graph
    from tracekit.store.database import connect_for_queries

    con = connect_for_queries(loops_db)
    try:
        graph = read_graph(con, "infer_naive")
    finally:
        con.close()
    assert len(graph.lanes) == 1 and not (graph.call_after >= 0).any()


def test_the_command_prints_each_step_and_the_saving(sample_db):
    result = invoke_cli("whatif", "naive", "--apply", "drop-copies:aten::masked_fill", "--db", sample_db)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "naive: replayed with drop-copies:aten::masked_fill"
    assert lines[1].split() == ["step", "steady", "trace_us", "replayed_us", "fixed_us", "saving_us"]
    assert lines[-1].startswith("Per step, over the steady steps: ") and "(+0.0%)" in lines[-1]
    data = json.loads(invoke_cli("whatif", "naive", "--apply", "drop-copies:aten::masked_fill", "--db", sample_db,
                                 "-f", "json").output)
    assert data["fit_pct"] == 0 and 200 < data["saving_us_per_step"] < 300
    assert [s["step"] for s in data["steps"]] == list(range(6)) and data["steady_steps"] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("args, says", [
    (["--apply", "bogus:1"], "Error: --apply 'bogus:1': a fix is one of drop-copies:OP, drop:REGEX, drop-sync:REGEX, "
                             "drop-cpu-gaps:US[-US], drop-cpu:REGEX, drop-host-ops:US, tensor-cores[:REGEX], "
                             "pin-copies[:REGEX], prefetch-copies[:REGEX], cuda-graph[:US], "
                             "fuse-attention[:REGEX], fuse-attention-chains, fuse-optimizer, drop-scaler-checks, fuse-elementwise[:REGEX], no-profiler[:US]"),
    (["--apply", "cuda-graph:x"], "Error: --apply 'cuda-graph:x': cuda-graph takes a time in microseconds above 0"),
    (["--apply", "fuse-attention-chains:x"], "Error: --apply 'fuse-attention-chains:x': fuse-attention-chains takes no argument"),
    (["--apply", "drop-host-ops:0"], "Error: --apply 'drop-host-ops:0': drop-host-ops takes a time in microseconds above 0"),
    (["--apply", "drop-host-ops:nan"], "Error: --apply 'drop-host-ops:nan': drop-host-ops takes a time in microseconds above 0"),
    (["--apply", "drop-cpu-gaps:x"], "Error: --apply 'drop-cpu-gaps:x': drop-cpu-gaps takes a time in microseconds above 0, "
                                     "or a range of two (US-US)"),
    (["--apply", "drop-cpu-gaps:3000-2000"], "Error: --apply 'drop-cpu-gaps:3000-2000': drop-cpu-gaps takes a time in "
                                             "microseconds above 0, or a range of two (US-US)"),
    (["--apply", "drop:("], "Error: --apply 'drop:(': not a regular expression"),
])
def test_a_bad_fix_is_a_one_line_usage_error(sample_db, args, says):
    result = invoke_cli("whatif", "naive", *args, "--db", sample_db)
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1].startswith(says)


def test_a_fix_that_changes_nothing_says_so(sample_db):
    """A misspelt op (masked_fil) replayed as a saving of 0.0 µs, said as if it were the answer."""
    result = invoke_cli("whatif", "naive", "--apply", "drop-copies:aten::masked_fil", "--apply",
                        "drop-copies:aten::masked_fill", "--db", sample_db)
    assert result.exit_code == 0, result.output
    lines = result.output.rstrip().splitlines()
    assert lines[-2].endswith("they save 255.0 µs a step (9.7%).")
    assert lines[-1] == ("Note: drop-copies:aten::masked_fil changed nothing in the trace: nothing in it matches "
                         "(a name or pattern misspelt?), or what matches is as fast as the fix would make it.")
    as_json = json.loads(invoke_cli("whatif", "naive", "--apply", "drop-sync:nosuch", "-f", "json", "--db",
                                    sample_db).output)
    assert as_json["unchanged_by"] == ["drop-sync:nosuch"] and as_json["saving_us_per_step"] == 0


def test_an_unknown_trace_is_one_line(sample_db):
    result = invoke_cli("whatif", "nosuch", "--db", sample_db)
    assert result.exit_code == 1 and result.output.strip() == "Error: no trace named 'nosuch' is loaded"


@pytest.mark.parametrize("trace", ["cpu_only_linear_train_step", "old_schema_operator_only_no_gpu_events"])
def test_a_trace_with_nothing_to_replay_is_one_line(foreign_db, trace):
    """A CPU-only trace has no runtime call and no GPU work: no step time to replay (it printed a
    traceback formatting the replay's missing figures)."""
    result = invoke_cli("whatif", trace, "--db", foreign_db)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.strip() == (f"Error: whatif {trace}: nothing to replay: the trace records no runtime call "
                                     "(cudaLaunchKernel, hipMemcpyAsync...) and no GPU work, as a CPU-only trace "
                                     "does; the replay models the GPU's work and the calls that made it")


def test_a_trace_with_more_links_than_the_rounds_take_is_swept(sample_db, monkeypatch):
    """flex syncs 20 times in its 6 steps; with the rounds' limit below that, the command sweeps
    the nodes instead and prints the same."""
    from tracekit.replay import simulate

    rounds = invoke_cli("whatif", "flex", "--apply", "cuda-graph", "--db", sample_db)
    monkeypatch.setattr(simulate, "MAX_WAITS", 10)
    swept = invoke_cli("whatif", "flex", "--apply", "cuda-graph", "--db", sample_db)
    assert rounds.exit_code == swept.exit_code == 0 and swept.output == rounds.output
    assert "replayed as it is (+0.0%)" in swept.output


@pytest.fixture(scope="module")
def tf32_db(tmp_path_factory):
    """The H200's fp32 captures with TF32 off (tests/data/h200/fp32) and on (fp32_tf32), one process each."""
    db = tmp_path_factory.mktemp("tf32") / "tf32.duckdb"
    result = invoke_cli("load", TEST_DATA / "h200" / "fp32", TEST_DATA / "h200" / "fp32_tf32", "--db", db)
    assert result.exit_code == 0, result.output
    return db


def test_tensor_cores_predicts_what_allowing_tf32_saved(tf32_db):
    """naive with TF32 off runs its GEMMs as SIMT FFMA; at their Tensor Core roofline the step
    would take about what the TF32 capture (loaded as naive-2) took: 4,614.9 → 3,416.4 µs traced."""
    predicted = whatif(tf32_db, "naive", "tensor-cores")
    measured = predicted.mean("trace_us") - whatif(tf32_db, "naive-2").mean("trace_us")
    assert measured == pytest.approx(1198.5, abs=1)
    assert predicted.saving_us == pytest.approx(measured, rel=0.25)
    # The TF32 trace's GEMMs are on Tensor Cores already: nothing to change.
    assert whatif(tf32_db, "naive-2", "tensor-cores").saving_us == 0


def test_pinning_the_pageable_copy_predicts_the_pinned_capture(loops_db):
    """copy_pageable → copy_pinned (one process): the replayed step with the 64 MiB copy at the
    link's pinned bandwidth and its call no longer blocking is within 10% of the pinned trace's."""
    predicted = whatif(loops_db, "copy_pageable", "pin-copies")
    pinned = whatif(loops_db, "copy_pinned")
    assert predicted.mean("fixed_us") == pytest.approx(pinned.mean("trace_us"), rel=0.10)
    # Unprofiled, the copy cost less (4,753.0 µs a step, against 6,243.3 in the trace): the share saved agrees.
    measured_share = 1 - float(TRUTH["copy_pinned"]["step_us"]) / float(TRUTH["copy_pageable"]["step_us"])
    assert predicted.saving_us / predicted.mean("replayed_us") == pytest.approx(measured_share, rel=0.15)


def test_a_prefetch_on_a_side_stream_hides_the_compute_behind_the_copy(loops_db):
    """prefetch-copies: the 64 MiB copy pinned, on a side stream of its own and issued a step ahead,
    runs while the step before computes, so the step is the copy at the host link's speed (the
    H200's PCIe 5.0 x16, 64 GB/s one way: 1,048.6 µs), where pin-copies replays the copy and then
    the compute on one stream. (No capture checks it yet: capture/fix_pairs.py's train_copy_prefetch.)"""
    prefetched = whatif(loops_db, "copy_pageable", "prefetch-copies")
    pinned = whatif(loops_db, "copy_pageable", "pin-copies")
    link_us = 64 * 2 ** 20 / 64e3
    assert prefetched.mean("fixed_us") == pytest.approx(link_us, rel=0.05)
    compute_us = pinned.mean("fixed_us") - link_us  # what follows the copy on its stream, about 450 µs
    assert pinned.mean("fixed_us") - prefetched.mean("fixed_us") > 0.9 * compute_us
    assert prefetched.fit_pct == pytest.approx(0, abs=0.1)


def test_a_cuda_graph_saves_only_the_gaps_between_kernels_where_the_gpu_is_the_bound(loops_db):
    """infer_naive and train_gpt2 keep their GPU busy: from a graph, their kernels run as they did
    but closer together (a graph's nodes 0.45 µs apart, where kernels queued on a stream ran 1.4-1.5
    µs apart): train_gpt2's 677 kernels a step save about 0.8 ms of its 41.4 ms, infer_naive's 4
    next to nothing."""
    for trace, saving_us in (("infer_naive", 11.3), ("train_gpt2", 802.1)):
        result = whatif(loops_db, trace, "cuda-graph")
        assert result.saving_us == pytest.approx(saving_us, abs=1), trace
        assert 0 < result.saving_us < 0.02 * result.mean("replayed_us"), trace


def test_a_cuda_graph_saves_most_of_a_launch_bound_step(launch_bound_db):
    """train_naive in fp32 is bound by the CPU launching (16.3 ms of CPU in a 17.2 ms step): from a
    graph, its steady steps take about the GPU's busy time, and never less."""
    result = whatif(launch_bound_db, "train_naive", "cuda-graph")
    import duckdb
    con = duckdb.connect(str(launch_bound_db), read_only=True)
    busy = con.execute("SELECT avg(b.busy_us) FROM gpu_busy b JOIN steady_steps s USING (trace, step) "
                       "WHERE trace = 'train_naive'").fetchone()[0]
    con.close()
    assert busy <= result.mean("fixed_us") < 0.6 * result.mean("replayed_us")


def test_dropping_cpu_ops_the_gpu_waits_behind_saves_nothing(loops_db):
    """infer_naive's GPU runs behind its CPU: the forward's ops taking no CPU time would not make
    the GPU's work any shorter; a name no op has changes nothing."""
    result = whatif(loops_db, "infer_naive", "drop-cpu:^aten::")
    assert result.steps and abs(result.saving_us) < 0.005 * result.mean("replayed_us")
    assert whatif(loops_db, "infer_naive", "drop-cpu:^no such op$").saving_us == 0


def test_a_stream_waiting_for_another_carries_the_others_saving(side_streams_db):
    """The main stream's add waits (cudaStreamWaitEvent) for the side stream's 0.75 ms bmm: dropping
    the bmm saves what the loop without it saved (698.7 µs a step unprofiled, 692.8 in the traces);
    without the wait between streams in the graph the replay saw nothing to save."""
    side_truth = {row["loop"]: float(row["step_us"]) for row in
                  csv.DictReader(open(TEST_DATA / "h200" / "side_streams" / "truth.csv"))}
    result = whatif(side_streams_db, "side_stream", "drop:aten::bmm")
    assert result.fit_pct == pytest.approx(0, abs=0.1)
    assert result.saving_us == pytest.approx(side_truth["side_stream"] - side_truth["side_stream_none"], rel=0.05)
    assert result.mean("fixed_us") == pytest.approx(whatif(side_streams_db, "side_stream_none").mean("trace_us"),
                                                    rel=0.05)


@pytest.mark.parametrize("db_name, trace, fix", [
    ("loops_db", "train_gpt2", "cuda-graph"),             # 2 threads, handoffs, syncs
    ("loops_db", "copy_pageable", "pin-copies"),
    ("loops_db", "copy_pageable", "prefetch-copies"),     # a stream of its own, launched a step ahead
    ("launch_bound_db", "train_naive", "drop-cpu-gaps:1000"),
    ("side_streams_db", "side_stream", "drop:aten::bmm"),   # a wait between streams
])
def test_the_sweep_for_many_links_gives_the_rounds_answer(request, monkeypatch, db_name, trace, fix):
    """Past MAX_WAITS links (calls that wait, handoffs, stream waits) the replay sweeps the nodes
    once in dependency order instead of a round per link: the same answer to the nanosecond."""
    import numpy as np

    from tracekit.replay import simulate
    from tracekit.replay.fixes import apply, parse_fix
    from tracekit.replay.graph import read_graph
    from tracekit.store.database import connect_for_queries

    con = connect_for_queries(request.getfixturevalue(db_name))
    try:
        graph = read_graph(con, trace)
        for changed in ({}, apply(graph, [parse_fix(fix)], con)):
            fixed = changed.pop("graph", graph)
            rounds = simulate.replay(fixed, **changed)
            monkeypatch.setattr(simulate, "MAX_WAITS", -1)
            swept = simulate.replay(fixed, **changed)
            monkeypatch.undo()
            assert all(np.array_equal(a, b) for a, b in zip(rounds, swept))
    finally:
        con.close()


def test_a_trace_without_steps_is_replayed_whole(foreign_db):
    """A trace profiled without a schedule has no ProfilerStep#N: whatif replays it as one step, from
    its first call or GPU work to its last. The public RTX 4090 pair stalls 5.0 ms on each rank
    (gpu_idle's stall); replayed together without it, the job saves those 5 ms."""
    import tracekit

    as_is = tracekit.whatif("t4_resnet50_train", [], db=foreign_db)
    span = db_rows(foreign_db, "SELECT last_us - first_us FROM traces WHERE trace = 't4_resnet50_train'")[0][0]
    assert as_is.whole_trace and len(as_is.steps) == 1 and as_is.fit_pct == 0.0
    assert 0.9 * span < as_is.mean("trace_us") <= span + 0.001
    stall = tracekit.whatif("rtx4090_tp2_rank0_nccl_allreduce", ["drop-cpu-gaps:4999-5002"], db=foreign_db)
    assert stall.whole_trace and stall.ranks == ["rtx4090_tp2_rank0_nccl_allreduce", "rtx4090_tp2_rank1_nccl_allreduce"]
    assert stall.saving_us == pytest.approx(5000.8, abs=0.5)
    result = invoke_cli("whatif", "rtx4090_tp2_rank0_nccl_allreduce", "--apply", "drop-cpu-gaps:4999-5002",
                        "--db", foreign_db)
    assert result.exit_code == 0, result.output
    assert "whole trace  yes" in result.output
    assert result.output.rstrip().endswith("they save 5000.8 µs (6.9%).")
    assert "The whole trace (it has no steps), from its first event to its last: 72662.8 µs traced" in result.output


def test_findings_on_a_trace_without_steps_point_to_its_whole_replay(foreign_db):
    import tracekit

    found = tracekit.findings(trace="rtx4090_tp2_rank0_nccl_allreduce", db=foreign_db)
    stall = found[found["whatif"] == "drop-cpu-gaps:4999-5002"].iloc[0]
    assert stall["saving_us_per_step"] != stall["saving_us_per_step"]  # NULL: no step to save it in
    assert stall["detail"].endswith("replayed saving unknown: the trace has no steps, so no saving per step; "
                                    "`tracekit whatif rtx4090_tp2_rank0_nccl_allreduce --apply "
                                    "drop-cpu-gaps:4999-5002` replays it whole")


@pytest.mark.parametrize("seed", range(20))
def test_a_lanes_scan_is_its_recurrence_whatever_order_its_lanes_come_in(seed):
    """simulate._lane_scan: E[k] = max(E[k-1] + x[k], b[k]) along each lane (b NEVER: no bound), the
    first of a lane b there (or x, unbounded), checked against the recurrence written out node by node,
    on lanes in order and interleaved."""
    import numpy as np

    from tracekit.replay.simulate import NEVER, _lane_scan

    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 200)) if seed else 0
    lane = rng.integers(0, 6, n)
    if seed % 2:
        lane = np.sort(lane)
    x = rng.integers(0, 5_000, n).astype(np.int64)
    if seed % 3 == 0:  # each lane starts 2^61 in: the running total over all lanes wraps past int64, each lane's stays exact
        x[np.unique(lane, return_index=True)[1]] += np.int64(2 ** 61)
    b = np.where(rng.random(n) < 0.4, NEVER, rng.integers(0, 400_000, n)).astype(np.int64)
    expected, last = np.zeros(n, dtype=np.int64), {}
    for k in range(n):
        carried = last[lane[k]] + x[k] if lane[k] in last else x[k] + (NEVER if b[k] == NEVER else 0)
        expected[k] = carried if b[k] == NEVER else max(carried, b[k]) if lane[k] in last else b[k]
        last[lane[k]] = expected[k]
    assert (_lane_scan(lane, x, b) == expected).all()


@pytest.fixture(scope="module")
def sync_copies_db(tmp_path_factory):
    """A trace of runtime calls without GPU activity (an RTX 4060's: aten::to's 85-87 ms
    cudaMemcpyAsync, then a 278-296 µs cudaStreamSynchronize, each step) and ResNet-18 trained on a
    batch prepared on the CPU and copied as fp32 from pageable memory (aten::to's copy, then a sync)."""
    from conftest import cli_loaded

    return cli_loaded(tmp_path_factory, "sync_copies", TEST_DATA / "foreign" / "rtx4060_runtime_without_gpu_events.json.gz",
                      TEST_DATA / "h100" / "model_pairs" / "resnet_train_cpu_prep.json.gz")


def test_dropping_a_sync_keeps_the_copys_own_transfer(sync_copies_db):
    """`drop-sync:aten::to` removes the waits under aten::to, not the data they move: where the trace
    recorded no GPU copy, the copy call keeps its time, and the finding's replayed saving is the
    sync's own 296.3 µs a step (it was the copy's 87 ms too); where it did, the call keeps its copy's
    time, and the 77 MB pageable copy stays pageable_copy's to save (9,678.6 µs a step claimed
    before, 655.8 now, of the pin's 10,329.5)."""
    import tracekit

    found = tracekit.findings(db=sync_copies_db)
    saving = found.set_index(["trace", "rule", "whatif"])["saving_us_per_step"]
    assert saving[("rtx4060_runtime_without_gpu_events", "host_sync", "drop-sync:aten::to")] == pytest.approx(296.3, abs=0.1)
    assert saving[("resnet_train_cpu_prep", "host_sync", "drop-sync:aten::to")] == pytest.approx(655.8, abs=1)
    assert saving[("resnet_train_cpu_prep", "pageable_copy", "pin-copies")] == pytest.approx(10_329.5, abs=1)


def test_a_dropped_item_keeps_its_copys_microseconds_in_any_order_of_fixes(tmp_path_factory):
    """.item() on an H100 (tests/data/h100/fix_rounds/infer_item): under drop-sync:aten::item each
    cudaMemcpyAsync keeps its 4-byte copy's own time (a few µs of what were mostly waits) and each
    cudaStreamSynchronize costs nothing; a fix that drops the copies too leaves the calls nothing to
    keep, whichever of the two fixes comes first."""
    import numpy as np

    from conftest import cli_loaded
    from tracekit.replay.fixes import apply, parse_fix
    from tracekit.replay.graph import read_graph
    from tracekit.store.database import connect_for_queries

    db = cli_loaded(tmp_path_factory, "item", TEST_DATA / "h100" / "fix_rounds" / "infer_item.json.gz")
    con = connect_for_queries(db)
    try:
        graph = read_graph(con, "infer_item")
        changed = apply(graph, [parse_fix("drop-sync:aten::item")], con)
        under = np.array(["aten::item" in path for path in graph.call_op_path])
        copies = under & np.array(["Memcpy" in name for name in graph.call_name])
        syncs = under & np.array(["Synchronize" in name for name in graph.call_name])
        assert copies.sum() == syncs.sum() >= 5
        own = {call: dur for call, dur, kind in zip(graph.item_launch, graph.item_dur, graph.item_kind) if kind == "memcpy"}
        assert list(changed["call_dur"][copies]) == [own[call] for call in np.flatnonzero(copies)]
        assert changed["call_dur"][copies].sum() < 0.2 * graph.call_dur[copies].sum()
        assert (changed["call_dur"][syncs] == 0).all() and (changed["call_wait"][under] == -1).all()
        both = [parse_fix("drop-sync:aten::item"), parse_fix("drop:Memcpy DtoH")]
        for fixes in (both, both[::-1]):
            assert (apply(graph, fixes, con)["call_dur"][under] == 0).all()
    finally:
        con.close()


def test_a_fused_kernel_does_its_gemms_flops_at_a_share_of_the_16_bit_peak(sample_db):
    """The sample naive trace's chain (B4 H16 S2048 D64, bf16, causal, one call a step) fused: its two
    GEMMs' 68.7 GFLOP at the H200's 989.5 TFLOP/s bf16 peak, over FUSED_FORWARD_SHARE_OF_PEAK, 165 µs;
    the eager GEMMs' roofline, whose bytes are the scores', 238 µs; the flash kernel the sdpa_flash
    trace captured at the same shape, 159 µs."""
    from tracekit.replay import attention_fix
    from tracekit.replay.job import Jobs
    from tracekit.store.database import connect_for_queries

    con = connect_for_queries(sample_db)
    try:
        graph = Jobs(con).of("naive").graphs["naive"]
        firsts, fused_ns, *_ = attention_fix._fused(graph, attention_fix._CHAIN_CALLS, {}, con)
        group, _ = attention_fix._attention_groups(con, graph, attention_fix._CHAIN_CALLS, {})
        flash_us = con.execute("SELECT sum(dur_us) / count(DISTINCT step) FROM kernels WHERE trace = 'sdpa_flash' "
                               "AND step IS NOT NULL AND name LIKE '%flash_fwd%'").fetchone()[0]
    finally:
        con.close()
    gemms = (group >= 0) & (graph.item_half_peak_ns > 0)
    steps = len(set(graph.item_step[group >= 0]))
    assert graph.item_half_peak_ns[gemms].sum() / steps / 1e3 == pytest.approx(69.4, abs=0.1)
    assert graph.item_roofline[gemms].sum() / steps / 1e3 == pytest.approx(237.7, abs=0.1)
    assert list(fused_ns) == [int(n) for n in graph.item_half_peak_ns[gemms].reshape(-1, 2).sum(axis=1)
                              / attention_fix.FUSED_FORWARD_SHARE_OF_PEAK]
    assert fused_ns.mean() / 1e3 == pytest.approx(165.3, abs=0.2)
    assert flash_us == pytest.approx(159.0, abs=0.1)
