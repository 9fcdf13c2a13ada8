"""The fixes `fuse-attention[:REGEX]` and `fuse-attention-chains`: each call of an attention op (SDPA's
math backend by default), or each chain of ops that computes attention in the model's own code (view
attention_chains), and its backward replayed as one fused kernel, as flash, memory-efficient or cuDNN
attention runs it: the call's GEMM FLOPs at the share of the 16-bit Tensor Core peak such kernels
reach, with no scores written or read (a chain on fp32 inputs, which SDPA runs on its
memory-efficient kernel: at its GEMMs' own pace), the rest (softmax, masks, scaling, copies) fused
away, one launch. A
call's backward is autograd's evaluate_function spans whose sequence numbers the call's forward ops
carry.
"""

import re

import numpy as np

from tracekit.errors import TracekitError
from tracekit.replay.graph import calls_inside

UNFUSED_ATTENTION = "aten::_scaled_dot_product_attention_math"  # the op by default
# The memory-efficient kernel's forward against the SIMT GEMMs of the chain it replaces, on fp32:
# it writes no scores and, causal, skips the blocks above the diagonal (0.57x and 0.68x their time
# in two causal decoders' inference, 0.84x in an encoder's, on an H100: tests/data/h100/model_pairs_f,
# model_pairs_g). Its backward recomputes the scores, an extra GEMM: about the GEMMs' own time (0.77x
# and 1.07x in two causal decoders' training, on an H100 and an H200, 1.03x in the encoder's, the
# forward in them too), so a backward's GEMMs keep theirs.
FUSED_FP32_FORWARD = 0.7
# The share of the 16-bit Tensor Core peak at which a fused kernel does its chain's GEMM FLOPs,
# forward and backward: the medians of the flash and cuDNN kernels of 13 H100 and H200 pairs
# (benchmarks/fused_attention_pace.py: 0.17-0.57 forward, causal ones skipping half the FLOPs,
# the least a batch of 2 with dropout; 0.18-0.23 backward, of 4 training pairs).
FUSED_FORWARD_SHARE_OF_PEAK = 0.42
FUSED_BACKWARD_SHARE_OF_PEAK = 0.21
FUSED = "fused_items"  # in the changed arrays while fixes apply: the items a fusing fix took


def fuse_attention(graph, argument, changed, con):
    """Each call of the op (and each call's backward) becomes one item at its GEMMs' fused pace; the
    calls that launched the rest cost nothing."""
    _fuse(graph, ("fuse-attention", argument), _OP_CALLS, {"op": argument or f"^{re.escape(UNFUSED_ATTENTION)}$"},
          changed, con)


def fuse_attention_chains(graph, argument, changed, con):
    """fuse_attention for the chains of view attention_chains: each, from its Q·Kᵀ matmul to its ·V
    matmul, is the call; on fp32 inputs its SIMT GEMMs keep their own time (_fused)."""
    _fuse(graph, ("fuse-attention-chains", argument), _CHAIN_CALLS, {}, changed, con)


def _fuse(graph, key, calls_sql, params, changed, con):
    if key not in graph.read_by_fixes:  # findings replays a fix alone and with the others
        graph.read_by_fixes[key] = _fused(graph, calls_sql, params, con)
    apply_fused(changed, graph.read_by_fixes[key])


def apply_fused(changed, fused):
    """Runs each group of items as one: (the items that run each group's fused kernel, its ns, the
    groups' other items, the calls that launched only those, the ns of its thread's time before
    each such call that goes with it, the ns of its stream's idle time before each other item that
    goes with it), or None for no group."""
    if fused is None:
        return
    firsts, fused_ns, rest, gone_calls, call_cut, item_cut = fused
    # an item another fusing fix already took (a chain inside an op both fixes name) stays its
    taken = changed.setdefault(FUSED, np.zeros(len(changed["item_dur"]), dtype=bool))
    keep = ~taken[firsts]
    firsts, fused_ns = firsts[keep], fused_ns[keep]
    free = ~taken[rest]
    rest, item_cut = rest[free], item_cut[free]
    taken[firsts] = taken[rest] = True
    changed["item_dur"][firsts] = fused_ns
    changed["item_dur"][rest] = 0
    changed["item_gap"][rest] = np.maximum(changed["item_gap"][rest] - item_cut, 0)
    changed["call_dur"][gone_calls] = 0
    changed["call_gap"][gone_calls] = np.maximum(changed["call_gap"][gone_calls] - call_cut, 0)


