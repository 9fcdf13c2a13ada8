"""The report's charts, drawn from its data: one function per chart, each an SVG with a fixed id.

Rows are always in the summary's order (fastest first by GPU time per step), so a variant sits on the same
line of every chart.
"""

from dataclasses import dataclass, field

import numpy as np

from tracekit.analysis.findings_engine import rules
from tracekit.outputs.report import charts, units
from tracekit.outputs.report.data import on_gpu, present, step_noun, timeline_wording, top_kernel_rows
from tracekit.outputs.report.timeline import MAX_BLOCKS, Lane, timeline_chart

GOOD, BAD = "#59a14f", "#e15759"
# Below this occupancy a kernel is drawn red: the low_occupancy rule's own threshold, so the
# chart and the findings agree and the number lives in one place (queries/findings/low_occupancy.sql).
LOW_OCCUPANCY_PCT = float(rules()["low_occupancy"].params["max_pct"][0])
WIDE = 960  # design width of a chart spanning the page; a narrow one is 560 (both shrink to fit)
# A trace without GPU work plots its CPU ops: the ops with the most time each get a colour, the
# rest share OTHER_OPS' grey.
CPU_OP_COLOURS = ["#9d7660", "#86bcb6", "#d37295", "#8cd17d", "#b6992d", "#a0cbe8"]
OTHER_OPS = "other CPU ops"
CPU_OP = "CPU op"  # the timeline's class of a CPU op (charts.CLASS_COLOURS holds its colour)


@dataclass
class Figure:
    id: str
    title: str
    caption: str
    svg: str
    wide: bool = False
    values: list = field(default_factory=list)  # the chart's values as text rows, the first the header


def _classes(data):
    """Every class of the data, in the legend's order (the colour table's, then others sorted)."""
    return charts.present_keys(list(charts.CLASS_COLOURS), set(data.by_class["kernel_class"]))


def _cpu_ops(data):
    """{op name: its legend key} of the CPU ops drawn: the CPU_OP_COLOURS ops with the most time
    over all traces by name, the others as OTHER_OPS."""
    ops = data.cpu_by_op.groupby("op")["us_per_step"].sum().sort_values(ascending=False, kind="stable")
    top = list(ops.index[:len(CPU_OP_COLOURS)])
    return {op: op if op in top else OTHER_OPS for op in ops.index}, dict(zip(top, CPU_OP_COLOURS))


def _cpu_segments(data, trace, keys):
    """The stacked segments of a trace without GPU work: CPU µs per step of each op drawn."""
    rows = data.cpu_by_op[data.cpu_by_op["trace"] == trace]
    summed = {}
    for r in rows.itertuples():
        summed[keys[r.op]] = summed.get(keys[r.op], 0.0) + float(r.us_per_step)
    return [(key, us, f"{trace} · {key}: {units.us(us)} of CPU per step") for key, us in summed.items()]


