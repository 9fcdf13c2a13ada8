"""Kernel classification by name: one ordered table of rules, first match wins.

A trace tells us a kernel's name and little else about what it computes, so we read the
name the way a person would: vendor libraries spell the math unit into it (cuBLAS's
`s16816gemm` is a Tensor Core MMA shape, `_ffma_` is FP32 on CUDA cores, AMD Tensile's
`MI32x32x8` is a matrix-core tile). For the kernels that do matrix math (GEMMs, convolutions,
fused attention) a rule also says which unit runs it, its `math_unit`: 'tensor_core' (NVIDIA
Tensor Cores, AMD matrix cores), 'simt' (FMAs on CUDA cores / vector ALUs) or, where the name
does not say, None. The rules cover NVIDIA Volta to Blackwell and AMD ROCm names. Order
matters, and the groups below are ordered on purpose:

1. memory operations and collectives: their names contain words like "reduce" and "combine";
2. fused attention: its names contain "wgmma", "cutlass", "sm80", "fprop" and "softmax";
3. names that look like GEMMs but are not (fbgemm, split-K reductions);
4. softmax and Inductor's Triton prefixes, which say the kernel's shape outright (an Inductor
   `triton_poi_fused_convolution_0` is the pointwise epilogue, not the convolution);
5. convolutions: their names say sgemm, implicit_gemm, cutlass and xdl, so before the GEMMs;
6. GEMMs: SIMT markers before Tensor Core markers, because an FP32 `xmma` or `sm90`
   kernel that says `ffma` runs on CUDA cores whatever else its name says;
7. copies, element-wise, normalisation and reductions.

A short token that is also part of other names is matched as a word only: delimited by the
name's start or end or by a non-letter (`_`, `:`, digits, since libraries glue shapes to words
as in `s16816gemm`). CUTLASS writes `cutlass_80_tensorop_...` in snake_case, while MIOpen's
element-wise `SubTensorOpWithScalar1d` has `TensorOp` inside a CamelCase word, so the Tensor
Core rule must not fire there. Tokens that are no part of any longer word (`gmma`, `nvjet`,
`softmax`) and CamelCase spellings a library uses itself (`MIOpenConvUni`, FA4's
`cuteflash_fwd`) are matched anywhere. CamelCase words are matched case-sensitively with
`(?-i:Conv)`, so `MIOpenConvUni` is a convolution and `NumericConverter` is not.

Patterns are searched case-insensitively and use only syntax RE2 understands too (no
look-arounds, no back-references), so DuckDB's `regexp_matches(name, pattern, 'i')` gives
the same answer as Python on the `kernel_rules` table the loader stores.
"""

import re
from functools import lru_cache
from typing import NamedTuple, Optional

KERNEL_CLASSES = ("gemm", "convolution", "attention", "elementwise", "reduction", "softmax", "copy",
                  "communication", "other")
MATH_UNITS = ("tensor_core", "simt")
MATH_CLASSES = ("gemm", "convolution", "attention")  # the classes a math_unit can be given for
UNKNOWN = (None, None, None)


class Rule(NamedTuple):
    """One name rule: a case-insensitive regex searched in the kernel name, and its meaning."""

    pattern: str
    kernel_class: str
    math_unit: Optional[str]  # 'tensor_core' or 'simt'; None where the name does not tell
    why: str


TC, SIMT = "tensor_core", "simt"
_START, _END = r"(^|[^a-z])", r"([^a-z]|$)"


def _word(alternatives):
    """A pattern matching one of `alternatives` only where it is a word of its own."""
    return f"{_START}({alternatives}){_END}"


