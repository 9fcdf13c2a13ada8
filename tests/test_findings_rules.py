"""The finding rules gpu_idle, host_sync, pageable_copy, per_call_setup and graph_kernels_missing:
each on a real trace that has the problem (ours, tests/data/h200, or a public one of
tests/data/foreign), on a minimal trace of tests/trace_builder.py where no real trace shows it, and
silent on traces that do not have it."""

import json

import pytest

import trace_builder as tb
from built_traces import BUILT
from conftest import SAMPLE_TRACES, TEST_DATA
from tracekit.store.database import connect, connect_for_queries
from tracekit.analysis.findings_engine import run_findings
from tracekit.ingest.loader import load_file

FOREIGN = TEST_DATA / "foreign"
REAL = ([("samples", p) for p in sorted(SAMPLE_TRACES.glob("*.json.gz"))]
        + [("train", TEST_DATA / "h200" / "train_fp32" / "train_sdpa_default.json.gz")]
        + [("foreign", FOREIGN / f"{name}.json.gz") for name in (
            "l4_square_memcpy_two_steps", "v100_dgxs_mlp_train_step", "t4_resnet50_train",
            "rtx5080_cuda_graph_replay_manual_capture")]
        # AMP's fp16 recipe on an H100: a GradScaler and AdamW's foreach step
        + [("amp", TEST_DATA / "h100" / "more_ops" / "train_more_ops.json.gz")])


@pytest.fixture(scope="module")
def rules_db(tmp_path_factory):
    """The sample traces, an H200 training capture, four public traces and the built ones, each
    named folder_stem (samples_naive, train_train_sdpa_default, foreign_..., built_item_loop)."""
    folder = tmp_path_factory.mktemp("rules")
    files = REAL + [("built", tb.write(folder, name, make())) for name, make in BUILT.items()]
    con = connect(folder / "rules.duckdb")
    for group, file in files:
        assert load_file(con, file).status == "loaded"
        stem = file.name.split(".json")[0]
        con.execute("UPDATE trace_files SET trace = ? WHERE path = ?", [f"{group}_{stem}", str(file.resolve())])
    con.close()
    return folder / "rules.duckdb"


def _findings(db, rule, **params):
    con = connect_for_queries(db)
    try:
        frame = run_findings(con, rule=rule, params={k: str(v) for k, v in params.items()})
        frame.attrs["loaded"] = {row[0] for row in con.execute("SELECT trace FROM traces").fetchall()}
        return frame
    finally:
        con.close()


@pytest.fixture(scope="module")
def found(rules_db):
    """Every finding of the five rules with their default thresholds."""
    con = connect_for_queries(rules_db)
    try:
        frames = [run_findings(con, rule=rule) for rule in
                  ("gpu_idle", "host_sync", "pageable_copy", "per_call_setup", "graph_kernels_missing")]
    finally:
        con.close()
    import pandas as pd
    frame = pd.concat(frames, ignore_index=True)
    frame.attrs["loaded"] = {row[0] for row in _query(rules_db, "SELECT trace FROM traces")}
    return frame


def _rows(found, trace, rule):
    # a trace renamed or not loaded would find nothing too: "silent" must mean silent on it
    assert trace in found.attrs["loaded"], f"{trace} is not loaded"
    return found[(found["trace"] == trace) & (found["rule"] == rule)]


def _one(found, trace, rule, **where):
    rows = _rows(found, trace, rule)
    for column, text in where.items():
        rows = rows[rows[column].str.contains(text, regex=False)]
    assert len(rows) == 1, found[["trace", "rule", "title"]].to_string()
    return rows.iloc[0]


def _query(db, sql, params=()):
    con = connect_for_queries(db)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def _steady_gaps(db, trace, min_gap_us):
    """The device's idle gaps of at least `min_gap_us` between its kernels, copies and fills, both
    sides in steady steps, computed here in Python from the rows of the views."""
    rows = _query(db, """
        SELECT ts_us, ts_us + dur_us, step FROM kernels WHERE trace = ?
        UNION ALL SELECT ts_us, ts_us + dur_us, step FROM memcpy WHERE trace = ?
        UNION ALL SELECT ts_us, ts_us + dur_us, step FROM memset WHERE trace = ?""", [trace] * 3)
    steady = {step for (step,) in _query(db, "SELECT step FROM steady_window WHERE trace = ?", [trace])}
    gaps, reach, before = [], None, None
    for start, end, step in sorted(rows, key=lambda r: (r[0], r[1])):
        if reach is not None and start - reach >= min_gap_us and step in steady and before in steady:
            gaps.append(start - reach)
        reach, before = end if reach is None else max(reach, end), step
    return gaps, len(steady)


