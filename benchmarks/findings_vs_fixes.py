"""Each finding's predicted saving against the saving measured by capturing its fix.

Loads the sample traces and tests/data/h200 (real H200 captures of each "before" and its fix, at
the same shape and in the same process) into a scratch database, runs the finding rules, and prints
a markdown table: predicted saving_us_per_step of the "before" trace against the difference in GPU
busy time per steady step between the two traces. tests/test_findings.py asserts the same pairs.

    python benchmarks/findings_vs_fixes.py [--db /tmp/bench/findings.duckdb]
"""

import argparse
import json
import statistics
from pathlib import Path

from tracekit.store.database import connect, connect_for_queries
from tracekit.analysis.findings_engine import run_findings
from tracekit.ingest.loader import load_file

ROOT = Path(__file__).resolve().parent.parent
# (rule, before, after, fix): after is the before trace with the fix applied; fix is the rule's
# whatif where the capture is its fix, else the fix the capture made (TF32 for the math backend,
# whose finding's own fix is a fused backend).
PAIRS = [
    ("hidden_copy", "samples/naive", "samples/naive_inplace", None),
    ("hidden_copy", "fp32/naive", "fp32/naive_inplace", None),
    ("simt_gemm", "fp32/naive", "fp32_tf32/naive", None),
    ("simt_gemm", "fp32/naive_inplace", "fp32_tf32/naive_inplace", None),
    ("simt_gemm", "fp32/sdpa_math", "fp32_tf32/sdpa_math", "tensor-cores"),
    ("simt_gemm", "samples/sdpa_math", "samples/sdpa_flash", None),
    ("unfused_attention", "samples/naive", "samples/sdpa_flash", None),
    ("unfused_attention", "samples/naive_inplace", "samples/sdpa_flash", None),
]


def load_all(db):
    for suffix in ("", ".wal"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    con = connect(db)
    files = [("samples", p) for p in sorted((ROOT / "sample_traces").glob("*.json.gz"))]
    files += [(p.parent.name, p) for p in sorted((ROOT / "tests" / "data" / "h200").glob("*/*.json.gz"))]
    for folder, file in files:
        load_file(con, file)
        con.execute("UPDATE trace_files SET trace = ? WHERE path = ?", [f"{folder}/{file.name[:-8]}", str(file.resolve())])
    con.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="/tmp/bench/findings.duckdb")
    args = parser.parse_args()
    Path(args.db).parent.mkdir(parents=True, exist_ok=True)
    load_all(args.db)
    con = connect_for_queries(args.db)
    found = run_findings(con)
    gpu = dict(con.execute("SELECT trace, gpu_us_per_step FROM step_totals").fetchall())
    from tracekit.replay.savings import TraceReplay

    print("| rule (fix replayed) | before → after (the fix, captured) | predicted µs/step | measured µs/step | error |")
    print("|---|---|---:|---:|---:|")
    for rule, before, after, fix in PAIRS:
        row = found[(found["trace"] == before) & (found["rule"] == rule)].iloc[0]
        fix = fix or row["whatif"]
        predicted = TraceReplay(con, before).saving(fix).saving_us
        measured = gpu[before] - gpu[after]
        print(f"| `{rule}` (`{fix}`) | `{before}` → `{after}` | {predicted:,.1f} | {measured:,.1f} | "
              f"{100 * (predicted - measured) / measured:+.1f}% |")
    print()
    fix_pairs_table(con, found)


