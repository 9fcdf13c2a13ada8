"""Replays a Graph: when each call returns and each item ends, given their durations and links.

Each lane (a thread's calls, a stream's items) is a recurrence of one form: a node ends at the
later of (the previous node's end + its own gap + its duration) and (what it waits for + its
duration): E[k] = max(E[k-1] + x[k], B[k]). Its solution is E[k] = P[k] + max over j <= k of
(B[j] - P[j]), P the running sum of x: a running sum and a running maximum per lane, vectorised.
Calls wait for items (a sync) and items for calls (their launch), so the two are solved in turn,
each from the other's last answer, until neither moves: from waits that hold nothing back, the
ends only grow, to the least answer, the replay.

In a job's graph (replay.job: its ranks' graphs side by side), a collective's kernels, one a rank,
end together: each its own time (the transfer) after the last rank's kernel was ready to start, on
a clock the ranks share.
"""

import weakref

import numpy as np
import pandas as pd

from tracekit.errors import TracekitError

NEVER = np.int64(-(2 ** 62))  # B of a node that waits for nothing but its lane
# Each round carries a change across one more wait, so a trace needs about as many rounds as it
# has links across lanes (calls that wait for the GPU, handoffs, stream waits); each round is a
# pass over every node. Past this many, one sweep over the nodes in dependency order is faster.
MAX_WAITS = 500


def replay(graph, item_dur=None, item_gap=None, call_dur=None, call_gap=None, call_wait=None, call_lag=None):
    """(call_start, call_end, item_start, item_end) in ns, replayed with these arrays in place of
    the graph's own (a fix's changes)."""
    item_dur = graph.item_dur if item_dur is None else item_dur
    item_gap = graph.item_gap if item_gap is None else item_gap
    call_dur = graph.call_dur if call_dur is None else call_dur
    call_gap = graph.call_gap if call_gap is None else call_gap
    call_wait = graph.call_wait if call_wait is None else call_wait
    call_lag = graph.call_lag if call_lag is None else call_lag

    collective = graph.item_collective >= 0
    # a collective's kernel lasts its transfer; its wait for the last rank is the replay's to find
    item_dur = np.where(collective, np.minimum(np.maximum(graph.item_transfer, 0), item_dur), item_dur)
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
    call_gap = np.where(handoff, np.minimum(call_gap, call_lag), call_gap)
    # A call that waited costs its return (tail) once its item has ended; the rest its own time.
    call_own = np.where(waits, graph.call_tail, call_dur)
    call_x = np.where(call_first, graph.call_ts + call_own, call_gap + call_own)
    item_x = np.where(item_first & ~launched, graph.item_ts + item_dur, item_gap + item_dur)

    links = int(waits.sum()) + int(handoff.sum()) + int(stream_wait.sum()) + int(collective.sum())
    if links > MAX_WAITS:
        return _sweep(graph, item_dur, item_x, latency, call_x, call_own, call_gap, call_wait, call_lag, call_first,
                      item_first)
    item_end = np.full(len(item_dur), NEVER, dtype=np.int64)
    call_end = None
    for _ in range(links + 3):
        waited = np.where(waits, item_end[np.maximum(call_wait, 0)] + graph.call_tail, NEVER) \
            if len(call_wait) and len(item_end) else np.full(len(call_wait), NEVER, np.int64)
        if handoff.any():
            other_end = NEVER if call_end is None else call_end[np.maximum(graph.call_after, 0)]
            handed = np.where(handoff & (other_end != NEVER), other_end + call_lag + call_own, NEVER)
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
        if collective.any():
            launch_at = np.maximum(launch_at, _last_rank_in(graph, collective, item_end, item_dur))
        new_item_end = _lane_scan(graph.item_lane, item_x, launch_at)
        if call_end is not None and np.array_equal(new_call_end, call_end) and np.array_equal(new_item_end, item_end):
            break
        call_end, item_end = new_call_end, new_item_end
    else:
        # Only a wait on work launched after it (no trace does) can keep changing the answer.
        raise TracekitError("its replay did not settle: a call waits for GPU work launched after it")
    return call_start, call_end, item_end - item_dur, item_end