# gpu_idle

def test_gpu_idle_finds_the_launch_bound_training_step_and_what_the_cpu_ran(rules_db, found):
    rows = _rows(found, "train_train_sdpa_default", "gpu_idle")
    row = _one(found, "train_train_sdpa_default", "gpu_idle", title="ran Python and ops")
    assert row["severity"] == "high" and "CUDA graph" in row["fix"] and "torch.compile" in row["fix"]
    assert "Optimizer.step#AdamW.step" in row["detail"]
    # The causes share out the gaps: together they are every gap of 50 us or more, per step.
    gaps, steps = _steady_gaps(rules_db, "train_train_sdpa_default", 50)
    assert rows["estimate_us_per_step"].sum() == pytest.approx(sum(gaps) / steps, rel=1e-6)
    step_us = _query(rules_db, "SELECT cpu_us_per_step FROM step_totals WHERE trace = ?", ["train_train_sdpa_default"])[0][0]
    assert row["estimate_us_per_step"] > 0.5 * step_us  # 2.8 ms of kernels in a 17.9 ms step
    evidence = row["evidence"]
    assert len(evidence) == 20 and all(e["gap_dur_ns"] >= 50_000 for e in evidence)
    assert {e["source"] for e in evidence} <= {"cpu_ops", "kernels", "memcpy", "memset"}


def test_gpu_idle_threshold_is_a_parameter(rules_db, found):
    default = _one(found, "train_train_sdpa_default", "gpu_idle", title="ran Python and ops")["estimate_us_per_step"]
    stricter = _findings(rules_db, "gpu_idle", trace="train_train_sdpa_default", min_gap_us=500)
    gaps, steps = _steady_gaps(rules_db, "train_train_sdpa_default", 500)
    # each row's estimate to 0.1 µs, as findings print it
    assert stricter["estimate_us_per_step"].sum() == pytest.approx(sum(gaps) / steps, abs=0.05 * len(stricter))
    assert 0 < sum(gaps) / steps < default


def test_gpu_idle_names_the_copy_the_cpu_waited_for(found):
    row = _one(found, "built_item_loop", "gpu_idle", title="waited for a copy")
    assert "cudaMemcpyAsync in aten::_local_scalar_dense" in row["title"]
    assert row["estimate_us_per_step"] == pytest.approx(95.0)  # from the copy's end to the next kernel
    assert [e["name"] for e in row["evidence"]] == ["cudaMemcpyAsync"] * 3
    assert "non_blocking=True" in row["fix"]


def test_gpu_idle_says_when_the_cpu_was_loading_data(found):
    row = _one(found, "built_loading_loop", "gpu_idle", title="loaded data")
    # Each step: from the last kernel's end to the batch's copy (2 gaps in 3 steady steps).
    assert row["estimate_us_per_step"] == pytest.approx(2 * 940 / 3, abs=0.05)  # to 0.1 µs
    assert "num_workers" in row["fix"] and "pin_memory=True" in row["fix"]


def test_a_stalls_fix_takes_the_stalls_the_finding_counted_not_every_longer_stretch(rules_db, found):
    """The L4 trace's steady step (566 ms) holds two long stretches without a runtime call: 27.7 ms
    of Python before a launch, the stall gpu_idle counts in the step, and 508 ms inside aten::randn
    on the CPU, before the step's first GPU work (whose gap begins in the step before, outside the
    steady window). The stall's fix drops the stretches of its own range: it saves what the finding
    counted, not the randn's 508 ms too, as an open-ended threshold does."""
    import tracekit

    row = _one(found, "foreign_l4_square_memcpy_two_steps", "gpu_idle", title="stalled")
    assert row["whatif"] == "drop-cpu-gaps:27662-27665"
    assert row["estimate_us_per_step"] == pytest.approx(27620.6, abs=0.05)
    assert row["saving_us_per_step"] == pytest.approx(27663.4, abs=0.05)  # the stretch itself, replayed
    open_ended = tracekit.whatif("foreign_l4_square_memcpy_two_steps", ["drop-cpu-gaps:27663"], db=rules_db)
    assert open_ended.saving_us > 530_000  # the randn's 508 ms went too


