"""The findings, in plain words, computed from the report's data: nothing here is fixed text
about particular variants, so loading other traces gives other findings.
"""

from dataclasses import dataclass, field

from tracekit.report import units
from tracekit.report.data import present, top_kernel_rows

# Below this estimated occupancy a kernel leaves most of each SM's warp slots empty.
LOW_OCCUPANCY_PCT = 25.0


@dataclass
class Finding:
    topic: str       # stable key: speed, memcpy, gemm, occupancy, cudnn, kernels
    title: str       # the finding in one sentence
    lines: list = field(default_factory=list)  # the evidence, one line per trace or group
    tone: str = "info"  # good, bad or info: how the page colours it


def findings(data):
    """Every finding for `data` (a ReportData), in the order the page shows them."""
    return [_speed(data), _memcpy(data), _gemm(data), _occupancy(data), _cudnn(data), _kernels(data)]


def _speed(data):
    rows = data.summary[data.summary["gpu_us_per_step"] > 0]
    idle = [t for t in data.order if t not in set(rows["trace"])]
    if rows.empty:
        return Finding("speed", "No trace ran any GPU work.", [f"{t}: no kernels" for t in idle])
    best, worst = rows.iloc[0], rows.iloc[-1]
    title = f"{best.trace} is the fastest: {units.us(best.gpu_us_per_step)} of GPU time per step"
    lines = []
    if present(best.speedup_vs_naive) and best.variant != "naive":
        naive = data.summary[data.summary["variant"] == "naive"].iloc[0]
        title += f", {units.times(best.speedup_vs_naive)} faster than naive ({units.us(naive.gpu_us_per_step)})"
        ups = [f"{r.trace} {units.times(r.speedup_vs_naive)}" + (" (slower)" if r.speedup_vs_naive < 1 else "")
               for r in rows.itertuples() if present(r.speedup_vs_naive) and r.variant != "naive"]
        lines.append("Speed-up against naive: " + ", ".join(ups) + ".")
    elif not rows["speedup_vs_naive"].notna().any():
        lines.append("No naive trace of the same shape is loaded, so there is no speed-up against naive.")
    title += "."
    if len(rows) > 1:
        lines.append(f"Slowest: {worst.trace} at {units.us(worst.gpu_us_per_step)} per step, "
                     f"{units.times(worst.gpu_us_per_step / best.gpu_us_per_step)} the time of {best.trace}.")
    lines += [f"{t}: no GPU work in its steady steps." for t in idle]
    return Finding("speed", title, lines, "good")


def _memcpy_line(trace, steady, cold):
    if steady.empty:
        if cold.empty:
            return f"{trace}: none"
        causes = units.join_names(sorted({units.first_op(c) or "an unknown op" for c in cold["caused_by"]}))
        return (f"{trace}: none in the steady steps ({int(cold['memcpy_count'].sum())} copies outside them, "
                f"{units.bytes_text(cold['memcpy_bytes'].sum())} in all, from {causes})")
    parts = []
    for r in steady.itertuples():
        count = r.memcpy_count / r.steps
        each = units.bytes_text(r.memcpy_bytes / r.memcpy_count)
        cause = units.first_op(r.caused_by) or "no recorded CPU op"
        via = units.rest_of_chain(r.caused_by)
        parts.append(f"{units.per_step(count)} Memcpy {r.kind or ''} of {each} per step from {cause}"
                     + (f" (via {via})" if via else "")
                     + f", {units.us(r.memcpy_us / r.steps)} of GPU time per step")
    return f"{trace}: " + "; ".join(parts)


def _memcpy(data):
    with_copies = set(data.steady_memcpy["trace"])
    lines = []
    # Traces that copy come first: they are the finding.
    for trace in sorted(data.order, key=lambda t: t not in with_copies):
        steady = data.steady_memcpy[data.steady_memcpy["trace"] == trace]
        cold = data.memcpy[(data.memcpy["trace"] == trace) & (data.memcpy["memcpy_count"] > 0)]
        lines.append(_memcpy_line(trace, steady, cold))
    if not with_copies:
        return Finding("memcpy", "No variant copies memory in its steady steps.", lines, "good")
    names = [t for t in data.order if t in with_copies]
    biggest = data.steady_memcpy.assign(per=lambda f: f["memcpy_bytes"] / f["steps"]) \
        .groupby("trace")["per"].sum().max()
    title = (f"{units.join_names(names)} {'copies' if len(names) == 1 else 'copy'} memory on the GPU "
             f"every step (up to {units.bytes_text(biggest)} per step).")
    return Finding("memcpy", title, lines, "bad")


