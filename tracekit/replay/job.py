"""The ranks of a job replayed together: a collective cannot end on one rank before the last rank
has arrived, so what a fix saves one rank depends on the others.

A job's graph is its ranks' graphs side by side (lanes, items and calls renumbered), with each
collective call matched across the ranks (view _cp_rank_waits) made one constraint: its kernels
end together, each its own transfer after the latest of them was ready (replay.simulate). The
ranks' clocks are put on the first rank's by where their collectives end, which is the same
moment on every rank: this needs no clock the hosts share. A fix is applied to every rank, as the
same code runs on each (SPMD).
"""

import dataclasses

import numpy as np

from tracekit.replay.graph import read_graph
from tracekit.replay.simulate import replay
from tracekit.replay.steps import completions_of

# the other ranks whose collectives this trace's are matched with (ranks loaded beside it)
_RANKS = """
SELECT DISTINCT f.trace, f.rank
FROM {rank_waits} mine
JOIN {rank_waits} theirs ON theirs.call_key = mine.call_key
JOIN trace_files f ON f.trace_id = theirs.trace_id
WHERE mine.trace_id = (SELECT trace_id FROM trace_files WHERE trace = $trace)
ORDER BY f.rank, f.trace
"""

_ITEM_LINKS = ("item_launch", "call"), ("item_after", "item")
_CALL_LINKS = ("call_wait", "item"), ("call_after", "call")


# The matched collectives of every loaded trace, computed once: view _cp_rank_waits evaluates the
# collectives view over all of them, each time it is read.
_CACHED_RANK_WAITS = "_job_rank_waits"


def ranks_of(con, trace, rank_waits="_cp_rank_waits"):
    """The traces of `trace`'s job it shares collectives with, itself included, first rank first
    ([trace] alone when no other rank is loaded); `rank_waits` as read_graph takes it."""
    traces = [row[0] for row in con.execute(_RANKS.replace("{rank_waits}", rank_waits), {"trace": trace}).fetchall()]
    return traces if len(traces) > 1 else [trace]


class Jobs:
    """The jobs of the traces replayed on one connection, each job's graphs read once, and the
    collectives matched across ranks (view _cp_rank_waits) computed once for all of them into a
    temporary table: not once per rank and query, as reading the view does."""

    def __init__(self, con):
        self.con = con
        con.execute(f"CREATE OR REPLACE TEMP TABLE {_CACHED_RANK_WAITS} AS SELECT * FROM _cp_rank_waits")
        self._jobs = {}

    def of(self, trace):
        """The Job `trace` is replayed in (itself alone where no other rank is loaded)."""
        traces = tuple(ranks_of(self.con, trace, _CACHED_RANK_WAITS))
        if traces not in self._jobs:
            self._jobs[traces] = Job(self.con, traces, _CACHED_RANK_WAITS)
        return self._jobs[traces]


class Job:
    """The graphs of a job's ranks, to replay together."""

    def __init__(self, con, traces, rank_waits="_cp_rank_waits"):
        self.traces = list(traces)
        self.graphs = {trace: read_graph(con, trace, rank_waits) for trace in self.traces}

    def completions(self, changed_by_trace=None):
        """{trace: [(start, completion)] of each step} replayed together, each rank's graph with its
        arrays of `changed_by_trace` (fixes.apply) in place."""
        ranks = []
        for trace in self.traces:
            changed = dict((changed_by_trace or {}).get(trace) or {})
            graph = changed.pop("graph", self.graphs[trace])
            ranks.append(dataclasses.replace(graph, **changed) if changed else graph)
        joined, item_slices, call_slices = _side_by_side(ranks)
        call_start, call_end, item_start, item_end = replay(joined)
        return {graph.trace: completions_of(graph, call_start[c], call_end[c], item_start[i], item_end[i])
                for graph, i, c in zip(ranks, item_slices, call_slices)}


def _side_by_side(graphs):
    """One graph of `graphs` (a job's ranks), with (item slice, call slice) of each in it."""
    keys = {}
    parts, item_slices, call_slices = [], [], []
    items_before = calls_before = item_lanes = call_lanes = 0
    clocks = _clocks(graphs)
    for graph, clock in zip(graphs, clocks):
        part = {}
        for field in dataclasses.fields(graph):
            value = getattr(graph, field.name)
            if isinstance(value, np.ndarray):
                part[field.name] = value.copy()
        for name, to in _ITEM_LINKS + _CALL_LINKS:
            offset = calls_before if to == "call" else items_before
            part[name] = np.where(part[name] >= 0, part[name] + offset, -1)
        part["item_lane"] += item_lanes
        part["call_lane"] += call_lanes
        part["item_clock"][:] = clock
        part["item_collective"] = np.array([keys.setdefault(key, len(keys)) if key else -1
                                            for key in graph.item_call_key], dtype=np.int64)
        parts.append(part)
        item_slices.append(slice(items_before, items_before + len(graph.item_lane)))
        call_slices.append(slice(calls_before, calls_before + len(graph.call_lane)))
        items_before += len(graph.item_lane)
        calls_before += len(graph.call_lane)
        item_lanes += int(graph.item_lane.max()) + 1 if len(graph.item_lane) else 0
        call_lanes += int(graph.call_lane.max()) + 1 if len(graph.call_lane) else 0
    arrays = {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}
    # a call only some of the loaded ranks hold (a group of a subset) still binds those that do
    joined = dataclasses.replace(graphs[0], **arrays, lanes=[lane for g in graphs for lane in g.lanes],
                                 steps=[], steady=[])
    return joined, item_slices, call_slices


def _clocks(graphs):
    """What to add to each rank's times to put them on the first rank's clock: the median of the
    differences between the ends of the collectives both hold (their kernels end together)."""
    first = graphs[0]
    ends = {key: end for key, end in zip(first.item_call_key, first.item_ts + first.item_dur) if key}
    clocks = []
    for graph in graphs:
        differences = [ends[key] - end for key, end in zip(graph.item_call_key, graph.item_ts + graph.item_dur)
                       if key and key in ends]
        clocks.append(int(np.median(differences)) if differences else 0)
    return clocks