def test_gpu_idle_leaves_out_the_wait_of_a_sync_that_ends_each_step(rules_db, found):
    # The capture loop syncs at the end of every step; all the naive traces' long gaps start there.
    for trace in ("samples_naive", "samples_naive_inplace"):
        assert _rows(found, trace, "gpu_idle").empty
    counted = _findings(rules_db, "gpu_idle", trace="samples_naive", step_end_syncs=1)
    row = _one(counted, "samples_naive", "gpu_idle")
    assert "waited in cudaDeviceSynchronize in ProfilerStep#N" in row["title"]
    assert row["evidence"][0]["source"] == "runtime"


@pytest.mark.parametrize("trace", ["foreign_rtx5080_cuda_graph_replay_manual_capture",
                                   "foreign_l4_square_memcpy_two_steps"])
def test_gpu_idle_is_silent_where_the_gpu_never_waits_long_or_not_in_steady_steps(rules_db, found, trace):
    if trace.startswith("foreign_rtx5080"):
        gaps, _ = _steady_gaps(rules_db, trace, 0.001)
        assert max(gaps) < 50  # the graph replays keep the GPU busy
        assert _rows(found, trace, "gpu_idle").empty
    else:
        # Its 504 ms of CPU-side tensor making falls between its cold and its one steady step.
        assert "504" not in " ".join(_rows(found, trace, "gpu_idle")["title"])


# host_sync

def test_host_sync_finds_the_stream_syncs_of_copies_in_a_public_training_step(found):
    row = _one(found, "foreign_v100_dgxs_mlp_train_step", "host_sync")
    assert row["title"] == "2 cudaStreamSynchronize per step from aten::to → aten::copy_: the CPU waits 15.0 µs per step"
    assert row["estimate_us_per_step"] == pytest.approx(15.0)  # under the GPU's idle time: not capped
    assert "pin_memory=True" in row["fix"] and "non_blocking=True" in row["fix"]
    assert [e["source"] for e in row["evidence"]] == ["runtime", "runtime"]


def test_launch_bound_keeps_the_digits_of_a_gpu_busy_under_one_percent(rules_db):
    # the public V100 step: 50 µs of kernels in a 13.4 ms CPU span, not "0%: 0.1 ms"
    found = _findings(rules_db, "launch_bound", trace="foreign_v100_dgxs_mlp_train_step")
    row = _one(found, "foreign_v100_dgxs_mlp_train_step", "launch_bound")
    assert row["title"] == "The GPU is busy 0.4% of each step's CPU span: 50 µs of 13.4 ms"


def test_host_sync_finds_item_and_its_wait(found):
    row = _one(found, "built_item_loop", "host_sync")
    assert row["title"] == ("1 device-to-host copy of 4 B or less per step and cudaStreamSynchronize from "
                            "aten::item → aten::_local_scalar_dense: the CPU waits 191.0 µs per step")
    assert row["estimate_us_per_step"] == pytest.approx(191.0)
    assert "torch.where" in row["fix"]


def test_host_sync_takes_a_boolean_index_and_its_backward_for_one_sizing_op(rules_db, found):
    row = _one(found, "built_bool_index_loop", "host_sync")
    # the forward's aten::index and its backward's index_put_ each read the mask's count: one finding
    assert row["title"] == ("2 device-to-host copies of 8 B or less per step and cudaStreamSynchronize from aten::nonzero "
                            "(in aten::index; autograd::engine::evaluate_function: IndexBackward0): the CPU waits 258.0 µs per step")
    assert row["fix"].startswith("aten::nonzero sizes its output by the GPU's data") and "torch.where(mask, x, 0)" in row["fix"]
    assert row["whatif"] == "drop-sync:aten::nonzero"
    idle = _one(found, "built_bool_index_loop", "gpu_idle", title="to read the size of an output")
    assert idle["whatif"] == "drop-sync:aten::nonzero" and "torch.where(mask, x, 0)" in idle["fix"]
    # the fix takes both reads: the step replays shorter than without the forward's alone
    from tracekit.api import whatif
    both = whatif("built_bool_index_loop", ["drop-sync:aten::nonzero"], db=rules_db)
    forward = whatif("built_bool_index_loop", ["drop-sync:^aten::index →"], db=rules_db)
    assert both.saving_us > forward.saving_us > 0