def gpu_by_class(data):
    stacks, noun = [], step_noun(data.summary)
    op_keys, op_colours = _cpu_ops(data)
    for r in data.summary.itertuples():
        if not on_gpu(r) and r.trace in set(data.cpu_by_op["trace"]):
            stacks.append(charts.Stack(r.trace, _cpu_segments(data, r.trace, op_keys),
                                       f"{units.us(r.cpu_us_per_step)} CPU"))
            continue
        rows = data.by_class[data.by_class["trace"] == r.trace]
        segments = [(c.kernel_class, c.us_per_step,
                     f"{r.trace} · {c.kernel_class}: {units.us(c.us_per_step)} per step "
                     f"({units.per_step(c.launches_per_step)} launch(es))") for c in rows.itertuples()]
        total = units.us(r.gpu_us_per_step) if present(r.gpu_us_per_step) else "no GPU work"
        stacks.append(charts.Stack(r.trace, segments, total))
    cpu = [s for s in stacks if s.text.endswith(" CPU")]
    title = _by_class_title(noun, len(cpu), len(stacks))
    keys = _classes(data) + [k for k in op_colours] + ([OTHER_OPS] if OTHER_OPS in op_keys.values() else [])
    colours = {**charts.CLASS_COLOURS, **op_colours, OTHER_OPS: charts.CLASS_COLOURS["unclassified"]}
    svg = charts.stacked_bar_chart("chart-gpu-by-class", title, stacks, keys, width=WIDE,
                                   tick_fmt=lambda v: f"{v:,.0f} µs", colours=colours)
    values = _class_values(data)
    caption = ("Sum of kernel, memcpy and memset durations per step, by kernel class; after each bar the "
               "GPU's busy time per step (concurrent streams counted once).")
    if cpu:
        caption = ("" if len(cpu) == len(stacks) else caption + " ") + (
            "A trace without GPU work shows its CPU time instead: the outermost CPU ops of each step (no op "
            "counted inside another), by op; after the bar its ProfilerStep's CPU time.")
    heading = title if cpu else f"GPU time per {noun}, by kernel class"
    return Figure("chart-gpu-by-class", heading, caption + (" The table under the chart lists every segment."
                                                          if values else ""), svg, wide=True, values=values)


def _by_class_title(noun, cpu, traces):
    if cpu == traces:
        return f"CPU time per {noun} by op (no trace has GPU work)"
    if cpu:
        return f"GPU time per {noun} by kernel class (CPU time by op where a trace has no GPU work)"
    return f"GPU time per {noun} by kernel class"


def _class_values(data):
    """Rows of the GPU-by-class chart as text: µs per step of each class the chart draws."""
    drawn = set(data.by_class.loc[data.by_class["us_per_step"] > 0, "kernel_class"])
    classes = [c for c in _classes(data) if c in drawn]
    if not classes:
        return []
    cells = {(r.trace, r.kernel_class): r.us_per_step for r in data.by_class.itertuples()}
    rows = [["trace"] + classes]
    for trace in data.order:
        rows.append([trace] + [units.us(cells[trace, c]) if (trace, c) in cells else "—" for c in classes])
    return rows


def _lanes(data):
    """One Lane per trace (the summary's order) from the timeline frame, as arrays: a trace
    without GPU work shows its outermost CPU ops (cpu_timeline)."""
    by_trace = {}
    for frame in (data.cpu_timeline, data.timeline):
        by_trace.update({trace: rows for trace, rows in frame.groupby("trace", sort=False)} if len(frame) else {})
    lanes = []
    for trace in data.order:
        events = by_trace.get(trace)
        if events is None or events.empty:
            lanes.append(Lane(trace, "no GPU work"))
            continue
        start, dur = events["start_us"].to_numpy(float), events["dur_us"].to_numpy(float)
        cls = events["kernel_class"].to_numpy(object)
        detail = np.full(len(events), "", dtype=object)
        copies = (cls == "memcpy") & events["bytes"].notna().to_numpy()
        detail[copies] = [f" · {units.bytes_text(b)}" for b in events["bytes"].to_numpy()[copies]]
        step = events["step"].iloc[0]
        where = f"step {int(step)}" if present(step) else "whole trace"
        where += " on the CPU" if cls[0] == CPU_OP else ""
        lanes.append(Lane(trace, f"{where} · {units.us(float(np.max(start + dur)))}", start, dur, cls,
                          events["name"].to_numpy(object), detail))
    return lanes