# (rule, before, after[, fix]) of tests/data/h200: each pair captured in one process with no
# per-step sync; fix, where the capture made another fix than the rule's own whatif. Flash replaces
# the math backend: simt_gemm's fix there is fuse-attention.
FIX_PAIRS = [
    ("launch_bound", "fixes/infer_launch_eager", "fixes/infer_launch_graph"),
    ("launch_bound", "fixes/train_launch_eager", "fixes/train_launch_graph"),
    ("host_sync", "fixes/infer_item", "fixes/infer_no_item"),
    ("host_sync", "fixes/train_item", "fixes/train_no_item"),
    ("gpu_idle", "fixes/infer_stall", "fixes/infer_no_stall"),
    ("per_call_setup", "fixes/infer_mask_per_call", "fixes/infer_mask_once"),
    ("per_call_setup", "fixes/train_mask_per_call", "fixes/train_mask_once"),
    ("simt_gemm", "fixes/infer_fp32", "fixes/infer_tf32"),
    ("simt_gemm", "fixes/train_fp32", "fixes/train_tf32"),
    ("pageable_copy", "fixes/train_copy_pageable", "fixes/train_copy_pinned"),
    ("pageable_copy", "prefetch/train_copy_pageable", "prefetch/train_copy_prefetch", "prefetch-copies"),
    ("simt_gemm", "fixes/infer_sdpa_math", "fixes/infer_sdpa_flash"),
    ("simt_gemm", "fixes/train_sdpa_math", "fixes/train_sdpa_flash"),
]


