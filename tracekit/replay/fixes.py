"""Fixes a replay can apply, each a change to the graph's arrays, named as `--apply` takes them.

- `drop-copies:OP`: the device-to-device copies made under the op OP (OP in their op chain) where
  the user called it, not where autograd's backward formula calls it: what the in-place form of
  OP removes (`drop-copies:aten::masked_fill`);
- `drop:REGEX`: the GPU items (kernels, copies, fills) whose name or op chain REGEX finds;
- `drop-sync:REGEX`: the runtime calls whose name or op chain REGEX finds stop waiting for the GPU
  and cost nothing (`drop-sync:cudaDeviceSynchronize`, `drop-sync:aten::item` for `.item()`; not
  GradScaler's reads, which are no code of the user's: `fuse-optimizer`, `drop-scaler-checks`) but a
  copy's own transfer: a copy call keeps its GPU copies' time (in a trace that recorded no GPU
  copy, all its time, as nothing there tells its wait from its transfer, but a scalar read's:
  `.item()` moves one element), as dropping a wait moves no data;
- `drop-cpu-gaps:US[-US]`: a thread's own time of at least US microseconds (and at most the
  second US) between two of its calls goes (a stall: a sleep, data loading, host-side work the GPU
  waited on); a finding's stalls name their range, so that its fix takes those stalls, not every
  longer stretch of the thread's work;
- `drop-host-ops:US`: the ATen ops (the outermost, where they nest) that made no CUDA call and took
  US µs or more take no time on their thread: work on host tensors (input preparation, a metric)
  moved to DataLoader workers or onto the GPU; ops that launch GPU work keep their time;
- `drop-cpu:REGEX`: the CPU ops REGEX names (the outermost, where they nest) take no time on their
  thread (`drop-cpu:DataLoader` for loading in workers, a logger, a checkpoint);
- `tensor-cores[:REGEX]`: GEMMs on the CUDA cores (SIMT) run on Tensor Cores: their roofline (view
  gemm_math: their FLOPs at the dense peak or their bytes at the memory's bandwidth) over the share
  of it cuBLAS's GEMMs of their size reach, or, with rows not a multiple of 16 bytes, at the share
  of the bf16 peak its older kernels reach (replay.tensor_core_model); REGEX limits it to the
  GEMMs whose name or op chain it finds;
- `pin-copies[:REGEX]`: copies between pageable host memory and the GPU run from pinned memory:
  at the bandwidth the trace's own pinned copies that way reach (else the host link's,
  host_links.csv), and their calls return at once (non_blocking=True), so the CPU goes on;
- `prefetch-copies[:REGEX]`: the same copies pinned and on a side stream of their own (a prefetcher:
  `with torch.cuda.stream(side)`, then `wait_stream` before use): each starts once launched, beside
  the work queued ahead of it, and the work after it on its old stream waits for it;
- `cuda-graph[:US]`: each steady step's launches replayed from a CUDA graph: the CPU's work between
  a thread's first launch in the step and its last costs nothing but one launch (the graph's), so
  the GPU runs the step's work back to back, at a graph's node gap; another thread's launches
  (autograd's backward) are the same graph's, their start after the handoff too; calls that wait
  for the GPU stay (a graph cannot hold them), and the steps before the steady ones (the warm-up a
  graph is captured after) too.
  With US, the thread's own stretches of at least US µs stay: work no graph holds (a sleep, host
  work), so the fix is the launch rate's alone;
- `no-profiler[:US]`: not a fix but the loop without the profiler: each CPU op the trace records
  cost its thread US µs that the loop does not pay unprofiled, in the gap before each call and in
  the lag after a handoff between threads (the ops either thread records there: autograd's tail
  of the backward, the main thread resuming); and a CUDA graph's launch costs one launch (CUPTI's
  record of each of its kernels gone); replayed with a fix, what the fix saves the unprofiled
  loop. Without US (or with `trace`) the cost is the trace's own estimate
  (tracekit.replay.profiler_cost: from the gaps between ops C++ calls back to back; 6-8 µs an op
  on one H200 host, 3-4.5 on another, as measured there from loops timed without the profiler);
- `fuse-attention[:REGEX]`: each call of the attention op whose name REGEX finds (default SDPA's math
  backend, `aten::_scaled_dot_product_attention_math`; or a module's record_function range), and its backward
  (autograd's nodes of the same sequence numbers), runs as one fused kernel: its GEMMs' FLOPs at
  the share of the 16-bit Tensor Core peak fused kernels reach (0.42 forward, 0.21 backward;
  the scores never written), the rest (softmax, masks, scaling, copies) fused away, one launch;
- `fuse-attention-chains`: the same for each chain of ops that computes attention in the model's own
  code (view attention_chains: from its Q·Kᵀ matmul to its ·V matmul), as eager attention does; on
  fp32 inputs, which SDPA runs on its memory-efficient kernel, the GEMMs at their own SIMT pace (a
  forward's at 0.7x of it: replay.attention_fix.FUSED_FP32_FORWARD);
- `fuse-optimizer`: each Adam, AdamW or SGD step of the foreach or for-loop implementation (view
  optimizer_steps) as its fused one: its unfused kernels one kernel of their time at a fused step's
  bytes, one launch (replay.optimizer_fix);
  and GradScaler's read before such a step (view scaler_checks) waits no more, as a fused step
  checks the gradients for inf/NaN in its kernel;
- `drop-scaler-checks`: GradScaler's reads before every optimizer step wait no more (bf16 autocast,
  which needs no scaler; or an optimizer that checks in its own kernel);
- `fuse-elementwise[:REGEX]`: each chain of elementwise ops run a kernel an op (view
  elementwise_chains: a GELU or an RMSNorm written out op by op; with REGEX, those whose ops it
  finds, `rsqrt` for the RMSNorms F.rms_norm fuses) as one fused kernel, one pass over the tensor at the pace
  of the chain's own kernels, and its backward (autograd's nodes of the chain's ops) as one kernel
  moving half as much again, their launches but the first gone (a norm's forward keeps the thread's
  time before its second: F.rms_norm and F.layer_norm dispatch twice) (replay.elementwise_fix).
"""

