"""What each finding's fix saves a steady step, replayed: the step as replayed without change less
the step replayed with the fix (its `whatif`), in step (wall) time, so no saving is more than the
step; and what all of a trace's fixes save together.

The findings engine hands over its rows; a trace's graph is read once for all its findings.
"""

from dataclasses import dataclass

import numpy as np

from tracekit.errors import TracekitError
from tracekit.replay.fixes import apply, parse_fix
from tracekit.replay.graph import read_graph
from tracekit.replay.whatif import completions, step_times

FIX_SEPARATOR = "; "  # between the fixes of one whatif


@dataclass
class Replayed:
    """A fix's replay on one trace: saving_us is None when it cannot be replayed (why says why)."""

    saving_us: float = None
    step_us: float = None   # the steady step as replayed without change
    fixed_us: float = None  # with the fix
    why: str = None


class TraceReplay:
    """One trace's graph and its replay without change, to replay fixes against."""

    def __init__(self, con, trace):
        self.con, self.trace, self.problem = con, trace, None
        try:
            self.graph = read_graph(con, trace)
            if not self.graph.steps:
                self.problem = "the trace has no steps to replay"
            else:
                self.as_is = completions(self.graph)
        except TracekitError as exc:
            self.problem = str(exc)

    def saving(self, whatif):
        """The Replayed of `whatif` (fixes separated by FIX_SEPARATOR)."""
        if self.problem:
            return Replayed(why=self.problem)
        try:
            fixes = [parse_fix(text) for text in whatif.split(FIX_SEPARATOR)]
            changed = apply(self.graph, fixes, self.con)
        except TracekitError as exc:
            return Replayed(why=str(exc))
        if not _changes_anything(self.graph, changed):
            return Replayed(why="the fix changes nothing the trace shows")
        try:
            steps = step_times(self.graph, changed, self.as_is)
        except TracekitError as exc:
            return Replayed(why=str(exc))
        chosen = [s for s in steps if s.step in self.graph.steady] or steps
        step_us = sum(s.replayed_us for s in chosen) / len(chosen)
        fixed_us = sum(s.fixed_us for s in chosen) / len(chosen)
        return Replayed(step_us - fixed_us, step_us, fixed_us)


def _changes_anything(graph, changed):
    return "graph" in changed or any(not np.array_equal(getattr(graph, name), values) for name, values in changed.items())


def replay_savings(con, traces_and_fixes):
    """{(trace, whatif): Replayed} for each pair, and {trace: (whatif of all its fixes, Replayed)}
    for each trace with a fix that replays."""
    each, together = {}, {}
    by_trace = {}
    for trace, whatif in traces_and_fixes:
        by_trace.setdefault(trace, []).append(whatif)
    for trace, fixes in by_trace.items():
        replayer = TraceReplay(con, trace)
        for whatif in dict.fromkeys(fixes):
            each[(trace, whatif)] = replayer.saving(whatif)
        # in one order whatever order the rules' rows came in (a database's or a lake's)
        replayed = sorted(w for w in dict.fromkeys(fixes) if each[(trace, w)].saving_us is not None)
        if replayed:
            all_fixes = FIX_SEPARATOR.join(replayed)
            together[trace] = (all_fixes, replayer.saving(all_fixes))
    return each, together
