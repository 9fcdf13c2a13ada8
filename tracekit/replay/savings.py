"""What each finding's fix saves a steady step, replayed: the step as replayed without change less
the step replayed with the fix (its `whatif`), in step (wall) time, so no saving is more than the
step; and what all of a trace's fixes save together. Both replayed on the loop as it runs without
the profiler (`no-profiler` at the trace's own estimate of its cost: replay.profiler_cost), which
is what the user's loop would gain; the saving replayed on the traced loop is kept beside it.

The findings engine hands over its rows; a trace's graph is read once for all its findings.
"""

import shlex
from dataclasses import dataclass, replace

import numpy as np

from tracekit.errors import TracekitError
from tracekit.replay import FIX_SEPARATOR
from tracekit.replay.fixes import parse_fix
from tracekit.replay.graph import SHARED_TRACES
from tracekit.replay.profiler_cost import cost_per_op_us
from tracekit.replay.job import Jobs
from tracekit.replay.parallel import completions_of_each
from tracekit.replay.whatif import Replayer



@dataclass
class Replayed:
    """A fix's replay on one trace: saving_us is None when it cannot be replayed (why says why)."""

    saving_us: float = None
    step_us: float = None   # the steady step as replayed without change
    fixed_us: float = None  # with the fix
    why: str = None
    traced_saving_us: float = None  # the saving replayed on the loop as traced, with the profiler's cost
    profiler_us_per_op: float = None  # the profiler's cost taken out (None: none, the replay is the traced loop's)
    steady_us: tuple = None  # (shortest, longest) steady step as replayed without change: the mean's spread


class TraceReplay:
    """One trace's graph (with its job's other ranks where loaded) and its replay without change,
    to replay fixes against."""

    def __init__(self, con, trace, jobs=None):
        self.con, self.trace, self.problem = con, trace, None
        self._replayed_before = {}  # whatif -> Replayed: the unprofiled loop is replayed once for all fixes
        self._planned = {}  # whatif -> its changes or a Replayed: planned once, replayed once
        try:
            self.replayer = Replayer((jobs or Jobs(con)).of(trace), trace)
            self.graph = self.replayer.graph
            # a saving per step needs steps; the whole trace's is whatif's (replay.steps.as_one_step)
            self.no_steps = not self.graph.steps
            if self.no_steps:
                self.problem = "the trace has no steps, so no saving per step"
        except TracekitError as exc:
            self.problem, self.no_steps = str(exc), False

    def share_reads(self, shared):
        """Has the fixes on this trace's graphs read what they read for several traces into
        `shared` (Graph.shared_reads), with the other traces' replays."""
        if not self.problem:
            for graph in self.replayer.job.graphs.values():
                graph.shared_reads = shared

    def _why_not(self, whatif):
        if not self.no_steps:
            return self.problem
        return f"{self.problem}; `tracekit whatif {shlex.quote(self.trace)} --apply {shlex.quote(whatif)}` replays it whole"

    def saving(self, whatif):
        """The Replayed of `whatif` (fixes separated by FIX_SEPARATOR)."""
        return self.savings([whatif])[whatif]

    def savings(self, whatifs):
        """{whatif: Replayed} of each of `whatifs` on the loop as traced, their replays run together."""
        if self.problem:
            return {whatif: Replayed(why=self._why_not(whatif)) for whatif in whatifs}
        done, changes = {}, {}
        for whatif in dict.fromkeys(whatifs):
            if whatif in self._replayed_before:
                done[whatif] = self._replayed_before[whatif]
                continue
            planned = self._plan(whatif)
            if isinstance(planned, Replayed):
                done[whatif] = planned
            else:
                changes[whatif] = planned
        first = self.replayer.known_as_is() is None
        runs = completions_of_each(self.replayer, [None] * first + list(changes.values()))
        if first:
            if isinstance(runs[0], str):
                self.problem = runs[0]
                return {whatif: Replayed(why=self.problem) for whatif in whatifs}
            self.replayer.keep_as_is(runs.pop(0))
        for whatif, with_fix in zip(changes, runs):
            done[whatif] = Replayed(why=with_fix) if isinstance(with_fix, str) else \
                self._replayed(self.replayer.times_with(with_fix))
            self._planned.pop(whatif, None)  # its arrays are not needed again
        self._replayed_before.update(done)
        return done

    def plannable(self, whatif):
        """Whether `whatif` changes the graph (its replay may still fail)."""
        if whatif in self._replayed_before:
            return self._replayed_before[whatif].saving_us is not None
        return not self.problem and not isinstance(self._plan(whatif), Replayed)

    def _plan(self, whatif):
        """The arrays `whatif`'s fixes change, by rank, or a Replayed saying why it cannot be replayed
        (kept until replayed: planning a fix twice costs it twice)."""
        if whatif not in self._planned:
            self._planned[whatif] = self._planning(whatif)
        return self._planned[whatif]

    def _planning(self, whatif):
        try:
            fixes = [parse_fix(text) for text in whatif.split(FIX_SEPARATOR)]
            changed = self.replayer.apply(fixes, self.con)
        except TracekitError as exc:
            return Replayed(why=str(exc))
        if not any(_changes_anything(self.replayer.job.graphs[trace], arrays) for trace, arrays in changed.items()):
            return Replayed(why="the fix changes nothing the trace shows")
        return changed

    def _replayed(self, steps):
        steady = [s for s in steps if s.step in self.graph.steady]
        chosen = steady or steps
        step_us = sum(s.replayed_us for s in chosen) / len(chosen)
        fixed_us = sum(s.fixed_us for s in chosen) / len(chosen)
        # (without steady steps, the first step's one-time work is not a pace)
        spread = (min(s.replayed_us for s in steady), max(s.replayed_us for s in steady)) if steady else None
        return Replayed(step_us - fixed_us, step_us, fixed_us, steady_us=spread)

    def without_profiler(self, whatifs, per_op_us):
        """{whatif: Replayed} of each of `whatifs` on the loop without the profiler, each recorded op
        costing `per_op_us` less (None: unknown, the traced loop's replay), with the traced saving
        beside: the fix's saving on the unprofiled loop is that loop with the fix less that loop."""
        whatifs = list(dict.fromkeys(whatifs))
        if per_op_us is None or self.problem:
            return {whatif: replace(r, traced_saving_us=r.saving_us) for whatif, r in self.savings(whatifs).items()}
        unprofiled = f"no-profiler:{per_op_us:.4f}"
        # each fix on the traced loop and on the unprofiled one, all replayed in one run
        combined = {whatif: f"{unprofiled}{FIX_SEPARATOR}{whatif}" for whatif in whatifs if self.plannable(whatif)}
        runs = self.savings(whatifs + [unprofiled] + list(combined.values()))
        alone = runs[unprofiled]
        result = {}
        for whatif in whatifs:
            r = replace(runs[whatif], traced_saving_us=runs[whatif].saving_us)
            both = runs[combined[whatif]] if whatif in combined and r.saving_us is not None else None
            if both is None or alone.saving_us is None:  # no op to take out: the loop as traced is the loop
                result[whatif] = r
            elif both.saving_us is None:
                result[whatif] = replace(both, traced_saving_us=r.saving_us)
            else:
                result[whatif] = Replayed(both.saving_us - alone.saving_us, alone.fixed_us, both.fixed_us,
                                          traced_saving_us=r.saving_us, profiler_us_per_op=per_op_us,
                                          steady_us=r.steady_us)
        return result


