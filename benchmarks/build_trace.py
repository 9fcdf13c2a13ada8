"""Builds big, realistic Kineto traces by repeating the steady steps of real sample traces.

The output keeps the first source's header, its cold step (ProfilerStep#0), its metadata events and
its closing keys, and repeats the steady steps (ProfilerStep#1..N and every event they hold: cpu ops,
runtime and driver calls, kernels, memcpys, memsets, ac2g flows, GPU annotations) until the file
reaches the wanted size. Each copy gets later timestamps, new step numbers and fresh External ids,
correlation ids (flow ids are correlation ids), so every id stays unique and every link (launch to
kernel, op to launch, flow start to flow end) stays consistent. With several sources the copies
alternate between them, one process running different attention modules in turn.

Events keep Kineto's own layout byte for byte: each source event's text is a template whose
numbers are slots (trace_templates.py). The file is written section by section in Kineto's order (all
CPU-side events, then runtime and GPU events, then GPU annotations), streaming: it never holds more
than one copy of one source in memory. One copy of one source gives back the source's JSON exactly.
`--layout` writes the same trace as other tools lay it out (layouts.py): one event per line, minified,
indented by four, or the events alone as NDJSON.

    python benchmarks/build_trace.py --size 1000 --out /tmp/bench/bench_1000MB.json --gzip
    python benchmarks/build_trace.py --size 1000 --out /tmp/bench/bench_1000MB.lines.json --layout lines
"""

import argparse
import bisect
import json
import sys
import time
from pathlib import Path

import numpy as np

from layouts import LAYOUTS, TraceWriter
from trace_templates import CORR, EVIDX, EXT, KINDS, SPAN, STEP, STEP_DUR, TS, load_source

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCES = (HERE.parent / "sample_traces" / "sdpa_math.json.gz",
                   HERE.parent / "sample_traces" / "naive.json.gz")
MB = 1_000_000


class Planner:
    """The offset vector of every copy: copy 0 is the first source as it is."""

    def __init__(self, sources):
        self.sources = sources
        head = sources[0]
        self.next = {kind: head.max_ids.get(kind, 0) + 1 for kind in (EXT, CORR, EVIDX)}
        self.next_ts = head.first_step_us + head.period_us
        self.copies = [(0, np.zeros(KINDS, dtype=np.int64))]
        self.first_forward = [0]  # index of each copy's first forward among all steady forwards
        self.forwards = len(head.steps)

    def add(self):
        index = len(self.copies) % len(self.sources)
        src = self.sources[index]
        offsets = np.zeros(KINDS, dtype=np.int64)
        offsets[TS] = self.next_ts - src.first_step_us
        self.next_ts += src.period_us
        self.first_forward.append(self.forwards)
        self.forwards += len(src.steps)
        for kind in (EXT, CORR, EVIDX):
            if kind in src.spans:
                low, high = src.spans[kind]
                offsets[kind] = self.next[kind] - low
                self.next[kind] += high - low + 1
        self.copies.append((index, offsets))
        return index, offsets

    def forward_end_ns(self, forward):
        """Where the step of steady forward number `forward` ends in the output."""
        copy = bisect.bisect_right(self.first_forward, forward) - 1
        index, offsets = self.copies[copy]
        return int(offsets[TS]) * 1000 + self.sources[index].steps[forward - self.first_forward[copy]][2]

    def extra_us(self):
        """How much later the first source's tail events (and its trace span's end) now lie."""
        head = self.sources[0]
        return self.next_ts - (head.first_step_us + head.period_us)


def _copy_bytes(src, offsets, with_steps):
    return sum(len(item[1].render(offsets).encode("utf-8")) for items in src.sections.values() for item in items
               if with_steps or item[0] == "body")


def plan_copies(sources, target_bytes, with_steps=True):
    """A Planner holding just enough copies for about `target_bytes` of JSON (`with_steps` False:
    counting no ProfilerStep events, as when a few long steps leave nearly all of them out)."""
    head = sources[0]
    fixed = len((head.header + head.first_sep + head.trailer).encode("utf-8")) + sum(
        len(chunk.render(np.zeros(KINDS, dtype=np.int64)).encode("utf-8")) for part, chunk in head.plan if part != "steady")
    sizes = [_copy_bytes(src, np.zeros(KINDS, dtype=np.int64), with_steps) for src in sources]
    for _ in range(2):  # ids grow digits as copies are added: estimate, then re-measure mid-way
        planner, total = Planner(sources), fixed + sizes[0]
        while total < target_bytes:
            index, _ = planner.add()
            total += sizes[index]
        middle = len(planner.copies) // 2
        for index in range(len(sources)):
            picks = [offsets for i, offsets in planner.copies[middle:] if i == index]
            if picks:
                sizes[index] = _copy_bytes(sources[index], picks[0], with_steps)
    return planner


