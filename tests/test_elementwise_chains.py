"""Elementwise chains (view elementwise_chains), the rule unfused_elementwise and its fix
fuse-elementwise, on real captures: GPT-2 trained with transformers' gelu_new (its tanh GELU in 8
ops) in fp32 and under fp16 autocast, a Llama's forward with transformers' RMSNorm, and the
article's sample traces, whose attention chains are unfused_attention's, not this rule's."""

import numpy as np
import pytest

import trace_builder as tb
from conftest import SAMPLE_TRACES, TEST_DATA, db_dicts, named_traces_db, named_traces_db_at
from tracekit.analysis.findings_engine import run_findings
from tracekit.replay.attention_fix import apply_fused
from tracekit.replay.elementwise_fix import _fused, chain_groups, fused_groups
from tracekit.replay.fixes import parse_fix
from tracekit.replay.graph import read_graph
from tracekit.replay.whatif import whatif
from tracekit.store.database import connect_for_queries

TRACES = {
    "gpt2_fp32": TEST_DATA / "h100" / "model_pairs" / "gpt2_train_fp32.json.gz",
    "gpt2_fp16": TEST_DATA / "h100" / "amp_pairs" / "gpt2_train_fp16_scaler_fused.json.gz",
    "llama_infer": TEST_DATA / "h100" / "model_pairs" / "llama_infer_eager.json.gz",
    "naive": SAMPLE_TRACES / "naive.json.gz",
    # AdamW's for-loop step (an op a parameter), a CUDA graph replayed inside the trace, ops on tiny
    # tensors (a clip's norm, a metric), and a public job's metrics and norms written out
    "scaler_for_loop": TEST_DATA / "h100" / "amp_pairs" / "train_scaler_foreach.json.gz",
    "graph_in_trace": TEST_DATA / "h100" / "graph_in_trace" / "train_graph_in_trace.json.gz",
    "more_ops": TEST_DATA / "h100" / "more_ops" / "train_more_ops.json.gz",
    "rank0_of128": TEST_DATA / "nccl" / "rank0_of128_sendrecv_without_comms_args.json.gz",
    # GPT-2 trained in bf16 with gelu_new, and the baddbmm encoder (tests/data/h100/model_pairs_l:
    # the same MLP, 8 x 1024 tokens, F.gelu) trained in bf16 on an H100 lease like it
    "gpt2_bf16": TEST_DATA / "h100" / "model_pairs" / "gpt2_train_sdpa.json.gz",
    # a public ResNet-50 trained on a T4, traced without shapes
    "t4_no_shapes": TEST_DATA / "foreign" / "t4_resnet50_train.json.gz",
    "encoder_bf16": TEST_DATA / "h100" / "model_pairs_l" / "encoder_train_sdpa.json.gz",
    "sdpa_flash": SAMPLE_TRACES / "sdpa_flash.json.gz",
    # a Llama's bf16 forward (8 layers, 4 x 1024 tokens, hidden 2,048) whose MLP's weights (5,632 x
    # 2,048) are bigger than the activation the RMSNorm before it normalizes
    "llama_hd128": TEST_DATA / "h100" / "model_pairs_l" / "llama_infer_hd128_sdpa.json.gz",
    # a Llama kept in fp32, its forward under bf16 autocast, with transformers' RMSNorm
    "llama_autocast": TEST_DATA / "h100" / "model_pairs_m" / "llama_infer_rmsnorm_eager.json.gz",
    # ResNet-50's blocks (out += identity, ReLU, the last one's pool), a bf16 tensor's mean square in
    # fp32, and a masked loss whose sum casts its bool mask inside it
    "resnet50": TEST_DATA / "h200" / "work_models" / "train_resnet50.json.gz",
    "norms": TEST_DATA / "h200" / "work_models" / "train_norms.json.gz",
    "masked_loss": TEST_DATA / "h100" / "amp_pairs" / "train_masked_loss.json.gz",
}
GELU_NEW = " → ".join(f"aten::{op}" for op in ("mul", "pow", "mul", "add", "mul", "tanh", "add", "mul"))


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return named_traces_db(tmp_path_factory, "elementwise", TRACES)


@pytest.fixture(scope="module")
def elementwise_found(db):
    """The rule unfused_elementwise's findings on the module's traces, run once for the tests that
    read them (they only read the frame)."""
    con = connect_for_queries(db)
    try:
        return run_findings(con, rule="unfused_elementwise")
    finally:
        con.close()


_rows = db_dicts


