"""GPU work moved onto a stream of its own and issued a step ahead: the graph prefetch-copies
replays.

A prefetcher (`with torch.cuda.stream(side): next = host.to(device, non_blocking=True)`, then
`wait_stream(side)` before use) copies step N+1's batch while step N computes. So the moved items
leave their stream's order: each is launched where the same item of the step before was (the
first step's, where the trace has them), runs once launched (plus the launch latency the trace
shows for work its stream was idle for) and after the item moved before it, beside the work queued
ahead of it. The item that followed each on its old stream waits for it (`wait_stream`).
"""

import dataclasses

import numpy as np

from tracekit.replay.simulate import typical_launch_latency, typical_queue_gap


def on_side_stream(graph, chosen):
    """`graph` (replay.graph.Graph) with the items of mask `chosen` on one new stream, appended
    after the others (a lane's items stay together, in order), every item index remapped."""
    if not chosen.any():
        return graph
    kept, moved = np.flatnonzero(~chosen), np.flatnonzero(chosen)
    moved = moved[np.argsort(graph.item_ts[moved], kind="stable")]
    order = np.r_[kept, moved]
    new_index = np.empty(len(order), dtype=np.int64)
    new_index[order] = np.arange(len(order))
    items = {f.name: getattr(graph, f.name)[order].copy() for f in dataclasses.fields(graph)
             if f.name.startswith("item_")}
    side = slice(len(kept), None)
    items["item_lane"][side] = graph.item_lane.max() + 1
    items["item_after"] = _remapped(items["item_after"], new_index)
    items["item_after"][side] = -1
    items["item_lag"][side] = 0
    # each moved item waits for its launch alone: the latency of work launched to an idle stream
    items["item_idle_before"][side] = True
    items["item_gap"][side] = 0
    items["item_latency"][side] = typical_launch_latency(graph)
    # the item after each moved one on its old stream (kept items keep their order) waits for it
    after = np.searchsorted(kept, moved)
    has_next = after < len(kept)
    same_lane = np.zeros(len(moved), dtype=bool)
    same_lane[has_next] = graph.item_lane[kept[after[has_next]]] == graph.item_lane[moved[has_next]]
    items["item_after"][after[same_lane]] = new_index[moved[same_lane]]
    items["item_lag"][after[same_lane]] = typical_queue_gap(graph)
    return dataclasses.replace(graph, **items, call_wait=_remapped(graph.call_wait, new_index))


def _remapped(indices, new_index):
    return np.where(indices >= 0, new_index[np.maximum(indices, 0)], -1)


def issued_a_step_ahead(graph, lane):
    """`graph` with each item of stream `lane` (in time order) launched by the call that launched
    the item at its place on `lane` in the step before, where that step has one. (Apart from
    on_side_stream: the fixes in between still find each copy's own call, to make it return at once.)"""
    on_lane = np.flatnonzero(graph.item_lane == lane)
    launch = graph.item_launch.copy()
    steps = graph.item_step[on_lane]
    before = None
    for step in np.unique(steps[steps >= 0]):
        these = on_lane[steps == step]
        if before is not None:
            ahead = min(len(these), len(before))
            launch[these[:ahead]] = graph.item_launch[before[:ahead]]
        before = these
    return dataclasses.replace(graph, item_launch=launch)
