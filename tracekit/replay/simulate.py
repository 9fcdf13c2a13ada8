"""Replays a Graph: when each call returns and each item ends, given their durations and links.

Each lane (a thread's calls, a stream's items) is a recurrence of one form: a node ends at the
later of (the previous node's end + its own gap + its duration) and (what it waits for + its
duration): E[k] = max(E[k-1] + x[k], B[k]). Its solution is E[k] = P[k] + max over j <= k of
(B[j] - P[j]), P the running sum of x: a running sum and a running maximum per lane, vectorised.
Calls wait for items (a sync) and items for calls (their launch), so the two are solved in turn,
each from the other's last answer, until neither moves: from waits that hold nothing back, the
ends only grow, to the least answer, the replay.
"""

import numpy as np
import pandas as pd

from tracekit.errors import TracekitError

NEVER = np.int64(-(2 ** 62))  # B of a node that waits for nothing but its lane
# Each round carries a change across one more wait, so a trace needs about as many rounds as it
# has calls that wait for the GPU; each round is a pass over every node. Past this many waits the
# replay would take minutes (a trace that syncs hundreds of times a step), so it says so instead.
MAX_WAITS = 500


def replay(graph, item_dur=None, item_gap=None, call_dur=None, call_gap=None, call_wait=None):
    """(call_start, call_end, item_start, item_end) in ns, replayed with these arrays in place of
    the graph's own (a fix's changes)."""
    item_dur = graph.item_dur if item_dur is None else item_dur
    item_gap = graph.item_gap if item_gap is None else item_gap
    call_dur = graph.call_dur if call_dur is None else call_dur
    call_gap = graph.call_gap if call_gap is None else call_gap
    call_wait = graph.call_wait if call_wait is None else call_wait

    latency = _launch_latency(graph)
    item_gap = _queue_gap(graph, item_gap)
    # An item a stream wait held back: its idle before it was that wait; its own gap the lag after.
    stream_wait = graph.item_after >= 0
    item_gap = np.where(stream_wait, np.minimum(item_gap, graph.item_lag), item_gap)
    call_first = _firsts(graph.call_lane)
    item_first = _firsts(graph.item_lane)
    waits = call_wait >= 0
    launched = graph.item_launch >= 0
    handoff = graph.call_after >= 0
    # After a handoff the thread's gap was mostly waiting for the other thread: what is its own is
    # the lag after the other's call (or less, where a fix took the gap away).
    call_gap = np.where(handoff, np.minimum(call_gap, graph.call_lag), call_gap)
    # A call that waited costs its return (tail) once its item has ended; the rest its own time.
    call_own = np.where(waits, graph.call_tail, call_dur)
    call_x = np.where(call_first, graph.call_ts + call_own, call_gap + call_own)
    item_x = np.where(item_first & ~launched, graph.item_ts + item_dur, item_gap + item_dur)

    links = int(waits.sum()) + int(handoff.sum()) + int(stream_wait.sum())
    if int(waits.sum()) > MAX_WAITS:
        raise TracekitError(f"it holds {int(waits.sum())} calls that wait for the GPU; the replay handles up to "
                            f"{MAX_WAITS} yet (each costs a pass over the trace)")
    item_end = np.full(len(item_dur), NEVER, dtype=np.int64)
    call_end = None
    for _ in range(links + 3):
        waited = np.where(waits, item_end[np.maximum(call_wait, 0)] + graph.call_tail, NEVER) if len(call_wait) else \
            np.zeros(0, np.int64)
        if handoff.any():
            other_end = NEVER if call_end is None else call_end[np.maximum(graph.call_after, 0)]
            handed = np.where(handoff & (other_end != NEVER), other_end + graph.call_lag + call_own, NEVER)
            waited = np.maximum(waited, handed)
        waited = np.where(call_first, np.maximum(waited, call_x), waited)
        new_call_end = _lane_scan(graph.call_lane, call_x, waited)
        call_start = _starts(new_call_end, call_first, graph.call_ts, call_gap, call_own, waits)
        launch_at = np.where(launched, call_start[np.maximum(graph.item_launch, 0)] + latency + item_dur, NEVER) \
            if len(call_start) else np.full(len(item_dur), NEVER, np.int64)
        launch_at = np.where(item_first & ~launched, item_x, launch_at)
        if stream_wait.any():
            other_end = item_end[np.maximum(graph.item_after, 0)]
            launch_at = np.maximum(launch_at, np.where(stream_wait & (other_end != NEVER),
                                                       other_end + graph.item_lag + item_dur, NEVER))
        new_item_end = _lane_scan(graph.item_lane, item_x, launch_at)
        if call_end is not None and np.array_equal(new_call_end, call_end) and np.array_equal(new_item_end, item_end):
            break
        call_end, item_end = new_call_end, new_item_end
    else:
        # Only a wait on work launched after it (no trace does) can keep changing the answer.
        raise TracekitError("its replay did not settle: a call waits for GPU work launched after it")
    return call_start, call_end, item_end - item_dur, item_end


def _launch_latency(graph):
    """Each item's time from its launch call's start to its own start when nothing else holds it
    back: what the trace shows for an item whose stream was idle, waiting for its launch; for one
    queued behind others (its observed latency mostly the queue), the trace's median of those."""
    idle = graph.item_idle_before & (graph.item_launch >= 0)
    typical = np.int64(np.median(graph.item_latency[idle])) if idle.any() else np.int64(5_000)
    return np.where(idle, graph.item_latency, np.minimum(graph.item_latency, typical))


def _queue_gap(graph, item_gap):
    """Each item's gap after the item before it on its stream when queued behind it: as the trace
    shows for a queued item; for one whose stream was idle (its gap the wait for its launch), the
    median gap of the queued ones."""
    queued = ~graph.item_idle_before & ~_firsts(graph.item_lane)
    usual = np.int64(np.median(item_gap[queued])) if queued.any() else np.int64(1_000)
    return np.where(graph.item_idle_before, np.minimum(item_gap, usual), item_gap)


def _firsts(lane):
    return np.r_[True, lane[1:] != lane[:-1]] if len(lane) else np.zeros(0, dtype=bool)


def _lane_scan(lane, x, b):
    """E with E[k] = max(E[k-1] + x[k], b[k]) within each lane (E of a lane's first = b there)."""
    if not len(x):
        return np.zeros(0, dtype=np.int64)
    p = pd.Series(x).groupby(lane).cumsum().to_numpy()
    best = pd.Series(np.where(b == NEVER, NEVER, b - p)).groupby(lane).cummax().to_numpy()
    return p + best


def _starts(end, first, ts, gap, own, waits):
    """Each call's start: its end less its own time, or for a call that waited for the GPU, its
    lane's previous end plus its gap (the first: where the trace has it)."""
    if not len(end):
        return np.zeros(0, dtype=np.int64)
    previous = np.r_[np.int64(0), end[:-1]]
    return np.where(first, ts, np.where(waits, previous + gap, end - own))