def timeline(data):
    lanes = _lanes(data)
    cpu = sum(1 for lane in lanes if lane.cls is not None and len(lane.cls) and lane.cls[0] == CPU_OP)
    title = ("One step per trace on the CPU (no trace has GPU work)" if cpu == len(lanes) else
             "One step per trace on the GPU (its CPU ops where a trace has no GPU work)" if cpu else
             "One step per trace on the GPU")
    drawn = timeline_chart("chart-timeline", title, lanes, list(charts.CLASS_COLOURS),
                           width=WIDE, tick_fmt=lambda v: f"{v:,.0f} µs")
    caption = (f"Each lane shows {timeline_wording(data.summary)}; time runs from its first GPU event. All lanes "
               "share one time axis, so lengths compare directly (a fused kernel is a short block). A block "
               "wide enough is labelled with its kernel.")
    if cpu:
        caption += (" A trace without GPU work shows the outermost CPU ops of its median steady step instead, "
                    "labelled with the op, from its first op.")
    if drawn.blocks < drawn.events:
        caption += (f" Downsampled: {drawn.events:,} GPU events drawn as {drawn.blocks:,} block(s) (at most "
                    f"{MAX_BLOCKS:,}); neighbours of one class less than a pixel apart are merged, and where that "
                    "is not enough each few-pixel column is one block in the colour of its busiest class.")
    return Figure("chart-timeline", "Timeline of one step per trace", caption, drawn.svg, wide=True)


# What a bar says where summary's figure is NULL: unknown (a trace that lost its GPU events, copies
# of no recorded size: the anomalies query says which).
LOST = "unknown (see anomalies)"


def _known(value):
    """A summary figure as a bar's value, None where it is NULL (NaN or NA in the frame)."""
    import pandas as pd

    return None if pd.isna(value) else float(value)


def kernels_per_step(data):
    bars = [charts.Bar(r.trace, _known(r.kernels_per_step),
                       units.per_step(r.kernels_per_step) if _known(r.kernels_per_step) is not None else LOST,
                       f"{r.trace}: {units.per_step(r.kernels_per_step)} kernel launches per step"
                       if _known(r.kernels_per_step) is not None else f"{r.trace}: {LOST}")
            for r in data.summary.itertuples()]
    svg = charts.bar_chart("chart-kernels-per-step", f"Kernel launches per {step_noun(data.summary)}", bars)
    return Figure("chart-kernels-per-step", "Kernels per step",
                  "Kernel launches per step: each is a launch the CPU pays for.", svg)


def _byte_unit(largest):
    """(divisor, name) of the binary unit the axis of a byte chart counts in."""
    for power, name in enumerate(("B", "KiB", "MiB", "GiB")):
        if largest < 1024 ** (power + 1) or name == "GiB":
            return 1024 ** power, name
    return 1, "B"


def memcpy_bytes(data):
    divisor, unit = _byte_unit(float(data.summary["memcpy_bytes_per_step"].max() or 0))
    bars = []
    for r in data.summary.itertuples():
        if _known(r.memcpy_bytes_per_step) is None:
            bars.append(charts.Bar(r.trace, None, LOST, f"{r.trace}: {LOST}", BAD))
            continue
        bars.append(charts.Bar(r.trace, float(r.memcpy_bytes_per_step) / divisor,
                               units.bytes_text(r.memcpy_bytes_per_step),
                               f"{r.trace}: {units.per_step(r.memcpy_per_step)} memcpy per step, "
                               f"{units.bytes_text(r.memcpy_bytes_per_step)}", BAD))
    svg = charts.bar_chart("chart-memcpy-bytes", f"Bytes copied by memcpy per {step_noun(data.summary)}", bars,
                           tick_fmt=lambda v: f"{v:,.0f} {unit}" if float(v).is_integer() else f"{v:,.1f} {unit}")
    return Figure("chart-memcpy-bytes", "Memcpy bytes per step",
                  "Device memory copied per step (any direction).", svg)


