"""Kernel classification by name: one ordered table of rules, first match wins.

A trace tells us a kernel's name and little else about what it computes, so we read the
name the way a person would: vendor libraries spell the math unit into it (cuBLAS's
`s16816gemm` is a Tensor Core MMA shape, `_ffma_` is FP32 on CUDA cores, AMD Tensile's
`MI32x32x8` is a matrix-core tile). The rules cover NVIDIA Volta, Ampere and Hopper and
AMD ROCm names. Order matters, and the groups below are ordered on purpose:

1. memory operations and collectives: their names contain words like "reduce";
2. fused attention: its names contain "wgmma", "cutlass", "sm80" and sometimes "softmax";
3. names that look like GEMMs but are not (fbgemm, split-K reductions);
4. softmax and Inductor's Triton prefixes, which say the kernel's shape outright;
5. GEMMs: SIMT markers before Tensor Core markers, because an FP32 `xmma` or `sm90`
   kernel that says `ffma` runs on CUDA cores whatever else its name says;
6. copies, element-wise, normalisation and reductions.

Patterns are searched case-insensitively and use only syntax RE2 understands too (no
look-arounds, no back-references), so DuckDB's `regexp_matches(name, pattern, 'i')` gives
the same answer as Python on the `kernel_rules` table the loader stores.
"""

import re
from functools import lru_cache
from typing import NamedTuple, Optional

KERNEL_CLASSES = ("gemm", "attention", "elementwise", "reduction", "softmax", "copy",
                  "communication", "other")
GEMM_CLASSES = ("tensor_core", "simt")
UNKNOWN = (None, None, None)


class Rule(NamedTuple):
    """One name rule: a case-insensitive regex searched in the kernel name, and its meaning."""

    pattern: str
    kernel_class: str
    gemm_class: Optional[str]  # 'tensor_core' or 'simt' for a GEMM, None for anything else
    why: str


TC, SIMT = "tensor_core", "simt"