def _fused(graph, calls_sql, params, con):
    """(the items that run each call's fused kernel, its ns, the call's other items, the calls that
    launched only those) of the calls, or None where the graph has none."""
    group, fp32_group = _attention_groups(con, graph, calls_sql, params)
    members = np.flatnonzero(group >= 0)
    if not len(members):
        return None
    gemm = (graph.item_kind == "kernel") & (graph.item_math_unit != "")
    # A chain on fp32 inputs fuses into the memory-efficient kernel alone (flash and cuDNN take fp16
    # and bf16), which runs at about the pace of the cuBLAS SIMT GEMMs it replaces: such a GEMM keeps
    # its own time, a forward's at FUSED_FP32_FORWARD of it. Its GEMMs on the SIMT cores say it ran
    # in fp32: under autocast an fp32 input (rotary embeddings' cos and sin) is cast to bf16 first.
    # (fp32 with TF32 on: no pair was captured; its GEMMs count at the 16-bit peak.)
    own_pace = fp32_group[np.maximum(group, 0)] & (group >= 0) & gemm & (graph.item_math_unit == "simt")
    forward = group % 2 == 0  # a call's forward group is even, its backward odd
    pace = np.where(forward, FUSED_FP32_FORWARD, 1.0)
    # Else the fused kernel takes 16-bit inputs (the math backend's GEMMs, upcast to fp32, too) and
    # does their FLOPs at a share of the 16-bit peak, keeping the scores on chip: the eager GEMMs'
    # roofline, whose bytes are mostly the scores', is not its pace; where a GEMM's FLOPs are
    # unknown (no shapes recorded), that roofline is all there is.
    missing_peak = (group >= 0) & gemm & ~own_pace & (graph.item_half_peak_ns == -2)
    if missing_peak.any():
        raise TracekitError("fuse-attention: no Tensor Core figures for this GPU (gpu_specs.csv) to time a fused "
                            "kernel at")
    share = np.where(forward, FUSED_FORWARD_SHARE_OF_PEAK, FUSED_BACKWARD_SHARE_OF_PEAK)
    on_tensor_cores = np.where(graph.item_half_peak_ns > 0, graph.item_half_peak_ns / share,
                               np.maximum(graph.item_roofline, 0))
    # a copy's roofline is its bytes at the memory's bandwidth: the fused kernel makes no copy
    gemm_ns = np.where(graph.item_kind != "kernel", 0, np.where(own_pace, graph.item_dur * pace, on_tensor_cores))
    fused_ns = np.bincount(group[members], weights=gemm_ns[members]).astype(np.int64)
    if not fused_ns.any():
        raise TracekitError("fuse-attention: the attention's GEMMs have neither FLOPs nor a roofline (no input "
                            "shapes recorded, or no figures for this GPU)")
    return fused_in_groups(graph, group, members, fused_ns)


def fused_in_groups(graph, group, members, fused_ns, what_goes=None):
    """apply_fused's argument for the items `members` in their groups (`group`, by item), each group
    fused into its first item (in stream order) at `fused_ns[group]`. The calls gone take their
    thread's time before them along and the items gone their stream's idle time, all of it (an op's
    own calls: SDPA's math backend, an optimizer's step), or what `what_goes(graph, rest, gone_calls)`
    says: (the ns each call gives up, the ns each item does)."""
    order = members[np.argsort(group[members], kind="stable")]
    firsts = order[np.r_[True, group[order][1:] != group[order][:-1]]]
    rest = np.setdiff1d(members, firsts)
    gone_calls = np.setdiff1d(np.unique(graph.item_launch[rest][graph.item_launch[rest] >= 0]),
                              graph.item_launch[firsts])
    call_cut, item_cut = (np.full(len(gone_calls), np.inf), np.full(len(rest), np.inf)) if what_goes is None \
        else what_goes(graph, rest, gone_calls)
    return firsts, fused_ns[group[firsts]], rest, gone_calls, call_cut, item_cut


# Each call's (pid, tid, ts_ns, end_ns, fp32): the op's own spans, or a chain's from its first op to
# its last. fp32: a chain on fp32 inputs, which SDPA in its place runs in fp32 (NULL: shapes not
# recorded); never an op's calls: they are the math backend's, whose fix (simt_gemm's) is flash or
# cuDNN, on fp32 inputs with attention run in bf16 for them: their GEMMs go to the Tensor Cores (_fused).
_OP_CALLS = """
SELECT o.pid, o.tid, o.ts_ns, o.ts_ns + o.dur_ns AS end_ns, false AS fp32
FROM cpu_op_rows o JOIN trace_files t ON t.trace_id = o.trace_id
WHERE t.trace = $trace AND regexp_matches(o.name, $op)
"""
_CHAIN_CALLS = """
SELECT q.pid, q.tid, q.ts_ns, v.ts_ns + v.dur_ns AS end_ns, CAST(q.input_types AS VARCHAR) LIKE '["float"%' AS fp32
FROM attention_chains c JOIN trace_files t ON t.trace = c.trace
JOIN cpu_op_rows q ON q.trace_id = t.trace_id AND q.op_id = c.qk_op_id
JOIN cpu_op_rows v ON v.trace_id = t.trace_id AND v.op_id = c.av_op_id
-- a chain inside scaled_dot_product_attention's math backend is that call's (fuse-attention)
WHERE c.trace = $trace AND coalesce(q.parent, '') NOT LIKE '%scaled_dot_product%'
"""

