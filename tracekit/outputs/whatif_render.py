"""`tracekit whatif`'s output: each step's time as traced, as replayed, and with the fixes."""

import json

from tracekit.outputs.render import as_table
from tracekit.analysis.rows import Rows
from tracekit.outputs.safe_text import printable


def as_text(result):
    rows = [("whole trace" if result.whole_trace else s.step, "yes" if s.step in result.steady else "no",
             round(s.trace_us, 1), round(s.replayed_us, 1), round(s.fixed_us, 1), round(s.replayed_us - s.fixed_us, 1))
            for s in result.steps]
    table = as_table(Rows(["step", "steady", "trace_us", "replayed_us", "fixed_us", "saving_us"], rows))
    fixes = ", ".join(result.fixes) if result.fixes else "no fix"
    job = ""
    if len(result.ranks) > 1:
        job = f", together with its job's {len(result.ranks)} loaded ranks" + (" (the fixes on each)" if result.fixes else "")
    lines = [printable(f"{result.trace}: replayed with {fixes}{job}"), table.rstrip("\n"), _summary(result)]
    lines += [printable(_unchanged_note(fix)) for fix in result.unchanged]
    return "\n".join(lines) + "\n"


def _unchanged_note(fix):
    scaler = (", or what matches is AMP's GradScaler reading found_inf, which drop-sync leaves "
              "(fuse-optimizer or drop-scaler-checks drop it)") if fix.startswith("drop-sync:") else ""
    return (f"Note: {fix} changed nothing in the trace: nothing in it matches (a name or pattern misspelt?), "
            f"or what matches is as fast as the fix would make it{scaler}.")


def as_json(result):
    return json.dumps({
        "trace": result.trace, "fixes": result.fixes, "whole_trace": result.whole_trace,
        "steady_steps": [] if result.whole_trace else result.steady, "replayed_with": result.ranks,
        "steps": [{"step": s.step, "trace_us": round(s.trace_us, 3), "replayed_us": round(s.replayed_us, 3),
                   "fixed_us": round(s.fixed_us, 3), "saving_us": round(s.replayed_us - s.fixed_us, 3)}
                  for s in result.steps],
        "trace_us_per_step": _round(result.mean("trace_us")), "replayed_us_per_step": _round(result.mean("replayed_us")),
        "fit_pct": _round(result.fit_pct), "fixed_us_per_step": _round(result.mean("fixed_us")),
        "unchanged_by": result.unchanged,
        "saving_us_per_step": _round(result.saving_us)}, indent=2) + "\n"


def _summary(result):
    which = "steady steps" if result.steady else "all steps (none steady)"
    trace_us, replayed_us, fixed_us = (result.mean(a) for a in ("trace_us", "replayed_us", "fixed_us"))
    saving = result.saving_us
    pct = 100.0 * saving / replayed_us if replayed_us else 0.0
    if result.whole_trace:
        return (f"The whole trace (it has no steps), from its first event to its last: {trace_us:.1f} µs traced, "
                f"{replayed_us:.1f} replayed as it is ({result.fit_pct:+.1f}%), {fixed_us:.1f} with the fixes: they "
                f"save {saving:.1f} µs ({pct:.1f}%).")
    return (f"Per step, over the {which}: {trace_us:.1f} µs traced, {replayed_us:.1f} replayed as it is "
            f"({result.fit_pct:+.1f}%), {fixed_us:.1f} with the fixes: they save {saving:.1f} µs a step ({pct:.1f}%).")


def _round(value):
    return None if value is None else round(value, 3)
