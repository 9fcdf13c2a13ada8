"""Step times as the trace has them, as replayed without change, and as replayed with fixes.

A step completes when its CPU span and the GPU work it owns have both ended (as in view
step_bounds); its time runs from the step before's completion. Replayed, the CPU span's end moves
as its thread's last call before it moved; the GPU work's end is the replayed end of the latest
item the step owns. A trace whose job's other ranks are loaded is replayed with them (replay.job),
the fixes applied to every rank.
"""

from dataclasses import dataclass, field


from tracekit.errors import TracekitError
from tracekit.store.sql_sandbox import require_text
from tracekit.replay.fixes import apply
from tracekit.replay.job import Jobs
from tracekit.replay.parallel import completions_of_each
from tracekit.replay.simulate import replay
from tracekit.replay.steps import as_one_step, completions_of


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
    ranks: list = field(default_factory=list)   # the job's traces replayed with it (replay.job), itself included
    whole_trace: bool = False  # a trace without steps, replayed as one step from its first event to its last
    unchanged: list = field(default_factory=list)  # the fixes that changed nothing in the trace

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
    require_text(trace, f"the trace name {trace!r}", hint="")
    if not con.execute("SELECT 1 FROM trace_files WHERE trace = ?", [trace]).fetchone():
        raise TracekitError(f"no trace named {trace!r} is loaded")
    job = Jobs(con).of(trace)
    if not len(job.graphs[trace].call_ts) and not len(job.graphs[trace].item_ts):
        raise TracekitError(f"whatif {trace}: nothing to replay: the trace records no runtime call (cudaLaunchKernel, "
                            "hipMemcpyAsync...) and no GPU work, as a CPU-only trace does; the replay models the "
                            "GPU's work and the calls that made it")
    whole_trace = not job.graphs[trace].steps
    if whole_trace:  # no ProfilerStep#N and no marked iterations: the trace is the one step to replay
        job.graphs = {rank: graph if graph.steps else as_one_step(graph) for rank, graph in job.graphs.items()}
    replayer = Replayer(job, trace)
    graph = replayer.graph
    try:
        # the step as it is and with the fixes: two replays, one a core
        unchanged = []
        as_is, fixed = completions_of_each(replayer, [None, replayer.apply(fixes, con, unchanged)])
        for failed in (as_is, fixed):
            if isinstance(failed, str):
                raise TracekitError(failed)
        replayer.keep_as_is(as_is)
        return WhatIf(trace, list(fix_texts), replayer.times_with(fixed), graph.steady, replayer.job.traces,
                      whole_trace, unchanged)
    except TracekitError as exc:
        raise TracekitError(f"whatif {trace}: {exc}") from None


class Replayer:
    """One trace's replay, alone or with its job's other ranks (replay.job.Job)."""

    def __init__(self, job, trace):
        self.job, self.trace, self.graph = job, trace, job.graphs[trace]
        self._as_is = None

    def apply(self, fixes, con, unchanged=None):
        """{trace: the arrays the fixes change} for each rank (fixes.apply); `unchanged` gets the
        fixes that changed nothing in any rank (a delay on one rank is the job's to drop)."""
        by_rank = {trace: [] for trace in self.job.graphs}
        changed = {trace: apply(graph, fixes, con, by_rank[trace] if unchanged is not None else None)
                   for trace, graph in self.job.graphs.items()}
        if unchanged is not None:
            unchanged.extend(fix for fix in by_rank[self.trace] if all(fix in found for found in by_rank.values()))
        return changed

    def completions(self, changed_by_trace=None):
        """[(start, completion)] of each of the trace's steps, replayed with those changes."""
        if len(self.job.traces) == 1:
            return completions(self.graph, (changed_by_trace or {}).get(self.trace))
        return self.job.completions(changed_by_trace)[self.trace]

    def as_is(self):
        """completions() without change (kept: every fix is measured against it)."""
        if self._as_is is None:
            self._as_is = self.completions()
        return self._as_is

    def known_as_is(self):
        """as_is() where it has been replayed already, else None."""
        return self._as_is

    def keep_as_is(self, done):
        """Keep `done`, completions() without change replayed elsewhere (replay.parallel), as as_is()."""
        self._as_is = done

    def step_times(self, changed_by_trace):
        """[StepTimes] of each step, with the changes of `changed_by_trace` (apply)."""
        return self.times_with(self.completions(changed_by_trace))

    def times_with(self, done):
        """[StepTimes] of each step from `done`, its completions replayed with changes."""
        return times_of(self.graph, self.as_is(), done)


def step_times(graph, fixed, as_is=None):
    """[StepTimes] of each step of `graph`, `fixed` the arrays a fix changes (fixes.apply);
    `as_is`: completions(graph) where the caller has them already."""
    as_is = completions(graph) if as_is is None else as_is
    return times_of(graph, as_is, completions(graph, fixed))


def times_of(graph, as_is, with_fixes):
    """[StepTimes] of each step of `graph` from its completions as is and with fixes."""
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
    return completions_of(graph, *replay(graph, **changed))
