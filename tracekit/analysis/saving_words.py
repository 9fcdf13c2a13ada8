"""What a finding's detail says about its replayed saving: why it is far below or far above the
rule's own figure, whether the profiler's cost was taken out, whether the steps ran at one pace.

A rule counts a slice of the step (a wait, the idle gaps it caused, a few kernels); the replay
says what its fix takes off the whole step. Where the two are far apart, a reader would take one
of them for a mistake, so the detail says what the difference is.
"""

import math

from tracekit.replay import FIX_SEPARATOR

# A replayed saving under this share of the rule's own figure says why, lest the two read as a contradiction.
SAVING_BELOW_ESTIMATE = 0.5
# A replayed saving at least this many times the rule's own figure says why too, where the
# difference is at least SAVING_ABOVE_SHARE of the step (a few µs over a 1 µs estimate is no news).
SAVING_ABOVE_ESTIMATE = 2.0
SAVING_ABOVE_SHARE = 0.01

# What each kind of fix (replay.fixes) takes off a step besides the slice its rule counts.
_WAIT_GONE = ("the wait also held the CPU back from queuing the work after it: without it the CPU "
              "launches ahead while the GPU runs, and the two overlap instead of taking turns")
_CPU_PACE = ("the step runs at the CPU's pace: all the CPU time the fix removes comes off the step, "
             "not only the GPU's idle time the rule counts")
_PINNED = ("a pageable copy's call also holds the CPU until its transfer ends: pinned and "
           "non-blocking, the CPU goes on launching while the copy runs")
_WHY_MORE_BY_KIND = {
    "drop-sync": _WAIT_GONE,
    "pin-copies": _PINNED,
    "prefetch-copies": _PINNED,
    "cuda-graph": ("one graph launch runs the step's kernels back to back: every launch's cost goes, in "
                   "the gaps the rule counts and in the shorter ones it leaves out"),
    "drop-cpu-gaps": _CPU_PACE,
    "drop-cpu": _CPU_PACE,
    "drop-host-ops": _CPU_PACE,
    "fuse-attention": ("the fix fuses the whole attention op: all its kernels (GEMMs, softmax, masks, "
                       "copies) and their launches become one, not only what this finding counts"),
    "fuse-attention-chains": ("fused, each chain's kernels and their launches become one, and the score "
                              "matrix is never written: more than the rule's count of the chain's kernels"),
    "fuse-optimizer": ("a fused step also launches one kernel where the foreach step launches many: the "
                       "launches go too, not only the bytes the rule counts, and GradScaler's read before "
                       "the step, where there is one, waits no more"),
    "drop-scaler-checks": _WAIT_GONE,
    "fuse-elementwise": ("fused, each chain's launches but one go, and with them its ops' dispatch (all of "
                         "it where the CPU sets the step's pace), and in training each chain's backward "
                         "becomes one kernel too: more than the rule's count of the forward's kernels"),
    "tensor-cores": ("the faster GEMMs also shorten what waited on them (the CPU's syncs, the work "
                     "queued behind them), which the rule's own figure leaves out"),
}
_WHY_MORE_OTHERWISE = ("the work the fix removes also held back the work after it (its launches, what "
                       "waited on it), which the rule's own figure leaves out")


def why_less(replayed, estimate):
    """Where the replay saves much less than the rule counts (its estimate), why (for a detail)."""
    saving, traced = replayed.saving_us, replayed.traced_saving_us
    if saving is None or estimate is None or math.isnan(estimate) or estimate <= 0 \
            or saving >= SAVING_BELOW_ESTIMATE * estimate:
        return ""
    if replayed.profiler_us_per_op is not None and traced is not None and traced >= SAVING_BELOW_ESTIMATE * estimate:
        return (f"; as traced the fix saves {traced:,.1f} µs a step, but without the profiler's cost "
                f"({replayed.profiler_us_per_op:.1f} µs a recorded op) the CPU runs that much faster and the fix "
                f"saves {saving:,.1f}: much of what the rule counts here is the profiler's own cost")
    return (f"; replayed, the fix {_saves(saving)} of the {estimate:,.1f} µs a step the rule counts: the step's "
            "time is held by other work (a CPU slower than the GPU, or work on another stream), so the rest is "
            "off its critical path")