class _SweepOrder:
    """What a sweep of `graph` needs that no fix changes (its links, the visit order), as lists:
    a trace's findings replay its graph a dozen times, each worker several of them."""

    def __init__(self, graph, call_first, item_first, latency):
        n_calls, n_items = len(graph.call_ts), len(graph.item_ts)
        self.graph = weakref.ref(graph)  # whose id(graph) this is, while it lives
        self.c_first, self.c_ts = call_first.tolist(), graph.call_ts.tolist()
        self.c_tail, self.c_after = graph.call_tail.tolist(), graph.call_after.tolist()
        self.i_first, self.i_latency = item_first.tolist(), latency.tolist()
        self.i_launch = np.where(graph.item_launch >= 0, graph.item_launch, -1).tolist()
        self.i_after, self.i_lag = graph.item_after.tolist(), graph.item_lag.tolist()
        self.i_call, self.i_clock = graph.item_collective.tolist(), graph.item_clock.tolist()
        self.kernels_of_call = {}
        for i, call in enumerate(self.i_call):
            if call >= 0:
                self.kernels_of_call.setdefault(call, []).append(i)
        # Observed end order visits nearly every node after its inputs (each ended after what it waited
        # for; start order would visit a sync before the GPU work it waits for, which the stack must then
        # solve first, node by node); the stack takes the rest first.
        ends = np.concatenate([graph.call_ts + graph.call_dur, graph.item_ts + graph.item_dur])
        kind_of = np.r_[np.zeros(n_calls, dtype=np.int64), np.ones(n_items, dtype=np.int64)]
        index_of = np.r_[np.arange(n_calls), np.arange(n_items)]
        order = np.lexsort((index_of, kind_of, ends))
        self.kinds, self.indices = kind_of[order].tolist(), index_of[order].tolist()


_SWEEP_ORDERS = {}  # id(graph) -> _SweepOrder: the last graph swept


def _sweep_order(graph, call_first, item_first, latency):
    known = _SWEEP_ORDERS.get(id(graph))
    if known is None or known.graph() is not graph:
        _SWEEP_ORDERS.clear()
        known = _SWEEP_ORDERS[id(graph)] = _SweepOrder(graph, call_first, item_first, latency)
    return known


