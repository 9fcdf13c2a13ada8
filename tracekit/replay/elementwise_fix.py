"""The fix `fuse-elementwise[:REGEX]`: each chain of elementwise ops that runs a kernel per op (view
elementwise_chains: a GELU written out op by op, an RMSNorm as pow, mean, rsqrt and muls) runs as one
fused kernel, as torch.compile or the fused op (F.gelu, F.rms_norm) runs it: one pass over the
tensor, `fused_us` of the view (its fewest bytes at its own kernels' pace), one launch. With REGEX,
the chains whose ops (elementwise_chains.ops) it finds: `rsqrt` for the RMSNorms that F.rms_norm
fuses, not the rotary embeddings beside them. Its backward (autograd's nodes of the chain's ops, by
their sequence numbers and names) runs as one kernel too, moving BACKWARD_PASSES times the
forward's fused bytes at the pace the backward's own kernels kept.
"""

import numpy as np

from tracekit.errors import TracekitError
from tracekit.replay.attention_fix import apply_fused, fused_in_groups, items_in_spans
from tracekit.replay.graph import SHARED_TRACES
from tracekit.replay.simulate import typical_queue_gap

# A fused backward of a chain reads the output's gradient and the saved input and writes the input's
# gradient: three tensors where the forward reads one and writes one (F.gelu's backward kernel,
# F.rms_norm's and layer_norm's, their weights' gradients a reduction beside).
BACKWARD_PASSES = 1.5

# The chains the fix takes, numbered k in the order of their threads and starts: chain k's forward
# is group 2k (its fused ns, and its ops by view elementwise_chain_ops: not every op in its span, as
# a cast of a weight launched among them is no member), its backward 2k + 1 (the spans of the
# evaluate_function nodes that carry its ops' sequence numbers, with BACKWARD_PASSES times its fused
# bytes at the ns a byte of the kernels launched inside them).
_CHAINS = """
    SELECT row_number() OVER (PARTITION BY c.trace ORDER BY c.pid, c.tid, c.ts_us) - 1 AS k, c.trace,
           c.first_op_id, c.fused_bytes, c.fused_us
    FROM elementwise_chains c
    WHERE c.trace IN (SELECT unnest($traces)) AND c.fused_us IS NOT NULL
      AND ($ops IS NULL OR regexp_matches(c.ops, $ops))
"""
_FORWARD = """
WITH chains AS ({chains})
SELECT DISTINCT c.trace, 2 * c.k AS grp, c.fused_us * 1000 AS fused_ns, m.op_id,
       -- a chain with a row reduction is a norm, whose fused op dispatches twice (_fused)
       bool_or(m.work_family = 'reduction') OVER (PARTITION BY c.trace, c.k) AS norm
FROM chains c JOIN elementwise_chain_ops m ON m.trace = c.trace AND m.chain_first_op_id = c.first_op_id
"""