_CALL_SPANS = """
SELECT 2 * (row_number() OVER (ORDER BY pid, tid, ts_ns) - 1) AS grp, pid, tid, ts_ns, end_ns, fp32 FROM ({calls})
"""

HAS_BACKWARD = """
SELECT EXISTS (SELECT 1 FROM cpu_op_rows o JOIN trace_files t ON t.trace_id = o.trace_id
               WHERE t.trace = $trace AND o.name LIKE 'autograd::engine::evaluate_function:%')
"""

_ATTENTION_SPANS = """
WITH ops AS (
    SELECT o.name, o.pid, o.tid, o.ts_ns, o.ts_ns + o.dur_ns AS end_ns,
           TRY_CAST(e.args->>'Sequence number' AS BIGINT) AS seq
    FROM cpu_op_rows o JOIN trace_files t ON t.trace_id = o.trace_id
    LEFT JOIN event_rows e ON e.trace_id = o.trace_id AND e.cat = 'cpu_op' AND e.name = o.name
         AND TRY_CAST(e.args->>'External id' AS BIGINT) = o.external_id AND e.ts_ns = o.ts_ns
    WHERE t.trace = $trace
), calls AS (
    SELECT row_number() OVER (ORDER BY pid, tid, ts_ns) - 1 AS k, pid, tid, ts_ns, end_ns, fp32 FROM ({calls})
), forward_seqs AS (
    -- the sequence numbers autograd gave the ops inside each call: its backward nodes carry them
    SELECT DISTINCT c.k, o.seq FROM calls c
    JOIN ops o ON o.pid = c.pid AND o.tid = c.tid AND o.ts_ns >= c.ts_ns AND o.ts_ns < c.end_ns
    WHERE o.seq IS NOT NULL AND o.name NOT LIKE 'autograd::engine::evaluate_function:%'
), backward AS (
    SELECT f.k, b.pid, b.tid, b.ts_ns, b.end_ns, c.fp32 FROM ops b JOIN forward_seqs f ON f.seq = b.seq
    JOIN calls c ON c.k = f.k
    WHERE b.name LIKE 'autograd::engine::evaluate_function:%'
    QUALIFY row_number() OVER (PARTITION BY b.pid, b.tid, b.ts_ns ORDER BY f.k) = 1
)
SELECT 2 * k AS grp, pid, tid, ts_ns, end_ns, fp32 FROM calls
UNION ALL SELECT 2 * k + 1, pid, tid, ts_ns, end_ns, fp32 FROM backward
"""


def _attention_groups(con, graph, calls_sql, params):
    """(each item's group (-1: none): 2k for the items the k-th call (calls_sql's rows) launched, 2k + 1
    for those its backward launched (autograd's evaluate_function spans with its sequence numbers);
    each group's call on fp32 inputs, by group)."""
    if con is None:
        raise TracekitError("fuse-attention needs the trace's database")
    # a trace without autograd's nodes (inference) has no backward: its ops' sequence numbers,
    # read from every op's args, are not needed
    backward = con.execute(HAS_BACKWARD, {"trace": graph.trace}).fetchone()[0]
    spans = con.execute((_ATTENTION_SPANS if backward else _CALL_SPANS).format(calls=calls_sql),
                        {"trace": graph.trace, **params}).fetchall()
    fp32_group = np.zeros(max((row[0] for row in spans), default=-1) + 1, dtype=bool)
    for grp, *_, fp32 in spans:
        fp32_group[grp] = bool(fp32)
    # the outermost span wins where spans nest: written last
    return items_in_spans(graph, sorted((row[:5] for row in spans), key=lambda row: row[0], reverse=True)), fp32_group


def items_in_spans(graph, spans):
    """Each item's group (-1: none): the group of the (group, pid, tid, start_ns, end_ns) span whose
    calls launched it, a later span winning where two hold a call."""
    call_group = np.full(len(graph.call_lane), -1, dtype=np.int64)
    for grp, on_lane, lo, hi in calls_inside(graph, spans):
        call_group[on_lane[lo:hi]] = grp
    return np.where(graph.item_launch >= 0, call_group[np.maximum(graph.item_launch, 0)], -1)