import bisect
import collections
import csv
import math
import re
from importlib import resources

import numpy as np
import pandas as pd

from tracekit.errors import TracekitError
from tracekit.replay.attention_fix import FUSED, fuse_attention, fuse_attention_chains
from tracekit.replay.elementwise_fix import fuse_elementwise
from tracekit.replay.optimizer_fix import fuse_optimizer
from tracekit.replay.graph import calls_inside
from tracekit.replay.profiler_cost import MIN_GAPS, cost_per_op_us
from tracekit.replay.scaler_fix import scaler_read_calls
from tracekit.replay.side_stream import issued_a_step_ahead, on_side_stream
from tracekit.replay.tensor_core_model import tensor_core_ns

# name -> whether the argument is required (False: optional), and what it is
FIXES = {"drop-copies": (True, "OP"), "drop": (True, "REGEX"), "drop-sync": (True, "REGEX"),
         "drop-cpu-gaps": (True, "US[-US]"), "drop-cpu": (True, "REGEX"), "drop-host-ops": (True, "US"), "tensor-cores": (False, "REGEX"),
         "pin-copies": (False, "REGEX"), "prefetch-copies": (False, "REGEX"), "cuda-graph": (False, "US"),
         "fuse-attention": (False, "REGEX"), "fuse-attention-chains": (False, ""), "fuse-optimizer": (False, ""),
         "drop-scaler-checks": (False, ""), "fuse-elementwise": (False, "REGEX"), "no-profiler": (False, "US")}
TRACE_ESTIMATE = "trace"  # no-profiler's argument for the trace's own estimate (as no argument)
# ATen ops that make a view of a tensor or allocate one: never host work, however long the profiler
# made them (gpu_idle's host cause leaves them out too).
HOST_OP_EXCLUDED = (r"^aten::(t|view|_unsafe_view|reshape|_reshape_alias|flatten|unflatten|split|split_with_sizes|chunk|"
                    r"transpose|permute|expand|squeeze|unsqueeze|slice|select|narrow|as_strided|detach|alias|"
                    r"contiguous|empty|empty_like|empty_strided|resize_|set_|lift_fresh|numpy_T)$")