def test_host_sync_tells_a_step_timed_by_events_to_read_them_later(found):
    row = _one(found, "built_event_timed_loop", "host_sync")
    assert row["title"] == "1 cudaEventSynchronize per step from ProfilerStep#N: the CPU waits 186.0 µs per step"
    assert "read their elapsed_time every N steps or after the loop" in row["fix"]
    assert row["whatif"] == "drop-sync:cudaEventSynchronize"


def test_host_sync_names_gradscalers_read_and_its_fix(rules_db, found):
    """AMP's GradScaler reads found_inf (.item()) before each foreach AdamW step: no .item() of the
    user's, so the advice is the fused optimizer, which checks it in its kernel."""
    checks = _query(rules_db, "SELECT s.step, s.optimizer, o.name FROM scaler_checks s JOIN cpu_ops o "
                              "ON o.trace = s.trace AND o.op_id = s.optimizer_op_id WHERE s.trace = 'amp_train_more_ops' ORDER BY s.step")
    steps = _query(rules_db, "SELECT count(*) FROM cpu_ops WHERE trace = 'amp_train_more_ops' AND name = 'Optimizer.step#AdamW.step'")
    assert checks == [(step, "AdamW", "Optimizer.step#AdamW.step") for step in range(3, 8)] and steps == [(5,)]
    row = _one(found, "amp_train_more_ops", "host_sync")
    assert row["title"].startswith("GradScaler's inf/NaN check before each AdamW step: 1 device-to-host copy")
    assert "torch.optim.AdamW(model.parameters(), ..., fused=True)" in row["fix"] and "bf16 autocast" in row["fix"]
    assert "read it every N steps" not in row["fix"]
    assert row["whatif"] == "fuse-optimizer"
    idle = _one(found, "amp_train_more_ops", "gpu_idle", title="GradScaler")
    assert idle["whatif"] == "fuse-optimizer" and "fused=True" in idle["fix"]
    # no other trace's read is taken for GradScaler's (the built trace of the test below aside)
    assert sorted(_query(rules_db, "SELECT DISTINCT trace FROM scaler_checks")) == [
        ("amp_train_more_ops",), ("built_amp_loss_logged",)]


def test_the_fused_optimizer_drops_gradscalers_read(rules_db):
    from tracekit.api import whatif
    fused = whatif("amp_train_more_ops", ["fuse-optimizer"], db=rules_db)
    # the read already gone: dropping it again changes nothing
    assert whatif("amp_train_more_ops", ["fuse-optimizer", "drop-scaler-checks"], db=rules_db).saving_us == fused.saving_us
    # the read alone; dropping the user's .item() calls leaves it (the trace has no other)
    read = whatif("amp_train_more_ops", ["drop-scaler-checks"], db=rules_db)
    assert 0 < read.saving_us < fused.saving_us
    user = whatif("amp_train_more_ops", ["drop-sync:aten::item"], db=rules_db)
    assert user.saving_us == 0 and user.unchanged == ["drop-sync:aten::item"]


def test_a_loss_logged_before_gradscalers_read_is_the_users(rules_db, found):
    """loss.item() between scaler.unscale_() and scaler.step(): the user's read, fixed by reading it
    every N steps; GradScaler's, right before the optimizer's step, by the fused optimizer."""
    assert len(_query(rules_db, "SELECT * FROM scaler_checks WHERE trace = 'built_amp_loss_logged'")) == 4
    rows = _rows(found, "built_amp_loss_logged", "host_sync")
    assert len(rows) == 2
    users, scalers = (rows[rows["title"].str.startswith("GradScaler's") == mine].iloc[0] for mine in (False, True))
    assert users["title"].startswith("1 device-to-host copy") and "read it every N steps" in users["fix"]
    assert (users["whatif"], scalers["whatif"]) == ("drop-sync:aten::item", "fuse-optimizer")
    # each fix takes its own read: the user's 225 µs wait, GradScaler's 15
    from tracekit.api import whatif
    assert whatif("built_amp_loss_logged", ["drop-sync:aten::item"], db=rules_db).saving_us == pytest.approx(227.0)
    assert whatif("built_amp_loss_logged", ["drop-scaler-checks"], db=rules_db).saving_us == pytest.approx(17.0)