_BACKWARD_SPANS = """
WITH chains AS ({chains}
), mine AS (
    SELECT t.trace, o.* FROM cpu_op_rows o JOIN trace_files t ON t.trace_id = o.trace_id
    WHERE t.trace IN (SELECT unnest($traces))
), launchers AS (
    -- the ops that launched a chain's kernels, and the op each was called from (aten::copy_'s
    -- aten::_to_copy): autograd records a node for the op the user called
    SELECT DISTINCT c.trace, c.k, o.op_id, o.name, o.parent_id FROM chains c
    JOIN elementwise_chain_ops m ON m.trace = c.trace AND m.chain_first_op_id = c.first_op_id
    JOIN mine o ON o.trace = c.trace AND o.op_id = m.op_id
), members AS (
    SELECT trace, k, op_id, name FROM launchers
    UNION
    SELECT l.trace, l.k, p.op_id, p.name FROM launchers l JOIN mine p ON p.trace = l.trace AND p.op_id = l.parent_id
), seqs AS (
    SELECT o.trace, o.op_id, o.name, o.pid, o.tid, o.ts_ns, o.ts_ns + o.dur_ns AS end_ns,
           TRY_CAST(e.args->>'Sequence number' AS BIGINT) AS seq,
           -- the name autograd's node takes: PowBackward0 for aten::pow, ToCopyBackward0 for aten::_to_copy
           CASE WHEN o.name LIKE 'autograd::engine::evaluate_function: %'
                THEN lower(regexp_replace(replace(o.name, 'autograd::engine::evaluate_function: ', ''), 'Backward[0-9]*$', ''))
                ELSE replace(trim(replace(o.name, 'aten::', ''), '_'), '_', '') END AS node
    FROM mine o
    JOIN event_rows e ON e.trace_id = o.trace_id AND e.cat = 'cpu_op' AND e.name = o.name
         AND TRY_CAST(e.args->>'External id' AS BIGINT) = o.external_id AND e.ts_ns = o.ts_ns
    WHERE o.op_id IN (SELECT op_id FROM members) OR o.name LIKE 'autograd::engine::evaluate_function: %'
), backward AS (
    SELECT m.trace, m.k, b.pid, b.tid, b.ts_ns, b.end_ns
    FROM members m JOIN seqs f ON f.trace = m.trace AND f.op_id = m.op_id
    JOIN seqs b ON b.trace = f.trace AND b.seq = f.seq AND b.node = f.node
         AND b.name LIKE 'autograd::engine::evaluate_function: %'
    WHERE f.seq IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY b.trace, b.pid, b.tid, b.ts_ns ORDER BY m.k) = 1
), pace AS (
    SELECT b.trace, b.k, sum(kr.dur_ns) / sum(kr.bytes) AS ns_per_byte
    FROM backward b
    JOIN mine o ON o.trace = b.trace AND o.pid = b.pid AND o.tid = b.tid AND o.ts_ns >= b.ts_ns AND o.ts_ns < b.end_ns
    JOIN kernel_rows kr ON kr.trace_id = o.trace_id AND kr.cpu_op_id = o.op_id
    WHERE kr.bytes > 0
    GROUP BY b.trace, b.k
)
SELECT b.trace, 2 * b.k + 1 AS grp, b.pid, b.tid, b.ts_ns, b.end_ns,
       {passes} * c.fused_bytes * p.ns_per_byte AS fused_ns
FROM backward b JOIN chains c USING (trace, k) JOIN pace p USING (trace, k)
"""

def fuse_elementwise(graph, argument, changed, con):
    """Each chain of view elementwise_chains (those whose ops, joined by ' → ', the regex `argument`
    finds, if given), and its backward, as one kernel of its fused time."""
    key = ("fuse-elementwise", argument)
    if key not in graph.read_by_fixes:  # findings replays a fix alone and with the others
        graph.read_by_fixes[key] = _fused(graph, argument, con)
    apply_fused(changed, graph.read_by_fixes[key])


def fused_groups(con, trace, argument=None, shared=None):
    """(each group's fused ns [(group, ns)], the ops whose launches each chain's forward holds
    [(group, op_id)], the spans of its backward's nodes [(group, pid, tid, start_ns, end_ns)], the
    forward groups of norms {group}): chain k's forward is group 2k, its backward 2k + 1.

    `shared` (a dict, replay.graph.Graph.shared_reads): what one findings run reads for all the
    traces it replays (under SHARED_TRACES), read there once for them all with the first: each
    query's cost is mostly planning the views, whatever the traces it reads."""
    shared = {} if shared is None else shared
    key = ("elementwise groups", argument)
    groups = shared.setdefault(key, {})
    if trace not in groups:
        traces = sorted({trace, *shared.get(SHARED_TRACES, ())} - set(groups))
        groups.update(_groups_of(con, traces, argument))
    return groups[trace]


def _groups_of(con, traces, argument):
    """{trace: fused_groups's triple} of each of `traces`."""
    params = {"traces": traces, "ops": argument or None}
    forward, backward = {trace: [] for trace in traces}, {trace: [] for trace in traces}
    for trace, *row in con.execute(_FORWARD.format(chains=_CHAINS), params).fetchall():
        forward[trace].append(row)
    if any(forward.values()):
        for trace, *row in con.execute(_BACKWARD_SPANS.format(chains=_CHAINS, passes=BACKWARD_PASSES),
                                       params).fetchall():
            backward[trace].append(row)
    return {trace: _triple(forward[trace], backward[trace]) for trace in traces}


def _triple(forward, backward):
    if not forward:
        return [], [], [], set()
    times = sorted({(grp, ns) for grp, ns, *_ in forward}) + [(grp, ns) for grp, *_, ns in backward]
    return (times, [(grp, op_id) for grp, _, op_id, _ in forward], [tuple(row[:5]) for row in backward],
            {grp for grp, *_, norm in forward if norm})


