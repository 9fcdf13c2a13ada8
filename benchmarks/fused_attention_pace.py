"""The pace of a fused attention kernel against the GEMMs of the attention it replaces.

For each captured pair of an unfused attention (SDPA's math backend, or a model's own chain of
matmul, mask, softmax, matmul) and the same loop on a fused backend (flash, cuDNN or
memory-efficient), on H100s and an H200: per step, the fused kernels' time in the fixed loop's
trace, forward and backward (the kernels launched under scaled_dot_product_attention and its
backward node), against the chains' GEMMs in the unfused loop's trace: their FLOPs at the Tensor
Cores' peak (share = that time over the fused kernels'), their roofline (the FLOPs or the bytes,
whichever is slower: the bytes are mostly the scores', which a fused kernel keeps on chip), and
what `fuse-attention` replays them as (tracekit.replay.attention_fix). 16-bit pairs set
FUSED_FORWARD_SHARE_OF_PEAK and FUSED_BACKWARD_SHARE_OF_PEAK; fp32 pairs run the memory-efficient
kernel on the SIMT cores, modelled from their own GEMMs' time (FUSED_FP32_FORWARD).

    python benchmarks/fused_attention_pace.py [--dbs DIR]
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tracekit.replay import attention_fix  # noqa: E402
from tracekit.replay.job import Jobs  # noqa: E402

DATA = ROOT / "tests" / "data"
MATH = ("^aten::_scaled_dot_product_attention_math$",)  # fuse-attention's calls; None: the model's chains
# (folder, unfused loop, fused loop, the math op's calls or None for chains)
PAIRS = [("h100/model_pairs", "gpt2_infer_eager_attn", "gpt2_infer_sdpa", None),
         ("h100/model_pairs", "gpt2_train_eager_attn", "gpt2_train_sdpa", None),
         ("h100/model_pairs_b", "gpt2_infer_eager_attn", "gpt2_infer_sdpa", None),
         ("h100/model_pairs_c", "baddbmm_infer_eager", "baddbmm_infer_sdpa", None),
         ("h100/model_pairs_c", "baddbmm_train_eager", "baddbmm_train_sdpa", None),
         ("h100/model_pairs_d", "baddbmm_infer_eager", "baddbmm_infer_sdpa", None),
         ("h100/model_pairs_g", "encoder_infer_eager", "encoder_infer_sdpa", None),
         ("h100/fix_rounds_e", "infer_sdpa_math", "infer_sdpa_flash", MATH),
         ("h100/fix_rounds_e", "train_sdpa_math", "train_sdpa_flash", MATH),
         ("h200/fixes", "infer_sdpa_math", "infer_sdpa_flash", MATH),
         ("h200/fixes", "train_sdpa_math", "train_sdpa_flash", MATH),
         # the article's shape (B4 H16 S2048 D64, causal), the sample traces of one H200 process
         ("../../sample_traces", "naive", "sdpa_flash", None),
         ("../../sample_traces", "sdpa_math", "sdpa_flash", MATH),
         ("h100/model_pairs_f", "gpt2_infer_fp32_eager_attn", "gpt2_infer_fp32_sdpa", None),
         ("h100/model_pairs_g", "encoder_infer_fp32_eager", "encoder_infer_fp32_sdpa", None),
         ("h100/model_pairs_h", "gpt2_train_fp32_eager_attn", "gpt2_train_fp32_sdpa", None),
         ("h100/model_pairs_h", "llama_infer_fp32_eager_attn", "llama_infer_fp32_sdpa", None),
         ("h100/model_pairs_i", "encoder_train_fp32_eager", "encoder_train_fp32_sdpa", None)]
# Captured after the shares were read off the pairs above (an eleventh lease, an H100): out of sample
HELD_OUT = [("h100/model_pairs_l", "llama_infer_eager_attn", "llama_infer_sdpa", None),
            ("h100/model_pairs_l", "llama_infer_hd128_eager_attn", "llama_infer_hd128_sdpa", None),
            ("h100/model_pairs_l", "encoder_train_eager", "encoder_train_sdpa", None),
            ("h100/model_pairs_l", "gpt2_infer_eager_attn", "gpt2_infer_sdpa", None),
            # a twelfth: the article's variants, SDPA pinned to each fused backend (efficient: not
            # flash or cuDNN, a slower kernel the medians do not describe)
            ("h100/fix_rounds_f", "infer_sdpa_math", "infer_sdpa_flash", MATH),
            ("h100/fix_rounds_f", "infer_sdpa_math", "infer_sdpa_cudnn", MATH),
            ("h100/fix_rounds_f", "infer_sdpa_math", "infer_sdpa_efficient", MATH),
            ("h100/fix_rounds_f", "train_sdpa_math", "train_sdpa_flash", MATH),
            ("h100/fix_rounds_f", "train_sdpa_math", "train_sdpa_cudnn", MATH),
            ("h100/fix_rounds_f", "train_sdpa_math", "train_sdpa_efficient", MATH),
            ("h100/fix_rounds_f", "infer_naive", "infer_naive_sdpa", None),
            ("h100/fix_rounds_f", "train_naive", "train_naive_sdpa", None)]
# the same on a thirteenth lease, another host
HELD_OUT += [(lease.replace("fix_rounds_f", "fix_rounds_g"), *rest) for lease, *rest in HELD_OUT if lease.endswith("fix_rounds_f")]

# The fused loop's attention kernels a step: forward, and backward (launched under its backward node)
_FUSED_KERNELS = """
WITH n AS (SELECT count(DISTINCT step) AS n FROM kernels WHERE trace = $trace AND step IS NOT NULL)
SELECT sum(k.dur_us) FILTER (WHERE NOT regexp_matches(k.cpu_op_path, '[Bb]ackward')) / any_value(n.n),
       sum(k.dur_us) FILTER (WHERE regexp_matches(k.cpu_op_path, '[Bb]ackward')) / any_value(n.n)
