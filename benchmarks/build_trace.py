"""Builds big, realistic Kineto traces by repeating the steady steps of real sample traces.

The output keeps the first source's header, its cold step (ProfilerStep#0), its metadata events and
its closing keys, and repeats the steady steps (ProfilerStep#1..N and every event they hold: cpu ops,
runtime and driver calls, kernels, memcpys, memsets, ac2g flows, GPU annotations) until the file
reaches the wanted size. Each copy gets later timestamps, new step numbers and fresh External ids,
correlation ids (flow ids are correlation ids), so every id stays unique and every link (launch to
kernel, op to launch, flow start to flow end) stays consistent. With several sources the copies
alternate between them, one process running different attention modules in turn.

Events keep Kineto's own layout byte for byte: each source event's text is a template whose
numbers are slots. The file is written section by section in Kineto's order (all CPU-side events,
then runtime and GPU events, then GPU annotations), streaming: it never holds more than one copy of
one source in memory. One copy of one source gives back the source's JSON exactly.

    python benchmarks/build_trace.py --size 1000 --out /tmp/bench/bench_1000MB.json --gzip
"""

import argparse
import bisect
import gzip
import json
import math
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCES = (HERE.parent / "sample_traces" / "sdpa_math.json.gz",
                   HERE.parent / "sample_traces" / "naive.json.gz")
MB = 1_000_000

# Slot kinds: the offset vector of a copy has one entry per kind. SPAN is the trace span's dur (it grows
# with the trace), STEP_DUR a ProfilerStep's dur (it grows when one step holds several forwards).
TS, EXT, CORR, EVIDX, STEP, SPAN, STEP_DUR = range(7)
KINDS = 7
# A slot is the integer part of a number; the ns fraction of a timestamp stays in the literal text,
# so time shifts are whole microseconds and keep the trace's nanoseconds exact.
_TOP_SLOTS = ((re.compile(r'(?<!\\)"ts": (-?\d+)'), TS),
              (re.compile(r'(?<!\\)"name": "ProfilerStep#(\d+)"'), STEP))
_FLOW_ID = re.compile(r'(?<!\\)"id": (\d+)')
_SPAN_DUR = re.compile(r'(?<!\\)"dur": (\d+)')
_ARG_SLOTS = ((re.compile(r'(?<!\\)"External id": (\d+)'), EXT),
              (re.compile(r'(?<!\\)"correlation": (\d+)'), CORR),
              (re.compile(r'(?<!\\)"Ev Idx": (\d+)'), EVIDX))
_NUMBER = r"(-?\d+(?:\.\d+)?)"
_TS_TEXT = re.compile(r'(?<!\\)"ts": ' + _NUMBER)
_DUR_TEXT = re.compile(r'(?<!\\)"dur": ' + _NUMBER)
_ARGS_KEY = re.compile(r'(?<!\\)"args":')
_WS = re.compile(r"[ \t\n\r]*")
CPU_SIDE = ("cpu_op", "user_annotation", "python_function", "operator")
LAUNCHES = ("cuda_runtime", "cuda_driver", "hip_runtime", "hip_driver", "runtime")


class Chunk:
    """Event texts with their number slots, rendered for one offset vector."""

    def __init__(self):
        self.literals, self.bases, self.kinds = [""], [], []

    def add(self, prefix, text, slots):
        """Appends `prefix` and `text`, whose (start, end, kind) `slots` are sorted and do not overlap."""
        self.literals[-1] += prefix
        at = 0
        for start, end, kind in slots:
            self.literals[-1] += text[at:start]
            self.bases.append(int(text[start:end]))
            self.kinds.append(kind)
            self.literals.append("")
            at = end
        self.literals[-1] += text[at:]

    def freeze(self):
        self.fmt = "{}".join(part.replace("{", "{{").replace("}", "}}") for part in self.literals)
        self.base_array = np.array(self.bases, dtype=np.int64)
        self.kind_array = np.array(self.kinds, dtype=np.int64)
        return self

    def render(self, offsets):
        return self.fmt.format(*(self.base_array + offsets[self.kind_array]).tolist())


