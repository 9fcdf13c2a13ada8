"""Step times as the trace has them, as replayed without change, and as replayed with fixes.

A step completes when its CPU span and the GPU work it owns have both ended (as in view
step_bounds); its time runs from the step before's completion. Replayed, the CPU span's end moves
as its thread's last call before it moved; the GPU work's end is the replayed end of the latest
item the step owns.
"""

from dataclasses import dataclass, field

import numpy as np

from tracekit.errors import TracekitError
from tracekit.replay.fixes import apply
from tracekit.replay.graph import read_graph
from tracekit.replay.simulate import replay


@dataclass
class StepTimes:
    step: int
    trace_us: float      # step_bounds.step_us: the trace's own
    replayed_us: float   # the graph replayed as it is: how well the model fits
    fixed_us: float      # replayed with the fixes


@dataclass
class WhatIf:
    """The replay of one trace with fixes: each step's times, and their means over its steady steps."""

    trace: str
    fixes: list                       # the fixes, as given
    steps: list                       # [StepTimes]
    steady: list = field(default_factory=list)  # the steps averaged (view steady_steps)

    def mean(self, attribute):
        """The mean of a StepTimes field over the steady steps (all steps where none are steady)."""
        chosen = [s for s in self.steps if s.step in self.steady] or self.steps
        return sum(getattr(s, attribute) for s in chosen) / len(chosen) if chosen else None

    @property
    def fit_pct(self):
        """How far the replay without change is from the trace, percent of the trace's step."""
        trace_us = self.mean("trace_us")
        return 100.0 * (self.mean("replayed_us") - trace_us) / trace_us if trace_us else None

    @property
    def saving_us(self):
        """What the fixes save a steady step: replayed as it is minus replayed with them."""
        return self.mean("replayed_us") - self.mean("fixed_us") if self.steps else None


def whatif(con, trace, fixes, fix_texts=()):
    """The WhatIf of `trace` on `con` (DuckDB, a database or a lake) with `fixes` (parsed)."""
    if not con.execute("SELECT 1 FROM trace_files WHERE trace = ?", [trace]).fetchone():
        raise TracekitError(f"no trace named {trace!r} is loaded")
    graph = read_graph(con, trace)
    if not graph.steps:
        raise TracekitError(f"{trace}: no steps to replay (no ProfilerStep#N and no marked iterations)")
    try:
        return WhatIf(trace, list(fix_texts), step_times(graph, apply(graph, fixes, con)), graph.steady)
    except TracekitError as exc:
        raise TracekitError(f"whatif {trace}: {exc}") from None


def step_times(graph, fixed, as_is=None):
    """[StepTimes] of each step of `graph`, `fixed` the arrays a fix changes (fixes.apply);
    `as_is`: completions(graph) where the caller has them already."""
    as_is = completions(graph) if as_is is None else as_is
    with_fixes = completions(graph, fixed)
    return [StepTimes(step["step"], (step["done_ns"] - step["from_ns"]) / 1000.0,
                      _length(as_is, n) / 1000.0, _length(with_fixes, n) / 1000.0)
            for n, step in enumerate(graph.steps)]


def _length(done, n):
    """A step's replayed time: from the step before's completion (the first: from its CPU span's
    start, moved as its thread moved) to its own."""
    # A step that completes before the one before it (a stub the profiler cut) takes no time, as in _cp_steps.
    return max(done[n][1] - (done[n - 1][1] if n else done[n][0]), 0)


def completions(graph, changed=None):
    """[(start, completion)] of each step, in ns, replayed with the arrays `changed` (fixes.apply)."""
    changed = dict(changed or {})
    graph = changed.pop("graph", graph)  # a fix that moved work to another stream replays its own graph
    return _completions(graph, *replay(graph, **changed))


def _completions(graph, call_start, call_end, item_start, item_end):
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