@pytest.mark.parametrize("trace", ["samples_naive", "samples_sdpa_flash", "train_train_sdpa_default",
                                   "foreign_t4_resnet50_train", "foreign_rtx5080_cuda_graph_replay_manual_capture"])
def test_host_sync_is_silent_on_syncs_with_nothing_after_them(found, trace):
    # The capture loop's sync ends each step; t4's and rtx5080's final sync ends the trace.
    assert _rows(found, trace, "host_sync").empty


def test_host_sync_caps_a_step_end_sync_at_the_gpus_idle_time(rules_db):
    counted = _findings(rules_db, "host_sync", trace="samples_naive", step_end_syncs=1)
    row = _one(counted, "samples_naive", "host_sync")
    assert row["title"].startswith("1 cudaDeviceSynchronize per step from ProfilerStep#N")
    cpu_us, gpu_us = _query(rules_db, "SELECT cpu_us_per_step, gpu_us_per_step FROM step_totals WHERE trace = 'samples_naive'")[0]
    blocked = _query(rules_db, "SELECT avg(r.dur_us) FROM runtime r JOIN steady_steps s USING (trace, step) "
                               "WHERE trace = 'samples_naive' AND r.name = 'cudaDeviceSynchronize'")[0][0]
    assert blocked > cpu_us - gpu_us and row["estimate_us_per_step"] == pytest.approx(cpu_us - gpu_us, abs=0.05)


# pageable_copy

def test_pageable_copy_finds_the_public_l4_trace_copying_from_pageable_memory(found):
    row = _one(found, "foreign_l4_square_memcpy_two_steps", "pageable_copy")
    assert row["title"] == ("1 Memcpy HtoD of 381.5 MiB per step from pageable memory in "
                            "aten::to → aten::_to_copy → aten::copy_")
    assert "13.2 GB/s" in row["detail"]  # 400,000,000 B in 30,348 us
    # The copy's GPU time is the rule's estimate; pinned, over the L4's PCIe 4.0 link (32 GB/s one
    # way, the trace has no pinned copy to measure), the replay says it would take 12.5 ms. What it
    # saves is 3% of the 566 ms step (508 ms of it aten::randn on the CPU): medium.
    assert row["severity"] == "medium" and row["estimate_us_per_step"] == pytest.approx(30348, rel=0.001)
    assert row["whatif"] == "pin-copies" and 0.3 * 30348 < row["saving_us_per_step"] < 30348 - 12_500 + 100
    assert "pin_memory=True" in row["fix"] and "non_blocking=True" in row["fix"]
    assert [e["name"] for e in row["evidence"]] == ["Memcpy HtoD (Pageable -> Device)"]


def test_pageable_copy_tells_a_readback_to_use_a_pinned_buffer(found):
    row = _one(found, "built_pageable_readback", "pageable_copy")
    assert row["title"].startswith("1 Memcpy DtoH of 64.0 MiB per step to pageable memory")
    assert "pin_memory=True)" in row["fix"] and row["severity"] == "high"


def test_pageable_copy_ignores_tiny_copies_unless_asked(rules_db, found):
    # The V100 trace copies 128 and 640 B from pageable memory: latency, not bandwidth.
    assert _rows(found, "foreign_v100_dgxs_mlp_train_step", "pageable_copy").empty
    assert _rows(found, "built_item_loop", "pageable_copy").empty  # .item()'s 4 B to pageable memory
    every = _findings(rules_db, "pageable_copy", trace="foreign_v100_dgxs_mlp_train_step", min_bytes=1)
    assert _one(every, "foreign_v100_dgxs_mlp_train_step", "pageable_copy")["title"].startswith("2 Memcpy HtoD")