@dataclass
class Source:
    """One sample trace cut into its fixed parts and its steady sections."""

    path: Path
    header: str = ""
    first_sep: str = ""
    sep: str = ""
    trailer: str = ""
    plan: list = field(default_factory=list)  # ("pre"|"post", Chunk) or ("steady", section)
    # section -> its steady events as items: ("body", Chunk) or ("step", Chunk, step number, ts_ns, end_ns)
    sections: dict = field(default_factory=dict)
    steps: list = field(default_factory=list)  # (number, ts_ns, end_ns) of each steady step: one forward each
    first_step_us: int = 0
    period_us: int = 0
    spans: dict = field(default_factory=dict)  # kind -> (min, max) over the steady events
    max_ids: dict = field(default_factory=dict)  # kind -> max over every event


def _events(text, path):
    """(header text, [(leading separator, event text, event)], trailer text) of a Kineto file."""
    found = re.search(r'(?<!\\)"traceEvents":\s*\[', text)
    if not found:
        raise SystemExit(f"{path}: no traceEvents array (is it a Kineto trace?)")
    decoder, events, pos = json.JSONDecoder(), [], found.end()
    while True:
        start = _WS.match(text, pos).end()
        if text.startswith("]", start):
            return text[:found.end()], events, text[pos:]
        if events:
            if not text.startswith(",", start):
                raise SystemExit(f"{path}: expected ',' between events at char {start}")
            start = _WS.match(text, start + 1).end()
        event, end = decoder.raw_decode(text, start)
        events.append((text[pos:start], text[start:end], event))
        pos = end


def _slots(text, event):
    """The number slots of one event's text, checked against its parsed values."""
    args_at = _ARGS_KEY.search(text)
    top_end = args_at.start() if args_at else len(text)
    found = [(m.start(1), m.end(1), kind) for rx, kind in _TOP_SLOTS for m in rx.finditer(text, 0, top_end)]
    if event.get("cat") == "ac2g":
        found += [(m.start(1), m.end(1), CORR) for m in _FLOW_ID.finditer(text, 0, top_end)]
    if event.get("cat") == "Trace" or _is_step(event):
        kind = SPAN if event.get("cat") == "Trace" else STEP_DUR
        found += [(m.start(1), m.end(1), kind) for m in _SPAN_DUR.finditer(text, 0, top_end)]
    if args_at:
        found += [(m.start(1), m.end(1), kind) for rx, kind in _ARG_SLOTS for m in rx.finditer(text, top_end)]
    found.sort()
    expected = ("ts" in event) + (event.get("cat") == "ac2g" and "id" in event) + sum(
        key in event.get("args", {}) for key in ("External id", "correlation", "Ev Idx"))
    expected += str(event.get("name", "")).startswith("ProfilerStep#")
    expected += "dur" in event and (event.get("cat") == "Trace" or _is_step(event))
    if len(found) != expected:
        raise SystemExit(f"cannot template this event (found {len(found)} of {expected} numbers): {text[:200]}")
    return found


def _anchors(events):
    """Each event's anchor time: its launch's ts for GPU work and flows, else its own ts."""
    launch_ts, op_ts = {}, {}
    for _, _, e in events:
        args = e.get("args", {})
        if e.get("cat") in LAUNCHES and "correlation" in args:
            launch_ts.setdefault(args["correlation"], e["ts"])
        if e.get("cat") in CPU_SIDE and "External id" in args:
            op_ts.setdefault(args["External id"], e["ts"])
    anchors = []
    for _, _, e in events:
        args = e.get("args", {})
        if e.get("cat") == "ac2g":
            anchors.append(launch_ts.get(e.get("id"), e.get("ts")))
        elif args.get("correlation") in launch_ts:
            anchors.append(launch_ts[args["correlation"]])
        elif e.get("cat") == "gpu_user_annotation" and args.get("External id") in op_ts:
            anchors.append(op_ts[args["External id"]])
        else:
            anchors.append(e.get("ts"))
    return anchors