# The same on real models (tests/data/h100/model_pairs, capture/model_pairs.py): each pair's rule,
# the problem loop and its fix. The ResNet input pipeline moved from the CPU to the GPU is no one
# rule's fix: findings' all the fixes together stand for it. GPT-2's switch from eager attention to
# SDPA answers three findings at once: transformers' eager path also builds a 4-D causal mask each
# step (arange and where kernels: per_call_setup) from a CPU scalar copied to the GPU with a sync
# (host_sync), which its SDPA path (is_causal) does not; their fixes are replayed together.
MODEL_FIX_PAIRS = [
    ("launch_bound", "model_pairs/llama_infer_eager", "model_pairs/llama_infer_graph"),
    ("host_sync", "model_pairs/gpt2_train_item", "model_pairs/gpt2_train_no_item"),
    ("pageable_copy", "model_pairs/resnet_train_pageable", "model_pairs/resnet_train_pinned"),
    ("all_fixes", "model_pairs/resnet_train_cpu_prep", "model_pairs/resnet_train_gpu_prep"),
    ("unfused_attention+host_sync+per_call_setup", "model_pairs/gpt2_infer_eager_attn", "model_pairs/gpt2_infer_sdpa"),
    ("simt_gemm", "model_pairs/gpt2_train_fp32", "model_pairs/gpt2_train_tf32"),
    ("unfused_attention+host_sync+per_call_setup", "model_pairs/gpt2_train_eager_attn", "model_pairs/gpt2_train_sdpa"),
    ("unfused_optimizer", "model_pairs/gpt2_train_adamw_foreach", "model_pairs/gpt2_train_adamw_fused"),
    ("gpu_idle", "model_pairs/resnet_train_loader_main", "model_pairs/resnet_train_loader_workers"),
    # a third call (tests/data/h100/model_pairs_c): SGD's fused step, attention whose scores come
    # from baddbmm (Bloom's and the first GPT-NeoX's eager form), and bf16 autocast as the other fix
    # for fp32 GEMMs (simt_gemm's finding replays TF32's)
    ("unfused_optimizer", "model_pairs_c/gpt2_train_sgd_foreach", "model_pairs_c/gpt2_train_sgd_fused"),
    ("unfused_attention", "model_pairs_c/baddbmm_infer_eager", "model_pairs_c/baddbmm_infer_sdpa"),
    ("unfused_attention", "model_pairs_c/baddbmm_train_eager", "model_pairs_c/baddbmm_train_sdpa"),
    ("simt_gemm", "model_pairs_c/gpt2_train_fp32", "model_pairs_c/gpt2_train_bf16"),
    # GPU-bound fp32 training whose launches fill the queue (tests/data/h200/model_pairs_e): AdamW's
    # fused step, and eager attention to SDPA, whose fp32 kernel is the memory-efficient one
    ("unfused_optimizer", "model_pairs_e/gpt2_train_fp32_adamw_foreach", "model_pairs_e/gpt2_train_fp32_adamw_fused"),
    ("unfused_attention+host_sync+per_call_setup", "model_pairs_e/gpt2_train_fp32_eager_attn",
     "model_pairs_e/gpt2_train_fp32_sdpa"),
    # fp32 attention to SDPA on a fifth H100 lease (tests/data/h100/model_pairs_f), out of sample for
    # the memory-efficient kernel's pace: GPT-2 inference, and the baddbmm decoder trained
    ("unfused_attention+host_sync+per_call_setup", "model_pairs_f/gpt2_infer_fp32_eager_attn",
     "model_pairs_f/gpt2_infer_fp32_sdpa"),
    ("unfused_attention", "model_pairs_f/baddbmm_train_fp32_eager", "model_pairs_f/baddbmm_train_fp32_sdpa"),
    # the same on a sixth lease (tests/data/h100/model_pairs_g): the decoder's fp32 forward, and the
    # model as an encoder (no causal mask: the fused kernel does all of the scores' work) in bf16
    # and fp32, forward and trained
    ("unfused_attention", "model_pairs_g/baddbmm_infer_fp32_eager", "model_pairs_g/baddbmm_infer_fp32_sdpa"),
    ("unfused_attention", "model_pairs_g/encoder_infer_eager", "model_pairs_g/encoder_infer_sdpa"),
    ("unfused_attention", "model_pairs_g/encoder_infer_fp32_eager", "model_pairs_g/encoder_infer_fp32_sdpa"),
    ("unfused_attention", "model_pairs_g/encoder_train_fp32_eager", "model_pairs_g/encoder_train_fp32_sdpa"),
    # a seventh lease (tests/data/h100/model_pairs_h), out of sample for the fused fp32 forward's
    # pace: a Llama's fp32 forward, and GPT-2 trained in fp32 (on the H200 in model_pairs_e)
    ("unfused_attention+host_sync+per_call_setup", "model_pairs_h/llama_infer_fp32_eager_attn",
     "model_pairs_h/llama_infer_fp32_sdpa"),
    ("unfused_attention+host_sync+per_call_setup", "model_pairs_h/gpt2_train_fp32_eager_attn",
     "model_pairs_h/gpt2_train_fp32_sdpa"),
    # DDP's bucket copies and gradient_as_bucket_view=True (tests/data/h200/ddp_pairs, one rank):
    # fix_rounds.py times the job's loop once for its ranks' traces
    ("hidden_copy", "ddp_pairs/ddp_bucket_copy_rank0", "ddp_pairs/ddp_bucket_view_rank0"),
    # AMP's fp16 recipe (tests/data/h100/amp_pairs): GradScaler reads found_inf before each foreach
    # AdamW step, which host_sync names and whose fix, AdamW(fused=True), both rules replay
    ("host_sync", "amp_pairs/train_scaler_foreach", "amp_pairs/train_scaler_fused"),
    ("unfused_optimizer", "amp_pairs/gpt2_train_fp16_scaler_foreach", "amp_pairs/gpt2_train_fp16_scaler_fused"),
    ("host_sync", "amp_pairs/gpt2_train_fp16_scaler_foreach", "amp_pairs/gpt2_train_fp16_scaler_fused"),
    # a boolean index's size read in the forward and in its backward, and the mask multiplied in
    ("host_sync", "amp_pairs/train_bool_index", "amp_pairs/train_masked_loss"),
    # elementwise chains op by op against one fused op (tests/data/h100/model_pairs_m): GPT-2's
    # gelu_new (the tanh GELU written out) against F.gelu(approximate="tanh"), and transformers'
    # LlamaRMSNorm against F.rms_norm, trained and in inference (the norms' chains alone: the rotary
    # embeddings' stay, as no fused op of PyTorch's computes them)
    ("unfused_elementwise", "model_pairs_m/gpt2_train_gelu_new", "model_pairs_m/gpt2_train_gelu_tanh"),
    ("unfused_elementwise", "model_pairs_m/gpt2_infer_gelu_new", "model_pairs_m/gpt2_infer_gelu_tanh"),
    ("unfused_elementwise", "model_pairs_m/llama_train_rmsnorm_eager", "model_pairs_m/llama_train_rmsnorm_fused",
     "fuse-elementwise:rsqrt"),
    ("unfused_elementwise", "model_pairs_m/llama_infer_rmsnorm_eager", "model_pairs_m/llama_infer_rmsnorm_fused",
     "fuse-elementwise:rsqrt"),
    # the CPU-bound three again, nine rounds each, on another lease (tests/data/h100/model_pairs_n)
    ("unfused_elementwise", "model_pairs_n/gpt2_train_gelu_new", "model_pairs_n/gpt2_train_gelu_tanh"),
    ("unfused_elementwise", "model_pairs_n/llama_train_rmsnorm_eager", "model_pairs_n/llama_train_rmsnorm_fused",
     "fuse-elementwise:rsqrt"),
    ("unfused_elementwise", "model_pairs_n/llama_infer_rmsnorm_eager", "model_pairs_n/llama_infer_rmsnorm_fused",
     "fuse-elementwise:rsqrt"),
    # out of the sample the chains' ends were read off (tests/data/h100/model_pairs_o): T5's
    # T5LayerNorm against F.rms_norm (after a residual's dropout in training), and a LayerNorm
    # written out op by op against nn.LayerNorm in GPT-2, trained and in inference
    ("unfused_elementwise", "model_pairs_o/t5_train_rmsnorm_eager", "model_pairs_o/t5_train_rmsnorm_fused",
     "fuse-elementwise:rsqrt"),
    ("unfused_elementwise", "model_pairs_o/t5_infer_rmsnorm_eager", "model_pairs_o/t5_infer_rmsnorm_fused",
     "fuse-elementwise:rsqrt"),
    ("unfused_elementwise", "model_pairs_o/gpt2_train_layernorm_eager", "model_pairs_o/gpt2_train_layernorm_fused"),
    ("unfused_elementwise", "model_pairs_o/gpt2_infer_layernorm_eager", "model_pairs_o/gpt2_infer_layernorm_fused"),
    # out of the sample of the norm's second dispatch (a170ad8; tests/data/h100/model_pairs_p): Qwen2's
    # Qwen2RMSNorm against F.rms_norm, trained and in inference (fix_rounds.py reads the Llama's and
    # T5's pairs there too, by the rows of model_pairs_m and _o)
    ("unfused_elementwise", "model_pairs_p/qwen2_train_rmsnorm_eager", "model_pairs_p/qwen2_train_rmsnorm_fused",
     "fuse-elementwise:rsqrt"),
    ("unfused_elementwise", "model_pairs_p/qwen2_infer_rmsnorm_eager", "model_pairs_p/qwen2_infer_rmsnorm_fused",
     "fuse-elementwise:rsqrt"),
    # the same on batches the GPU bounds (tests/data/h100/model_pairs_t, 0fa008a): a saving in GPU
    # time, which the host's drifting CPU moved least
    ("unfused_elementwise", "model_pairs_t/qwen2_train_big_rmsnorm_eager", "model_pairs_t/qwen2_train_big_rmsnorm_fused",
     "fuse-elementwise:rsqrt"),
    ("unfused_elementwise", "model_pairs_t/qwen2_infer_big_rmsnorm_eager", "model_pairs_t/qwen2_infer_big_rmsnorm_fused",
     "fuse-elementwise:rsqrt"),
]