def _steady_chains(db, trace):
    return _rows(db, "SELECT c.* FROM elementwise_chains c JOIN steady_window w ON w.trace = c.trace AND w.step = c.step "
                     "WHERE c.trace = ? ORDER BY c.ts_us", [trace])


def test_gelu_new_is_a_chain_of_eight_kernels_a_layer(db):
    chains = _steady_chains(db, "gpt2_fp32")
    steps = _rows(db, "SELECT any_value(steps) AS steps FROM steady_window WHERE trace = 'gpt2_fp32'")[0]["steps"]
    assert len(chains) == 6 * steps  # GPT-2's six layers, each step
    for chain in chains:
        assert chain["ops"] == GELU_NEW and chain["kernels"] == 8
        assert chain["elements"] == 8 * 512 * 3072  # the MLP's 4 x 768 wide activation
        # one read and one write of the fp32 tensor: the chain's scalar mul moves that
        assert chain["fused_bytes"] == 2 * 4 * chain["elements"]
        assert 0.09 * chain["gpu_us"] < chain["fused_us"] < 0.14 * chain["gpu_us"]


def test_autocasts_casts_of_the_chain_are_in_it_and_a_weights_are_not(db):
    # under fp16 autocast pow runs in fp32: the input is cast up (a copy_ of the full size) and the
    # result cast down for the next Linear, whose weight and bias autocast casts as well (smaller)
    for chain in _steady_chains(db, "gpt2_fp16"):
        ops = chain["ops"].split(" → ")
        assert chain["kernels"] == 10 and ops.count("aten::copy_") == 2
        assert [op for op in ops if op != "aten::copy_"] == GELU_NEW.split(" → ")


def test_an_rmsnorm_is_a_chain_without_the_residual_add_before_it(db):
    # a bf16 Llama: the norm casts its input up and its output back down, inside the chain; the
    # residual add that makes its input (two tensors of its size) is no part of what F.rms_norm fuses
    patterns = _rows(db, "SELECT ops, count(*) AS n FROM elementwise_chains WHERE trace = 'llama_infer' "
                         "GROUP BY ops ORDER BY n DESC")
    assert patterns[0]["ops"] == " → ".join(f"aten::{op}" for op in (
        "copy_", "pow", "mean", "add", "rsqrt", "mul", "copy_", "mul"))


def test_under_autocast_the_next_linears_cast_of_an_fp32_norm_stays_out(db):
    """A Llama kept in fp32 under bf16 autocast (tests/data/h100/model_pairs_m): each RMSNorm runs in
    fp32 and the next Linear casts its output to bf16, a cast F.rms_norm leaves in place (its output
    is fp32 too), so the chain is the norm's six ops alone, 17 a step (two a layer and the last);
    the rotary embeddings' cos and sin, on a smaller tensor, launched just before the first norm,
    are a chain of their own, and the half-size neg after a rotary chain is in none."""
    patterns = {row["ops"]: row["n"] for row in _rows(
        db, "SELECT ops, count(*) AS n FROM elementwise_chains c JOIN steady_window w USING (trace, step) "
            "WHERE c.trace = 'llama_autocast' GROUP BY ops")}
    steps = _rows(db, "SELECT any_value(steps) AS steps FROM steady_window WHERE trace = 'llama_autocast'")[0]["steps"]
    norm = " → ".join(f"aten::{op}" for op in ("pow", "mean", "add", "rsqrt", "mul", "mul"))
    assert patterns == {norm: 17 * steps, "aten::mul → aten::add → aten::mul": 8 * steps,
                        "aten::cos → aten::mul → aten::sin → aten::mul": steps}


def _patterns(db, trace):
    return {row["ops"]: row["n"] for row in _rows(db, "SELECT ops, count(*) AS n FROM elementwise_chains WHERE trace = ? "
                                                         "GROUP BY ops", [trace])}


def test_an_add_that_joins_two_tensors_is_trimmed_only_before_a_norm(db):
    # ResNet's last block adds its identity, ReLUs and pools: one kernel for torch.compile, no norm
    # after the add; BCE with logits computes 1 - target (two tensors of its size) as its own first op
    assert set(_patterns(db, "resnet50")) == {"aten::add_ → aten::clamp_min_ → aten::mean"}
    assert "aten::sub_ → aten::mul_ → aten::sub_ → aten::mean" in _patterns(db, "more_ops")


def test_a_cast_counts_toward_a_chain_of_known_size(db):
    # x.float().square().mean() on a bf16 tensor: one fused reduction would read the bf16 tensor once
    chains = _steady_chains(db, "norms")
    assert chains and {c["ops"] for c in chains} == {"aten::copy_ → aten::pow → aten::mean"}
    # a GradScaler's 0-d reciprocal between two casts is no chain: it has no size to fuse over
    assert not any("reciprocal" in ops for ops in _patterns(db, "more_ops"))


