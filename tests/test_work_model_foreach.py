"""The optimizer's foreach ops: lists of tensors, whose dtype Kineto does not write (Input type
TensorList) and, for a long list, whose shapes it does not write either ([]). Their element size
comes from the kernel's name (multi_tensor_apply_kernel<..., BinaryOpScalarFunctor<float, 1, 1, 0>>),
their elements from the shapes when written, else from the step's gradients (AccumulateGrad),
when those cut into multi_tensor_apply's 65,536-element chunks give the blocks the kernels ran."""

import gzip
import json
import re

import pytest

from conftest import TEST_DATA, db_rows
from tracekit.ingest.loader import load_file
from tracekit.store.database import connect

H200 = TEST_DATA / "h200"
TRACES = {
    "train_gpt2": H200 / "loops" / "train_gpt2.json.gz",
    "train_bf16": H200 / "train_bf16" / "train_sdpa_default.json.gz",
    "sgd_fp32": H200 / "fixes" / "train_fp32.json.gz",
    "llama": H200 / "work_models" / "train_llama.json.gz",
}

# GPT-2 of capture/loops.py (6 layers, 768 wide, 50,257 tokens, 1,024 positions, the head tied to
# the embedding): the embeddings, per layer two norms, c_attn, attention's c_proj, c_fc and the
# MLP's c_proj with their biases, and the final norm.
LAYER = 2 * 2 * 768 + (768 * 2304 + 2304) + (768 * 768 + 768) + (768 * 3072 + 3072) + (3072 * 768 + 768)
GPT2 = 50257 * 768 + 1024 * 768 + 6 * LAYER + 2 * 768
# The transformer of capture/training.py at train_bf16's shape (width 4·64, 256 positions, 4
# layers, MLP 4x, vocabulary 4,096, an untied head); fp32 parameters under bf16 autocast.
BLOCK = 2 * 2 * 256 + (256 * 768 + 768) + (256 * 256 + 256) + (256 * 1024 + 1024) + (1024 * 256 + 256)
TINY = 4096 * 256 + 256 * 256 + 4 * BLOCK + 2 * 256 + 256 * 4096
# The Llama of capture/work_model_loops.py (hidden 1,024, MLP 2,816, 4 layers, vocabulary 32,000,
# an untied head), bf16 weights: embedding and head, per layer q, k, v, o, gate, up and down
# projections without biases and two RMS norms, the final norm.
LLAMA = 2 * 32000 * 1024 + 4 * (4 * 1024 * 1024 + 3 * 1024 * 2816 + 2 * 1024) + 1024
# train_fp32 (fix pairs' precision step): SGD over four 4096x4096 Linear layers with biases; the
# eight tensors' shapes are in Input Dims.
SGD = 4 * (4096 * 4096 + 4096)


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    folder = tmp_path_factory.mktemp("foreach")
    # train_gpt2 with one gradient's AccumulateGrad left out of its first step: the lists no
    # longer cut into the blocks the kernels ran, and nothing sizes them.
    trace = json.loads(gzip.open(TRACES["train_gpt2"], "rt").read())
    events = trace["traceEvents"]
    first = min(e["ts"] for e in events if e.get("name") == "ProfilerStep#3")
    drop = next(i for i, e in enumerate(events) if e.get("name") == "torch::autograd::AccumulateGrad" and e["ts"] > first)
    del events[drop]
    short = folder / "train_gpt2_one_gradient_less.json.gz"
    with gzip.open(short, "wt") as f:
        json.dump(trace, f)
    con = connect(folder / "foreach.duckdb")
    for name, file in {**TRACES, "one_gradient_less": short}.items():
        assert load_file(con, file).status == "loaded"
        con.execute("UPDATE trace_files SET trace = ? WHERE path = ?", [name, str(file.resolve())])
    con.close()
    return folder / "foreach.duckdb"


def _first_call(db, trace, op):
    """The first call of `op` in `trace`: its Input Dims, its kernels' work summed, how it was sized,
    its dtype and its kernels' names."""
    return db_rows(db, "SELECT o.input_dims, sum(k.flops), sum(k.bytes), any_value(k.work_source), "
                      "any_value(k.flops_dtype), list(DISTINCT k.name) "
                      "FROM kernels k JOIN trace_files f ON f.trace = k.trace "
                      "JOIN cpu_op_rows o ON o.trace_id = f.trace_id AND o.op_id = k.cpu_op_id "
                      "WHERE k.trace = ? AND k.cpu_op = ? GROUP BY o.op_id, o.input_dims, o.ts_ns "
                      "ORDER BY o.ts_ns LIMIT 1", [trace, op])[0]


def test_the_hand_counts_add_up_to_the_models_parameters():
    assert GPT2 == 81_912_576 and TINY == 5_322_240 and SGD == 67_125_248 and LLAMA == 116_925_440


