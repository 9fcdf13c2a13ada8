"""How close the Tensor Core GEMMs of real captures come to their roofline, by size and alignment: the
figures behind tracekit/replay/tensor_core_model.py (what `tensor-cores` replays a SIMT GEMM at).

Every GEMM kernel on Tensor Cores with a work model (FLOPs, bytes) in the GPU captures of tests/data and
sample_traces, less the captured fixes that the model is checked against (the "after" traces of the
simt_gemm pairs: TF32 and bf16 runs of loops whose fp32 runs the replay predicts). For each kernel its
efficiency (roofline time over its time) and its throughput as a share of its GPU's dense bf16 peak;
aligned: the last two dimensions of each of its op's matrix inputs make rows of a multiple of 16
bytes, 8 elements of 2 bytes or 4 fp32 ones on TF32 (cuBLAS's TMA-based kernels need them; an odd
dimension, as GPT-2's vocabulary of 50,257, sends it to older mma.sync kernels). Printed: per half decade of FLOPs, the median over traces of each trace's
median, for aligned GEMMs; and for unaligned ones, the share of the bf16 peak.

    python benchmarks/tensor_core_efficiency.py [--db /tmp/bench/tensor_cores.duckdb]
"""

import argparse
from pathlib import Path

import numpy as np

from tracekit.ingest.loader import load_file
from tracekit.replay.tensor_core_model import rows_aligned_sql
from tracekit.store.database import connect

ROOT = Path(__file__).resolve().parent.parent
# The captured fixes that tracekit's tensor-cores replay is checked against: left out of its calibration.
CHECKED_AGAINST = ("h200/fixes/infer_tf32", "h200/fixes/train_tf32", "h200/fixes/infer_sdpa_flash",
                   "h200/fixes/train_sdpa_flash", "h200/fp32_tf32/", "h100/model_pairs/gpt2_train_tf32",
                   "h100/model_pairs_b/gpt2_train_tf32", "h100/model_pairs_c/gpt2_train_bf16",
                   "h100/model_pairs_d/gpt2_train_tf32", "h200/model_pairs_e/gpt2_train_tf32")

_KERNELS = """
SELECT k.trace, k.flops, k.dur_us, k.roofline_us, k.achieved_tflops / sp.bf16_tflops AS bf16_share,
       CASE WHEN k.flops_dtype = 'float' THEN """ + rows_aligned_sql("o.input_dims", 4) + """
            ELSE """ + rows_aligned_sql("o.input_dims", 2) + """ END AS aligned
FROM kernels k JOIN trace_files t USING (trace) JOIN _trace_specs sp ON sp.trace_id = t.trace_id
LEFT JOIN cpu_op_rows o ON o.trace_id = t.trace_id AND o.op_id = k.cpu_op_id
WHERE k.work_family = 'gemm' AND k.math_unit = 'tensor_core' AND k.flops > 0 AND k.roofline_us > 0 AND k.dur_us > 0
"""


def captures():
    files = sorted((ROOT / "sample_traces").glob("*.json.gz")) + sorted((ROOT / "tests" / "data").glob("h*/**/*.json.gz"))
    return [f for f in files if not any(part in str(f.relative_to(ROOT / "tests" / "data" if "tests" in f.parts else ROOT))
                                        for part in CHECKED_AGAINST)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="/tmp/bench/tensor_cores.duckdb")
    parser.add_argument("--loaded", action="store_true", help="--db holds the captures already")
    args = parser.parse_args()
    Path(args.db).parent.mkdir(parents=True, exist_ok=True)
    files = captures()
    if not args.loaded:
        for suffix in ("", ".wal"):
            Path(args.db + suffix).unlink(missing_ok=True)
    con = connect(args.db)
    if not args.loaded:
        for file in files:
            load_file(con, file)
    frame = con.execute(_KERNELS).df()
    frame["efficiency"] = frame["roofline_us"] / frame["dur_us"]
    frame["bin"] = (np.log10(frame["flops"]) * 2).round() / 2
    captured = con.execute("SELECT count(*) FROM traces").fetchone()[0]
    print(f"{captured} captures, {len(frame):,} Tensor Core GEMM kernels, {int((frame['aligned'] == True).sum()):,} "  # noqa: E712
          f"aligned, {int(frame['aligned'].isna().sum()):,} of unknown shape (left out)\n")
    aligned = frame[frame["aligned"] == True]  # noqa: E712: a NULL (no shapes) is neither
    per_trace = aligned.groupby(["bin", "trace"])["efficiency"].median().reset_index()
    print("| log10 FLOPs | traces | kernels | efficiency (median of the traces') | least | most |")
    print("|---:|---:|---:|---:|---:|---:|")
    for b, group in per_trace.groupby("bin"):
        print(f"| {b:.1f} | {len(group)} | {int((aligned['bin'] == b).sum()):,} | {group['efficiency'].median():.2f} | "
              f"{group['efficiency'].min():.2f} | {group['efficiency'].max():.2f} |")
    unaligned = frame[frame["aligned"] == False]  # noqa: E712: a NULL (no shapes) is neither
    shares = unaligned.groupby("trace")["bf16_share"].median()
    print(f"\nunaligned: {len(unaligned):,} kernels in {len(shares)} traces; share of the bf16 peak, median of the "
          f"traces' {shares.median():.3f} (least {shares.min():.3f}, most {shares.max():.3f})")


if __name__ == "__main__":
    main()
