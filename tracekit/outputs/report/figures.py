"""The report's charts, drawn from its data: one function per chart, each an SVG with a fixed id.

Rows are always in the summary's order (fastest GPU step first), so a variant sits on the same
line of every chart.
"""

from dataclasses import dataclass

from tracekit.analysis.findings_engine import rules
from tracekit.outputs.report import charts, units
from tracekit.outputs.report.data import present, top_kernel_rows

GOOD, BAD = "#59a14f", "#e15759"
# Below this occupancy a kernel is drawn red: the low_occupancy rule's own threshold, so the
# chart and the findings agree and the number lives in one place (queries/findings/low_occupancy.sql).
LOW_OCCUPANCY_PCT = float(rules()["low_occupancy"].params["max_pct"][0])


@dataclass
class Figure:
    id: str
    title: str
    caption: str
    svg: str
    wide: bool = False


def _classes_present(data):
    present_classes = set(data.by_class["kernel_class"])
    known = [k for k in charts.CLASS_COLOURS if k in present_classes]
    return known + sorted(present_classes - set(known))


def gpu_by_class(data):
    stacks = []
    for r in data.summary.itertuples():
        rows = data.by_class[data.by_class["trace"] == r.trace]
        segments = [(c.kernel_class, c.us_per_step,
                     f"{r.trace} · {c.kernel_class}: {units.us(c.us_per_step)} per step "
                     f"({units.per_step(c.launches_per_step)} launch(es))") for c in rows.itertuples()]
        stacks.append(charts.Stack(r.trace, segments, units.us(r.gpu_us_per_step)))
    svg = charts.stacked_bar_chart("chart-gpu-by-class", "GPU time per steady step by kernel class",
                                   stacks, _classes_present(data), tick_fmt=lambda v: f"{v:,.0f} µs")
    return Figure("chart-gpu-by-class", "GPU time per steady step, by kernel class",
                  "Sum of kernel, memcpy and memset durations per step, mean over the steady steps. "
                  "Hover a segment for its time.", svg, wide=True)


def timeline(data):
    rows = []
    for trace in data.order:
        events = data.timeline[data.timeline["trace"] == trace]
        lanes = []
        for e in events.itertuples():
            extra = f" · {units.bytes_text(e.bytes)}" if present(e.bytes) and e.kernel_class == "memcpy" else ""
            tip = (f"{e.name}\n{e.kernel_class}{extra} · starts at +{e.start_us:,.1f} µs · "
                   f"lasts {units.us(e.dur_us)}")
            lanes.append((e.start_us, e.dur_us, e.kernel_class, tip))
        span = max((s + d for s, d, _, _ in lanes), default=0.0)
        step = events["step"].iloc[0] if not events.empty else None
        note = f"{'step ' + str(int(step)) if present(step) else 'all'} · {units.us(span)}" if lanes else "no GPU work"
        rows.append((trace, note, lanes))
    svg = charts.timeline_chart("chart-timeline", "One steady step per variant on the GPU", rows,
                                _classes_present(data), tick_fmt=lambda v: f"{v:,.0f} µs")
    return Figure("chart-timeline", "Timeline of one steady step",
                  "Each lane is the steady step with the median GPU time of one variant; time runs from "
                  "the step's first GPU event. All lanes share one time axis, so lengths compare "
                  "directly (a fused kernel is a short block). Hover a block for its kernel.", svg, wide=True)


def kernels_per_step(data):
    bars = [charts.Bar(r.trace, float(r.kernels_per_step), units.per_step(r.kernels_per_step),
                       f"{r.trace}: {units.per_step(r.kernels_per_step)} kernel launches per step")
            for r in data.summary.itertuples()]
    svg = charts.bar_chart("chart-kernels-per-step", "Kernel launches per steady step", bars)
    return Figure("chart-kernels-per-step", "Kernels per step",
                  "Kernel launches per steady step: each is a launch the CPU pays for.", svg)


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
        bars.append(charts.Bar(r.trace, float(r.memcpy_bytes_per_step) / divisor,
                               units.bytes_text(r.memcpy_bytes_per_step),
                               f"{r.trace}: {units.per_step(r.memcpy_per_step)} memcpy per step, "
                               f"{units.bytes_text(r.memcpy_bytes_per_step)}", BAD))
    svg = charts.bar_chart("chart-memcpy-bytes", "Bytes copied by memcpy per steady step", bars,
                           tick_fmt=lambda v: f"{v:,.0f} {unit}" if float(v).is_integer() else f"{v:,.1f} {unit}")
    return Figure("chart-memcpy-bytes", "Memcpy bytes per step",
                  "Device memory copied per steady step (any direction).", svg)


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
        elif not r.top_kernel_occupancy_pct > 0:
            bars.append(charts.Bar(r.trace, None, f"no estimate · {name}",
                                   f"{r.top_kernel}\nthe profiler recorded 0% (no estimate)"))
        else:
            occ = float(r.top_kernel_occupancy_pct)
            bars.append(charts.Bar(r.trace, occ, f"{units.pct(occ)} · {name}",
                                   f"{r.top_kernel}\n{units.pct(occ)} estimated achieved occupancy",
                                   BAD if occ < LOW_OCCUPANCY_PCT else charts.ACCENT))
    svg = charts.bar_chart("chart-occupancy", "Estimated occupancy of each variant's top kernel", bars,
                           top=100, tick_fmt=lambda v: f"{v:.0f}%", width=1100)
    return Figure("chart-occupancy", "Occupancy of each variant's top kernel",
                  f"The profiler's estimated achieved occupancy of the kernel with the most GPU time; "
                  f"red below {LOW_OCCUPANCY_PCT:.0f}%.", svg, wide=True)


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
    """Every chart of the report, in page order."""
    return [gpu_by_class(data), timeline(data), kernels_per_step(data), memcpy_bytes(data),
            tensor_core_share(data), cudnn_plan(data), occupancy(data)]