def tensor_core_share(data):
    gemm = data.gemm.set_index("trace")
    stacks = []
    for trace in data.order:
        if trace not in gemm.index:
            stacks.append(charts.Stack(trace, [], "no GEMM kernels"))
            continue
        g = gemm.loc[trace]
        share = float(g.tensor_core_pct)
        segments = [("Tensor Core", share, f"{trace}: {units.us(g.tensor_core_us)} of GEMM time on Tensor Cores "
                                           f"({int(g.tensor_core_gemms)} launches)"),
                    ("FP32 SIMT", 100 - share, f"{trace}: {units.us(g.simt_us)} of GEMM time as FP32 SIMT "
                                               f"({int(g.simt_gemms)} launches)")]
        stacks.append(charts.Stack(trace, segments, f"{units.pct(share)} Tensor Core"))
    svg = charts.stacked_bar_chart("chart-tensor-core", "Share of GEMM time on Tensor Cores", stacks,
                                   ["Tensor Core", "FP32 SIMT"], width=560, top=100,
                                   tick_fmt=lambda v: f"{v:.0f}%",
                                   colours={"Tensor Core": GOOD, "FP32 SIMT": BAD})
    return Figure("chart-tensor-core", "Tensor Core share of GEMM time",
                  "GEMM time on Tensor Cores (green) and as plain FP32 SIMT on the CUDA cores (red).", svg)


def occupancy(data):
    bars = []
    for r in top_kernel_rows(data).itertuples():
        name = units.short_kernel(r.top_kernel)
        if not present(r.top_kernel):
            bars.append(charts.Bar(r.trace, None, "no kernels"))
        elif not present(r.occupancy_pct):
            bars.append(charts.Bar(r.trace, None, f"not known · {name}",
                                   f"{r.top_kernel}\nthe trace does not give its launch's registers, shared "
                                   "memory and block size, or the device's limits"))
        else:
            occ, limiter = float(r.occupancy_pct), str(r.occupancy_limiter).replace("_", " ")
            bars.append(charts.Bar(r.trace, occ, f"{units.occupancy(occ)} · {name}",
                                   f"{r.top_kernel}\n{units.occupancy(occ)} theoretical occupancy, limited by {limiter}",
                                   BAD if occ < LOW_OCCUPANCY_PCT else charts.ACCENT))
    svg = charts.bar_chart("chart-occupancy", "Theoretical occupancy of each variant's top kernel", bars,
                           top=100, tick_fmt=lambda v: f"{v:.0f}%", width=WIDE)
    return Figure("chart-occupancy", "Occupancy of each variant's top kernel",
                  "The occupancy the launch of the kernel with the most GPU time allows (its registers, shared "
                  "memory and block size against the SM's limits): the figure the low_occupancy findings give "
                  f"and the table's occupancy column; red below {LOW_OCCUPANCY_PCT:.0f}%.", svg, wide=True)


def cudnn_plan(data):
    rows = [(p.trace, [float(p.first_call_ms), float(p.steady_call_ms) if present(p.steady_call_ms) else None],
             [f"{p.trace}: first call {units.ms(p.first_call_ms)}", f"{p.trace}: steady call {units.ms(p.steady_call_ms)}"])
            for p in data.plans.itertuples()]
    svg = charts.log_pair_chart("chart-cudnn-plan", "cuDNN attention: first call against a steady call", rows,
                                [("first call", BAD), ("steady call", GOOD)], empty_text="no trace calls cuDNN attention")
    return Figure("chart-cudnn-plan", "cuDNN first call against a steady call",
                  "CPU time of the first cuDNN attention call (which builds the plan) and the median "
                  "of the later calls. Log scale.", svg)


def figures(data):
    """Every chart of the report, in page order; where no trace has GPU work, the charts of GPU
    work alone (kernels, copies, Tensor Cores, cuDNN, occupancy) are left out, and the first
    chart's caption says so."""
    first = [gpu_by_class(data), timeline(data)]
    if not any(on_gpu(r) for r in data.summary.itertuples()):
        first[0].caption += (" No trace has GPU work: the charts of kernel launches, memcpy bytes, Tensor Core "
                             "share, cuDNN plans and occupancy are left out.")
        return first
    return first + [kernels_per_step(data), memcpy_bytes(data), tensor_core_share(data), cudnn_plan(data),
                    occupancy(data)]