_REGEX_FIXES = ("drop", "drop-sync", "drop-cpu", "tensor-cores", "pin-copies", "prefetch-copies", "fuse-attention",
                "fuse-elementwise")
_BACKWARD = "autograd::engine::evaluate_function"  # an op chain of autograd's backward starts so
_PINNED_SAMPLE_BYTES = 1 << 20  # copies this big or bigger show the link's bandwidth, not its latency


def usage():
    """The fixes as `--apply` takes them, for help texts and errors."""
    return ", ".join(f"{name}:{arg}" if required else (f"{name}[:{arg}]" if arg else name)
                     for name, (required, arg) in FIXES.items())


def parse_fix(text):
    """(name, argument) of one `--apply` value; a usage error names what is wrong."""
    name, _, argument = text.partition(":")
    if name not in FIXES or (FIXES[name][0] and not argument):
        raise TracekitError(f"--apply {text!r}: a fix is one of {usage()}")
    if argument and not FIXES[name][1]:
        raise TracekitError(f"--apply {text!r}: {name} takes no argument")
    if name == "no-profiler" and argument == TRACE_ESTIMATE:
        return name, ""
    if name == "drop-cpu-gaps":
        try:
            _gap_range(argument)
        except ValueError:
            raise TracekitError(f"--apply {text!r}: {name} takes a time in microseconds above 0, "
                                "or a range of two (US-US)") from None
    elif FIXES[name][1] == "US" and argument:
        try:
            if not math.isfinite(float(argument)) or float(argument) <= 0:
                raise ValueError
        except ValueError:
            raise TracekitError(f"--apply {text!r}: {name} takes a time in microseconds above 0") from None
    elif name in _REGEX_FIXES and argument:
        try:
            re.compile(argument)
        except re.error as exc:
            raise TracekitError(f"--apply {text!r}: not a regular expression ({exc})") from None
    return name, argument


def apply(graph, fixes, con=None, unchanged=None):
    """The arrays `fixes` (parsed) change, for simulate.replay(graph, **changed); and under "graph"
    the graph they change, where a fix moved work to another stream (prefetch-copies). `con` (the
    graph's database) is needed by the fixes that read more of the trace (drop-cpu, pin-copies,
    fuse-attention). `unchanged`, a list, gets the text of each fix that changed nothing (a name
    or pattern nothing in the trace matches: a typo reads as a saving of 0 otherwise)."""
    original, side_lanes = graph, []
    for name, argument in fixes:
        if name == "prefetch-copies":  # first: the other fixes then find the items where they now are
            graph = on_side_stream(graph, _pageable(graph, argument))
            side_lanes.append(graph.item_lane.max())
    changed = {"item_dur": graph.item_dur.copy(), "item_gap": graph.item_gap.copy(),
               "call_dur": graph.call_dur.copy(), "call_gap": graph.call_gap.copy(),
               "call_wait": graph.call_wait.copy(), "call_lag": graph.call_lag.copy()}
    changed[_DROPPED] = {}
    for name, argument in fixes:
        before = _arrays(changed) if unchanged is not None else None
        _APPLY[name](graph, argument, changed, con)
        if before is not None and not _changes(before, changed):
            unchanged.append(f"{name}:{argument}" if argument else name)
    changed.pop(_DROPPED)
    _keep_transfers(graph, changed)
    changed.pop(FUSED, None)
    for lane in side_lanes:
        graph = issued_a_step_ahead(graph, lane)
    if graph is not original:
        changed["graph"] = graph
    return changed


def _arrays(changed):
    return {key: value.copy() for key, value in changed.items() if isinstance(value, np.ndarray)}


def _changes(before, changed):
    """Whether a fix changed any array of `changed` since `before` (an array it added counts where
    any of it is set: the items or calls it took)."""
    return any((not np.array_equal(before[key], value)) if key in before else bool(value.any())
               for key, value in changed.items() if isinstance(value, np.ndarray))