@pytest.mark.parametrize("trace", ["samples_naive", "samples_flex", "train_train_sdpa_default"])
def test_pageable_copy_is_silent_without_pageable_copies_in_steady_steps(found, trace):
    assert _rows(found, trace, "pageable_copy").empty  # flex copies from pageable memory only while compiling


# per_call_setup

def test_per_call_setup_finds_the_math_backends_mask_and_row_checks(rules_db, found):
    checks = _one(found, "samples_sdpa_math", "per_call_setup", title="_safe_softmax")
    mask = _one(found, "samples_sdpa_math", "per_call_setup", title="causal mask")
    assert checks["title"].endswith(" in aten::_scaled_dot_product_attention_math: 4 kernels, "
                                    f"{checks['estimate_us_per_step']:.1f} µs of GPU time per step")
    assert "5 kernels" in mask["title"] and "aten::ones, aten::scalar_tensor, aten::tril, aten::where" in mask["detail"]
    measured = dict(_query(rules_db, """
        SELECT CASE WHEN cpu_op_path LIKE '%_safe_softmax →%' THEN 'checks' ELSE 'mask' END, sum(k.dur_us) / 5
        FROM kernels k JOIN steady_steps s USING (trace, step)
        WHERE trace = 'samples_sdpa_math' AND cpu_op NOT IN ('aten::_softmax', 'aten::bmm', 'aten::add_', 'aten::mul', 'aten::copy_')
        GROUP BY 1"""))
    assert checks["estimate_us_per_step"] == pytest.approx(measured["checks"], abs=0.05)
    assert mask["estimate_us_per_step"] == pytest.approx(measured["mask"], abs=0.05)
    assert checks["severity"] == "high" and "fused backend" in checks["fix"] and "is_causal=True" in checks["fix"]


def test_per_call_setup_finds_a_mask_the_model_rebuilds_and_not_one_it_caches(found):
    row = _one(found, "built_mask_every_step", "per_call_setup")
    assert row["title"] == ("A causal mask rebuilt on every call in Python code (no op above it): "
                            "2 kernels, 16.0 µs of GPU time per step")
    assert "register_buffer" in row["fix"]
    assert _rows(found, "built_mask_cached", "per_call_setup").empty  # rebuilt in one steady step of three


@pytest.mark.parametrize("trace", ["samples_sdpa_flash", "samples_naive", "samples_sdpa_efficient",
                                   "train_train_sdpa_default", "foreign_v100_dgxs_mlp_train_step",
                                   "foreign_t4_resnet50_train"])
def test_per_call_setup_is_silent_on_buffers_and_backward_formulas(found, trace):
    # Training zeroes fresh gradient buffers (aten::zeros, zero_) and its backward formulas make
    # scalars (ClampBackward1's scalar_tensor): none of it could be built once.
    assert _rows(found, trace, "per_call_setup").empty


# graph_kernels_missing

def test_graph_kernels_missing_is_silent_on_a_replay_trace_that_records_them(rules_db, found):
    launches = _query(rules_db, "SELECT count(*) FROM runtime WHERE trace = ? AND name = 'cudaGraphLaunch'",
                      ["foreign_rtx5080_cuda_graph_replay_manual_capture"])[0][0]
    assert launches == 7 and _rows(found, "foreign_rtx5080_cuda_graph_replay_manual_capture", "graph_kernels_missing").empty


def test_graph_kernels_missing_finds_replays_whose_kernels_are_not_in_the_trace(rules_db, found):
    trace = "built_rtx5080_graph_kernels_left_out"
    row = _one(found, trace, "graph_kernels_missing")
    assert row["title"] == "6 of 6 cudaGraphLaunch call(s) in steady steps show no GPU work: the steps' GPU time leaves the graphs out"
    assert row["severity"] == "medium" and row["estimate_us_per_step"] != row["estimate_us_per_step"]
    assert "from ## graph.replay ##" in row["detail"]
    steady = _query(rules_db, "SELECT r.correlation FROM runtime r JOIN steady_steps s USING (trace, step) "
                              "WHERE trace = ? AND r.name = 'cudaGraphLaunch' ORDER BY r.ts_us", [trace])
    assert [e["correlation"] for e in row["evidence"]] == [c for (c,) in steady]


