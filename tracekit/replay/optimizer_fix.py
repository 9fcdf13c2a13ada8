"""The fix `fuse-optimizer`: each Adam, AdamW or SGD step that ran its foreach or for-loop
implementation (view optimizer_steps) replayed as its fused implementation (fused=True) runs it:
the step's unfused kernels (its foreach ops', or a for-loop step's other ops') as one kernel, their
time scaled to the bytes a fused step moves (each state read once and written once: for Adam(W)
the parameters, gradients and both moments read, the parameters and moments written, 7 times the
parameters' bytes; optimizer_steps.fused_bytes) against the bytes they move, at the bandwidth they
reached; one launch, the calls that launched the rest and the CPU's time before them gone (a
for-loop step's dispatch a parameter at a time with them).
"""

import numpy as np

from tracekit.errors import TracekitError
from tracekit.replay.attention_fix import apply_fused, fused_in_groups
from tracekit.replay.graph import calls_inside

# Each unfused step's range, the share of its unfused kernels' time a fused step takes, and whether it ran the for-loop.
_STEPS = """
SELECT o.pid, o.tid, q.ts_ns, q.ts_ns + q.dur_ns AS end_ns, least(o.fused_bytes / o.unfused_bytes, 1) AS share,
       o.implementation = 'for-loop' AS for_loop
FROM optimizer_steps o JOIN trace_files t ON t.trace = o.trace
JOIN cpu_op_rows q ON q.trace_id = t.trace_id AND q.op_id = o.op_id
WHERE o.trace = $trace AND o.fused_bytes IS NOT NULL AND NOT o.fused AND o.unfused_bytes > 0
ORDER BY q.ts_ns
"""


def fuse_optimizer(graph, argument, changed, con):
    """Each unfused step's foreach kernels become one item of their time scaled to a fused
    step's bytes; the calls that launched the rest cost nothing."""
    key = ("fuse-optimizer", argument)
    if key not in graph.read_by_fixes:  # findings replays a fix alone and with the others
        graph.read_by_fixes[key] = _fused(graph, con)
    apply_fused(changed, graph.read_by_fixes[key])


def _fused(graph, con):
    if con is None:
        raise TracekitError("fuse-optimizer needs the trace's database")
    steps = con.execute(_STEPS, {"trace": graph.trace}).fetchall()
    call_group = np.full(len(graph.call_lane), -1, dtype=np.int64)
    for group, on_lane, lo, hi in calls_inside(graph, [(k, pid, tid, start, end)
                                                       for k, (pid, tid, start, end, *_) in enumerate(steps)]):
        call_group[on_lane[lo:hi]] = group
    launched = graph.item_launch >= 0
    foreach = np.array(["aten::_foreach_" in path for path in graph.item_op_path], dtype=bool)
    item_group = call_group[np.maximum(graph.item_launch, 0)]
    # a foreach step's foreach kernels; a for-loop step's others (a step hook's foreach clip stays),
    # as optimizer_steps.unfused_* counts them
    for_loop = np.array([row[5] for row in steps] + [False], dtype=bool)[item_group]
    group = np.where(launched & (foreach != for_loop) & (graph.item_kind == "kernel"), item_group, -1)
    members = np.flatnonzero(group >= 0)
    if not len(members):
        return None
    share = np.array([row[4] for row in steps], dtype=float)
    fused_ns = np.round(np.bincount(group[members], weights=graph.item_dur[members], minlength=len(steps))
                        * share).astype(np.int64)
    return fused_in_groups(graph, group, members, fused_ns)