def _drop_items(graph, argument, changed, con, copies_only=False):
    if copies_only:
        under = re.compile(rf"(^|→ ){re.escape(argument)}( →|$)")
        made = _found_in(lambda path: bool(under.search(path)) and not path.startswith(_BACKWARD), graph.item_op_path)
        gone = made & (graph.item_kind == "memcpy") & (graph.item_copy_kind == "DtoD")
    else:
        gone = _matching(re.compile(argument), graph.item_name, graph.item_op_path)
    changed["item_dur"][gone] = 0
    changed["item_gap"][gone] = 0


_SYNCS_DROPPED = "syncs_dropped"
_SCALAR_READ = "aten::_local_scalar_dense"  # .item() and a tensor's bool: one element copied, its time the wait


def _drop_sync(graph, argument, changed, con):
    # GradScaler's reads are no code of the user's to drop: a fused optimizer or no scaler drops them
    _no_wait(_matching(re.compile(argument), graph.call_name, graph.call_op_path)
             & ~scaler_read_calls(graph, con, fusable_only=False), changed)


def _no_wait(hit, changed):
    """The calls `hit` stop waiting for the GPU (their copies' own transfers stay: _keep_transfers)."""
    changed["call_wait"][hit] = -1
    changed.setdefault(_SYNCS_DROPPED, np.zeros(len(hit), dtype=bool))[hit] = True


def _fuse_optimizer(graph, argument, changed, con):
    fuse_optimizer(graph, argument, changed, con)
    _no_wait(scaler_read_calls(graph, con, fusable_only=True), changed)


def _drop_scaler_checks(graph, argument, changed, con):
    _no_wait(scaler_read_calls(graph, con, fusable_only=False), changed)


def _keep_transfers(graph, changed):
    """The calls drop-sync hit, once every fix has run, cost no more than their copies' own
    transfers as the fixes left those copies (one another fix dropped moves nothing; one pinned
    moves at the pinned pace): dropping a wait moves no data. In any order of the fixes."""
    hit = changed.pop(_SYNCS_DROPPED, None)
    if hit is not None:
        transfer = _own_transfer(graph, changed["item_dur"])
        changed["call_dur"][hit] = np.minimum(changed["call_dur"][hit], transfer[hit])


def _own_transfer(graph, item_dur):
    """ns of each copy call that are its copies' own transfer, not a wait: its GPU copies'
    durations; in a trace with no GPU copy recorded, all of a copy call's time (nothing there tells
    its wait from its transfer) but a scalar read's, which moves one element; 0 for other calls."""
    transfer = np.zeros(len(graph.call_lane), dtype=np.int64)
    copy_call = _found_in(lambda name: "memcpy" in name.lower(), graph.call_name)
    launched = graph.item_launch >= 0
    copies = launched & (graph.item_kind == "memcpy")
    copies[copies] = copy_call[graph.item_launch[copies]]  # a graph launch's copy nodes are no call's copy
    np.add.at(transfer, graph.item_launch[copies], item_dur[copies])
    if not (graph.item_kind == "memcpy").any():
        scalar = _found_in(lambda path: _SCALAR_READ in path, graph.call_op_path)
        kept = copy_call & ~scalar
        transfer[kept] = graph.call_dur[kept]
    return transfer


def _no_profiler(graph, argument, changed, con):
    per_op_us = float(argument) if argument else _estimated_cost(graph, con)
    # the ops in a gap, and those of them in its lag after a handoff (the thread's own work there)
    for times, ops in (("call_gap", graph.call_ops), ("call_lag", graph.call_lag_ops)):
        changed[times][:] = np.maximum(changed[times] - (per_op_us * 1000 * ops).astype(np.int64), 0)
    # CUPTI records each kernel of a CUDA graph as it runs, so a traced graph launch costs per kernel
    # (117 µs for 80 kernels, 394 for 251 on the H200's host); without the profiler it costs about
    # one launch, as cuda-graph takes it
    graph_launches = _found_in(lambda name: "graphlaunch" in name.lower(), graph.call_name)
    if graph_launches.any():
        changed["call_dur"][graph_launches] = np.minimum(changed["call_dur"][graph_launches], _launch_cost(graph))