def _render_items(items, copy, offsets, planner, per_step):
    """One copy's events of one section; with `per_step` forwards per step, only every
    `per_step`-th forward keeps its ProfilerStep, renumbered and stretched over its group."""
    parts = []
    forward = planner.first_forward[copy] - 1
    for item in items:
        if item[0] == "body":
            parts.append(item[1].render(offsets))
            continue
        forward += 1
        if forward % per_step:
            continue
        _, chunk, number, _, end_ns = item
        last = min(forward + per_step, planner.forwards) - 1
        step = offsets.copy()
        step[STEP] = planner.sources[0].steps[0][0] + forward // per_step - number
        step[STEP_DUR] = -(-(planner.forward_end_ns(last) - planner.forward_end_ns(forward)) // 1000)
        parts.append(chunk.render(step))
    return "".join(parts)


def write_trace(sources, planner, outputs, level=6, per_step=1, shift_us=0):
    """Streams the planned trace, `shift_us` later, to `outputs` ((path, layout) pairs; a .gz path is
    gzipped); returns ({path: JSON bytes}, copies)."""
    head, extra = sources[0], planner.extra_us()
    shift = np.zeros(KINDS, dtype=np.int64)
    shift[TS] = shift_us
    pre = shift.copy()
    pre[SPAN] = extra
    post = pre.copy()
    post[TS] += extra
    writer = TraceWriter(outputs, head.header, head.trailer, head.first_sep, head.sep, level)
    complete = False
    try:
        for part, item in head.plan:
            if part != "steady":
                writer.events_text(item.render(pre if part == "pre" else post))
                continue
            for copy, (index, offsets) in enumerate(planner.copies):
                items = sources[index].sections.get(item)
                if items:
                    writer.events_text(_render_items(items, copy, offsets + shift, planner, per_step))
        complete = True
    finally:
        written = writer.close(complete)
    return written, len(planner.copies)


def numbered(path, index):
    """`path` of the `index`-th of several traces: bench.json.gz -> bench_03.json.gz."""
    path = Path(path)
    suffix = "".join(path.suffixes[-2:]) if path.name.endswith(".json.gz") else path.suffix
    return path.with_name(f"{path.name[:-len(suffix)] if suffix else path.name}_{index:02d}{suffix}")


def build(out, size_mb, sources=DEFAULT_SOURCES, gzip_too=False, level=6, steps=None, layout="kineto", count=1):
    """Writes `out` (.json or .json.gz, in `layout`) holding what `size_mb` MB of Kineto-layout JSON
    holds (and `out`.gz when asked).

    Each steady forward is one ProfilerStep, unless `steps` asks for fewer, longer steps (a real
    training trace has a few dozen steps of many thousand events each). With `count` > 1 it writes
    that many traces, `out` numbered _00, _01, ..., each an hour later than the one before: the same
    program captured again, so each has content of its own (a loader skips a file it has already loaded).
    """
    loaded = [load_source(path) for path in sources]
    keys = set(loaded[0].sections)
    for src in loaded[1:]:
        if not set(src.sections) <= keys:
            raise SystemExit(f"{src.path}: has steady {sorted(set(src.sections) - keys)} events the first source has not")
        if src.sep != loaded[0].sep:
            raise SystemExit(f"{src.path}: separates its events with {src.sep!r}, the first source with {loaded[0].sep!r}")
    planner = plan_copies(loaded, size_mb * MB, with_steps=not steps)
    per_step = -(-planner.forwards // steps) if steps else 1
    written = {}
    for index in range(count):
        first = Path(out) if count == 1 else numbered(out, index)
        outputs = [first] + ([Path(str(first) + ".gz")] if gzip_too and not str(first).endswith(".gz") else [])
        first.parent.mkdir(parents=True, exist_ok=True)
        sizes, copies = write_trace(loaded, planner, [(path, layout) for path in outputs], level, per_step,
                                    shift_us=index * 3_600_000_000)
        written.update(sizes)
    return {"outputs": list(written), "layout": layout, "json_bytes": written, "copies": copies,
            "forwards": planner.forwards, "steady_steps": -(-planner.forwards // per_step),
            "forwards_per_step": per_step, "sources": [str(s.path) for s in loaded]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=float, required=True, help="how much the trace holds, in MB (10^6 bytes) "
                        "of Kineto-layout JSON; other layouts hold the same events")
    parser.add_argument("--out", required=True, help="output file, .json or .json.gz")
    parser.add_argument("--layout", choices=LAYOUTS, default="kineto", help="kineto: Kineto's own text; lines: "
                        "json.dumps(event) per line; minified: json.dumps(trace, separators=(',', ':')); "
                        "indent4: json.dumps(trace, indent=4); ndjson: the events alone, one per line [kineto]")
    parser.add_argument("--gzip", action="store_true", help="also write OUT.gz (with a .json OUT)")
    parser.add_argument("--level", type=int, default=6, help="gzip level [6]")
    parser.add_argument("--steps", type=int, help="this many steady steps, each holding several forwards "
                        "[one step per forward]")
    parser.add_argument("--count", type=int, default=1, help="write N traces, OUT numbered _00.., each an hour "
                        "later than the one before (distinct content, for a folder) [1]")
    parser.add_argument("--source", action="append", help="sample trace(s) to repeat, in turn "
                        "[sample_traces/sdpa_math.json.gz and naive.json.gz]")
    args = parser.parse_args(argv)
    started = time.monotonic()
    info = build(args.out, args.size, args.source or DEFAULT_SOURCES, args.gzip, args.level, args.steps,
                 args.layout, args.count)
    info["seconds"] = round(time.monotonic() - started, 1)
    info["file_bytes"] = {path: Path(path).stat().st_size for path in info["outputs"]}
    json.dump(info, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
