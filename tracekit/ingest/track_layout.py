"""Keeps every thread track properly nested, as Perfetto's JSON importer needs, and undoes it.

A complete slice that starts inside another on its track but ends after it is
moved to an extra track of the same process ("<tid> overlap 1", ...), where it
nests; a nested or disjoint slice stays where it was. The file says which tracks
it added (under OVERLAP_TRACKS_KEY), so a reload by tracekit puts each slice back
on its thread, where its nesting (depth, parent, the ops that launched GPU work)
is what it was.
"""

import json

OVERLAP_TRACKS_KEY = "tracekitOverlapTracks"


def _end(event):
    return event["ts_ns"] + max(event["dur_ns"] or 0, 0)


def assign_lanes(events):
    """Returns (events with partial overlaps moved to extra tracks, number moved, the extra tracks
    as [{"pid", "track", "tid"}], the stored text of each)."""
    tracks = {}
    for event in events:
        if event["ph"] == "X" and event.get("ts_ns") is not None:
            tracks.setdefault((event["pid"], event["tid"]), []).append(event)
    moved, extra_tracks, lanes_added = 0, [], []
    for (pid, tid), slices in tracks.items():
        slices.sort(key=lambda e: (e["ts_ns"], -(e["dur_ns"] or 0)))
        lanes = []  # per lane: a stack of the end times of the slices still open
        for event in slices:
            start, end = event["ts_ns"], _end(event)
            for number, stack in enumerate(lanes):
                while stack and stack[-1] <= start:
                    stack.pop()
                if not stack or end <= stack[-1]:
                    stack.append(end)
                    break
            else:
                number = len(lanes)
                lanes.append([end])
            if number:
                event["tid"] = f"{tid} overlap {number}"
                moved += 1
        for number in range(1, len(lanes)):
            lane = f"{tid} overlap {number}"
            lanes_added.append({"pid": pid, "track": lane, "tid": tid})
            extra_tracks.append({"trace": slices[0]["trace"], "cat": None, "name": "thread_name", "ph": "M",
                                 "ts_ns": None, "dur_ns": None, "pid": pid, "tid": lane,
                                 "args": json.dumps({"name": f"{tid} (slices overlapping track {tid}, {number})"})})
    return events + extra_tracks, moved, lanes_added


def restore_tracks(con, trace_id, header):
    """Puts the slices of a trace tracekit exported back on the threads they were moved off
    (`header`'s OVERLAP_TRACKS_KEY, which it removes), dropping the extra tracks' names."""
    lanes = header.pop(OVERLAP_TRACKS_KEY, None)
    if not isinstance(lanes, list):
        return
    for lane in lanes:
        if not isinstance(lane, dict) or not {"pid", "track", "tid"} <= set(lane):
            continue
        where = "WHERE trace_id = $trace_id AND pid = $pid AND tid = $track"
        values = {"trace_id": trace_id, **{key: str(lane[key]) for key in ("pid", "track")}}
        con.execute(f"DELETE FROM event_rows {where} AND ph = 'M' AND name = 'thread_name'", values)
        con.execute(f"UPDATE event_rows SET tid = $tid {where}", {**values, "tid": str(lane["tid"])})