RULES = (
    # 1. Not kernels, or not compute: Kineto names DMA operations itself.
    Rule(r"^memcpy\b", "copy", None,
         "Kineto's 'Memcpy HtoD/DtoH/DtoD (...)' is a copy-engine transfer, not a kernel"),
    Rule(r"^memset\b|fillbuffer", "copy", None,
         "'Memset (Device)' and ROCm's __amd_rocclr_fillBuffer* only fill memory"),
    Rule(_START + r"(nccl|rccl|msccl)", "communication", None,
         "NCCL/RCCL/MSCCL collectives (ncclDevKernel_AllReduce_*, rccl_main_kernel); "
         "tried before 'reduce' because AllReduce/ReduceScatter say reduce"),
    Rule(r"(one|two)_?shot_?all_?reduce|multimem_all_?(reduce|gather)|cross_device_reduce|"
         r"all_?reduce_?fusion|quickreduce|userbuffers", "communication", None,
         "symmetric-memory and custom all-reduce kernels (one_shot_all_reduce, "
         "cross_device_reduce_1stage, allreduce_fusion_kernel, Transformer Engine userbuffers) "
         "move data between GPUs"),
    Rule(_word("deep_?ep") + "|" + _START + r"(ep_?(dispatch|combine)|nvshmemi?_)",
         "communication", None,
         "expert-parallel all-to-all: DeepEP's deep_ep::intranode::dispatch/combine, "
         "notify_dispatch, internode_ll::*, MORI's EpDispatchIntraNodeKernel, NVSHMEM: they move "
         "tokens between GPUs, whatever layout or cast work they do on the way"),
    # 2. Fused attention: the whole softmax(QK^T)V in one kernel, whatever GEMM words it holds.
    Rule(r"flash\w*(dot_do_o|convert_?d[qkv]|combine|preprocess|postprocess)|"
         r"merge_?attn_?states|mergestates|paged_attention\w*reduce", "attention", None,
         "attention's helper passes: FlashAttention's flash_bwd_dot_do_o_kernel, "
         "flash_bwd_convert_dq_kernel, flash_fwd_splitkv_combine_kernel, vLLM's "
         "merge_attn_states_kernel and paged_attention_*_reduce_kernel: row sums, casts and "
         "split-KV merges, no matrix multiply"),
    Rule(r"fmha_cutlass[fb]_(\w*_sm[56]\d|f32\w*_sm7\d)", "attention", SIMT,
         "PyTorch/xformers mem-efficient attention (fmha_cutlassF_f32_*_sm75) falls back to "
         "CUTLASS SIMT before Volta, and for FP32 before sm80 (DefaultGemmType in its "
         "gemm_kernel_utils.h)"),
    Rule(_START + r"fmha|flash_?(attn|attention)|flash_(fwd|bwd)", "attention", TC,
         "FlashAttention 2/3/4 (flash_fwd_kernel, flash::FlashAttnFwdSm90, FA4's "
         "cuteflash_fwd_sm100, glued to its prefix) and fused MHA (fmha_cutlassF_*_sm80, "
         "ck_tile::FmhaFwdKernel, fmhaSm100fKernel_*) run QK^T and PV on Tensor Cores; the "
         "names say cutlass and sm80, so before the GEMM rules"),
    Rule(_START + r"sdpa", "attention", TC,
         "cuDNN fused SDPA (cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_*) "
         "is flash attention on wgmma; its name says wgmma and fprop"),
    Rule(r"flex_(attention|decoding)", "attention", TC,
         "FlexAttention's Triton template (triton_tem_fused_flex_attention_*): assumed on Tensor "
         "Cores, as tl.dot is for the 16-bit inputs flex is used with (FP32 inputs would not be, "
         "and the name does not say)"),
    Rule(_START + r"attn_(fwd|bwd)|unified_attention", "attention", TC,
         "Triton flash attention: AMD AOTriton's attn_fwd/_attn_bwd, vLLM's "
         "kernel_unified_attention_2d; tl.dot on Tensor Cores/matrix cores"),
    Rule(r"prefillwith\w*kv_?cache|mlapagedattention", "attention", TC,
         "FlashInfer prefill and MLA kernels (BatchPrefillWithPagedKVCacheKernel, "
         "BatchMLAPagedAttentionKernel) are written on mma.sync"),
    Rule(r"decodewith\w*kv_?cache", "attention", SIMT,
         "FlashInfer decode kernels (BatchDecodeWithPagedKVCacheKernel) use CUDA cores; its "
         "use_tensor_cores option runs the prefill kernels instead"),
    Rule(r"paged_attention\w*mfma", "attention", TC,
         "vLLM ROCm paged_attention_ll4mi_QKV_mfma16_kernel: MFMA, as it says"),
    Rule(r"paged_attention", "attention", SIMT,
         "vLLM paged_attention_v1/v2_kernel: dot products with FMAs on CUDA cores"),
    Rule(r"multihead_attention", "attention", None,
         "TensorRT-LLM/FasterTransformer masked_multihead_attention_kernel: decoder attention "
         "whose name does not say its unit"),
    # 3. Named like GEMMs, but no matrix multiply.
    Rule(r"fbgemm", "other", None,
         "FBGEMM_GPU kernels (embedding bags, jagged tensors, quantization): the library "
         "is called fbgemm, the kernel is not a GEMM"),
    Rule(r"^cijk_\w*postgsu", "reduction", None,
         "AMD Tensile's Cijk_*_PostGSU sums the partial tiles of a split (GSU) GEMM: not a GEMM itself"),
    Rule(r"splitkreduce|reducesplitk", "reduction", None,
         "second pass of a split-K GEMM (cuBLAS splitKreduce_kernel, CUTLASS ReduceSplitK) "
         "sums partial tiles; no matmul"),
    Rule(r"(gemm|matmul|mm)\w*::(\w+::)*(transpose|permute|fill|copy|zero|init|prepare|setup|convert|"
         r"quantiz|dequantiz|compute_|histogram|topk|sort|align|gather|scatter)\w*[<(]|"
         r"fill_?tensormaps?|(finalize|combine|reduce|scatter|gather)_\w*(matmul|gemm)|"
         r"(matmul|gemm)\w*_(finalize|combine|reduce)", "other", None,
         "the helpers a GEMM library launches beside its GEMMs, whose names carry the library's: "
         "grouped_gemm::...::transpose<...>, fill_tensormaps_kernel (TMA descriptors for a grouped "
         "GEMM), triton_kernels' _finalize_matmul_scatter (the MoE epilogue: a reduction and a "
         "scatter, no matrix multiply)"),
    # 4. Kernels whose name states their shape.
    Rule(r"softmax", "softmax", None,
         "softmax_warp_forward, cunn_SoftMaxForward, Inductor's triton_per_fused__softmax_*; "
         "a reduction, but the one attention analyses ask about, so it gets its own class"),
    Rule(r"triton_tem_\w*conv", "convolution", TC,
         "Inductor's Triton convolution template (triton_tem_fused_convolution_*): tl.dot, on "
         "Tensor Cores for the 16-bit and TF32 inputs it is chosen for"),
    Rule(r"triton_tem_\w*mm", "gemm", TC,
         "Inductor's Triton mm/addmm/bmm template: tl.dot lowers to mma/wgmma for 16-bit, "
         "FP8 and TF32 inputs (an FP32 matmul with TF32 disabled would not)"),
    Rule(r"^triton_poi_fused_(_to_copy|clone)_\d+$", "copy", None,
         "an Inductor pointwise kernel that fuses nothing but a cast or clone is a copy"),
    Rule(r"triton_(poi|for)_", "elementwise", None,
         "Inductor pointwise (poi) and foreach (for) kernels"),
    Rule(r"triton_(red|per)_", "reduction", None,
         "Inductor reduction (red) and persistent reduction (per) kernels"),
    # 5. Convolutions, before the GEMMs: cuDNN's and MIOpen's names say sgemm and igemm.
    Rule(r"convolve_[sd]gemm|" + _START + r"[sdh]cudnn|winograd[^(]*<float\b|"
         r"(winograd|asmconv)\w*fp32|(fprop|dgrad|wgrad)\w*_ffma", "convolution", SIMT,
         "convolutions on CUDA cores: cuDNN's implicit/explicit/precomputed_convolve_sgemm, "
         "*_scudnn_* (s = FP32 SIMT, h = FP16 HFMA2), Winograd on float "
         "(winograd_nonfused::winogradForwardData4x4<float, float>, MIOpen's "
         "miopenSp3AsmConv_*_fp32_*)"),
    Rule(_START + r"[hsi]\d{3,6}(tf32|bf16|f16)?(cudnn|fprop|dgrad|wgrad)|"
         r"(fprop|dgrad|wgrad|implicit_?gemm)\w*(bf16|f16|tf32|e4m3|e5m2|i8|tensor\d)|"
         r"tensorop\w*(fprop|dgrad|wgrad)|(conv|igemm)\w*(xdl|wmma|mfma)|igemm_\w*gtcx",
         "convolution", TC,
         "Tensor Core convolutions: cuDNN's volta_h884cudnn_*, turing_fp16_s1688cudnn_*, "
         "sm80_xmma_fprop/dgrad/wgrad_implicit_gemm_{bf16,f16,tf32}*, CUTLASS "
         "cutlass_tensorop_s1688fprop_*; AMD CK kernel_grouped_conv_fwd_xdl_*/_wmma_* and "
         "MIOpen's xdlops igemm_fwd/bwd/wrw_gtcx*"),
    Rule(r"convol(ution|ve)|winograd|implicit_?gemm|cutlass::conv::|" + _START
         + r"(conv(\d|_|$)|igemm_|[dw]grad(\dd|_alg\d|_engine|_\d+x\d)|strided_[dw]grad)|"
         r"(?-i:Conv)(?-i:[A-Z0-9_])|miopencv|im(\dd)?2col|col2im|vol2col|fft2d_(r2c|c2r)_|"
         r"compute\w*offsets\w*kernel", "convolution", None,
         "convolutions whose unit the name does not say: cuDNN dgrad_engine, wgrad_alg0_engine, "
         "conv2d_grouped_direct_kernel, FFT and Winograd transforms, the offset kernels of a "
         "pass (computeOffsetsKernel, cask_cudnn::computeWgradSplitKOffsetsKernel); "
         "MIOpen MIOpenConvUni, gcnAsmConv1x1U, MIOpenCvD3x3_WSR0, naive_conv_fwd_*, "
         "Im2d2Col; PyTorch conv_depthwise2d_*, im2col_kernel; cutlass::conv::kernel::*"),
    # 6a. SIMT GEMMs that carry Tensor-Core-looking words (xmma, sm80, sm90, cutlass).
    Rule(r"gemm\w*_ffma", "gemm", SIMT,
         "FFMA = FP32 fused multiply-add on CUDA cores: sm80_xmma_gemm_f32f32_*_ffma_* "
         "runs without Tensor Cores, so 'xmma' alone does not mean Tensor Cores"),
    Rule(r"simt|universalfma", "gemm", SIMT,
         "CUTLASS SIMT kernels: cutlass_80_simt_sgemm_*, cutlass::gemm::warp::MmaSimt, "
         "CUTLASS 3's cute::UniversalFMA atom"),
    # 6b. Tensor Core GEMMs.
    Rule(r"nvjet", "gemm", TC,
         "cuBLAS's Hopper/Blackwell nvjet_* kernels (nvjet_sm90_tst_*, nvjet_sm90_hsh_*) "
         "are built on warpgroup MMA"),
    Rule(_word("(bs|sp)?tensorop|wmma"), "gemm", TC,
         "CUTLASS TensorOp/WMMA kernels: cutlass_80_tensorop_*, cutlass3x_sm90_tensorop_*, "
         "cutlass3x_sm100_bstensorop_* (block-scaled), cutlass_80_wmma_tensorop_*; a word "
         "of its own, since MIOpen's SubTensorOpWithScalar* is element-wise"),
    Rule(r"gmma", "gemm", TC, "Hopper warpgroup MMA (wgmma/GMMA) mainloops"),
    Rule(_START + r"[dhis]\d{3,6}(tf32|bf16|f16)?gemm", "gemm", TC,
         "cuBLAS/CUTLASS spell the MMA instruction shape: volta h884/s884, turing s1688, "
         "ampere s16816, int8 i8816, TF32 s1688tf32, FP64 d884"),
    Rule(_START + r"xmma\w*(bf16|f16|tf32|e4m3|e5m2|i8|tensor\d)", "gemm", TC,
         "xmma GEMMs with 16-bit, TF32 (sm90_xmma_gemm_f32f32_tf32f32_*), FP8 or int8 "
         "operands or a tensorMxNxK tile run on Tensor Cores"),
    Rule(_START + r"cijk_\w*_mi\d+x\d+", "gemm", TC,
         "AMD Tensile/hipBLASLt Cijk_* with an MI (MFMA) tile run on matrix cores"),
    Rule(r"gemm\w*xdl", "gemm", TC, "AMD Composable Kernel xdl/xdlops GEMMs use MFMA"),
    Rule(_START + r"sm(9\d|1\d\d)\w*gemm", "gemm", TC,
         "Hopper/Blackwell-named GEMMs without an FFMA marker (sm90_xmma_gemm_*, DeepGEMM's "
         "sm90_fp8_gemm_1d2d_impl and sm100_fp8_gemm_1d1d_impl)"),
    Rule(_START + r"(bmm|gemm)_\w*_sm1\d\d", "gemm", TC,
         "TensorRT-LLM/FlashInfer trtllm-gen batched GEMMs for Blackwell "
         "(bmm_E4m3_E4m3E4m3_Fp32_*_sm100f, the fused-MoE experts) run on tcgen05 UMMA"),
    Rule(r"cutlass::gemm::|cutlass\w*gemm|::\w*gemm(kernel|universal|grouped)|ck_tile::\w*gemm",
         "gemm", TC,
         "CUTLASS and CK-tile template GEMMs (cutlass::device_kernel<...::GemmKernel>, "
         "cutlass::gemm::kernel::GemmUniversal, vLLM's cutlass_3x_gemm_sm90_fp8, PyTorch's "
         "grouped and row-wise scaled mm, ck_tile::GroupedGemmKernel): SIMT ones say MmaSimt "
         "or UniversalFMA and were caught above"),
    Rule(r"grouped_?gemm|gemm_?grouped|moe\w*gemm|gemm\w*moe|fused_moe_kernel|marlin\w*::marlin|"
         r"(fp8|e4m3|e5m2|fp4|e2m1|mxfp\d)\w*gemm|gemm\w*(fp8|e4m3|e5m2|fp4|e2m1|mxfp\d)",
         "gemm", TC,
         "grouped/MoE GEMMs (vLLM's Triton fused_moe_kernel, MoeFCGemm, cutlass_moe_gemm) and "
         "Marlin mixed-precision GEMMs are written for mma/wgmma; FP8/FP4 GEMMs "
         "(deep_gemm::fp8_gemm_kernel) have no CUDA-core arithmetic to run on"),
    Rule(r"^_?(p_)?matmul_ogs(_[a-z0-9_]*)?$|^_?(p_)?(kernel_)?matmul(_[a-z0-9]*)*_"
         r"(fp16|f16|bf16|fp8|e4m3|e5m2|tf32|mxfp\d|fp4)([_x][a-z0-9_]*)?$", "gemm", TC,
         "Triton matmul kernels that say they are: triton_kernels' _matmul_ogs_* and "
         "_p_matmul_ogs_* (written for bf16/FP8/MXFP4 weights), or a bare identifier starting "
         "with matmul that names a 16-bit, FP8 or TF32 type (_kernel_matmul_fp8_row): tl.dot "
         "lowers to mma/wgmma for those"),
    Rule(r"^_?(p_)?(kernel_)?matmul(_[a-z0-9_]*)?$", "gemm", None,
         "a bare identifier starting with matmul and naming no type (the tutorials' "
         "matmul_kernel, a user's extern \"C\" matmul_k): a Triton kernel or a hand-written "
         "one, fp32 or 16-bit: a matrix multiply on a math unit the name does not tell"),
    Rule(r"matmul\w*(<[^>]*>)?\((const )?(float|double)\b", "gemm", SIMT,
         "a CUDA C++ kernel of the user's named matmul whose arguments are float or double "
         "(matmul_k(float const*, ...)): no library, no wmma/mma in its name, so FP32 FMAs on "
         "CUDA cores, not Tensor Cores"),
    # 6c. SIMT GEMMs named by BLAS type or shape.
    Rule(r"(^|[^a-z])[sdcz]gemm", "gemm", SIMT,
         "FP32/FP64/complex SIMT GEMMs: volta_sgemm_*, ampere_sgemm_*, maxwell_sgemm_*"),
    Rule(r"gemv|gemmsn|gemmk1", "gemm", SIMT,
         "cuBLAS matrix-vector and skinny fallbacks (gemv2T_kernel_val, gemvNSP, gemvx, "
         "gemmSN_*, gemmk1_kernel) use CUDA-core FMAs"),
    Rule(_START + r"cijk_", "gemm", SIMT,
         "AMD Tensile Cijk_* without an MI tile uses the vector ALUs"),
    # 7. Memory movement, element-wise work, the TensorIterator / CUB families.
    Rule(r"copy", "copy", None,
         "casts and layout copies (direct_copy_kernel_cuda, bfloat16_copy_kernel_cuda, "
         "CatArrayBatchedCopy, __amd_rocclr_copyBuffer); before 'elementwise' because "
         "PyTorch runs them inside elementwise_kernel"),
    Rule(_START + r"(op(\dd)?tensor|subtensorop|scale(packed)?tensor|settensor)", "elementwise", None,
         "MIOpen's and cuDNN's whole-tensor operations (Op2dTensorGeneric, OpTensorFwdBias, "
         "SubTensorOpWithScalar1d, cudnn::ops::scalePackedTensor_kernel, setTensor5d)"),
    Rule(r"elementwise|pointwise", "elementwise", None,
         "PyTorch's elementwise_kernel, vectorized_/unrolled_/index_elementwise_kernel"),
    Rule(r"triu_tril|multi_tensor_apply|dropout", "elementwise", None,
         "one independent output per input element: triu/tril masks, fused optimizer "
         "steps (multi_tensor_apply_kernel), dropout"),
    Rule(_START + r"(gather|index_?select|transpose|cat_|(reshape|concat)_and_cache|store_kv_?cache)|"
         r"nchwtonhwc|nhwctonchw", "copy", None,
         "data movement without arithmetic: gathers (vectorized_gather_kernel, indexSelectLargeIndex, "
         "gather_and_maybe_dequant_cache), concatenation (chunk_cat_cuda_kernel), transposes and "
         "layout changes (MIOpen's batched_transpose_*, cuDNN's nchwToNhwcKernel), KV-cache writes "
         "(reshape_and_cache_flash_kernel); before 'quant', which a dequantizing gather says"),
    Rule(r"(layer|batch|group|rms|instance)_?norm|rowwisemoments|gammabeta|" + _START + r"bn_(fw|bw)",
         "reduction", None,
         "normalisation kernels spend their time on per-row mean/variance reductions "
         "(vectorized_layer_norm_kernel, GammaBetaBackwardCUDAKernel, MIOpenBatchNormFwdTrainSpatial, "
         "cuDNN's bn_fw_tr_1C11_kernel_NCHW); after 'elementwise' so batch_norm_elementwise "
         "stays element-wise, before 'quant' so rms_norm_per_block_quant_kernel stays a norm"),
    Rule(_START + r"(act_and_mul|silu|gelu|swiglu|geglu|relu|sigmoid|tanh|rope" + _END + ")|rotary|"
         r"upsample|activation_(fw|bw)|miopenneuron|quant", "elementwise", None,
         "activations (act_and_mul_kernel, cuDNN's activation_fw_4d_kernel, MIOpenNeuronFwd), "
         "rotary embeddings, upsampling and (de)quantization (per_token_group_quant_8bit): one "
         "output per element"),
    Rule(r"pooling|pool(\dd)?([^a-z]|$)", "reduction", None,
         "pooling reduces each window to one value: max_pool_forward_nchw, avg_pool2d_out_cuda_frame, "
         "adaptive_average_pool, cuDNN's pooling_fw_4d_kernel, MIOpen's mloPoolingG"),
    Rule(r"reduce", "reduction", None,
         "at::native::reduce_kernel (sum, mean, all, argmax), cub::DeviceReduceKernel, "
         "reduce_1Block_kernel"),
)


