"""What the memory tests check a trace with: each step's peak computed from the trace's own JSON,
apart from tracekit's SQL (tests/test_memory.py on the CPU, tests/test_capture_gpu.py on a GPU)."""

import gzip
import json


def peaks_from_json(path):
    """Each step's (step, device, start, peak, peak reserved) computed from the trace's own JSON:
    its ProfilerStep#N spans (the whole trace when it has none) and its [memory] events."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    spans = [(int(e["name"].split("#")[1]), e["ts"], e["ts"] + e["dur"]) for e in events
             if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]
    memory = sorted(((e["ts"], i, e["args"]) for i, e in enumerate(events) if e.get("name") == "[memory]"),
                    key=lambda m: (m[0], m[1]))
    rows = {}
    for ts, _, args in memory:
        inside = [step for step, start, end in spans if start <= ts < end]
        if spans and not inside:
            continue
        key = (inside[0] if inside else None, args["Device Id"])
        start, peak, reserved = rows.get(key, (args["Total Allocated"] - args["Bytes"], 0, 0))
        rows[key] = (start, max(peak, start, args["Total Allocated"]), max(reserved, args["Total Reserved"]))
    return sorted((step, device, start, peak, reserved if device >= 0 else None)
                  for (step, device), (start, peak, reserved) in rows.items())
