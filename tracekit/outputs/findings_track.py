"""The "tracekit findings" track: the findings engine's rows as slices on the timeline.

One process, "tracekit findings", with a thread (track) per rule that found something, the
rule with the biggest saving on top; on it a slice over each event a finding rests on (its
evidence), named as that event, with the finding (rule, severity, title, detail, fix, saving
and trace) in its args. The process is separate so the slices never overlap the trace's own
tracks; traces exported together share it, one track per rule.
"""

import json
import math

from tracekit.analysis.findings_engine import ALL_FIXES, run_findings

FINDINGS_PID = "tracekit findings"
FINDINGS_CAT = "tracekit_finding"
# The finding's own fields that every slice of it carries; the evidence's keys (source,
# correlation, cpu_op_id, ...) come after them.
_FINDING_ARGS = ("rule", "severity", "title", "detail", "fix", "whatif", "saving_us_per_step", "trace")


def _known(value):
    """None for a missing value (the engine's NaN saving), so it is `null` in the JSON args."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def _metadata(trace, name, tid, args):
    return {"trace": trace, "cat": None, "name": name, "ph": "M", "ts_ns": None, "dur_ns": None,
            "pid": FINDINGS_PID, "tid": str(tid), "id": None, "bp": None, "s": None, "args": json.dumps(args)}


def _slices(finding, tid):
    """A complete slice over each evidence event of one finding (events without a time are left out)."""
    args = {key: _known(finding[key]) for key in _FINDING_ARGS}
    for event in finding["evidence"] or []:
        if event.get("ts_ns") is None:
            continue
        extra = {k: v for k, v in event.items() if k not in ("trace", "name", "ts_ns", "dur_ns")}
        yield {"trace": finding["trace"], "cat": FINDINGS_CAT, "name": event.get("name") or finding["title"],
               "ph": "X", "ts_ns": int(event["ts_ns"]), "dur_ns": max(int(event.get("dur_ns") or 0), 1),
               "pid": FINDINGS_PID, "tid": str(tid), "id": None, "bp": None, "s": None,
               "args": json.dumps({**args, **extra}, default=str, ensure_ascii=False)}


def findings_events(con, traces):
    """The findings track's events for the traces of one export: the process and thread names and
    the slices (empty when no rule finds anything in them). Several traces share the tracks, so
    a track is one rule whatever the trace."""
    traces = list(traces)
    found = run_findings(con, trace=traces[0] if len(traces) == 1 else None)
    # Each trace's fixes together rest on no event of their own: no slice to draw.
    found = found[found["trace"].isin(traces) & (found["rule"] != ALL_FIXES)]
    tracks, slices = {}, []
    for finding in found.to_dict("records"):
        # Tracks numbered in the engine's ranking: the rule of the biggest saving is track 1.
        tid = tracks.setdefault(finding["rule"], len(tracks) + 1)
        slices += _slices(finding, tid)
    if not slices:
        return []
    used = {int(s["tid"]) for s in slices}
    first = slices[0]["trace"]
    meta = [_metadata(first, "process_name", 0, {"name": "tracekit findings"})]
    for rule, tid in tracks.items():
        if tid in used:
            meta.append(_metadata(first, "thread_name", tid, {"name": rule}))
            meta.append(_metadata(first, "thread_sort_index", tid, {"sort_index": tid}))
    return meta + slices