def _estimated_cost(graph, con):
    if con is None:
        raise TracekitError("no-profiler without a cost needs the trace's database to estimate it")
    per_op_us = cost_per_op_us(con, graph.trace)
    if per_op_us is None:
        raise TracekitError(f"no-profiler: {graph.trace} has fewer than {MIN_GAPS} gaps between ops that C++ "
                            "calls back to back, too few to estimate the profiler's cost from; give it: no-profiler:US")
    return per_op_us


_US = r"(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)"  # a time in µs: 3183, 2.5, 1e3, 1e-3
_GAP_RANGE = re.compile(f"{_US}(?:-{_US})?")


def _gap_range(argument):
    """(least, most) µs of `drop-cpu-gaps`'s argument, US or US-US (most: inf for one); ValueError
    where it is neither, or not above 0, or the range runs backwards."""
    found = _GAP_RANGE.fullmatch(argument)
    if not found:
        raise ValueError(argument)
    least = float(found[1])
    most = float(found[2]) if found[2] is not None else float("inf")
    if not 0 < least <= most:
        raise ValueError(argument)
    return least, most


def _drop_cpu_gaps(graph, argument, changed, con):
    # the trace's own stretches of that length, whatever fixes ran first
    least, most = _gap_range(argument)
    changed["call_gap"][(graph.call_gap >= least * 1000) & (graph.call_gap <= most * 1000)] = 0


def _drop_cpu(graph, argument, changed, con):
    """Each call's gap less the part of it the named ops (outermost) took on its thread."""
    ops = _outermost_ops(con, graph, argument)
    _drop_spans(graph, [((start, end), pid, tid, start, end) for (pid, tid), found in ops.items() for start, end in found],
                changed)


def _drop_host_ops(graph, argument, changed, con):
    """_drop_cpu for the ATen ops of at least `argument` µs that hold no runtime call and run in the
    user's code, not inside another op (an op that launched GPU work keeps its time, and so do the
    views and allocations inside it; Python and the optimizer's ranges are not work on host tensors)."""
    if con is None:
        raise TracekitError("drop-host-ops needs the trace's database")
    rows = con.execute(_HOST_OPS, [graph.trace, max(round(float(argument) * 1000), 1)]).fetchall()
    spans = [((pid, tid, start, end), pid, tid, start, end) for pid, tid, start, end in rows]
    hosts = {}
    for (pid, tid, start, end), _, lo, hi in calls_inside(graph, spans):
        if lo == hi:
            _merged(hosts.setdefault((pid, tid), []), start, end)
    _drop_spans(graph, [((start, end), pid, tid, start, end) for (pid, tid), found in hosts.items()
                        for start, end in found], changed)


# Where the fixes have dropped CPU time so far, {(pid, tid): (starts_ns, ends_ns)} in time order:
# two fixes that drop the same time (drop-cpu:dataloader and drop-host-ops over a DataLoader's
# collate) drop it once.
_DROPPED = "dropped_spans"


# ATen ops that are the user's own code's (none of their enclosing ops an op: a record_function range or
# ProfilerStep#N at most), computing, not reshaping a view of a tensor or allocating one.
_HOST_OPS = f"""
SELECT o.pid, o.tid, o.ts_ns, o.ts_ns + o.dur_ns FROM cpu_op_rows o JOIN trace_files t USING (trace_id)
LEFT JOIN cpu_op_rows p ON p.trace_id = o.trace_id AND p.op_id = o.parent_id
WHERE t.trace = ? AND o.name LIKE 'aten::%' AND o.dur_ns >= ?
  AND NOT regexp_matches(o.name, '{HOST_OP_EXCLUDED}')
  AND (p.op_id IS NULL OR p.cat = 'user_annotation' OR p.name LIKE 'ProfilerStep#%')
ORDER BY o.pid, o.tid, o.ts_ns
"""