def _check(rules):
    """Fails at import, not on a user's trace, if a rule is malformed (a pattern that does not
    compile fails at the first classify(); tests/test_classify.py classifies at once)."""
    for rule in rules:
        if rule.kernel_class not in KERNEL_CLASSES:
            raise ValueError(f"rule {rule.pattern!r}: unknown kernel_class {rule.kernel_class!r}")
        allowed = (None, *MATH_UNITS) if rule.kernel_class in MATH_CLASSES else (None,)
        if rule.math_unit not in allowed:
            raise ValueError(f"rule {rule.pattern!r}: math_unit {rule.math_unit!r} "
                             f"does not fit kernel_class {rule.kernel_class!r}")


_check(RULES)


@lru_cache(maxsize=None)
def _compiled():
    # On first use, not at import: a load classifies in DuckDB (class_tables) and never needs
    # them, and compiling 57 patterns took a tenth of the loader's imports.
    return tuple(re.compile(rule.pattern, re.IGNORECASE) for rule in RULES)


# A name is classified by its first this many characters (the loader's SQL does the same). The
# words the rules look for sit in a kernel's name and first template arguments, well within it
# (the longest real name in the tests, a PyTorch lambda's, has 5,123), and a 100 MB name then
# costs what a short one does. Python's `re` backtracks: on a name built to hurt it (`gemm`
# repeated) a rule can take time in the square of the length, which this bounds; the loader
# classifies with DuckDB's RE2, linear in it (class_tables).
MAX_CLASSIFIED_CHARS = 8192