def _sweep(graph, item_dur, item_x, latency, call_x, call_own, call_gap, call_wait, call_lag, call_first, item_first):
    """The same answer as the rounds, node by node in an order where each node's inputs are known:
    for a trace with many links (thousands of syncs), one pass, not one pass per link."""
    n_calls, n_items = len(call_x), len(item_x)
    fixed = _sweep_order(graph, call_first, item_first, latency)
    c_first, c_ts, c_tail, c_after = fixed.c_first, fixed.c_ts, fixed.c_tail, fixed.c_after
    i_first, i_latency, i_launch = fixed.i_first, fixed.i_latency, fixed.i_launch
    i_after, i_lag, i_call, i_clock = fixed.i_after, fixed.i_lag, fixed.i_call, fixed.i_clock
    kernels_of_call = fixed.kernels_of_call
    c_x, c_own, c_gap = call_x.tolist(), call_own.tolist(), call_gap.tolist()
    c_wait, c_lag = call_wait.tolist(), call_lag.tolist()
    i_x, i_dur = item_x.tolist(), item_dur.tolist()
    never = int(NEVER)
    c_end, c_start, i_end = [None] * n_calls, [None] * n_calls, [None] * n_items

    def call_needs(k):
        needs = start_needs(k)
        if c_wait[k] >= 0 and i_end[c_wait[k]] is None:
            needs.append((1, c_wait[k]))
        return needs

    def item_needs(i):
        # a collective's kernels are solved together: each needs what all of them wait for
        if i_call[i] >= 0:
            return [need for k in kernels_of_call[i_call[i]] for need in own_needs(k)]
        return own_needs(i)

    def own_needs(i):
        needs = []
        if not i_first[i] and i_end[i - 1] is None:
            needs.append((1, i - 1))
        if i_launch[i] >= 0 and c_start[i_launch[i]] is None:
            needs.append((2, i_launch[i]))
        if i_after[i] >= 0 and i_end[i_after[i]] is None:
            needs.append((1, i_after[i]))
        return needs

    def start_needs(k):
        needs = []
        if not c_first[k] and c_end[k - 1] is None:
            needs.append((0, k - 1))
        if c_after[k] >= 0 and c_end[c_after[k]] is None:
            needs.append((0, c_after[k]))
        return needs

    def solve_start(k):
        if c_first[k]:
            c_start[k] = c_ts[k]
            return
        start = c_end[k - 1] + c_gap[k]
        if c_after[k] >= 0 and c_wait[k] < 0:
            start = max(start, c_end[c_after[k]] + c_lag[k])
        c_start[k] = start

    def solve_call(k):
        b = never
        if c_wait[k] >= 0:
            b = i_end[c_wait[k]] + c_tail[k]
        if c_after[k] >= 0:
            b = max(b, c_end[c_after[k]] + c_lag[k] + c_own[k])
        c_end[k] = max(b, c_x[k]) if c_first[k] else max(c_end[k - 1] + c_x[k], b)
        if c_start[k] is None:
            c_start[k] = c_ts[k] if c_first[k] else (c_end[k - 1] + c_gap[k] if c_wait[k] >= 0 else c_end[k] - c_own[k])

    def solve_item(i):
        if i_call[i] < 0:
            i_end[i] = own_end(i)
            return
        kernels = kernels_of_call[i_call[i]]
        latest = max(own_end(k) + i_clock[k] - i_dur[k] for k in kernels)
        for k in kernels:
            i_end[k] = latest - i_clock[k] + i_dur[k]

    def own_end(i):
        at = never
        if i_launch[i] >= 0:
            at = c_start[i_launch[i]] + i_latency[i] + i_dur[i]
        elif i_first[i]:
            at = i_x[i]
        if i_after[i] >= 0:
            at = max(at, i_end[i_after[i]] + i_lag[i] + i_dur[i])
        return at if i_first[i] else max(i_end[i - 1] + i_x[i], at)

    kinds = ((call_needs, solve_call, c_end), (item_needs, solve_item, i_end), (start_needs, solve_start, c_start))
    for kind, index in zip(fixed.kinds, fixed.indices):
        # Most nodes have their inputs solved by now: solve them here, as solve_call and own_end do,
        # without the stack's calls (a third of the sweep's time on a 1 GB trace).
        if kind == 0:
            if c_end[index] is not None:
                continue
            first, wait, after = c_first[index], c_wait[index], c_after[index]
            if (first or c_end[index - 1] is not None) and (wait < 0 or i_end[wait] is not None) \
                    and (after < 0 or c_end[after] is not None):
                b = i_end[wait] + c_tail[index] if wait >= 0 else never
                if after >= 0:
                    b = max(b, c_end[after] + c_lag[index] + c_own[index])
                end = max(b, c_x[index]) if first else max(c_end[index - 1] + c_x[index], b)
                c_end[index] = end
                if c_start[index] is None:
                    c_start[index] = c_ts[index] if first else \
                        (c_end[index - 1] + c_gap[index] if wait >= 0 else end - c_own[index])
                continue
        else:
            if i_end[index] is not None:
                continue
            first, launch, after = i_first[index], i_launch[index], i_after[index]
            if i_call[index] < 0 and (first or i_end[index - 1] is not None) \
                    and (launch < 0 or c_start[launch] is not None) and (after < 0 or i_end[after] is not None):
                at = c_start[launch] + i_latency[index] + i_dur[index] if launch >= 0 else \
                    (i_x[index] if first else never)
                if after >= 0:
                    at = max(at, i_end[after] + i_lag[index] + i_dur[index])
                i_end[index] = at if first else max(i_end[index - 1] + i_x[index], at)
                continue
        stack = [(kind, index)]
        while stack:
            kind, index = stack[-1]
            needs_of, solve, done = kinds[kind]
            if done[index] is not None:
                stack.pop()
                continue
            needs = needs_of(index)
            if needs:
                if len(stack) > n_calls + n_items:
                    raise TracekitError("its replay did not settle: a call waits for GPU work launched after it")
                stack.extend(needs)
            else:
                solve(index)
                stack.pop()
    item_end = np.array(i_end, dtype=np.int64)
    return np.array(c_start, dtype=np.int64), np.array(c_end, dtype=np.int64), item_end - item_dur, item_end