def _drop_spans(graph, spans, changed):
    """Each call's gap less the part of it the spans ((key, pid, tid, start_ns, end_ns)) cover on its
    thread that no fix before dropped."""
    gaps, dropped = changed["call_gap"], changed[_DROPPED]
    pieces = [((start, end), pid, tid, start, end) for _, pid, tid, span_start, span_end in spans
              for start, end in _not_dropped(dropped.setdefault((pid, tid), ([], [])), span_start, span_end)]
    for (op_start, op_end), on_lane, lo, hi in calls_inside(graph, pieces):
        # the calls whose gap (from the call before's end to their own start) the op can overlap
        calls = on_lane[lo:min(hi + 1, len(on_lane))]
        if not len(calls):
            continue
        before = np.maximum(np.searchsorted(on_lane, calls) - 1, 0)
        gap_start = np.where(calls == on_lane[0], graph.call_ts[calls],
                             graph.call_ts[on_lane[before]] + graph.call_dur[on_lane[before]])
        overlap = np.clip(np.minimum(graph.call_ts[calls], op_end) - np.maximum(gap_start, op_start), 0, None)
        gaps[calls] = np.maximum(gaps[calls] - overlap, 0)


def _not_dropped(dropped, start, end):
    """The parts of (start, end) outside a thread's dropped spans, `dropped` (their starts and ends,
    sorted and disjoint), which then take it in: two binary searches, not a pass over every span."""
    starts, ends = dropped
    first, past = bisect.bisect_right(ends, start), bisect.bisect_left(starts, end)
    pieces, at = [], start
    for lo, hi in zip(starts[first:past], ends[first:past]):
        if lo > at:
            pieces.append((at, lo))
        at = max(at, hi)
    if at < end:
        pieces.append((at, end))
    if first < past:
        start, end = min(start, starts[first]), max(end, ends[past - 1])
    starts[first:past], ends[first:past] = [start], [end]
    return pieces


def _merged(spans, start, end):
    """Adds (start, end) to a thread's spans in time order, into the one before where inside it."""
    if spans and start < spans[-1][1]:
        spans[-1] = (spans[-1][0], max(spans[-1][1], end))
    else:
        spans.append((start, end))


def _outermost_ops(con, graph, argument):
    """{(pid, tid): [(start_ns, end_ns)]} of the ops whose name `argument` finds, none inside another."""
    if con is None:
        raise TracekitError("drop-cpu needs the trace's database")
    rows = con.execute(
        """SELECT o.pid, o.tid, o.ts_ns, o.ts_ns + o.dur_ns FROM cpu_op_rows o JOIN trace_files t USING (trace_id)
           WHERE t.trace = ? AND regexp_matches(o.name, ?) AND o.dur_ns > 0 ORDER BY o.pid, o.tid, o.ts_ns""",
        [graph.trace, argument]).fetchall()
    found = {}
    for pid, tid, start, end in rows:
        _merged(found.setdefault((pid, tid), []), start, end)  # one inside the one before: counted there
    return found


def _tensor_cores(graph, argument, changed, con):
    chosen = (graph.item_math_unit == "simt") & (graph.item_roofline >= 0)
    if FUSED in changed:  # a fused kernel's time is its own, whichever of the two fixes ran first
        chosen &= ~changed[FUSED]
    if argument:
        chosen &= _matching(re.compile(argument), graph.item_name, graph.item_op_path)
    on_tensor_cores = tensor_core_ns(graph.item_roofline[chosen], graph.item_flops[chosen], graph.item_aligned[chosen],
                                     graph.item_bf16_peak_ns[chosen])
    changed["item_dur"][chosen] = np.minimum(changed["item_dur"][chosen], on_tensor_cores)


def _pageable(graph, argument):
    """The copies from or to pageable host memory (Kineto names them so), those REGEX finds."""
    pageable = np.array(["pageable" in (name or "").lower() for name in graph.item_name], dtype=bool)
    if argument:
        pageable &= _matching(re.compile(argument), graph.item_name, graph.item_op_path)
    return pageable


def _pin_copies(graph, argument, changed, con):
    pageable = _pageable(graph, argument)
    for direction in np.unique(graph.item_copy_kind[pageable]):
        these = pageable & (graph.item_copy_kind == direction) & (graph.item_bytes > 0)
        per_ns = _pinned_bytes_per_ns(graph, con, direction, pageable)
        if per_ns is None:
            raise TracekitError(f"pin-copies: no pinned {direction} copy in the trace and no figure for its "
                                "GPU's host link (tracekit/replay/host_links.csv)")
        changed["item_dur"][these] = np.minimum(changed["item_dur"][these],
                                                (graph.item_bytes[these] / per_ns).astype(np.int64))
    # A pinned, non_blocking copy's call only queues it: it returns as a launch does.
    launches = np.unique(graph.item_launch[pageable & (graph.item_launch >= 0)])
    changed["call_dur"][launches] = _launch_cost(graph)
    changed["call_wait"][launches] = -1


