"""When each step completes, from a replay's times.

A step completes when its CPU span and the GPU work it owns have both ended (as in view
step_bounds). Replayed, the CPU span's end moves as its thread's last call before it moved; the GPU
work's end is the replayed end of the latest item the step owns.
"""

import dataclasses

import numpy as np


def completions_of(graph, call_start, call_end, item_start, item_end):
    """[(start, completion)] of each step of `graph` from its replayed times."""
    owned = graph.item_step >= 0
    steps, step_of_item = np.unique(graph.item_step[owned], return_inverse=True)
    latest = np.full(len(steps), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(latest, step_of_item, item_end[owned])
    owned_end = dict(zip(steps.tolist(), latest.tolist()))
    shifts = {lane: _Shift(graph, lane) for lane in {step["lane"] for step in graph.steps}}
    result = []
    for step in graph.steps:
        shift = shifts[step["lane"]]
        moved_start = step["ts_ns"] + shift(call_end, step["ts_ns"])
        moved_end = step["end_ns"] + shift(call_end, step["end_ns"])
        result.append((moved_start, max(moved_end, owned_end.get(step["step"], moved_end))))
    return result


class _Shift:
    """How far the replay moved a thread's time at a moment: as far as its last call returning by
    then (of those returning together, the first in the thread's order)."""

    def __init__(self, graph, lane):
        on_lane = np.flatnonzero(graph.call_lane == lane) if lane >= 0 else np.zeros(0, dtype=np.int64)
        observed_end = graph.call_ts[on_lane] + graph.call_dur[on_lane]
        by_end = np.lexsort((-np.arange(len(on_lane)), observed_end))
        self.calls, self.observed_end = on_lane[by_end], observed_end[by_end]

    def __call__(self, call_end, at_ns):
        last = np.searchsorted(self.observed_end, at_ns, "right") - 1
        if last < 0:
            return 0
        return int(call_end[self.calls[last]] - self.observed_end[last])


def as_one_step(graph):
    """`graph` of a trace without steps, as one step that is the whole trace: from its first call
    or item to its last, the thread of its last call its CPU side (it moves as that call moves),
    every item its GPU work."""
    call_end, item_end = graph.call_ts + graph.call_dur, graph.item_ts + graph.item_dur
    first = int(min(np.concatenate([graph.call_ts, graph.item_ts]), default=0))
    done = int(max(np.concatenate([call_end, item_end]), default=first))
    lane, cpu_end = -1, first
    if len(call_end):
        last = int(np.argmax(call_end))
        lane, cpu_end = int(graph.call_lane[last]), int(call_end[last])
    step = {"step": 0, "ts_ns": first, "end_ns": cpu_end, "lane": lane, "from_ns": first, "done_ns": done}
    return dataclasses.replace(graph, steps=[step], steady=[0], item_step=np.zeros(len(graph.item_step), dtype=np.int64))