def _section(event):
    cat = event.get("cat")
    return "cpu" if cat in CPU_SIDE else "gpu_annotation" if cat == "gpu_user_annotation" else "gpu"


def _is_step(event):
    return (event.get("ph") == "X" and event.get("cat") in CPU_SIDE
            and re.fullmatch(r"ProfilerStep#\d+", str(event.get("name", ""))) is not None)


def _ns(number_text):
    """Exact integer nanoseconds of a microsecond number's text."""
    whole, _, fraction = number_text.partition(".")
    sign = -1 if whole.startswith("-") else 1
    return sign * (abs(int(whole)) * 1000 + int((fraction + "000")[:3]))


def _steps(events, path):
    steps = {}
    for _, _, e in events:
        if _is_step(e):
            steps[int(e["name"].split("#")[1])] = (e["ts"], e["ts"] + e.get("dur", 0))
    if len(steps) < 2:
        raise SystemExit(f"{path}: needs ProfilerStep#0 (cold) and at least one steady step; has {sorted(steps)}")
    return steps


def _add_steady(src, items, text, event, slots):
    """Adds a steady event to its section; each ProfilerStep gets an item of its own (it may be left out)."""
    if _is_step(event):
        ts_ns = _ns(_TS_TEXT.search(text).group(1))
        end_ns = ts_ns + _ns(_DUR_TEXT.search(text).group(1))
        number = int(event["name"].split("#")[1])
        src.steps.append((number, ts_ns, end_ns))
        items.append(("step", Chunk(), number, ts_ns, end_ns))
    elif not items or items[-1][0] != "body":
        items.append(("body", Chunk()))
    items[-1][1].add(src.sep, text, slots)
    if _is_step(event):
        items.append(("body", Chunk()))


def load_source(path):
    """Cuts a sample trace into header, cold part, steady sections, tail part and trailer."""
    with open(path, "rb") as handle:
        raw = handle.read()
    text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode("utf-8")
    src = Source(Path(path))
    src.header, events, src.trailer = _events(text, path)
    if not events:
        raise SystemExit(f"{path}: no events")
    src.first_sep, src.sep = events[0][0], events[1][0] if len(events) > 1 else ",\n  "
    steps = _steps(events, path)
    first, last = min(steps) + 1, max(steps)  # the first step is the cold one
    begin, end = steps[first][0], steps[last][1]
    anchors = _anchors(events)
    steady_end, ids = end, {}
    for (_, text_, event), anchor in zip(events, anchors):
        slots = _slots(text_, event)
        for start, stop, kind in slots:
            ids.setdefault(kind, []).append(int(text_[start:stop]))
        part = "pre" if anchor is None or anchor < begin else "post" if anchor > end else "steady"
        if part == "steady":
            steady_end = max(steady_end, event.get("ts", 0) + event.get("dur", 0))
            key = _section(event)
            if key not in src.sections:
                src.sections[key] = []
                src.plan.append(("steady", key))
            _add_steady(src, src.sections[key], text_, event, slots)
            for start, stop, kind in slots:
                low, high = src.spans.get(kind, (math.inf, -math.inf))
                value = int(text_[start:stop])
                src.spans[kind] = (min(low, value), max(high, value))
        else:
            if not src.plan or src.plan[-1][0] != part:
                src.plan.append((part, Chunk()))
            src.plan[-1][1].add(src.sep, text_, slots)
    for part, chunk in src.plan:
        if part != "steady":
            chunk.freeze()
    for items in src.sections.values():
        for item in items:
            item[1].freeze()
    gap = steps[first + 1][0] - steps[first][1] if first + 1 in steps else 50.0
    src.first_step_us = math.floor(begin)
    src.period_us = math.ceil(steady_end - begin + gap)
    src.max_ids = {kind: max(values) for kind, values in ids.items()}
    return src


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


