"""GradScaler's reads (view scaler_checks): before each optimizer step GradScaler.step reads
whether the gradients held inf/NaN, a scalar copied to the host that makes the CPU wait for the
backward's kernels. An optimizer whose fused implementation takes the check into its kernel
(Adam, AdamW, SGD with fused=True) makes no read, so `fuse-optimizer` drops the reads before the
steps it fuses; `drop-scaler-checks` drops them all (bf16 autocast, which needs no scaler). No
`drop-sync` takes them: dropping the user's .item() calls leaves GradScaler's.
"""

import numpy as np

from tracekit.replay.graph import calls_inside

FUSABLE = ("Adam", "AdamW", "SGD")  # the optimizers whose fused=True step checks inf/NaN itself

_READS = """
SELECT s.pid, s.tid, q.ts_ns, q.ts_ns + q.dur_ns AS end_ns
FROM scaler_checks s JOIN trace_files t ON t.trace = s.trace
JOIN cpu_op_rows q ON q.trace_id = t.trace_id AND q.op_id = s.op_id
WHERE s.trace = $trace AND ($fusable_only = FALSE OR list_contains($fusable, s.optimizer))
ORDER BY q.ts_ns
"""


def scaler_read_calls(graph, con, fusable_only):
    """Which of the graph's calls are inside GradScaler's reads (before the steps of a fusable
    optimizer alone, with `fusable_only`): a boolean per call, read once a graph."""
    key = ("scaler-reads", fusable_only)
    if key not in graph.read_by_fixes:  # findings replays each fix alone and with the others
        graph.read_by_fixes[key] = _read_calls(graph, con, fusable_only)
    return graph.read_by_fixes[key]


def _read_calls(graph, con, fusable_only):
    hit = np.zeros(len(graph.call_lane), dtype=bool)
    if con is None:
        return hit
    reads = con.execute(_READS, {"trace": graph.trace, "fusable_only": fusable_only, "fusable": list(FUSABLE)}).fetchall()
    for _, on_lane, lo, hi in calls_inside(graph, [(k, pid, tid, start, end)
                                                   for k, (pid, tid, start, end) in enumerate(reads)]):
        hit[on_lane[lo:hi]] = True
    return hit