def test_graph_kernels_missing_knows_hip_graphs(found):
    row = _one(found, "built_hip_graph_loop", "graph_kernels_missing")
    assert row["title"].startswith("3 of 3 hipGraphLaunch call(s)") and "ROCm" in row["fix"]
    assert _one(found, "built_cuda_graph_loop", "graph_kernels_missing")["title"].startswith("3 of 3 cudaGraphLaunch")


def test_the_five_rules_evidence_is_json_that_names_real_events(rules_db, found):
    keys = {"kernels": "SELECT count(*) FROM kernels WHERE trace = ? AND correlation = ?",
            "memcpy": "SELECT count(*) FROM memcpy WHERE trace = ? AND correlation = ?",
            "memset": "SELECT count(*) FROM memset WHERE trace = ? AND correlation = ?",
            "runtime": "SELECT count(*) FROM runtime WHERE trace = ? AND correlation = ?",
            "cpu_ops": "SELECT count(*) FROM cpu_ops WHERE trace = ? AND op_id = ?"}
    checked = 0
    con = connect_for_queries(rules_db)
    try:
        for row in found[found["rule"] != "all_fixes"].itertuples():
            evidence = row.evidence if isinstance(row.evidence, list) else json.loads(row.evidence)
            assert evidence, row.title
            for e in evidence[:3]:
                key = e["cpu_op_id"] if e["source"] == "cpu_ops" else e["correlation"]
                assert con.execute(keys[e["source"]], [e["trace"], key]).fetchone()[0] >= 1, e
                checked += 1
    finally:
        con.close()
    assert checked > 30


@pytest.mark.parametrize("trace", ["foreign_v100_dgxs_mlp_train_step", "foreign_t4_resnet50_train"])
def test_simt_gemm_advises_fp16_autocast_where_tensor_cores_have_no_tf32_or_bf16(rules_db, trace):
    """Volta (V100) and Turing (T4) Tensor Cores take fp16 alone: TF32 or bf16 advice would not run there."""
    row = _one(_findings(rules_db, "simt_gemm", trace=trace), trace, "simt_gemm")
    assert row["fix"].startswith("run under torch.autocast(dtype=torch.float16), with torch.amp.GradScaler")
    assert "allow_tf32" not in row["fix"] and "bfloat16" not in row["fix"]



def test_unfused_attention_finds_the_articles_chain_and_not_sdpa(rules_db):
    """The article's naive attention (q @ kᵀ, masked_fill, softmax, @ v) is one chain a step, with
    and without the in-place mask; every SDPA backend, math included (simt_gemm's fuse-attention
    replays that one), has none of the model's own."""
    frame = _findings(rules_db, "unfused_attention")
    found = dict(zip(frame["trace"], frame["title"]))
    assert set(found) == {"samples_naive", "samples_naive_inplace"}
    assert all(title.startswith("Attention computed op by op: 1 chain(s) of softmax(Q·Kᵀ)·V per step") for title in found.values())
    chains = _query(rules_db, "SELECT trace, count(*), min(queries), min(keys), min(head_dim) FROM attention_chains "
                              "WHERE trace LIKE 'samples_%' GROUP BY trace ORDER BY trace")
    # the math backend's own chain is in the view: the rule leaves it to simt_gemm
    assert [row[0] for row in chains] == ["samples_naive", "samples_naive_inplace", "samples_sdpa_math"]
    assert {row[2:] for row in chains} == {(2048, 2048, 64)}
    row = frame[frame["trace"] == "samples_naive"].iloc[0]
    assert row["whatif"] == "fuse-attention-chains" and row["saving_us_per_step"] > 0.5 * row["estimate_us_per_step"]


# Three cases a review of the GradScaler and sizing-op rules built (each a trace of tests/trace_builder.py)

def _built_findings(tmp_path, name, content):
    con = connect(tmp_path / f"{name}.duckdb")
    assert load_file(con, tb.write(tmp_path, name, content)).status == "loaded"
    con.close()
    return tmp_path / f"{name}.duckdb", _findings(tmp_path / f"{name}.duckdb", None)


