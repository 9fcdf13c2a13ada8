"""Keeps every thread track properly nested, as Perfetto's JSON importer needs.

A complete slice that starts inside another on its track but ends after it is
moved to an extra track of the same process ("<tid> overlap 1", ...), where it
nests; a nested or disjoint slice stays where it was.
"""

import json


def _end(event):
    return event["ts_ns"] + max(event["dur_ns"] or 0, 0)


def assign_lanes(events):
    """Returns (events with partial overlaps moved to extra tracks, number moved)."""
    tracks = {}
    for event in events:
        if event["ph"] == "X" and event.get("ts_ns") is not None:
            tracks.setdefault((event["pid"], event["tid"]), []).append(event)
    moved, extra_tracks = 0, []
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
            extra_tracks.append({"trace": slices[0]["trace"], "cat": None, "name": "thread_name", "ph": "M",
                                 "ts_ns": None, "dur_ns": None, "pid": pid, "tid": f"{tid} overlap {number}",
                                 "args": json.dumps({"name": f"{tid} (slices overlapping track {tid}, {number})"})})
    return events + extra_tracks, moved