class _Sinks:
    """Writes the same text to a plain file and/or a gzip file."""

    def __init__(self, outputs, level):
        self.handles = [gzip.GzipFile(path, "wb", compresslevel=level, mtime=0) if str(path).endswith(".gz")
                        else open(path, "wb") for path in outputs]
        self.bytes, self.first = 0, True

    def event_text(self, text, src):
        if self.first and text:
            text, self.first = src.first_sep + text[len(src.sep):], False
        self.write(text)

    def write(self, text):
        data = text.encode("utf-8")
        self.bytes += len(data)
        for handle in self.handles:
            handle.write(data)

    def close(self):
        for handle in self.handles:
            handle.close()


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


def write_trace(sources, planner, outputs, level=6, per_step=1):
    """Streams the planned trace to `outputs` (.json and/or .json.gz); returns (bytes, copies)."""
    head, extra = sources[0], planner.extra_us()
    pre = np.zeros(KINDS, dtype=np.int64)
    pre[SPAN] = extra
    post = pre.copy()
    post[TS] = extra
    sinks = _Sinks(outputs, level)
    try:
        sinks.write(head.header)
        for part, item in head.plan:
            if part != "steady":
                sinks.event_text(item.render(pre if part == "pre" else post), head)
                continue
            for copy, (index, offsets) in enumerate(planner.copies):
                items = sources[index].sections.get(item)
                if items:
                    sinks.event_text(_render_items(items, copy, offsets, planner, per_step), head)
        sinks.write(head.trailer)
    finally:
        sinks.close()
    return sinks.bytes, len(planner.copies)


def build(out, size_mb, sources=DEFAULT_SOURCES, gzip_too=False, level=6, steps=None):
    """Writes `out` (.json or .json.gz) of about `size_mb` MB of JSON (and `out`.gz when asked).

    Each steady forward is one ProfilerStep, unless `steps` asks for fewer, longer steps (a real
    training trace has a few dozen steps of many thousand events each).
    """
    loaded = [load_source(path) for path in sources]
    keys = set(loaded[0].sections)
    for src in loaded[1:]:
        if not set(src.sections) <= keys:
            raise SystemExit(f"{src.path}: has steady {sorted(set(src.sections) - keys)} events the first source has not")
    planner = plan_copies(loaded, size_mb * MB, with_steps=not steps)
    outputs = [Path(out)] + ([Path(str(out) + ".gz")] if gzip_too and not str(out).endswith(".gz") else [])
    for path in outputs:
        path.parent.mkdir(parents=True, exist_ok=True)
    per_step = -(-planner.forwards // steps) if steps else 1
    written, copies = write_trace(loaded, planner, outputs, level, per_step)
    return {"outputs": [str(p) for p in outputs], "json_bytes": written, "copies": copies,
            "forwards": planner.forwards, "steady_steps": -(-planner.forwards // per_step),
            "forwards_per_step": per_step, "sources": [str(s.path) for s in loaded]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=float, required=True, help="size of the JSON in MB (10^6 bytes)")
    parser.add_argument("--out", required=True, help="output file, .json or .json.gz")
    parser.add_argument("--gzip", action="store_true", help="also write OUT.gz (with a .json OUT)")
    parser.add_argument("--level", type=int, default=6, help="gzip level [6]")
    parser.add_argument("--steps", type=int, help="this many steady steps, each holding several forwards "
                        "[one step per forward]")
    parser.add_argument("--source", action="append", help="sample trace(s) to repeat, in turn "
                        "[sample_traces/sdpa_math.json.gz and naive.json.gz]")
    args = parser.parse_args(argv)
    started = time.monotonic()
    info = build(args.out, args.size, args.source or DEFAULT_SOURCES, args.gzip, args.level, args.steps)
    info["seconds"] = round(time.monotonic() - started, 1)
    for path in info["outputs"]:
        info.setdefault("file_bytes", {})[path] = Path(path).stat().st_size
    json.dump(info, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
