"""Replays of one graph with several sets of changes, on every core: each replay is a sweep in
Python over the graph's nodes (a second a replay on a 1 GB trace), and a trace's findings need a
dozen, each independent of the others.

Worker processes are forked, so they share the graph's arrays without copying them; they run only
the replay (NumPy and Python), never the database. Where fork is not the platform's way (macOS,
Windows), the graph is small, or there is one core, the replays run here, one after another.
"""

import multiprocessing
import os
import sys

from tracekit.errors import TracekitError

# Below this many nodes (calls and items) a replay takes milliseconds: a worker's start costs more.
MIN_NODES = 100_000

_work = None  # (replayer, [changes]) for the forked workers: set before the fork, read in them


def completions_of_each(replayer, changes):
    """[completions, or the TracekitError's text where the replay failed] of `replayer`
    (whatif.Replayer) with each of `changes` (None: without change), in order."""
    global _work
    graph = replayer.graph
    workers = min(len(changes), _cores())
    if workers < 2 or len(graph.item_lane) + len(graph.call_lane) < MIN_NODES or sys.platform != "linux":
        return [_replayed(replayer, changed) for changed in changes]
    _work = (replayer, changes)
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            return pool.map(_replayed_nth, range(len(changes)), chunksize=1)
    finally:
        _work = None


def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _replayed_nth(n):
    replayer, changes = _work
    return _replayed(replayer, changes[n])


def _replayed(replayer, changed):
    try:
        return replayer.completions(changed)
    except TracekitError as exc:
        return str(exc)