def chain_groups(graph, con, argument=None):
    """(each item's group, -1 for none: 2k for the kernels chain k's ops launched, 2k + 1 for those
    its backward's nodes launched; each group's fused ns), or None where no chain is estimated."""
    times, members, backward, _ = fused_groups(con, graph.trace, argument, graph.shared_reads)
    if not times:
        return None
    fused_ns = np.zeros(max(grp for grp, _ in times) + 1)
    for grp, ns in times:
        fused_ns[grp] = ns
    op_group = dict((op_id, grp) for grp, op_id in members)
    call_group = np.array([op_group.get(op, -1) for op in graph.call_op.tolist()], dtype=np.int64)
    forward = np.where(graph.item_launch >= 0, call_group[np.maximum(graph.item_launch, 0)], -1)
    group = np.where(forward >= 0, forward, items_in_spans(graph, backward))
    # only kernels fuse: a copy or a fill a chain's op made (none, as the view takes them) stays
    group[graph.item_kind != "kernel"] = -1
    return group, fused_ns


def _fused(graph, argument, con):
    if con is None:
        raise TracekitError("fuse-elementwise needs the trace's database")
    grouped = chain_groups(graph, con, argument)
    if grouped is None:
        return None
    group, fused_ns = grouped
    in_chains = np.flatnonzero(group >= 0)
    if not len(in_chains):
        return None
    # a fused kernel takes no longer than the kernels it replaces: the model's pace, read off a few
    # tiny kernels, may say more
    kernels_ns = np.bincount(group[in_chains], weights=graph.item_dur[in_chains], minlength=len(fused_ns))
    fused = fused_in_groups(graph, group, in_chains, np.round(np.minimum(fused_ns, kernels_ns)).astype(np.int64),
                            what_goes=_what_goes_in_user_code)
    # (read once: fused_groups keeps what it read in graph.shared_reads)
    norms = fused_groups(con, graph.trace, argument, graph.shared_reads)[3]
    _keep_a_norms_second_dispatch(group, in_chains, norms, fused, graph)
    return fused


def _keep_a_norms_second_dispatch(group, in_chains, norms, fused, graph):
    """A norm's fused op (F.rms_norm, F.layer_norm: a chain with a row reduction, its forward group in
    `norms`) is a composite that calls its kernel's op, two dispatches where a pointwise one (F.gelu)
    is one: in each norm's forward, the first call gone keeps its thread's time before it."""
    _, _, _, gone_calls, call_cut, _ = fused
    launched = in_chains[graph.item_launch[in_chains] >= 0]
    call_group = np.full(len(graph.call_op), -1, dtype=np.int64)
    call_group[graph.item_launch[launched]] = group[launched]
    of_gone = call_group[gone_calls]
    in_norms = np.flatnonzero(np.isin(of_gone, list(norms)))
    # gone_calls are in their lanes' order: the first of a group's is its earliest
    _, first = np.unique(of_gone[in_norms], return_index=True)
    call_cut[in_norms[first]] = 0


MIN_STRETCHES = 8  # fewer calls gone on a thread than this, and its quartiles are a few calls'


def _what_goes_in_user_code(graph, rest, gone_calls):
    """(the ns of its thread's time before each call gone that goes with it, the ns of its stream's
    idle time before each kernel gone that does), for ops written in the user's code, which may have
    other work between them: the user's Python between two ops of a chain, autograd's engine
    between two backward nodes, another stream's work the GPU waits for.

    A call gone takes its thread's time before it along (the op's dispatch and its line of Python),
    unless the trace shows that time far longer than such times are on its thread (beyond Tukey's
    far-out fence, Q3 + 3 IQR, of the calls gone there; those of all threads where a thread has too
    few): then their median, one op's, and the other work stays. A kernel gone takes its wait for
    its launch along (the launch is gone), or its queue's usual gap behind the kernel before it; a
    longer idle with its launch made was a wait for other work, which stays."""
    observed = graph.call_gap[gone_calls].astype(float)
    call_cut = np.full(len(gone_calls), np.inf)
    lanes = graph.call_lane[gone_calls]
    for lane in np.unique(lanes):
        on_lane = lanes == lane
        population = observed[on_lane] if on_lane.sum() >= MIN_STRETCHES else observed
        q1, median, q3 = np.percentile(population, [25, 50, 75])
        call_cut[on_lane] = np.where(observed[on_lane] > q3 + 3 * (q3 - q1), median, np.inf)
    item_cut = np.where(graph.item_idle_before[rest], np.inf, typical_queue_gap(graph))
    return call_cut, item_cut
