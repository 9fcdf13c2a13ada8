"""Sample traces cut into templates: each event's text with its numbers as slots, for build_trace.py.

A slot is the integer part of a timestamp, an id, a step number or a span's duration; a copy of a
source is its templates rendered with one offset vector (one offset per kind of slot). Only the
numbers change, so every other byte of Kineto's text, its layout included, is kept.
"""

import gzip
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

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
