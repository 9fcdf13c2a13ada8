"""Elementwise chains (view elementwise_chains), the rule unfused_elementwise and its fix
fuse-elementwise, on real captures: GPT-2 trained with transformers' gelu_new (its tanh GELU in 8
ops) in fp32 and under fp16 autocast, a Llama's forward with transformers' RMSNorm, and the
article's sample traces, whose attention chains are unfused_attention's, not this rule's."""

import pytest

from conftest import SAMPLE_TRACES, TEST_DATA
from tracekit.analysis.findings_engine import run_findings
from tracekit.ingest.loader import load_file
from tracekit.replay.fixes import parse_fix
from tracekit.replay.whatif import whatif
from tracekit.store.database import connect, connect_for_queries

TRACES = {
    "gpt2_fp32": TEST_DATA / "h100" / "model_pairs" / "gpt2_train_fp32.json.gz",
    "gpt2_fp16": TEST_DATA / "h100" / "amp_pairs" / "gpt2_train_fp16_scaler_fused.json.gz",
    "llama_infer": TEST_DATA / "h100" / "model_pairs" / "llama_infer_eager.json.gz",
    "naive": SAMPLE_TRACES / "naive.json.gz",
    "sdpa_flash": SAMPLE_TRACES / "sdpa_flash.json.gz",
}
GELU_NEW = " → ".join(f"aten::{op}" for op in ("mul", "pow", "mul", "add", "mul", "tanh", "add", "mul"))


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("elementwise") / "chains.duckdb"
    con = connect(path)
    for name, file in TRACES.items():
        assert load_file(con, file).status == "loaded"
        con.execute("UPDATE trace_files SET trace = ? WHERE path = ?", [name, str(file.resolve())])
    con.close()
    return path


def _rows(db, sql, params=()):
    con = connect_for_queries(db)
    try:
        cursor = con.execute(sql, list(params))
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]
    finally:
        con.close()


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


def test_rmsnorm_and_the_residual_add_before_it_are_one_chain(db):
    patterns = _rows(db, "SELECT ops, count(*) AS n FROM elementwise_chains WHERE trace = 'llama_infer' "
                         "GROUP BY ops ORDER BY n DESC")
    assert patterns[0]["ops"] == " → ".join(f"aten::{op}" for op in (
        "add", "copy_", "pow", "mean", "add", "rsqrt", "mul", "copy_", "mul"))


@pytest.mark.parametrize("trace", ["naive", "sdpa_flash"])
def test_attention_and_fused_kernels_make_no_chain(db, trace):
    assert _rows(db, "SELECT * FROM elementwise_chains WHERE trace = ?", [trace]) == []


def test_the_rule_saves_the_forward_and_backward_chains_and_no_more(db):
    con = connect_for_queries(db)
    try:
        found = run_findings(con, rule="unfused_elementwise")
        row = found[found["trace"] == "gpt2_fp32"].iloc[0]
        assert row["whatif"] == "fuse-elementwise"
        assert row["title"].startswith("Elementwise ops one kernel each: 6 chain(s) per step in 48 kernels")
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
        assert set(found["trace"]) == {"gpt2_fp32", "gpt2_fp16", "llama_infer"}
    finally:
        con.close()


def test_the_fix_runs_each_chain_as_one_kernel_in_the_replay(db):
    con = connect_for_queries(db)
    try:
        result = whatif(con, "gpt2_fp32", [parse_fix("fuse-elementwise")], ["fuse-elementwise"])
    finally:
        con.close()
    assert result.unchanged == []
    assert 0.05 < result.saving_us / result.mean("replayed_us") < 0.10
