"""What each finding's fix saves a steady step, replayed: the step as replayed without change less
the step replayed with the fix (its `whatif`), in step (wall) time, so no saving is more than the
step; and what all of a trace's fixes save together. Both replayed on the loop as it runs without
the profiler (`no-profiler` at the trace's own estimate of its cost: replay.profiler_cost), which
is what the user's loop would gain; the saving replayed on the traced loop is kept beside it.

The findings engine hands over its rows; a trace's graph is read once for all its findings.
"""

from dataclasses import dataclass, replace

import numpy as np

from tracekit.errors import TracekitError
from tracekit.replay.fixes import parse_fix
from tracekit.replay.profiler_cost import cost_per_op_us
from tracekit.replay.job import Jobs
from tracekit.replay.whatif import Replayer

FIX_SEPARATOR = "; "  # between the fixes of one whatif


@dataclass
class Replayed:
    """A fix's replay on one trace: saving_us is None when it cannot be replayed (why says why)."""

    saving_us: float = None
    step_us: float = None   # the steady step as replayed without change
    fixed_us: float = None  # with the fix
    why: str = None
    traced_saving_us: float = None  # the saving replayed on the loop as traced, with the profiler's cost
    profiler_us_per_op: float = None  # the profiler's cost taken out (None: none, the replay is the traced loop's)


class TraceReplay:
    """One trace's graph (with its job's other ranks where loaded) and its replay without change,
    to replay fixes against."""

    def __init__(self, con, trace, jobs=None):
        self.con, self.trace, self.problem = con, trace, None
        self._unprofiled = {}  # the loop without the profiler, by its no-profiler fix: replayed once
        try:
            self.replayer = Replayer((jobs or Jobs(con)).of(trace), trace)
            self.graph = self.replayer.graph
            if not self.graph.steps:
                self.problem = "the trace has no steps to replay"
            else:
                self.replayer.as_is()
        except TracekitError as exc:
            self.problem = str(exc)

    def saving(self, whatif):
        """The Replayed of `whatif` (fixes separated by FIX_SEPARATOR)."""
        if self.problem:
            return Replayed(why=self.problem)
        try:
            fixes = [parse_fix(text) for text in whatif.split(FIX_SEPARATOR)]
            changed = self.replayer.apply(fixes, self.con)
        except TracekitError as exc:
            return Replayed(why=str(exc))
        if not any(_changes_anything(self.replayer.job.graphs[trace], arrays) for trace, arrays in changed.items()):
            return Replayed(why="the fix changes nothing the trace shows")
        try:
            steps = self.replayer.step_times(changed)
        except TracekitError as exc:
            return Replayed(why=str(exc))
        chosen = [s for s in steps if s.step in self.graph.steady] or steps
        step_us = sum(s.replayed_us for s in chosen) / len(chosen)
        fixed_us = sum(s.fixed_us for s in chosen) / len(chosen)
        return Replayed(step_us - fixed_us, step_us, fixed_us)

    def without_profiler(self, whatif, per_op_us):
        """The Replayed of `whatif` on the loop without the profiler, each recorded op costing
        `per_op_us` less (None: unknown, the traced loop's replay), with the traced saving beside."""
        traced = self.saving(whatif)
        traced = replace(traced, traced_saving_us=traced.saving_us)
        if per_op_us is None or traced.saving_us is None:
            return traced
        unprofiled = f"no-profiler:{per_op_us:.4f}"
        if unprofiled not in self._unprofiled:
            self._unprofiled[unprofiled] = self.saving(unprofiled)
        alone = self._unprofiled[unprofiled]
        if alone.saving_us is None:  # no op to take out: the loop as traced is the loop
            return traced
        both = self.saving(f"{unprofiled}{FIX_SEPARATOR}{whatif}")
        if both.saving_us is None:
            return replace(both, traced_saving_us=traced.saving_us)
        return Replayed(both.saving_us - alone.saving_us, alone.fixed_us, both.fixed_us,
                        traced_saving_us=traced.saving_us, profiler_us_per_op=per_op_us)


def _changes_anything(graph, changed):
    return "graph" in changed or any(not np.array_equal(getattr(graph, name), values) for name, values in changed.items())


def replay_savings(con, traces_and_fixes):
    """{(trace, whatif): Replayed} for each pair, and {trace: (whatif of all its fixes, Replayed)}
    for each trace with a fix that replays; each replayed without the profiler's estimated cost."""
    each, together = {}, {}
    by_trace = {}
    for trace, whatif in traces_and_fixes:
        by_trace.setdefault(trace, []).append(whatif)
    jobs = Jobs(con) if by_trace else None  # a job's ranks are read once for all of them
    for trace, fixes in by_trace.items():
        replayer = TraceReplay(con, trace, jobs)
        per_op_us = cost_per_op_us(con, trace)
        for whatif in dict.fromkeys(fixes):
            each[(trace, whatif)] = replayer.without_profiler(whatif, per_op_us)
        # in one order whatever order the rules' rows came in (a database's or a lake's)
        replayed = sorted(w for w in dict.fromkeys(fixes) if each[(trace, w)].saving_us is not None)
        if replayed:
            all_fixes = FIX_SEPARATOR.join(replayed)
            together[trace] = (all_fixes, replayer.without_profiler(all_fixes, per_op_us))
    return each, together
