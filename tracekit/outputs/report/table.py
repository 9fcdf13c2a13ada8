"""The comparative table (named query `summary`) as display text, shared by HTML and markdown."""

from dataclasses import dataclass

import pandas as pd

from tracekit.outputs.report import units
from tracekit.outputs.report.data import present


@dataclass
class Column:
    key: str        # column of the summary (or a derived one)
    header: str
    text: object    # value -> display text
    numeric: bool = True
    help: str = ""
    optional: bool = False  # left out of a table where no row has a value


def _tflops(row, metadata, counted):
    """Achieved TFLOP/s over the GPU time per step: of the capture's attention FLOPs per call (one
    call a step: the work the variants share), else of the FLOPs counted on the trace's kernels."""
    flops = (metadata.get(row["trace"]) or {}).get("flops_per_call") or counted.get(row["trace"])
    if not flops or not row["gpu_us_per_step"] > 0:
        return None
    return float(flops) / (row["gpu_us_per_step"] * 1e-6) / 1e12


COLUMNS = [
    Column("trace", "variant", str, numeric=False, help="trace name"),
    Column("gpu_us_per_step", "GPU µs / step", lambda v: units.number(v),
           help="kernels + memcpy + memset per step"),
    Column("speedup_vs_naive", "vs naive", units.times,
           help="the GPU time per step of the naive trace of the same shape and device over this one's "
                "(CPU time for traces without GPU work)", optional=True),
    Column("tflops", "TFLOP/s", lambda v: units.number(v, 0) if present(v) else "—",
           help="FLOPs over GPU time per step: the capture's attention FLOPs per call (4·B·H·S²·D, halved "
                "when causal), else those counted on the trace's GEMM and fused attention kernels from "
                "their recorded shapes", optional=True),
    Column("kernels_per_step", "kernels / step", units.per_step),
    Column("cpu_us_per_step", "CPU µs / step", lambda v: units.number(v), help="ProfilerStep span"),
    Column("memcpy_per_step", "memcpy / step", units.per_step),
    Column("memcpy_bytes_per_step", "memcpy bytes / step", units.bytes_text),
    Column("tensor_core_pct", "Tensor Core %", units.pct,
           help="share of GEMM, convolution and attention time on Tensor Cores"),
    Column("top_kernel", "top kernel", units.short_kernel, numeric=False),
    Column("occupancy_pct", "occupancy", units.occupancy,
           help="the occupancy the top kernel's launch allows (registers, shared memory and block size "
                "against the SM's limits), as the low_occupancy finding gives it (— : not known)"),
    Column("plan_ms", "cuDNN plan", units.ms, help="first-call plan time", optional=True),
    Column("peak_mib", "peak MiB", lambda v: units.number(v, 2),
           help="the most memory allocated at once in a steady step, on the GPU (else the CPU): Kineto's "
                "Total Allocated, recorded with --profile-memory (view memory_steps)", optional=True),
]


def shown_columns(frame):
    """COLUMNS less the optional ones no row of `frame` has a value in: no "vs naive" column
    without a naive trace of some trace's shape, no TFLOP/s where no FLOPs are known."""
    return [c for c in COLUMNS if not c.optional or frame[c.key].map(present).any()]


def table_frame(data):
    """The summary with the derived columns of COLUMNS, fastest first (raw values)."""
    frame = data.summary.copy()
    metadata = {t.trace: t.metadata if isinstance(t.metadata, dict) else None for t in data.traces.itertuples()}
    counted = dict(zip(data.flops["trace"], data.flops["flops_per_step"]))
    frame["tflops"] = [_tflops(row, metadata, counted) for _, row in frame.iterrows()]
    # summary's share covers the steady steps only; gemm_classes' (all of the trace) fills a gap.
    shares = dict(zip(data.gemm["trace"], data.gemm["tensor_core_pct"]))
    frame["tensor_core_pct"] = [v if present(v) else shares.get(t) for t, v in
                                zip(frame["trace"], frame["tensor_core_pct"])]
    launches = data.launch_occupancy
    occupancy = dict(zip(zip(launches["trace"], launches["kernel"]), launches["occupancy_pct"]))
    frame["occupancy_pct"] = [occupancy.get((t, k)) for t, k in zip(frame["trace"], frame["top_kernel"])]
    return frame


def display_frame(data):
    """The table as text cells, one column per COLUMNS entry, headed by its header."""
    frame = table_frame(data)
    shown = {c.header: [c.text(v) for v in frame[c.key]] for c in shown_columns(frame)}
    return pd.DataFrame(shown)