def classify(name):
    """(kernel_class, math_unit, why) of the first rule matching `name`; all None if none does."""
    if name is None:
        return UNKNOWN
    return _classify(name[:MAX_CLASSIFIED_CHARS])


@lru_cache(maxsize=1 << 16)
def _classify(name):
    for regex, rule in zip(_compiled(), RULES):
        if regex.search(name):
            return rule.kernel_class, rule.math_unit, rule.why
    return UNKNOWN


def classify_many(names):
    """classify() of each name, in order; traces repeat names, so each is matched once."""
    return [classify(name) for name in names]


def gemm_class(kernel_class, math_unit):
    """The `gemm_class` column kept for older queries: the math unit of GEMMs, else None."""
    return math_unit if kernel_class == "gemm" else None


def class_rows(names):
    """Rows for the `kernel_classes` table: (name, kernel_class, gemm_class, math_unit, rule)."""
    return [(name, kernel_class, gemm_class(kernel_class, math_unit), math_unit, why)
            for name, (kernel_class, math_unit, why) in zip(names, classify_many(names))]


def rule_rows():
    """Rows for the `kernel_rules` table: (rule_order, pattern, kernel_class, gemm_class,
    math_unit, why)."""
    return [(r["order"], r["pattern"], r["kernel_class"], r["gemm_class"], r["math_unit"], r["why"])
            for r in rules_table()]


def rules_table():
    """The rules as dicts, in the order they are tried; `order` starts at 1."""
    return [{"order": i, "pattern": r.pattern, "kernel_class": r.kernel_class,
             "gemm_class": gemm_class(r.kernel_class, r.math_unit), "math_unit": r.math_unit,
             "why": r.why} for i, r in enumerate(RULES, start=1)]