def test_a_size_read_through_item_is_the_sizing_ops_in_gpu_idle_as_in_host_sync(tmp_path):
    """repeat_interleave (and bincount) read their output's size with .item(): the wait's own op is
    aten::_local_scalar_dense, its chain the sizing op's; the fix drops that op's reads, not every sync."""
    from built_traces import read_in_step

    ops = [("aten::repeat_interleave", 40, 215), ("aten::item", 45, 205), ("aten::_local_scalar_dense", 46, 200)]
    _, found = _built_findings(tmp_path, "repeat", tb.trace([e for n in range(4) for e in read_in_step(n, ops)]))
    sync = _one(found, "repeat", "host_sync")
    assert sync["title"].endswith("from aten::repeat_interleave: the CPU waits 185.0 µs per step")  # no "(in itself)"
    idle = _one(found, "repeat", "gpu_idle", title="to read the size")
    assert idle["title"].endswith("cudaStreamSynchronize in aten::_local_scalar_dense of aten::repeat_interleave")
    assert sync["whatif"] == idle["whatif"] == "drop-sync:aten::repeat_interleave"


def test_a_clip_hook_inside_the_optimizers_step_leaves_a_for_loop_step_a_for_loop(tmp_path):
    """A step pre-hook runs inside the Optimizer.step range: its clip's _foreach_norm is no foreach
    update; the step's ten add_ kernels, a parameter at a time, are."""
    events = []
    for n in range(4):
        t, c = n * 2000, n * 100
        events += [tb.step(n, t, 1900), tb.op("aten::mm", t + 10, 20), tb.launch(t + 15, c + 1),
                   tb.kernel("mm_kernel", t + 30, 250, c + 1), tb.annotation("Optimizer.step#SGD.step", t + 300, 1500),
                   tb.op("aten::_foreach_norm", t + 310, 20), tb.launch(t + 315, c + 2),
                   tb.kernel("multi_tensor_apply_kernel", t + 320, 10, c + 2)]
        for p in range(10):
            s = t + 400 + p * 100
            events += [tb.op("aten::add_", s, 30), tb.launch(s + 5, c + 10 + p), tb.kernel("add_kernel", s + 10, 50, c + 10 + p)]
    db, found = _built_findings(tmp_path, "clip_hook", tb.trace(events))
    assert set(_query(db, "SELECT implementation, kernels, unfused_kernels, unfused_us FROM optimizer_steps")) == {
        ("for-loop", 11, 10, 500.0)}
    assert _one(found, "clip_hook", "unfused_optimizer")["title"].startswith(
        "SGD steps a parameter at a time (its for-loop implementation): 10 kernels, 500.0 µs of GPU time")


def test_gradscalers_read_before_a_step_it_skipped_is_still_gradscalers(tmp_path):
    """Where the read finds inf/NaN, GradScaler skips the optimizer's step and scaler.update() comes
    next: the read is GradScaler's all the same, one finding for all six."""
    from built_traces import amp_step_start

    events = []
    for n in range(6):
        t, c = n * 1000, n * 10
        events += amp_step_start(n) + [
                   tb.op("aten::item", t + 60, 240), tb.op("aten::_local_scalar_dense", t + 62, 235),
                   tb.launch(t + 64, c + 3, name="cudaMemcpyAsync", dur=230), tb.memcpy(t + 292, 2, c + 3, kind="DtoH", nbytes=4),
                   tb.launch(t + 296, c + 4, name="cudaStreamSynchronize", dur=3)]
        if n != 3:
            events += [tb.annotation("Optimizer.step#AdamW.step", t + 360, 300),
                       tb.op("aten::_foreach_add_", t + 370, 20), tb.launch(t + 375, c + 8),
                       tb.kernel("multi_tensor_apply_kernel", t + 390, 200, c + 8)]
        events += [tb.op("aten::_amp_update_scale_", t + 700, 10), tb.launch(t + 702, c + 9),
                   tb.kernel("update_kernel", t + 710, 5, c + 9)]
    db, found = _built_findings(tmp_path, "skipped", tb.trace(events))
    assert _query(db, "SELECT step, optimizer, optimizer_op_id IS NULL FROM scaler_checks ORDER BY step") == [
        (n, "AdamW", n == 3) for n in range(6)]
    rows = _rows(found, "skipped", "host_sync")
    assert len(rows) == 1 and rows.iloc[0]["title"].startswith("GradScaler's inf/NaN check before each AdamW step: 1 device")