def test_a_cast_made_inside_an_op_is_placed_where_its_kernel_ran(db):
    # kept.sum(): the sum's op starts before the bool mask's cast inside it, whose kernel runs first;
    # the chain ends at the sum, the cast inside it, and the loss's scalar clamp and div after it are
    # in no chain
    assert _patterns(db, "masked_loss") == {" → ".join(f"aten::{op}" for op in (
        "clamp_min", "copy_", "gt", "pow", "mul", "sum", "sum", "copy_")): 5}


@pytest.mark.parametrize("trace", ["naive", "sdpa_flash"])
def test_attention_and_fused_kernels_make_no_chain(db, trace):
    assert _rows(db, "SELECT * FROM elementwise_chains WHERE trace = ?", [trace]) == []


def test_an_optimizers_step_and_a_graphs_replay_are_no_chain(db):
    # AdamW's for-loop runs an op a parameter (unfused_optimizer's): 560 kernels on unrelated tensors
    inside = _rows(db, """
        SELECT count(*) AS n FROM elementwise_chains c JOIN cpu_ops o ON o.trace = c.trace AND o.pid = c.pid
             AND o.tid = c.tid AND o.name LIKE 'Optimizer.step#%' AND c.ts_us >= o.ts_us AND c.ts_us < o.ts_us + o.dur_us
        WHERE c.trace = 'scaler_for_loop'""")[0]["n"]
    assert inside == 0 and max(c["kernels"] for c in _steady_chains(db, "scaler_for_loop")) < 10
    # a graph replay's kernels carry the work of the ops that captured them, and are launched by the step
    assert all("ProfilerStep" not in c["ops"] for c in _steady_chains(db, "graph_in_trace"))


def test_only_pointwise_ops_row_reductions_and_casts_chain(db):
    ops = {op for row in _rows(db, "SELECT ops FROM elementwise_chains") for op in row["ops"].split(" → ")}
    assert not {op for op in ops if any(word in op for word in ("pool", "upsample", "fft", "cumsum", "bernoulli"))}
    assert {"aten::pow", "aten::mean", "aten::rsqrt", "aten::tanh", "aten::copy_"} <= ops


def test_the_rule_saves_the_forward_and_backward_chains_and_no_more(db, elementwise_found):
    found = elementwise_found
    row = found[found["trace"] == "gpt2_fp32"].iloc[0]
    assert row["whatif"] == "fuse-elementwise"
    assert row["title"].startswith("Elementwise ops one kernel each: 6 chain(s) per step in 48 kernels")
    assert "µs of GPU time per step in the forward; the most" in row["title"]
    assert "more than the rule's count of the forward's kernels" in row["detail"]
    assert GELU_NEW in row["title"]
    # the backward's kernels (autograd's nodes of the chains' ops) fuse too: more than the
    # forward's estimate, less than the chains' forward and backward GPU time together
    backward_us = _rows(db, """
        SELECT sum(k.dur_us) / any_value(w.steps) AS us FROM kernels k
        JOIN steady_window w ON w.trace = k.trace AND w.step = k.step
        WHERE k.trace = 'gpt2_fp32' AND regexp_matches(k.cpu_op_path, 'evaluate_function: (Mul|Pow|Add|Tanh)Backward0')
    """)[0]["us"]
    forward_us = sum(c["gpu_us"] for c in _steady_chains(db, "gpt2_fp32")) / 4
    assert row["estimate_us_per_step"] < row["saving_us_per_step"] < forward_us + backward_us
    # more_ops' chains (a clip's norm on 5 elements, a few on 8,192) fuse to less than 20 µs a
    # step; the encoder's MLP runs F.gelu, one kernel: none; ResNet-50's last block (its add, ReLU
    # and pool) too little for a finding
    assert set(found["trace"]) == {"gpt2_fp32", "gpt2_fp16", "gpt2_bf16", "llama_infer", "rank0_of128", "t4_no_shapes",
                                   "llama_hd128", "llama_autocast", "norms", "masked_loss"}
    # no shapes, no bytes: no estimate and no replayed saving, never a made-up one
    unshaped = found[found["trace"] == "t4_no_shapes"].iloc[0]
    assert unshaped["estimate_us_per_step"] != unshaped["estimate_us_per_step"]  # NaN: NULL
    assert unshaped["saving_us_per_step"] != unshaped["saving_us_per_step"]
    assert unshaped["severity"] == "low" and "1 of the chains not estimated" in unshaped["detail"]