def _pinned_bytes_per_ns(graph, con, direction, pageable):
    pinned = ~pageable & (graph.item_copy_kind == direction) & (graph.item_bytes >= _PINNED_SAMPLE_BYTES) \
        & (graph.item_dur > 0)
    if pinned.any():
        return float(np.max(graph.item_bytes[pinned] / graph.item_dur[pinned]))
    device = con.execute("SELECT device_name FROM trace_files WHERE trace = ?", [graph.trace]).fetchone() \
        if con is not None else None
    for pattern, gb_s in _host_links():
        if device and device[0] and re.search(pattern, device[0]):
            return gb_s  # GB/s is bytes per ns
    return None


def _host_links():
    """(name pattern, GB/s one way) of each GPU's link to the host, longest pattern first."""
    text = resources.files("tracekit.replay").joinpath("host_links.csv").read_text(encoding="utf-8")
    rows = [(r["name_pattern"], float(r["gb_s_one_way"])) for r in csv.DictReader(text.splitlines())]
    return sorted(rows, key=lambda row: -len(row[0]))


def _launch_cost(graph):
    """What one launch costs the CPU in this trace: the median kernel launch call."""
    launches = _found_in(lambda name: "launchkernel" in name.lower(), graph.call_name) & (graph.call_wait < 0)
    return np.int64(np.median(graph.call_dur[launches])) if launches.any() else np.int64(5_000)


# ns from one kernel of a CUDA graph to the next on its stream, queued: 0.29-0.45 µs in the graphs of
# the H100 and H200 captures (tests/data/h100/fix_rounds*, model_pairs; tests/data/h200/fixes), the
# larger taken; launched one by one on a stream, queued kernels run 1.0-2.1 µs apart there.
GRAPH_NODE_GAP_NS = 450
MIN_GRAPH_GAPS = 10  # fewer queued graph kernels than this and their median is a few kernels', not the GPU's


def graph_node_gap(graph):
    """ns between queued kernels of a CUDA graph: the median the trace's own graph launches show,
    else GRAPH_NODE_GAP_NS."""
    from_graph = _found_in(lambda name: "graphlaunch" in name.lower(), graph.call_name)
    launch = graph.item_launch
    ours = (launch >= 0) & from_graph[np.maximum(launch, 0)] if len(from_graph) else np.zeros(len(launch), bool)
    queued = ours & ~graph.item_idle_before & np.r_[False, launch[1:] == launch[:-1]] \
        & np.r_[False, graph.item_lane[1:] == graph.item_lane[:-1]]
    return np.int64(np.median(graph.item_gap[queued])) if queued.sum() >= MIN_GRAPH_GAPS else np.int64(GRAPH_NODE_GAP_NS)


