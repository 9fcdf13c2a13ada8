"""When each step completes, from a replay's times.

A step completes when its CPU span and the GPU work it owns have both ended (as in view
step_bounds). Replayed, the CPU span's end moves as its thread's last call before it moved; the GPU
work's end is the replayed end of the latest item the step owns.
"""

import numpy as np


def completions_of(graph, call_start, call_end, item_start, item_end):
    """[(start, completion)] of each step of `graph` from its replayed times."""
    owned_end = {}
    for step in np.unique(graph.item_step[graph.item_step >= 0]):
        owned_end[int(step)] = int(item_end[graph.item_step == step].max())
    result = []
    for step in graph.steps:
        moved_start = step["ts_ns"] + _shift(graph, call_end, step["lane"], step["ts_ns"])
        moved_end = step["end_ns"] + _shift(graph, call_end, step["lane"], step["end_ns"])
        result.append((moved_start, max(moved_end, owned_end.get(step["step"], moved_end))))
    return result


def _shift(graph, call_end, lane, at_ns):
    """How far the replay moved a thread's time at `at_ns`: as far as its last call returning by then."""
    if lane < 0:
        return 0
    on_lane = np.flatnonzero(graph.call_lane == lane)
    observed_end = graph.call_ts[on_lane] + graph.call_dur[on_lane]
    before = on_lane[observed_end <= at_ns]
    if not len(before):
        return 0
    last = before[np.argmax(graph.call_ts[before] + graph.call_dur[before])]
    return int(call_end[last] - (graph.call_ts[last] + graph.call_dur[last]))