def _replayed(db, trace):
    con = connect_for_queries(db)
    try:
        return whatif(con, trace, [parse_fix("fuse-elementwise")], ["fuse-elementwise"])
    finally:
        con.close()


def test_the_fix_runs_each_chain_as_one_kernel_in_the_replay(db):
    result = _replayed(db, "gpt2_fp32")
    assert result.unchanged == []
    assert 0.05 < result.saving_us / result.mean("replayed_us") < 0.10


@pytest.mark.parametrize("trace, most", [("more_ops", 0.10), ("rank0_of128", 0.01)])
def test_a_fused_kernel_never_takes_longer_than_the_kernels_it_replaces(db, trace, most):
    # a backward's pace read off a few tiny kernels once made a fused kernel of 16.9 ms (more_ops:
    # the step 5.5 ms replayed, 19.7 fixed) and matched chains to other ops' backward nodes (200 ms
    # saved of rank0_of128's 623 ms step); both CPU-bound: what they save is the ops' dispatch
    result = _replayed(db, trace)
    assert 0 < result.saving_us < most * result.mean("replayed_us")


def test_the_replay_fuses_the_kernels_of_the_chains_ops_and_no_other(db):
    # under autocast the next layer's weight is cast among the chain's ops (GPT-2's Conv1D: aten::addmm
    # → aten::to → aten::_to_copy → aten::copy_, before the activation's own cast): no member of it,
    # and no fusion removes it; the replay once fused every kernel launched in the chain's span
    con = connect_for_queries(db)
    try:
        graph = read_graph(con, "gpt2_bf16")
        group, _ = chain_groups(graph, con)
    finally:
        con.close()
    chains = _rows(db, "SELECT kernels, gpu_us, ts_us, end_us FROM elementwise_chains "
                       "WHERE trace = 'gpt2_bf16' AND fused_us IS NOT NULL ORDER BY pid, tid, ts_us")
    forward = np.flatnonzero((group >= 0) & (group % 2 == 0))
    assert np.bincount(group[forward] // 2, minlength=len(chains)).tolist() == [c["kernels"] for c in chains]
    grouped_us = np.bincount(group[forward] // 2, weights=graph.item_dur[forward], minlength=len(chains)) / 1000
    assert grouped_us == pytest.approx([c["gpu_us"] for c in chains], abs=0.01)
    # the weight's casts, launched inside the chains' spans, stay as they were
    launched = graph.item_launch >= 0
    launch_ts = np.where(launched, graph.call_ts[np.maximum(graph.item_launch, 0)], -1) / 1000
    weight_casts = [i for i in np.flatnonzero(launched & (group < 0))
                    if graph.item_op_path[i].endswith("aten::_to_copy → aten::copy_")
                    and any(c["ts_us"] < launch_ts[i] < c["end_us"] for c in chains)]
    assert len(weight_casts) == len(chains)


def test_a_bigger_cast_among_a_chains_ops_does_not_set_its_size(db):
    # the MLP's up projection's weight (11.5 M elements), cast among the RMSNorm's ops, once made the
    # chain's size: the norm's 8.4 M-element ops fell out and its chain was the residual add, the
    # rsqrt and the cast
    steps = _rows(db, "SELECT any_value(steps) AS n FROM steady_window WHERE trace = 'llama_hd128'")[0]["n"]
    norms = [c for c in _steady_chains(db, "llama_hd128") if "aten::rsqrt" in c["ops"]]
    assert len(norms) == (2 * 8 + 1) * steps  # two a layer and the last
    for chain in norms:
        assert chain["elements"] == 4 * 1024 * 2048
        assert "aten::pow → aten::mean → aten::add → aten::rsqrt → aten::mul → aten::mul" in chain["ops"]


def test_a_call_gone_keeps_the_other_work_before_it(db, elementwise_found):
    # rank0_of128: 1,796 µs without a recorded op (the user's Python) between two ops of one chain
    # (aten::sub_, aten::sum): fusing them takes one op's dispatch and line away, not that
    con = connect_for_queries(db)
    try:
        graph = read_graph(con, "rank0_of128")
        fused = _fused(graph, None, con)
    finally:
        con.close()
    changed = {name: getattr(graph, name).copy() for name in ("item_dur", "item_gap", "call_dur", "call_gap")}
    apply_fused(changed, fused)
    gone, cut = fused[3], fused[4]
    before, after = graph.call_gap[gone], changed["call_gap"][gone]
    longest = before.argmax()
    assert before[longest] == 1_796_000
    assert 0 < cut[longest] < 200_000 and after[longest] == before[longest] - cut[longest]
    # the usual stretches go whole: a few far longer than the rest keep theirs (past the first call
    # of each norm, which keeps its stretch whole: its fused op dispatches twice)
    cut_at_all = cut > 0
    assert 0 < (after[cut_at_all] > 0).sum() < cut_at_all.sum() / 10
    # the kernels gone keep a wait with their launch made (another stream's work), less a queue's gap
    idle = changed["item_gap"][fused[2]]
    assert idle.max() > 1_000_000
    # the profiler's cost taken out first (as findings replays a fix), which leaves most of
    # these stretches at 0: the far-out ones are the trace's own, not what is left of them
    found = elementwise_found
    row = found[found["trace"] == "rank0_of128"].iloc[0]
    assert row["saving_us_per_step"] < 5 * row["estimate_us_per_step"]


def test_a_regex_fuses_the_chains_whose_ops_it_finds(db):
    # F.rms_norm fuses the Llama's RMSNorms (rsqrt), not the rotary embeddings' muls beside them
    con = connect_for_queries(db)
    try:
        every, norms = (whatif(con, "llama_infer", [parse_fix(fix)], [fix]).saving_us
                        for fix in ("fuse-elementwise", "fuse-elementwise:rsqrt"))
        none = whatif(con, "llama_infer", [parse_fix("fuse-elementwise:no_such_op")], ["x"])
    finally:
        con.close()
    assert 0 < norms < every
    assert none.unchanged == ["x"] or none.saving_us == 0


def test_the_fused_kernels_time_is_what_f_gelus_kernels_took_on_the_same_gpu(db):
    """The model's fused GELU against real ones: GPT-2's gelu_new chain (bf16 autocast, 8 x 512
    tokens: 12.6 M elements) replayed as one kernel, and the encoder's F.gelu on as many elements
    in bf16 on another H100 lease: forward 19.6 µs against 18.1, backward 27.1 against 27.6."""
    measured = {row["op"]: row["us"] for row in _rows(db, """
        SELECT cpu_op AS op, median(dur_us) AS us FROM kernels
        WHERE trace = 'encoder_bf16' AND cpu_op IN ('aten::gelu', 'aten::gelu_backward') GROUP BY cpu_op""")}
    gelu_bytes = _rows(db, "SELECT median(bytes) AS b FROM kernels WHERE trace = 'encoder_bf16' AND cpu_op = 'aten::gelu'")
    chains = _steady_chains(db, "gpt2_bf16")
    assert {c["fused_bytes"] for c in chains} == {gelu_bytes[0]["b"] + 8}  # 4 bytes an element, and a scalar's
    con = connect_for_queries(db)
    try:
        times, *_ = fused_groups(con, "gpt2_bf16")
    finally:
        con.close()
    forward = sorted(ns / 1000 for grp, ns in times if grp % 2 == 0)
    backward = sorted({(grp, ns / 1000) for grp, ns in times if grp % 2 == 1})
    assert forward[len(forward) // 2] == pytest.approx(measured["aten::gelu"], rel=0.15)
    assert backward[len(backward) // 2][1] == pytest.approx(measured["aten::gelu_backward"], rel=0.15)


def _step_ends_in_elementwise_ops(n):
    """Step `n` (1000 µs apart): two elementwise ops, a matmul, two more elementwise ops at its end:
    the next step's first two follow its last two with nothing between them."""
    t, events = n * 1000, [tb.step(n, n * 1000, 1000)]
    for i, (name, at) in enumerate([("aten::mul", 10), ("aten::add", 60), ("aten::mm", 110), ("aten::mul", 900),
                                    ("aten::tanh", 950)]):
        correlation = n * 10 + i
        events += [tb.op(name, t + at, 30), tb.launch(t + at + 5, correlation),
                   tb.kernel(f"{name[6:]}_kernel", t + at + 20, 10, correlation)]
    return events


def test_no_chain_crosses_a_steps_start(tmp_path):
    built = tb.write(tmp_path, "steps_end_elementwise", tb.trace(
        [event for n in range(4) for event in _step_ends_in_elementwise_ops(n)]))
    db = named_traces_db_at(tmp_path / "built.duckdb", {"built": built})
    # each step's pairs of elementwise ops are too short a chain; with the next step's first pair
    # they would make four in a row
    assert _rows(db, "SELECT count(*) AS n FROM kernels WHERE work_family = 'elementwise'")[0]["n"] == 16
    assert _rows(db, "SELECT ops FROM elementwise_chains") == []