def _cuda_graph(graph, argument, changed, con):
    """Within each steady step (a graph is captured after the warm-up), on each thread, the calls
    after its first launch and up to its last that do not wait for the GPU cost nothing, their
    gaps and their lags after another thread's call too; the step's first launch costs one launch
    (the graph's), and the GPU work they launch runs as a graph's nodes do, queued at
    graph_node_gap apart. Another thread's launches (autograd's backward) are the same graph's: the
    lag before its first one goes too."""
    if not len(graph.call_lane):  # GPU work alone (a trace of CUDA activities only): no launch to graph
        return
    launching = np.zeros(len(graph.call_lane), dtype=bool)
    launching[graph.item_launch[graph.item_launch >= 0]] = True
    place = np.arange(len(graph.call_lane))
    cost = _launch_cost(graph)
    in_graph = np.zeros(len(graph.call_lane), dtype=bool)
    # the thread's own time before each call: after another thread's call, the lag (the rest of its
    # gap was waiting for that call)
    own_stretch = np.where(graph.call_after >= 0, np.minimum(graph.call_gap, graph.call_lag), graph.call_gap)
    for step in graph.steps:
        if step["step"] not in graph.steady:
            continue
        window = (graph.call_ts >= step["ts_ns"]) & (graph.call_ts < step["end_ns"])
        if not (window & launching).any():
            continue
        # the thread that launches the graph: the step's, else the one whose launch comes first
        graph_lane = step["lane"] if step["lane"] >= 0 else graph.call_lane[np.flatnonzero(window & launching)[0]]
        for lane in np.unique(graph.call_lane[window & launching]):
            launches = np.flatnonzero(window & launching & (graph.call_lane == lane))
            # (a launch held by a full queue is a launch: a graph's kernels take no place in it one by one)
            inside = window & (graph.call_lane == lane) & (place > launches[0]) & (place <= launches[-1]) \
                & ((changed["call_wait"] < 0) | graph.call_held)
            if argument:
                inside &= own_stretch < float(argument) * 1000  # the trace's own stretches, whatever fixes ran first
            changed["call_dur"][inside] = 0
            changed["call_gap"][inside] = 0
            changed["call_lag"][inside] = 0
            changed["call_wait"][inside & graph.call_held] = -1
            first = launches[0]
            if graph.call_held[first]:
                changed["call_wait"][first] = -1
            changed["call_dur"][first] = cost if lane == graph_lane else 0
            # another thread handed its work by the graph's (autograd's, after backward()): its own
            # start after the handoff is the graph's; a gap of its own without a handoff stays
            if lane != graph_lane and graph.call_after[first] >= 0 \
                    and not (argument and own_stretch[first] >= float(argument) * 1000):
                changed["call_lag"][first] = 0
            in_graph |= inside
            in_graph[first] = True
    launched_in_graph = (graph.item_launch >= 0) & in_graph[np.maximum(graph.item_launch, 0)]
    changed["item_gap"][launched_in_graph] = np.minimum(changed["item_gap"][launched_in_graph], graph_node_gap(graph))


def _matching(pattern, names, paths):
    """Whether `pattern` finds each node's name or op path."""
    return _found_in(pattern.search, names) | _found_in(pattern.search, paths)


def _found_in(test, texts):
    """Whether `test` holds for each of `texts` (None as '')."""
    # A trace repeats a few thousand names and op paths over its hundreds of thousands of nodes:
    # each distinct text is tested once.
    codes, distinct = _distinct(texts)
    if not len(codes):
        return np.zeros(0, dtype=bool)
    # (factorize makes a None NaN)
    return np.array([bool(test(text if isinstance(text, str) else "")) for text in distinct], dtype=bool)[codes]


_DISTINCT = collections.OrderedDict()  # id(texts) -> (texts, codes, distinct): the last few arrays read


def _distinct(texts):
    """(codes, distinct texts) of `texts`, kept for the next fix on the same array (the cache holds
    the array, so its id stays its own)."""
    key = id(texts)
    if key in _DISTINCT and _DISTINCT[key][0] is texts:
        _DISTINCT.move_to_end(key)
        return _DISTINCT[key][1:]
    codes, distinct = pd.factorize(texts, use_na_sentinel=False)
    _DISTINCT[key] = (texts, codes, distinct)
    while len(_DISTINCT) > 8:
        _DISTINCT.popitem(last=False)
    return codes, distinct


_APPLY = {
    "drop-copies": lambda graph, argument, changed, con: _drop_items(graph, argument, changed, con, copies_only=True),
    "drop": _drop_items, "drop-sync": _drop_sync, "drop-cpu-gaps": _drop_cpu_gaps, "drop-cpu": _drop_cpu, "drop-host-ops": _drop_host_ops,
    "tensor-cores": _tensor_cores, "pin-copies": _pin_copies, "prefetch-copies": _pin_copies, "cuda-graph": _cuda_graph,
    "fuse-attention": fuse_attention, "fuse-attention-chains": fuse_attention_chains, "fuse-optimizer": _fuse_optimizer,
    "drop-scaler-checks": _drop_scaler_checks, "fuse-elementwise": fuse_elementwise, "no-profiler": _no_profiler,
}
