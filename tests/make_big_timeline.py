"""Builds a big trace for the report's page-size test: a real sample trace's GPU events repeated
back to back into one long window with no ProfilerStep#N (as a user's own capture or a foreign
trace has), so the whole trace is one step and the report's timeline has all of it to draw.

Each copy keeps the kernels, memcpys and memsets of the source's steady steps as Kineto wrote them (names, args,
durations, the gaps between them), later in time and with fresh correlation ids. The CPU side is
left out, as in a trace captured with CPU activity off, so the file holds many GPU events for its
size. The capture's `tracekit` metadata is left out too: this is nobody's `tracekit capture`.

    python tests/make_big_timeline.py OUT.json [--events N] [--source TRACE]
"""

import argparse
import gzip
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "sample_traces" / "sdpa_math.json.gz"
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
HEADER_KEYS = ("schemaVersion", "deviceProperties", "displayTimeUnit", "baseTimeNanoseconds")


def gpu_events(source):
    """The source's header keys and the GPU events of its steady steps (all but ProfilerStep#0,
    the cold one, which ends in a long wait), in time order."""
    with gzip.open(source, "rt") if str(source).endswith(".gz") else open(source) as f:
        trace = json.load(f)
    steps = sorted(e["ts"] for e in trace["traceEvents"]
                   if e.get("cat") == "user_annotation" and e.get("name", "").startswith("ProfilerStep#"))
    steady_from = steps[1] if len(steps) > 1 else float("-inf")
    events = sorted((e for e in trace["traceEvents"] if e.get("cat") in GPU_CATEGORIES and e["ts"] >= steady_from),
                    key=lambda e: e["ts"])
    return {k: trace[k] for k in HEADER_KEYS if k in trace}, events


def _copy(event, shift_us, id_shift):
    args = dict(event.get("args", {}))
    for key in ("correlation", "External id"):
        if key in args:
            args[key] += id_shift
    return {**event, "ts": round(event["ts"] + shift_us, 3), "args": args}


def build(out, events=100_000, source=SOURCE):
    """Writes `out` (JSON) with at least `events` GPU events; returns how many it wrote."""
    header, template = gpu_events(source)
    first = template[0]["ts"]
    gaps = [b["ts"] - a["ts"] - a.get("dur", 0) for a, b in zip(template, template[1:])]
    # The next copy starts after the median gap between two events, as the next step would.
    period = max(e["ts"] + e.get("dur", 0) for e in template) - first + sorted(gaps)[len(gaps) // 2]
    id_step = max(e.get("args", {}).get("correlation", 0) for e in template) + 1
    copies = -(-events // len(template))
    with open(out, "w") as f:
        f.write("{\n" + "".join(f'  {json.dumps(k)}: {json.dumps(v)},\n' for k, v in header.items()))
        f.write('  "traceEvents": [\n')
        for n in range(copies):
            lines = (json.dumps(_copy(e, n * period, n * id_step)) for e in template)
            f.write(("" if n == 0 else ",\n") + ",\n".join(lines))
        f.write('\n  ],\n  "traceName": "built by tests/make_big_timeline.py"\n}\n')
    return copies * len(template)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--events", type=int, default=100_000, help="at least this many GPU events [100000]")
    parser.add_argument("--source", default=str(SOURCE), help="the real trace to repeat [sample_traces/sdpa_math]")
    args = parser.parse_args(argv)
    print(f"{args.out}: {build(args.out, args.events, args.source):,} GPU events")


if __name__ == "__main__":
    main()