def _changes_anything(graph, changed):
    return "graph" in changed or any(not np.array_equal(getattr(graph, name), values) for name, values in changed.items())


def replay_savings(con, traces_and_fixes, jobs=None):
    """{(trace, whatif): Replayed} for each pair, and {trace: (whatif of all its fixes, Replayed)}
    for each trace with a fix that replays; each replayed without the profiler's estimated cost.
    `jobs`: where the graphs were read already (replay.prefetch), else read here."""
    each, together = {}, {}
    by_trace = {}
    for trace, whatif in traces_and_fixes:
        by_trace.setdefault(trace, []).append(whatif)
    if jobs is None and by_trace:
        jobs = Jobs(con)  # a job's ranks are read once for all of them
    shared = {SHARED_TRACES: sorted(by_trace)}
    for trace, fixes in by_trace.items():
        replayer = TraceReplay(con, trace, jobs)
        replayer.share_reads(shared)
        per_op_us = cost_per_op_us(con, trace)
        fixes = list(dict.fromkeys(fixes))
        # all fixes together, as planning foresees them, replayed in the same run as each alone
        foreseen = FIX_SEPARATOR.join(sorted(w for w in fixes if replayer.plannable(w)))
        results = replayer.without_profiler(fixes + ([foreseen] if foreseen else []), per_op_us)
        each.update({(trace, whatif): results[whatif] for whatif in fixes})
        # in one order whatever order the rules' rows came in (a database's or a lake's)
        replayed = sorted(w for w in fixes if results[w].saving_us is not None)
        if replayed:
            all_fixes = FIX_SEPARATOR.join(replayed)
            together[trace] = (all_fixes, results.get(all_fixes) or replayer.without_profiler([all_fixes], per_op_us)[all_fixes])
    return each, together