def _last_rank_in(graph, collective, item_end, item_dur):
    """Each collective kernel's least end: the latest its call's kernels (one a rank) were ready to
    start, on the ranks' shared clock, plus its own transfer (NEVER for other items)."""
    ready = np.where(collective & (item_end != NEVER), item_end + graph.item_clock - item_dur, NEVER)
    latest = pd.Series(ready[collective]).groupby(graph.item_collective[collective]).transform("max").to_numpy()
    bound = np.full(len(item_end), NEVER, dtype=np.int64)
    bound[collective] = np.where(latest != NEVER, latest - graph.item_clock[collective] + item_dur[collective], NEVER)
    return bound


def _launch_latency(graph):
    """Each item's time from its launch call's start to its own start when nothing else holds it
    back: what the trace shows for an item whose stream was idle, waiting for its launch; for one
    queued behind others (its observed latency mostly the queue), the trace's median of those."""
    idle = graph.item_idle_before & (graph.item_launch >= 0)
    return np.where(idle, graph.item_latency, np.minimum(graph.item_latency, typical_launch_latency(graph)))


def typical_launch_latency(graph):
    """The median time from a launch call's start to its work's start, over the items whose stream
    was idle, waiting for their launch (5 µs where none was)."""
    idle = graph.item_idle_before & (graph.item_launch >= 0)
    return np.int64(np.median(graph.item_latency[idle])) if idle.any() else np.int64(5_000)


def _queue_gap(graph, item_gap):
    """Each item's gap after the item before it on its stream when queued behind it: as the trace
    shows for a queued item; for one whose stream was idle (its gap the wait for its launch), the
    median gap of the queued ones."""
    return np.where(graph.item_idle_before, np.minimum(item_gap, typical_queue_gap(graph, item_gap)), item_gap)


def typical_queue_gap(graph, item_gap=None):
    """The median gap between an item and the one it was queued behind on its stream (1 µs where
    none was queued)."""
    item_gap = graph.item_gap if item_gap is None else item_gap
    queued = ~graph.item_idle_before & ~_firsts(graph.item_lane)
    return np.int64(np.median(item_gap[queued])) if queued.any() else np.int64(1_000)


def _firsts(lane):
    return np.r_[True, lane[1:] != lane[:-1]] if len(lane) else np.zeros(0, dtype=bool)


def _lane_scan(lane, x, b):
    """E with E[k] = max(E[k-1] + x[k], b[k]) within each lane (E of a lane's first = b there)."""
    if not len(x):
        return np.zeros(0, dtype=np.int64)
    # A lane's nodes lie together in lane order (the graph numbers them so); a scan per lane's slice,
    # not a pandas groupby, whose fixed cost was most of a small trace's replay.
    order = None if (lane[1:] >= lane[:-1]).all() else np.argsort(lane, kind="stable")
    if order is not None:
        lane, x, b = lane[order], x[order], b[order]
    starts = np.flatnonzero(np.r_[True, lane[1:] != lane[:-1]])
    total = np.cumsum(x)
    p = total - np.repeat(total[starts] - x[starts], np.diff(np.r_[starts, len(x)]))
    offered = np.where(b == NEVER, NEVER, b - p)
    best = np.empty_like(offered)
    for start, end in zip(starts, np.r_[starts[1:], len(x)]):
        np.maximum.accumulate(offered[start:end], out=best[start:end])
    scanned = p + best
    if order is None:
        return scanned
    back = np.empty_like(scanned)
    back[order] = scanned
    return back


def _starts(end, first, ts, gap, own, waits):
    """Each call's start: its end less its own time, or for a call that waited for the GPU, its
    lane's previous end plus its gap (the first: where the trace has it)."""
    if not len(end):
        return np.zeros(0, dtype=np.int64)
    previous = np.r_[np.int64(0), end[:-1]]
    return np.where(first, ts, np.where(waits, previous + gap, end - own))
