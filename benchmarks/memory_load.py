"""Load speed with memory events: a trace of many steps, each a copy of a real CPU capture's steady
step with its [memory] events (tests/data/cpu/memory/naive.json.gz), loaded by `tracekit load`.

    python benchmarks/memory_load.py --steps 20000 [--dir /tmp/bench] [--without-memory]

Each copy keeps the step's events as Kineto wrote them, later in time and with its blocks at
addresses of their own (the previous copy's output, freed in the next, keeps its address).
--without-memory writes the same trace with the [memory] events left out: the difference between
the two loads is what reading memory events costs. Prints events, memory events, seconds.
"""

import argparse
import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "data" / "cpu" / "memory" / "naive.json.gz"
ADDRESS_STRIDE = 1 << 32


def build(path, steps, with_memory):
    trace = json.loads(gzip.decompress(SOURCE.read_bytes()))
    events = trace["traceEvents"]
    step1 = next(e for e in events if e.get("name") == "ProfilerStep#1")
    start, end = step1["ts"], step1["ts"] + step1["dur"]
    template = [e for e in events if e.get("ph") != "M" and start <= e.get("ts", -1) < end
                and (with_memory or e.get("name") != "[memory]")]
    period = end - start + 10.0
    out = [e for e in events if e.get("ph") == "M"]
    for copy in range(steps):
        for event in template:
            event = dict(event, ts=round(event["ts"] + copy * period, 3))
            if event["name"] == "ProfilerStep#1":
                event["name"] = f"ProfilerStep#{copy + 1}"
            if event["name"] == "[memory]":
                event["args"] = dict(event["args"], Addr=event["args"]["Addr"] + copy * ADDRESS_STRIDE)
            out.append(event)
    trace["traceEvents"] = out
    with open(path, "w") as sink:
        json.dump(trace, sink)
    return len(out), sum(e["name"] == "[memory]" for e in out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/bench"))
    parser.add_argument("--without-memory", action="store_true")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    kind = "nomem" if args.without_memory else "mem"
    trace = args.dir / f"memory_{kind}_{args.steps}.json"
    events, memory = build(trace, args.steps, not args.without_memory)
    db = args.dir / f"memory_{kind}_{args.steps}.duckdb"
    db.unlink(missing_ok=True)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tracekit", "load", str(trace), "--db", str(db)], check=True,
                   capture_output=True)
    print(f"{trace.name}: {events:,} events, {memory:,} memory events, {trace.stat().st_size / 1e6:.0f} MB:"
          f" loaded in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