RULES_TOGETHER = "+"  # between the rules of a pair whose one change answers each of them


def saving_together(con, found, trace, rules):
    """µs a step that the fixes of `trace`'s findings of `rules` save together, replayed without the
    profiler as findings replays each alone (None where none of them found anything)."""
    from tracekit.replay.profiler_cost import cost_per_op_us
    from tracekit.replay.savings import FIX_SEPARATOR, TraceReplay

    rows = found[(found["trace"] == trace) & found["rule"].isin(rules) & found["whatif"].notna() & (found["whatif"] != "")]
    if not len(rows):
        return None
    together = FIX_SEPARATOR.join(sorted(set(rows["whatif"])))  # as findings joins its fixes
    return TraceReplay(con, trace).without_profiler([together], cost_per_op_us(con, trace))[together].saving_us


def unprofiled_medians():
    """{folder/loop: median unprofiled step_us}: fixes/repeats.csv, and the repeats.json of the
    folders captured since (the device script's own record)."""
    from profiler_cost import unprofiled_steps

    medians = {f"fixes/{loop}": us for loop, us in unprofiled_steps().items()}
    for path in (ROOT / "tests" / "data" / "h200").glob("*/repeats.json"):
        for loop, rounds in json.loads(path.read_text()).items():
            medians[f"{path.parent.name}/{loop}"] = statistics.median(rounds["unprofiled"])
    return medians