FROM kernels k, n
WHERE k.trace = $trace AND k.step IS NOT NULL AND regexp_matches(k.cpu_op_path, 'scaled_dot_product|ScaledDotProduct')
"""


def chain_gemms(con, trace, math_op):
    """{direction: (FLOPs at peak µs, roofline µs, replayed µs) a step} of the unfused loop's chains."""
    graph = Jobs(con).of(trace).graphs[trace]
    calls, params = ((attention_fix._OP_CALLS, {"op": math_op[0]}) if math_op else (attention_fix._CHAIN_CALLS, {}))
    group, _ = attention_fix._attention_groups(con, graph, calls, params)
    firsts, fused_ns, _, _ = attention_fix._fused(graph, calls, params, con)
    gemm = (group >= 0) & (graph.item_kind == "kernel") & (graph.item_roofline > 0)
    steps = len(set(graph.item_step[group >= 0]))
    result = {}
    for name, parity in (("forward", 0), ("backward", 1)):
        chosen = gemm & (group % 2 == parity)
        replayed = fused_ns[group[firsts] % 2 == parity].sum()
        # at the 16-bit peak, as the fused kernel takes them (the math backend's upcast GEMMs too)
        result[name] = tuple(value / steps / 1e3 for value in (np.maximum(graph.item_half_peak_ns[chosen], 0).sum(),
                                                               graph.item_roofline[chosen].sum(), replayed))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dbs", type=Path, help="a folder to keep each pair's database in (default: a temporary one)")
    args = parser.parse_args()
    folder = args.dbs or Path(tempfile.mkdtemp(prefix="tk_fused_pace_"))
    folder.mkdir(parents=True, exist_ok=True)
    print("| capture | unfused → fused | dtype | direction | fused kernels µs | GEMM FLOPs at peak µs | share of peak "
          "| eager roofline µs | replayed µs |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|")
    shares = {}
    for lease, before, after, math_op in PAIRS + HELD_OUT:
        sample = "out of sample" if (lease, before, after, math_op) in HELD_OUT else "in sample"
        db = folder / f"{lease.replace('../', '').replace('/', '_')}_{before}_{after}.duckdb"
        if not db.exists():
            subprocess.run([sys.executable, "-m", "tracekit", "load", str(DATA / lease / f"{before}.json.gz"),
                            str(DATA / lease / f"{after}.json.gz"), "--db", str(db)], check=True, capture_output=True)
        con = duckdb.connect(str(db), read_only=True)
        fused = dict(zip(("forward", "backward"), con.execute(_FUSED_KERNELS, {"trace": after}).fetchone()))
        dtype = "fp32" if "fp32" in before else "16-bit"
        for direction, (at_peak, roofline, replayed) in chain_gemms(con, before, math_op).items():
            if not fused[direction]:
                continue
            share = at_peak / fused[direction]
            shares.setdefault((sample, dtype, direction), []).append(share)
            print(f"| {lease} | {before} → {after} | {dtype} | {direction} | {fused[direction]:,.1f} | {at_peak:,.1f} "
                  f"| {share:.2f} | {roofline:,.1f} | {replayed:,.1f} |")
    print()
    for (sample, dtype, direction), values in sorted(shares.items()):
        print(f"{sample}: {dtype} {direction}: share of peak {min(values):.2f}-{max(values):.2f}, "
              f"median {statistics.median(values):.2f} ({len(values)} pairs)")


if __name__ == "__main__":
    main()
