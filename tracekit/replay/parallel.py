"""Replays of one graph with several sets of changes, on every core: each replay is a sweep in
Python over the graph's nodes (a second a replay on a 1 GB trace), and a trace's findings need a
dozen, each independent of the others.

Worker processes are forked, so they share the graph's arrays without copying them; they run only
the replay (NumPy and Python), never the database. Each set of changes goes to a worker as soon as
the caller has made it, so the workers replay while the caller plans the next fix (planning a fix
reads the database). Where fork is not the platform's way (macOS, Windows), the graph is small, or
there is one core, the replays run here, one after another.
"""

import multiprocessing
import os
import sys

from tracekit.errors import TracekitError

# Below this many nodes (calls and items) a replay takes milliseconds: a worker's start costs more.
MIN_NODES = 100_000

_replayer = None  # the forked workers' replayer: set before the fork, read in them


def completions_of_each(replayer, changes, count=None):
    """[completions, or the TracekitError's text where the replay failed] of `replayer`
    (whatif.Replayer) with each of `changes` (None: without change), in order. `changes` may be
    an iterator that makes each set as it is asked for (then `count`: how many it will make, at
    most), replayed while it makes the next."""
    global _replayer
    graph = replayer.graph
    workers = min(len(changes) if count is None else count, _cores())
    if workers < 2 or len(graph.item_lane) + len(graph.call_lane) < MIN_NODES or sys.platform != "linux":
        return [_replayed(replayer, changed) for changed in changes]
    _replayer = replayer
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            pending = [pool.apply_async(_replayed_here, (changed,)) for changed in changes]
            return [replay.get() for replay in pending]
    finally:
        _replayer = None


def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _replayed_here(changed):
    return _replayed(_replayer, changed)


def _replayed(replayer, changed):
    try:
        return replayer.completions(changed)
    except TracekitError as exc:
        return str(exc)
