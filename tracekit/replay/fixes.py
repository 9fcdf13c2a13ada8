"""Fixes a replay can apply, each a change to the graph's arrays, named as `--apply` takes them.

- `drop-copies:OP`: the copies made under the op OP where the user called it (its op chain starts
  at OP), not where autograd's backward calls it: what the in-place form of OP removes
  (`drop-copies:aten::masked_fill`);
- `drop:REGEX`: the GPU items (kernels, copies, fills) whose name or op chain REGEX finds;
- `drop-sync:REGEX`: the runtime calls REGEX finds stop waiting for the GPU and cost nothing
  (`drop-sync:cudaDeviceSynchronize`, `drop-sync:cudaStreamSynchronize`);
- `drop-cpu-gaps:US`: a thread's own time of at least US microseconds between two of its calls
  goes (a stall: a sleep, data loading, host-side work the GPU waited on).
"""

import re

import numpy as np

from tracekit.errors import TracekitError

FIXES = ("drop-copies", "drop", "drop-sync", "drop-cpu-gaps")


def parse_fix(text):
    """(name, argument) of one `--apply` value; a usage error names what is wrong."""
    name, _, argument = text.partition(":")
    if name not in FIXES or not argument:
        raise TracekitError(f"--apply {text!r}: a fix is one of {', '.join(f + ':...' for f in FIXES)}")
    if name == "drop-cpu-gaps":
        try:
            if float(argument) <= 0:
                raise ValueError
        except ValueError:
            raise TracekitError(f"--apply {text!r}: drop-cpu-gaps takes a time in microseconds above 0") from None
    elif name in ("drop", "drop-sync"):
        try:
            re.compile(argument)
        except re.error as exc:
            raise TracekitError(f"--apply {text!r}: not a regular expression ({exc})") from None
    return name, argument


def apply(graph, fixes):
    """The arrays `fixes` (parsed) change, for simulate.replay(graph, **changed)."""
    item_dur, item_gap = graph.item_dur.copy(), graph.item_gap.copy()
    call_dur, call_gap, call_wait = graph.call_dur.copy(), graph.call_gap.copy(), graph.call_wait.copy()
    for name, argument in fixes:
        if name in ("drop-copies", "drop"):
            gone = _items(graph, name, argument)
            item_dur[gone] = 0
            item_gap[gone] = 0
        elif name == "drop-sync":
            pattern = re.compile(argument)
            gone = np.array([bool(pattern.search(n)) for n in np.unique(graph.call_name)], dtype=bool)
            names = set(np.unique(graph.call_name)[gone])
            hit = np.isin(graph.call_name, list(names))
            call_wait[hit] = -1
            call_dur[hit] = 0
        elif name == "drop-cpu-gaps":
            call_gap[call_gap >= float(argument) * 1000] = 0
    return {"item_dur": item_dur, "item_gap": item_gap, "call_dur": call_dur, "call_gap": call_gap,
            "call_wait": call_wait}


def _items(graph, name, argument):
    """The items a drop fix takes: copies under OP where the user called it, or REGEX's items."""
    if name == "drop-copies":
        starts = np.array([path == argument or path.startswith(argument + " →") for path in graph.item_op_path])
        return starts & (graph.item_kind == "memcpy")
    pattern = re.compile(argument)
    return np.array([bool(pattern.search(n or "")) or bool(pattern.search(p)) for n, p in
                     zip(graph.item_name, graph.item_op_path)], dtype=bool)