def why_more(replayed, estimate, whatif):
    """Where the replay saves far more than the rule counts, what else each kind of fix in `whatif`
    takes off the step, with the step's replayed times."""
    saving, traced = replayed.saving_us, replayed.traced_saving_us
    if (saving is None or estimate is None or math.isnan(estimate) or estimate <= 0 or not replayed.step_us
            or saving < SAVING_ABOVE_ESTIMATE * estimate or saving - estimate < SAVING_ABOVE_SHARE * replayed.step_us):
        return ""
    kinds = dict.fromkeys(part.split(":", 1)[0].strip() for part in whatif.split(FIX_SEPARATOR))
    reasons = "; and ".join(dict.fromkeys(_WHY_MORE_BY_KIND.get(kind, _WHY_MORE_OTHERWISE) for kind in kinds))
    unprofiled = " without the profiler" if replayed.profiler_us_per_op is not None else ""
    words = (f"; replayed, the fix saves {saving:,.1f} µs a step, more than the {estimate:,.1f} the rule counts: "
             f"{reasons} (the step, replayed{unprofiled}, from {replayed.step_us:,.1f} µs to {replayed.fixed_us:,.1f})")
    # the traced loop's own saving, where the profiler's cost hid what the fix does: near the rule's figure
    if replayed.profiler_us_per_op is not None and traced is not None and traced < SAVING_ABOVE_ESTIMATE * estimate:
        words += (f"; as traced it {_saves(traced)}: there the profiler's cost ({replayed.profiler_us_per_op:.1f} µs "
                  "a recorded op) slows the CPU so much that the step waits on it either way")
    return words


def same_saving(other_rules):
    """Where other findings of the trace name the same fix, or one that replays the same (their
    rules: `other_rules`, one per finding), saying so: their savings are one."""
    if not other_rules:
        return ""
    counts = {rule: other_rules.count(rule) for rule in sorted(set(other_rules))}
    names = ", ".join(f"`{rule}`" + (f" ×{count}" if count > 1 else "") for rule, count in counts.items())
    return (f"; the same saving as {len(other_rules)} other finding{'s' if len(other_rules) > 1 else ''} "
            f"of this trace ({names}): their fixes replay the same, one saving, not to be added")


def _saves(saving):
    return f"saves {saving:,.1f}" if saving >= 0 else f"saves nothing ({-saving:,.1f} µs longer)"


def unprofiled(replayed):
    """Where the replay took the profiler's cost out, how much (for a detail)."""
    if replayed.profiler_us_per_op is None:
        return "; replayed as traced (too few ops back to back to estimate the profiler's cost)"
    return (f"; replayed without the profiler's cost, {replayed.profiler_us_per_op:.1f} µs a recorded op as the "
            f"trace's gaps between ops show (as traced, the fixes save {replayed.traced_saving_us:,.1f} µs)")


# Steady steps whose traced times differ more than this (longest over shortest) did not run at one
# pace: a loop still warming up, a host that stalled the process mid-trace, or work that changed; a
# step's mean then stands for none of them.
UNSTEADY_SPREAD = 1.5


def unsteady(replayed):
    """Where the steady steps ran at unlike paces, saying so (for a detail)."""
    if replayed.steady_us is None or not replayed.steady_us[0] or replayed.steady_us[1] < UNSTEADY_SPREAD * replayed.steady_us[0]:
        return ""
    low, high = replayed.steady_us
    return (f"; its steady steps took {low:,.0f} to {high:,.0f} µs as traced, not one pace (still warming up, a "
            f"host that stalled the process, or work that changed between steps): these figures are their mean")