def fix_pairs_table(con, found):
    """The replayed saving of each pair's "before" finding against the fix's, measured without the
    profiler: the median of the interleaved rounds (step_us, CUDA events). The profiler slows the
    CPU, so three predictions: the replayed share of the traced step applied to the unprofiled step;
    the fix replayed on the loop without the profiler (no-profiler: each recorded op's cost,
    measured on the fixed loops by benchmarks/profiler_cost.py, taken out); and findings' own
    saving_us_per_step, the same with the cost the trace's own gaps between ops show."""
    from profiler_cost import cost_per_op
    from tracekit.replay.profiler_cost import cost_per_op_us
    from tracekit.replay.savings import TraceReplay

    unprofiled = unprofiled_medians()
    cost, _ = cost_per_op(con, prefix="fixes/")
    traced = dict(con.execute("SELECT trace, avg(step_us) FROM step_bounds JOIN steady_steps USING (trace, step) "
                              "GROUP BY trace").fetchall())
    print(f"| rule (whatif) | before → after | replayed: step → fixed µs | predicted: traced share, µs | error | "
          f"predicted: without the profiler ({cost:.1f} µs an op), µs | error | "
          "predicted: saving_us_per_step (the trace's estimate: µs an op), µs | error | measured µs |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    errors = []
    for rule, before, after, *fix in FIX_PAIRS:
        rows = found[(found["trace"] == before) & (found["rule"] == rule) & found["saving_us_per_step"].notna()]
        replayer = TraceReplay(con, before)
        whatif = fix[0] if fix else rows.iloc[0]["whatif"]
        saving = replayer.saving(whatif).saving_us if fix else rows.iloc[0]["traced_saving_us_per_step"]
        step_us = traced[before]
        by_share = saving / step_us * unprofiled[before]
        unprofiled_fix = f"no-profiler:{cost:.1f}"
        without = replayer.saving(f"{unprofiled_fix}; {whatif}").saving_us - replayer.saving(unprofiled_fix).saving_us
        measured = unprofiled[before] - unprofiled[after]
        per_op_us = cost_per_op_us(con, before)
        own = replayer.without_profiler([whatif], per_op_us)[whatif].saving_us
        errors.append(100 * (own - measured) / measured)
        print(f"| `{rule}` (`{whatif[:40]}`) | `{before.split('/')[1]}` → `{after.split('/')[1]}` | {step_us:,.0f} → "
              f"{step_us - saving:,.0f} | {by_share:,.0f} | {100 * (by_share - measured) / measured:+.0f}% | "
              f"{without:,.0f} | {100 * (without - measured) / measured:+.0f}% | {own:,.0f} ({per_op_us:.1f}) | "
              f"{errors[-1]:+.0f}% | {measured:,.0f} |")
    print(f"\nsaving_us_per_step within 25% of the measured saving: {sum(abs(e) <= 25 for e in errors)} of {len(errors)}")


if __name__ == "__main__":
    main()