def _gemm(data):
    gemm = data.gemm.set_index("trace")
    lines, simt = [], []
    for trace in data.order:
        if trace not in gemm.index:
            continue
        r = gemm.loc[trace]
        total = int(r.tensor_core_gemms + r.simt_gemms)
        if r.simt_gemms > 0:
            simt.append(trace)
            lines.append(f"{trace}: {int(r.simt_gemms)} of {total} GEMM launches ran as plain FP32 SIMT on the "
                         f"CUDA cores ({units.us(r.simt_us)} in all, {units.pct(r.tensor_core_pct)} of GEMM time "
                         f"on Tensor Cores): {', '.join(units.short_kernel(k) for k in str(r.simt_kernels).split(' | '))}")
        else:
            lines.append(f"{trace}: all {total} GEMM launches on Tensor Cores "
                         f"({units.pct(r.tensor_core_pct)} of GEMM time)")
    without = [t for t in data.order if t not in gemm.index]
    if without:
        lines.append(f"No GEMM kernels: {', '.join(without)}.")
    if simt:
        return Finding("gemm", f"{units.join_names(simt)} {'runs its' if len(simt) == 1 else 'run their'} "
                               "GEMMs as FP32 SIMT, not on Tensor Cores.", lines, "bad")
    if gemm.empty:
        return Finding("gemm", "No trace runs a GEMM kernel.", lines)
    return Finding("gemm", "Every GEMM runs on Tensor Cores.", lines, "good")


def _occupancy(data):
    rows = top_kernel_rows(data)
    rows = rows[rows["top_kernel"].notna()]
    estimated = rows[rows["top_kernel_occupancy_pct"] > 0].sort_values(["top_kernel_occupancy_pct", "trace"])
    unknown = rows[~(rows["top_kernel_occupancy_pct"] > 0)]
    lines = []
    for r in estimated.itertuples():
        detail = []
        if present(r.registers_per_thread):
            detail.append(f"{int(r.registers_per_thread)} registers per thread")
        if present(r.shared_memory_bytes) and r.shared_memory_bytes > 0:
            detail.append(f"{units.bytes_text(r.shared_memory_bytes)} shared memory per block")
        if present(r.blocks_per_sm):
            detail.append(f"{r.blocks_per_sm:.1f} blocks per SM")
        lines.append(f"{r.trace}: top kernel {units.short_kernel(r.top_kernel)} at "
                     f"{units.pct(r.top_kernel_occupancy_pct)} estimated occupancy"
                     + (f" ({', '.join(detail)})" if detail else ""))
    if not unknown.empty:
        smem = [s for s in unknown["shared_memory_bytes"] if present(s) and s > 0]
        note = (f" (they use {units.bytes_text(min(smem))}–{units.bytes_text(max(smem))} of shared memory per block)"
                if len(smem) > 1 and min(smem) != max(smem) else "")
        lines.append(f"No estimate (recorded as 0% or missing) for the top kernels of {units.join_names(unknown['trace'])}{note}.")
    low = estimated[estimated["top_kernel_occupancy_pct"] < LOW_OCCUPANCY_PCT]
    if low.empty:
        title = ("No top kernel runs below " f"{LOW_OCCUPANCY_PCT:.0f}% estimated occupancy."
                 if not estimated.empty else "No occupancy estimate for any top kernel.")
        return Finding("occupancy", title, lines)
    parts = [f"{r.trace} ({units.pct(r.top_kernel_occupancy_pct)})" for r in low.itertuples()]
    return Finding("occupancy", f"Low occupancy of the top kernel: {units.join_names(parts)}.", lines, "bad")


def _cudnn(data):
    plans = data.plans.sort_values(["plan_ms", "trace"], ascending=[False, True])
    if plans.empty:
        return Finding("cudnn", "No trace calls cuDNN attention.", [])
    top = plans.iloc[0]
    lines = []
    for r in plans.itertuples():
        step = f", in step {int(r.first_call_step)}" if present(r.first_call_step) else ""
        line = (f"{r.trace}: first call {units.ms(r.first_call_ms)} on the CPU, steady call "
                f"{units.ms(r.steady_call_ms)}: {units.ms(r.plan_ms)} spent building the plan{step}")
        if r.trace != top.trace and r.plan_ms > 0:
            line += f" ({top.plan_ms / r.plan_ms:,.0f}× less than {top.trace})"
        lines.append(line)
    title = (f"{top.trace} spends {units.ms(top.plan_ms)} building its cuDNN plan on the first call, "
             f"then {units.ms(top.steady_call_ms)} per call.")
    return Finding("cudnn", title, lines, "bad" if top.plan_ms >= 100 else "info")


def _kernels(data):
    rows = data.summary
    groups = {}
    for r in rows.itertuples():
        groups.setdefault(units.per_step(r.kernels_per_step), []).append(r.trace)
    by_count = sorted(groups.items(), key=lambda kv: -float(kv[0]) if kv[0] != "—" else 0)
    busiest = rows.sort_values(["kernels_per_step", "trace"], ascending=[False, True]).iloc[0]
    if not busiest.kernels_per_step > 0:
        return Finding("kernels", "No trace launches GPU kernels in its steady steps.", [])
    mix = data.by_class[(data.by_class["trace"] == busiest.trace)
                        & ~data.by_class["kernel_class"].isin(["memcpy", "memset"])]
    mix = mix.sort_values(["launches_per_step", "kernel_class"], ascending=[False, True])
    detail = ", ".join(f"{units.per_step(r.launches_per_step)} {r.kernel_class}" for r in mix.itertuples())
    title = f"{busiest.trace} launches the most kernels: {units.per_step(busiest.kernels_per_step)} per step"
    title += f" ({detail})." if detail else "."
    lines = [f"{count} per step: {', '.join(names)}" for count, names in by_count]
    return Finding("kernels", title, lines, "bad" if busiest.kernels_per_step > 1 else "info")