RULES = (
    # 1. Not kernels, or not compute: Kineto names DMA operations itself.
    Rule(r"^memcpy\b", "copy", None,
         "Kineto's 'Memcpy HtoD/DtoH/DtoD (...)' is a copy-engine transfer, not a kernel"),
    Rule(r"^memset\b|fillbuffer", "copy", None,
         "'Memset (Device)' and ROCm's __amd_rocclr_fillBuffer* only fill memory"),
    Rule(r"nccl|rccl", "communication", None,
         "NCCL/RCCL collectives (ncclDevKernel_AllReduce_*, ncclDevKernel_Generic_*); "
         "tried before 'reduce' because AllReduce/ReduceScatter say reduce"),
    Rule(r"(one_shot|two_shot|multimem)_all_reduce|cross_device_reduce", "communication", None,
         "symmetric-memory and custom all-reduce kernels move data between GPUs"),
    # 2. Fused attention: the whole softmax(QK^T)V in one kernel, whatever GEMM words it holds.
    Rule(r"flash_?attn|flash_(fwd|bwd)", "attention", None,
         "FlashAttention 2/3: pytorch_flash::flash_fwd_kernel, flash_bwd_*, flash::FlashAttnFwdSm90"),
    Rule(r"fmha", "attention", None,
         "fused multi-head attention: PyTorch's mem-efficient fmha_cutlassF/B_*_sm80, "
         "CK's ck_tile::FmhaFwdKernel; the name says cutlass and sm80, so before the GEMM rules"),
    Rule(r"sdpa", "attention", None,
         "cuDNN fused SDPA (cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_*); "
         "its name says wgmma, so it must precede the Tensor Core rules"),
    Rule(r"flex_(attention|decoding)", "attention", None,
         "FlexAttention's Triton template (triton_tem_fused_flex_attention_*)"),
    Rule(r"attn_(fwd|bwd)|paged_attention", "attention", None,
         "AMD AOTriton/Triton flash attention (attn_fwd, attn_bwd) and vLLM paged attention"),
    # 3. Named like GEMMs, but no matrix multiply.
    Rule(r"fbgemm", "other", None,
         "FBGEMM_GPU kernels (embedding bags, jagged tensors, quantization): the library "
         "is called fbgemm, the kernel is not a GEMM"),
    Rule(r"^cijk_\w*postgsu", "reduction", None,
         "AMD Tensile's Cijk_*_PostGSU sums the partial tiles of a split (GSU) GEMM: not a GEMM itself"),
    Rule(r"splitkreduce|reducesplitk", "reduction", None,
         "second pass of a split-K GEMM (cuBLAS splitKreduce_kernel, CUTLASS ReduceSplitK) "
         "sums partial tiles; no matmul"),
    # 4. Kernels whose name states their shape.
    Rule(r"softmax", "softmax", None,
         "softmax_warp_forward, cunn_SoftMaxForward, Inductor's triton_per_fused__softmax_*; "
         "a reduction, but the one attention analyses ask about, so it gets its own class"),
    Rule(r"triton_tem_\w*mm", "gemm", TC,
         "Inductor's Triton mm/addmm/bmm template: tl.dot lowers to mma/wgmma for 16-bit, "
         "FP8 and TF32 inputs (an FP32 matmul with TF32 disabled would not)"),
    Rule(r"^triton_poi_fused_(_to_copy|clone)_\d+$", "copy", None,
         "an Inductor pointwise kernel that fuses nothing but a cast or clone is a copy"),
    Rule(r"triton_(poi|for)_", "elementwise", None,
         "Inductor pointwise (poi) and foreach (for) kernels"),
    Rule(r"triton_(red|per)_", "reduction", None,
         "Inductor reduction (red) and persistent reduction (per) kernels"),
    # 5a. SIMT GEMMs that carry Tensor-Core-looking words (xmma, sm80, sm90).
    Rule(r"gemm\w*_ffma", "gemm", SIMT,
         "FFMA = FP32 fused multiply-add on CUDA cores: sm80_xmma_gemm_f32f32_*_ffma_* "
         "runs without Tensor Cores, so 'xmma' alone does not mean Tensor Cores"),
    Rule(r"simt", "gemm", SIMT, "CUTLASS SIMT kernels: cutlass_80_simt_sgemm_*, MmaSimt"),
    # 5b. Tensor Core GEMMs.
    Rule(r"nvjet", "gemm", TC,
         "cuBLAS's Hopper/Blackwell nvjet_* kernels (nvjet_sm90_tst_*, nvjet_sm90_hsh_*) "
         "are built on warpgroup MMA"),
    Rule(r"tensorop|wmma", "gemm", TC,
         "CUTLASS TensorOp/WMMA kernels: cutlass_80_tensorop_*, cutlass3x_sm90_tensorop_*, "
         "cutlass_80_wmma_tensorop_*"),
    Rule(r"gmma", "gemm", TC, "Hopper warpgroup MMA (wgmma/GMMA) mainloops"),
    Rule(r"[dhis]\d{3,6}(tf32|bf16|f16)?gemm", "gemm", TC,
         "cuBLAS/CUTLASS spell the MMA instruction shape: volta h884/s884, turing s1688, "
         "ampere s16816, int8 i8816, TF32 s1688tf32, FP64 d884"),
    Rule(r"xmma\w*(bf16|f16|tf32|e4m3|e5m2|i8|tensor\d)", "gemm", TC,
         "xmma GEMMs with 16-bit, TF32 (sm90_xmma_gemm_f32f32_tf32f32_*), FP8 or int8 "
         "operands or a tensorMxNxK tile run on Tensor Cores"),
    Rule(r"cijk_\w*_mi\d+x\d+", "gemm", TC,
         "AMD Tensile/hipBLASLt Cijk_* with an MI (MFMA) tile run on matrix cores"),
    Rule(r"gemm\w*xdl", "gemm", TC, "AMD Composable Kernel xdl/xdlops GEMMs use MFMA"),
    Rule(r"sm(9\d|1\d\d)\w*gemm", "gemm", TC,
         "Hopper/Blackwell-named GEMMs (sm90_xmma_gemm_*) without an FFMA marker"),
    # 5c. SIMT GEMMs named by BLAS type or shape.
    Rule(r"(^|[^a-z])[sdcz]gemm", "gemm", SIMT,
         "FP32/FP64/complex SIMT GEMMs: volta_sgemm_*, ampere_sgemm_*, maxwell_sgemm_*"),
    Rule(r"gemv|gemmsn|gemmk1", "gemm", SIMT,
         "cuBLAS matrix-vector and skinny fallbacks (gemv2T_kernel_val, gemvNSP, gemvx, "
         "gemmSN_*, gemmk1_kernel) use CUDA-core FMAs"),
    Rule(r"cijk_", "gemm", SIMT, "AMD Tensile Cijk_* without an MI tile uses the vector ALUs"),
    # 6. Memory movement and the TensorIterator / CUB families.
    Rule(r"copy", "copy", None,
         "casts and layout copies (direct_copy_kernel_cuda, bfloat16_copy_kernel_cuda, "
         "CatArrayBatchedCopy, __amd_rocclr_copyBuffer); before 'elementwise' because "
         "PyTorch runs them inside elementwise_kernel"),
    Rule(r"elementwise|pointwise", "elementwise", None,
         "PyTorch's elementwise_kernel, vectorized_/unrolled_/index_elementwise_kernel"),
    Rule(r"triu_tril|multi_tensor_apply|dropout", "elementwise", None,
         "one independent output per input element: triu/tril masks, fused optimizer "
         "steps (multi_tensor_apply_kernel), dropout"),
    Rule(r"(layer|batch|group|rms|instance)_?norm|rowwisemoments", "reduction", None,
         "normalisation kernels spend their time on per-row mean/variance reductions; "
         "after 'elementwise' so batch_norm_elementwise stays element-wise"),
    Rule(r"reduce", "reduction", None,
         "at::native::reduce_kernel (sum, mean, all, argmax), cub::DeviceReduceKernel, "
         "reduce_1Block_kernel"),
)


def _check(rules):
    """Fails at import, not on a user's trace, if a rule is malformed."""
    for rule in rules:
        if rule.kernel_class not in KERNEL_CLASSES:
            raise ValueError(f"rule {rule.pattern!r}: unknown kernel_class {rule.kernel_class!r}")
        if (rule.kernel_class == "gemm") != (rule.gemm_class in GEMM_CLASSES):
            raise ValueError(f"rule {rule.pattern!r}: gemm_class {rule.gemm_class!r} "
                             f"does not fit kernel_class {rule.kernel_class!r}")
    return tuple(re.compile(rule.pattern, re.IGNORECASE) for rule in rules)


_COMPILED = _check(RULES)


@lru_cache(maxsize=1 << 16)
def classify(name):
    """(kernel_class, gemm_class, why) of the first rule matching `name`; all None if none does."""
    if name is None:
        return UNKNOWN
    for regex, rule in zip(_COMPILED, RULES):
        if regex.search(name):
            return rule.kernel_class, rule.gemm_class, rule.why
    return UNKNOWN


def classify_many(names):
    """classify() of each name, in order; traces repeat names, so each is matched once."""
    return [classify(name) for name in names]


def rules_table():
    """The rules as rows for the `kernel_rules` table; `order` starts at 1 and is tried first."""
    return [{"order": i, "pattern": r.pattern, "kernel_class": r.kernel_class,
             "gemm_class": r.gemm_class, "why": r.why} for i, r in enumerate(RULES, start=1)]