# Each case: trace, op, its elements, its FLOPs per element, the tensors each element moves (read
# and written), and how its lists were sized; fp32 (4 bytes) but for the Llama's bf16.
CASES = [
    # AdamW (foreach) on GPT-2's 76 fp32 tensors, whose shapes Kineto did not write ([]).
    ("train_gpt2", "aten::_foreach_mul_", GPT2, 1, 2, "step gradients"),          # p *= 1 − lr·wd
    ("train_gpt2", "aten::_foreach_lerp_", GPT2, 3, 3, "step gradients"),         # m += (g − m)(1 − β1)
    ("train_gpt2", "aten::_foreach_addcmul_", GPT2, 3, 3, "step gradients"),      # v = β2·v + (1 − β2)·g·g: g read once
    ("train_gpt2", "aten::_foreach_sqrt", GPT2, 1, 2, "step gradients"),          # d = sqrt(v), a new list
    ("train_gpt2", "aten::_foreach_div_", GPT2, 1, 2, "step gradients"),          # d /= sqrt(1 − β2^t), per tensor
    ("train_gpt2", "aten::_foreach_add_", GPT2, 1, 2, "step gradients"),          # d += eps
    ("train_gpt2", "aten::_foreach_addcdiv_", GPT2, 3, 4, "step gradients"),      # p += −lr/(1 − β1^t) · m / d
    # the same AdamW over the small transformer's 53 tensors
    ("train_bf16", "aten::_foreach_addcdiv_", TINY, 3, 4, "step gradients"),
    ("train_bf16", "aten::_foreach_lerp_", TINY, 3, 3, "step gradients"),
    # SGD: p += −lr·g over eight tensors whose shapes Input Dims lists
    ("sgd_fp32", "aten::_foreach_add_", SGD, 1, 3, "op shapes"),
    # fused AdamW over the Llama's 39 bf16 tensors: params, grads and both moments read, three written
    ("llama", "aten::_fused_adamw_", LLAMA, 12, 7, "step gradients"),
]


@pytest.mark.parametrize("trace, op, elements, per_element, tensors, source", CASES,
                         ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_each_foreach_op_counts_its_lists_by_hand(db, trace, op, elements, per_element, tensors, source):
    dims, flops, nbytes, got_source, dtype, _ = _first_call(db, trace, op)
    assert (dims == "[[[4096,4096],[4096],[4096,4096],[4096],[4096,4096],[4096],[4096,4096],[4096]],"
                    "[[4096,4096],[4096],[4096,4096],[4096],[4096,4096],[4096],[4096,4096],[4096]],[]]"
            if source == "op shapes" else json.loads(dims) == [[]] * len(json.loads(dims)))
    assert flops == pytest.approx(per_element * elements, rel=1e-12)
    size, dtype_name = (2, "c10::BFloat16") if trace == "llama" else (4, "float")
    assert nbytes == pytest.approx(tensors * elements * size, rel=1e-12)
    assert got_source == source and dtype == dtype_name


def test_the_tensors_each_element_moves_are_those_the_kernels_functor_reads_and_writes(db):
    # multi_tensor_apply's functors name <type, depth, lists read, list written>: bytes per element
    # are (lists read + 1) · 4, but addcmul's t1 and t2, one list (g·g), are read once.
    rows = db_rows(db, "SELECT cpu_op, any_value(name), sum(bytes) / sum(flops) FROM kernels "
                      "WHERE trace = 'train_gpt2' AND cpu_op LIKE 'aten::\\_foreach%' ESCAPE '\\' GROUP BY cpu_op")
    assert len(rows) == 7
    for op, name, bytes_per_flop in rows:
        _, depth, reads, written = re.search(r"Functor<(\w+), (\d), (\d), (\d)>", name).groups()
        per_element = 3 if op in ("aten::_foreach_addcmul_", "aten::_foreach_addcdiv_", "aten::_foreach_lerp_") else 1
        moved = int(reads) if op == "aten::_foreach_addcmul_" else int(reads) + 1
        assert bytes_per_flop * per_element == pytest.approx(moved * 4), op


def test_lists_stay_unsized_where_the_gradients_do_not_give_the_kernels_blocks(db):
    # One AccumulateGrad fewer in the first step: its lists stay NULL; the other steps' are sized.
    rows = db_rows(db, "SELECT step, count(*), count(flops), count(bytes), count(work_source), "
                      "count(work_missing), any_value(work_missing) FROM kernels "
                      "WHERE trace = 'one_gradient_less' AND cpu_op LIKE 'aten::\\_foreach%' ESCAPE '\\' "
                      "GROUP BY step ORDER BY step")
    assert [r[0] for r in rows] == [3, 4, 5, 6, 7]
    assert rows[0][1] == 40 and rows[0][2:] == (0, 0, 0, 40, "a tensor list without shapes")
    assert all(r[1:6] == (40, 40, 40, 40, 0) for r in rows[1:])
