"""Kernel classification: real kernel names per GPU generation and library, the trace corpus,
rule order, word boundaries, and the rows the loader stores."""

import glob
import sys
from collections import Counter
from pathlib import Path

import duckdb
import pytest

from conftest import SAMPLE_TRACES, TEST_DATA, read_trace
from tracekit.store.classify import (KERNEL_CLASSES, MATH_CLASSES, MATH_UNITS, RULES, class_rows, classify,
                               classify_many, rule_rows, rules_table)

TC, SIMT = "tensor_core", "simt"

# (name, kernel_class, math_unit), names as cuBLAS/cuDNN/PyTorch/NCCL print them in profiles.
VOLTA = [
    ("volta_sgemm_128x64_nn", "gemm", SIMT),
    ("volta_sgemm_64x32_sliced1x4_nn", "gemm", SIMT),
    ("maxwell_sgemm_128x64_nn", "gemm", SIMT),
    ("volta_h884gemm_64x128_ldg8_nn", "gemm", TC),
    ("volta_h884gemm_256x128_ldg8_nn", "gemm", TC),
    ("volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_nn", "gemm", TC),
    ("turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_tn", "gemm", TC),
    ("gemmSN_NN_kernel", "gemm", SIMT),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "communication", None),
]
AMPERE = [
    ("ampere_sgemm_128x64_tn", "gemm", SIMT),
    ("ampere_sgemm_64x32_sliced1x4_nn", "gemm", SIMT),
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>"
     "(cutlass_80_simt_sgemm_256x128_8x4_nn_align1::Params)", "gemm", SIMT),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_"
     "aligna4_alignc4_execute_kernel__5x_cublas", "gemm", SIMT),
    ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_tn_align8>"
     "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_tn_align8::Params)", "gemm", TC),
    ("cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_nn_align8", "gemm", TC),
    ("cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8", "gemm", TC),
    ("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn", "gemm", TC),
    ("ampere_bf16_s1688gemm_bf16_128x64_sliced1x2_ldg8_f2f_tn", "gemm", TC),
    ("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_stage3_warpsize2x4x1_"
     "tensor16x8x16_kernel", "gemm", TC),
    ("sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize32x32x64_stage3_warpsize2x1x2_tensor16x8x8",
     "gemm", TC),
    ("void gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, float, "
     "128, 16, 4, 4, false, false>", "gemm", SIMT),
    ("gemvNSP_kernel", "gemm", SIMT),
    ("void gemmk1_kernel<int, float, 256, 5, false, false>", "gemm", SIMT),
    ("cutlass_80_tensorop_d884gemm_64x32_16x4_nn_align1", "gemm", TC),
    ("void splitKreduce_kernel<32, 16, int, float, float, float, float, true, false, false>"
     "(cublasSplitKParams<float>, float const*, float*)", "reduction", None),
    ("cutlass_80_splitKreduce_kernel", "reduction", None),
    # FP32 mem-efficient attention on sm80 uses TensorOp with OpMultiplyAddFastF32 (xformers'
    # gemm_kernel_utils.h, "Specialization for tensorcores with f32")
    ("fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, "
     "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)", "attention", TC),
    ("fmha_cutlassB_bf16_aligned_64x64_k64_sm80(PyTorchMemEffAttention::AttentionBackwardKernel"
     "<cutlass::arch::Sm80, cutlass::bfloat16_t, true, false, false, 64, 64, 64, false>::Params)",
     "attention", TC),
    ("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, "
     "cutlass::bfloat16_t>, false, false, false>(flash::Flash_fwd_params)", "attention", TC),
    ("flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel", "attention", TC),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     "communication", None),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)"
     "::OpaqueType<2u>, unsigned int, 3, 64, 64>(...)", "copy", None),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
     "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
     "softmax", None),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, "
     "false>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, "
     "float*, float*, c10::BFloat16*)", "reduction", None),
    ("void fbgemm_gpu::permute_2D_data_kernel<false, int, int>(int, int, int const*)", "other", None),
]
HOPPER = [
    ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", "gemm", TC),
    ("nvjet_sm90_tst_64x512_64x2_1x2_h_bz_coopB_NNT", "gemm", TC),
    ("nvjet_sm90_tst_192x8_64x8_2x1_v_bz_TNT", "gemm", TC),
    ("nvjet_sm90_tss_64x8_64x16_4x1_v_bz_splitK_TNT", "gemm", TC),
    ("nvjet_tst_128x64_64x5_1x3_h_bz_coopA_NTn", "gemm", TC),
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_"
     "execute_segment_k_off_kernel__5x_cublas", "gemm", TC),
    ("sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_"
     "execute_segment_k_off_kernel__5x_cublas", "gemm", TC),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_"
     "aligna4_alignc4_execute_kernel__5x_cublas", "gemm", SIMT),
    ("cutlass3x_sm90_tensorop_s64x128x16gemm_bf16_bf16_f32_bf16_bf16_128x128x64_1x1x1_0_tnn_"
     "align8_warpspecialized_cooperative_epi_tma", "gemm", TC),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_"
     "cga1x1x1_kernel0_0", "attention", TC),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x128_1x4x1_"
     "cga1x1x1", "attention", TC),
    ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<...> > >"
     "(...)", "attention", TC),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
     "cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, "
     "true, false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)",
     "attention", TC),
    ("triton_tem_fused_flex_attention_0", "attention", TC),
    ("triton_tem_fused_flex_attention_backward_2", "attention", TC),
    ("triton_tem_fused_mm_0", "gemm", TC),
    ("triton_poi_fused__to_copy_0", "copy", None),
    ("triton_poi_fused_add_mul_0", "elementwise", None),
    ("triton_per_fused__softmax_0", "softmax", None),
    ("triton_red_fused_sum_0", "reduction", None),
    ("Memcpy DtoD (Device -> Device)", "copy", None),
    ("Memcpy HtoD (Pageable -> Device)", "copy", None),
    ("Memset (Device)", "copy", None),
]
AMD = [
    ("Cijk_Ailk_Bljk_HHS_BH_MT128x128x16_MI16x16x16x1_SN_1LDSB0_APM1_ABV0_ACED0_AF0EM1_AF1EM1_"
     "AMAS3_ASE_ASGT_ASAE01_ASCE01_ASEM1_AAC0_BL1_BS1_DTL0_DTVA0_DVO0_ETSP_EPS1_FL0_GRVW8_GSU1_"
     "GSUASB_GLS0_ISA1100_IU1_K1_KLA", "gemm", TC),
    ("Cijk_Alik_Bljk_BBS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB0", "gemm", TC),
    ("Cijk_Ailk_Bljk_HSS_MT96x96x32_MI16x16x1", "gemm", TC),
    ("Cijk_Ailk_Bljk_SB_MT16x16x16_SE_AF0EM1_AMAS2_ASEM1_BL0_DTL0_EPS0_FL0_GRVW2_GSU1_ISA000_K1_"
     "KLS_LPA0_LPB0_NLCA1_NLCB1_PGR1_PLR1_TT2_2_USFGRO0_VAW1_VW2_WG8_8_1_WGM1", "gemm", SIMT),
    ("void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemm_xdl_cshuffle_v3<...> >(...)",
     "gemm", TC),
    ("void ck_tile::kentry<256, 2, ck_tile::FmhaFwdKernel<...> >(...)", "attention", TC),
    ("attn_fwd", "attention", TC),
    ("_attn_fwd", "attention", TC),
    ("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)", "communication", None),
    ("__amd_rocclr_fillBufferAligned", "copy", None),
    ("__amd_rocclr_copyBuffer", "copy", None),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
     "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
     "elementwise", None),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t"
     "<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)"
     "::{lambda(float, float)#1}>, unsigned int, float, 4, 4> >(...)", "reduction", None),
]
MIOPEN = [
    # rocprofv3 kernel stats of a ResNet training run on an MI300, in
    # amd/HPCTrainingExamples MLExamples/PyTorch_Profiling/rocprofv3/README.md
    ("SubTensorOpWithScalar1d", "elementwise", None),
    ("igemm_fwd_gtcx3_nhwc_fp16_bx0_ex0_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64_"
     "tb1x8x2x1_1x4x1x64_gkgs", "convolution", TC),
    ("igemm_wrw_gtcx3_nhwc_fp16_bx0_ex1_bt256x256x32_wt32x32x8_ws2x2_wr2x2_ta1x4x1x8_1x8x1x32_"
     "tb1x4x1x8_1x8x1x32_gkgs", "convolution", TC),
    ("igemm_bwd_gtcx3_nhwc_fp16_bx0_ex0_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64_"
     "tb1x8x1x2_1x4x1x64_gkgs", "convolution", TC),
    ("MIOpenBatchNormFwdTrainSpatial", "reduction", None),
    ("MIOpenBatchNormBwdSpatial", "reduction", None),
    ("rccl_main_kernel(ncclDevComm*, unsigned long, ncclWork*)", "communication", None),
    # kernel entry points in ROCm/MIOpen src/kernels: MIOpenTensorKernels.cl, MIOpenConvDirUni.cl
    ("Op2dTensorGeneric", "elementwise", None),
    ("Op2dTensorLite", "elementwise", None),
    ("MIOpenConvUni", "convolution", None),
    # MIOpen's Winograd assembly kernel named in a public solver-selection report (ConvBinWinogradRxSf2x3)
    ("miopenSp3AsmConv_v21_1_3_gfx9_fp32_f2x3_stride1", "convolution", SIMT),
    # MIOpen's batched transpose, the top kernel of a public KernelBench run on an MI355X
    ("batched_transpose_32x16_dword", "copy", None),
    # ROCm/composable_kernel device_grouped_conv_fwd_multiple_abd_xdl_cshuffle_v3.hpp
    ("void ck::tensor_operation::device::(anonymous namespace)::kernel_grouped_conv_fwd_xdl_cshuffle_v3"
     "<ck::GridwiseGemmMultiD_xdl_cshuffle_v3<...> >(...)", "convolution", TC),
    # vLLM ROCm attention (csrc/rocm/attention.cu), as AITER/vLLM profiles list them
    ("paged_attention_ll4mi_QKV_mfma16_kernel", "attention", TC),
    ("paged_attention_ll4mi_reduce_kernel", "attention", None),
    ("_ZN5aiter19fmha_fwd_hd128_bf16E", "attention", TC),
    ("_ZN7ck_tile6kentryILi1ENS_13FmhaFwdKernelEEEvv", "attention", TC),
]
CUDNN_CONV = [
    # TensorFlow profiler dumps and nsys/torch.profiler tables of ResNet training on V100/A100/H100
    ("void implicit_convolve_sgemm<float, float, 128, 6, 7, 3, 3, 5, 1, false, true, true>(int, int, "
     "int, float const*, int, float*, float const*, kernel_conv_params, unsigned long long, int, float, "
     "float, int, float const*, float const*, bool, int, int)", "convolution", SIMT),
    ("maxwell_scudnn_128x128_relu_interior_nn_v1", "convolution", SIMT),
    ("volta_scudnn_128x64_relu_interior_nn_v1", "convolution", SIMT),
    ("volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1", "convolution", SIMT),
    ("void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(cudnn::winograd_nonfused"
     "::WinogradDataParams<float, float>)", "convolution", SIMT),
    ("void cudnn::cnn::wgrad_alg1_engine_NHWC<__half, float, 128, 6, 8, 3, 3, 5, false, true>(int, int, "
     "int, __half const*, int, float*, __half const*, kernel_grad_params, unsigned long long, int, "
     "float, float, int, int, int*, int*, int, int)", "convolution", None),
    ("_ZN5cudnn6detail12dgrad_engineIfLi512ELi6ELi5ELi3ELi3ELi3ELb0EEEviiiPKT_iS4_iPS2_18kernel_grad_"
     "paramsyiyifiii", "convolution", None),
    ("void fft2d_r2c_32x32<float, false, 0u, false>(float2*, float const*, int, int, int, int, int, int, "
     "int, int, int, cudnn::reduced_divisor, bool, int2, int, int)", "convolution", None),
    ("volta_h884cudnn_256x128_ldg8_relu_exp_small_nhwc_tn_v1", "convolution", TC),  # TensorRT tactic log
    ("sm80_xmma_dgrad_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize64x64x64_stage4_warpsize1x4x1_"
     "g8_tensor16x8x16_execute_kernel__5x_cudnn", "convolution", TC),
    ("sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16_stage4_"
     "warpsize2x2x1_g1_tensor16x8x8", "convolution", TC),
    ("sm90_xmma_dgrad_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x64x32_warpgroupsize1x1x1_"
     "g1_execute_segment_k_on_kernel__5x_cudnn", "convolution", TC),
    # nsys truncates long names with an ellipsis; the rules must work on what is left
    ("void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688fprop_optimized_tf32_128x128_16x4_nhwc_align…",
     "convolution", TC),
    ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512, true, 1>(cudnnTensorStruct, float const*, "
     "cudnnTensorStruct, float*, float const*, float const*, float, float, float*, float*, …",
     "reduction", None),
    ("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>"
     "(cudnn::ops::nchw2nhwc_params_t<float>, float const*, float*)", "copy", None),
    # Inductor output_code dumps: the template is the convolution, the poi kernel its epilogue
    ("triton_tem_fused_convolution_0", "convolution", TC),
    ("triton_poi_fused_convolution_relu_threshold_backward_6", "elementwise", None),
]
NEW_GEMMS = [
    # a cuda-gdb core dump in a vLLM bug report (H100, FP8 CUTLASS 3 GEMM)
    ("void cutlass::device_kernel<vllm::cutlass_3x_gemm_sm90_fp8<cutlass::float_e4m3_t, cutlass::"
     "bfloat16_t, vllm::c3x::ScaledEpilogue, cute::tuple<cute::C<64>, cute::C<128>, cute::C<128> >, "
     "cute::tuple<cute::C<2>, cute::C<1>, cute::C<1> >, cutlass::gemm::KernelTmaWarpSpecializedPingpong"
     "FP8FastAccum, cutlass::epilogue::TmaWarpSpecialized, false>::GemmKernel>(vllm::cutlass_3x_gemm_"
     "sm90_fp8<...>::GemmKernel::Params)", "gemm", TC),
    ("void cutlass::device_kernel<vllm::cutlass_3x_gemm_fp8_blockwise<cutlass::bfloat16_t, (int)1, "
     "(int)128>>(T1)", "gemm", TC),
    # PyTorch's grouped / row-wise scaled mm in a public MoE training profile (truncated as printed)
    ("void cutlass::device_kernel<at::cuda::detail::enable_3x_kernel_for_sm9x<cutlass::gemm::ker",
     "gemm", TC),
    ("cutlass3x_sm120_bstensorop_s16832gemm_block_scaled_ue8m0xe4m3_ue8m0xe4m3_f32_bf16_bf16_128x128x128_"
     "1x1x1_0_tnn_align16_q_bias_bf16_relu", "gemm", TC),
    ("ck_tile::GroupedGemmKernel<...>", "gemm", TC),
    # nsys kernel summary of DeepSeek-R1 on a B200 (vLLM): DeepGEMM and trtllm-gen MoE GEMMs
    ("void deep_gemm::sm100_fp8_gemm_1d1d_impl<(cute::UMMA::Major)0, (cute::UMMA::Major)0, "
     "(unsigned int)…", "gemm", TC),
    ("nvjet_tst_64x8_64x16_2x1_v_bz_NNT", "gemm", TC),
    # FlashInfer trtllm_batched_gemm_runner error message (Blackwell bmm_*_sm100f)
    ("bmm_E4m3_E4m3E4m3_Fp32_t128x8x128u2_s8_et64x8_m64x8x32_cga1x1x1_16dp256b_rM_TN_transOut_noShflA_"
     "dsFp8_schedP4x2x2x3_bN_ldgsts_tmaOpt_clmp_dynBatch_sm100f", "gemm", TC),
    # triton_kernels' matmul_ogs as gpt-oss runs it (vLLM/SGLang profiles and sanitizer reports)
    ("_matmul_ogs_NNT_bf16xbf16xmxfp4_32x256x256x1_swiglu", "gemm", TC),
    ("_p_matmul_ogs_NNT_bf16xbf16xmxfp4", "gemm", TC),
    # Their helpers, and a GEMM library's (issue [14]): no matrix multiply, whatever library name they carry
    ("_finalize_matmul_scatter_bf16", "other", None),
    ("void grouped_gemm::cuda::transpose<float>(float*, float const*, int, int)", "other", None),
    ("void grouped_gemm::fill_tensormaps_kernel<(int)1>(grouped_gemm::Params)", "other", None),
    ("fill_tensormaps_kernel", "other", None),
    # a hand-written CUDA matmul in fp32: CUDA cores, not Tensor Cores
    ("matmul_k(float const*, float const*, float*, int)", "gemm", SIMT),
    ("void matmul_k<float>(float*, float*, float*, int)", "gemm", SIMT),
    # a bare matmul name says nothing of its inputs (Triton's tutorial kernel, an extern "C" one):
    # a GEMM on a unit unknown, never Tensor Cores by default
    ("matmul_k", "gemm", None),
    ("matmul_kernel", "gemm", None),
    ("_kernel_matmul_fp8_row", "gemm", TC),
    ("matmul_kernel_bf16", "gemm", TC),
]
COMMUNICATION = [
    # DeepEP in public vLLM/SGLang expert-parallel profiles (names truncated as printed)
    ("void deep_ep::intranode::dispatch<(int)8, (int)768, (int)8192>(int4 *, float *, float *, i",
     "communication", None),
    ("void deep_ep::intranode::combine<__nv_bfloat16, (int)8, (int)768, (int)4096>(T1 *, float *",
     "communication", None),
    ("void deep_ep::intranode::cached_notify_combine<(int)8>(void **, int *, int, int, int, int ",
     "communication", None),
    ("deep_ep::layout::get_dispatch_layout", "communication", None),
    ("void <unnamed>::multimem_all_reduce_kernel<c10::BFloat16, (int)16>(T1 *, unsigned long, unsigned in",
     "communication", None),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",
     "communication", None),
]
SERVING = [
    # the same B200 DeepSeek-R1 nsys summary: FA4 (CuTe DSL), TensorRT-LLM FMHA, vLLM helpers
    ("kernel_cutlass_kernel_vllmvllm_flash_attncuteflash_fwd_sm100FlashAttentionForwardSm100_object_at__t…",
     "attention", TC),
    ("fmhaSm100fKernel_QkvBfloat16OBfloat16HQk576HV512HVPerCta128PagedKvDenseP32MultiCtasKvVarSeqQ16Kv128…",
     "attention", TC),
    ("void vllm::merge_attn_states_kernel<__nv_bfloat16, __nv_bfloat16, (unsigned int)128, (bool)0>(T2 *,…",
     "attention", None),
    ("void per_token_group_quant_8bit_packed_kernel<c10::BFloat16, __nv_fp8_e4m3>(const T1 *, void *, uns…",
     "elementwise", None),
    ("void vllm::gather_and_maybe_dequant_cache<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0…",
     "copy", None),
    ("void vllm::concat_and_cache_mla_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(c…",
     "copy", None),
    ("void at::native::vectorized_gather_kernel<(int)16, long>(char *, char *, T2 *, int, long, long, lon…",
     "copy", None),
    # SGLang profile reports: FlashInfer prefill (mma.sync) and decode (CUDA cores) attention
    ("void flashinfer::BatchPrefillWithPagedKVCacheKernel<flashinfer::KernelTraits<(flashinfer::MaskMode)1, "
     "(unsigned int)128, (unsigned int)2, (unsigned int)2, (unsigned int)8, (unsigned int)8, (unsigned "
     "int)4, (unsigned int)1, (flashinfer::PosEncodingMode)", "attention", TC),
    ("void flashinfer::BatchDecodeWithPagedKVCacheKernel<(flashinfer::PosEncodingMode)0, (unsigned int)2, "
     "(unsigned int)1, (unsigned int)8, (unsigned int)16, (unsigned int)2, (unsigned int)4, "
     "flashinfer::DefaultAttention<(bool)0, (bool)0, (bool)0, (bool)0>,", "attention", SIMT),
    ("kernel_unified_attention_2d", "attention", TC),
    # PyTorch's mem-efficient attention as compiled for sm50 (FP32 before Volta: CUTLASS SIMT)
    ("fmha_cutlassF_f32_aligned_64x64_rf_sm50(PyTorchMemEffAttention::AttentionKernel<float, "
     "cutlass::arch::Sm50, true, 64, 64, 64, true, true>::Params)", "attention", SIMT),
    ("void vllm::rms_norm_per_block_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn, (bool)0, (bool)1, "
     "(int)128>(T2 *)", "reduction", None),
    ("void at::native::detail::chunk_cat_cuda_kernel<float, c10::BFloat16>(T2 **, T1 *, long *, ",
     "copy", None),
]
TABLES = (("volta", VOLTA), ("ampere", AMPERE), ("hopper", HOPPER), ("amd", AMD), ("miopen", MIOPEN),
          ("cudnn-conv", CUDNN_CONV), ("new-gemm", NEW_GEMMS), ("comm", COMMUNICATION),
          ("serving", SERVING))
CASES = [pytest.param(n, k, u, id=f"{group}-{i}") for group, rows in TABLES
         for i, (n, k, u) in enumerate(rows)]


@pytest.mark.parametrize("name,kernel_class,math_unit", CASES)
def test_real_names(name, kernel_class, math_unit):
    got = classify(name)
    assert got[:2] == (kernel_class, math_unit), got[2]
    assert got[2]


# Names with GEMM words (sgemm, igemm, implicit_gemm, GridwiseGemm, tensorop, cutlass, wgmma,
# xdl) that are not GEMMs: convolutions, attention, MIOpen tensor ops, split-K and fbgemm.
_GEMM_WORDS = ("gemm", "tensorop", "cutlass", "mma", "xdl")
NOT_GEMMS = sorted({n for _, rows in TABLES for n, k, _ in rows
                    if k != "gemm" and any(w in n.lower() for w in _GEMM_WORDS)}
                   | {"Cijk_B_PostGSU2", "triton_poi_fused_convolution_relu_threshold_backward_6"})


def test_the_negative_cases_cover_every_family():
    classes = {classify(n)[0] for n in NOT_GEMMS}
    assert {"convolution", "attention", "elementwise", "reduction", "other"} <= classes
    assert len(NOT_GEMMS) >= 20


@pytest.mark.parametrize("name", NOT_GEMMS)
def test_gemm_words_in_names_that_are_not_gemms(name):
    kernel_class, math_unit, why = classify(name)
    assert kernel_class is not None and kernel_class != "gemm", why


def test_tensorop_is_only_a_word_of_its_own():
    # MIOpen's element-wise kernels (src/kernels/MIOpenSubTensorOpWith*Kernel.cl) hold "TensorOp"
    # inside a CamelCase word ...
    for name in ["SubTensorOpWithScalar1d", "SubTensorOpWithSubTensor3d"]:
        assert classify(name)[:2] == ("elementwise", None), name
    # ... while CUTLASS spells it as a snake_case word
    for name in [AMPERE[5][0], HOPPER[8][0], NEW_GEMMS[3][0]]:
        assert "tensorop" in name and classify(name)[:2] == ("gemm", TC), name


def test_camel_case_conv_is_a_convolution_and_convert_is_not():
    # MIOpen's gcnAsmConv1x1U and MIOpenGroupConvUni (src/solver, src/ocl) are convolutions;
    # vLLM's cache_kernels.cu convert_fp8_kernel and FlashAttention's dQ cast are not
    assert classify("gcnAsmConv1x1U")[0] == "convolution"
    assert classify("MIOpenGroupConvUni")[0] == "convolution"
    assert classify("void vllm::convert_fp8_kernel<unsigned char, c10::BFloat16, "
                    "(vllm::Fp8KVCacheDataType)1>")[0] != "convolution"
    assert classify("void pytorch_flash::flash_bwd_convert_dq_kernel<Flash_bwd_kernel_traits<...> >"
                    "(pytorch_flash::Flash_bwd_params, int)")[:2] == ("attention", None)


def _sample_names(stem):
    events = read_trace(SAMPLE_TRACES / f"{stem}.json.gz")["traceEvents"]
    return sorted({e["name"] for e in events if e.get("cat") == "kernel"})


SAMPLE_STEMS = sorted(Path(p).name.split(".")[0] for p in glob.glob(str(SAMPLE_TRACES / "*.json.gz")))
CORPUS = sorted(glob.glob(str(SAMPLE_TRACES / "*.json.gz")) + glob.glob(str(TEST_DATA / "*" / "*.json.gz")))


def test_there_are_eight_sample_traces():
    assert len(SAMPLE_STEMS) == 8


@pytest.mark.parametrize("stem", SAMPLE_STEMS)
def test_every_sample_kernel_is_classified(stem):
    names = _sample_names(stem)
    assert names
    unclassified = [n for n, (k, _, _) in zip(names, classify_many(names)) if k is None]
    assert unclassified == []


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: Path(p).name.split(".")[0])
def test_under_five_percent_of_gpu_time_is_unclassified(path):
    events = read_trace(path)
    events = events["traceEvents"] if isinstance(events, dict) else events
    kernels = [e for e in events if str(e.get("cat", "")).lower() == "kernel" and e.get("dur")]
    total = sum(float(e["dur"]) for e in kernels)
    missed = sum(float(e["dur"]) for e in kernels if classify(e.get("name"))[0] is None)
    assert missed <= 0.05 * total


def _class_counts(stem):
    return Counter(classify(n)[:2] for n in _sample_names(stem))


@pytest.mark.parametrize("stem", ["naive", "naive_inplace"])
def test_naive_gemms_are_tensor_core(stem):
    assert _class_counts(stem) == {("gemm", TC): 2, ("softmax", None): 1,
                                   ("elementwise", None): 2}


def test_sdpa_math_has_exactly_the_simt_gemms():
    assert _class_counts("sdpa_math") == {("gemm", SIMT): 2, ("softmax", None): 1,
                                          ("elementwise", None): 7, ("reduction", None): 1,
                                          ("copy", None): 2}
    simt = [n for n in _sample_names("sdpa_math") if classify(n)[1] == SIMT]
    assert all(n.startswith("sm80_xmma_gemm_f32f32_") and "_ffma_" in n for n in simt)


@pytest.mark.parametrize("stem", ["sdpa_cudnn", "sdpa_default", "sdpa_efficient", "sdpa_flash",
                                  "flex"])
def test_fused_attention_traces_are_one_tensor_core_attention_kernel(stem):
    assert _class_counts(stem) == {("attention", TC): 1}


@pytest.mark.parametrize("name,math_unit", [
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_"
     "aligna4_alignc4_execute_kernel__5x_cublas", SIMT),
    ("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_ffma_execute_kernel", SIMT),
    ("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_stage3_warpsize2x4x1_"
     "tensor16x8x16_kernel", TC),
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize256x128x32_warpgroupsize2x1x1_"
     "execute_segment_k_off_kernel__5x_cublas", TC),
])
def test_xmma_is_simt_with_ffma_and_tensor_core_with_bf16_or_tf32(name, math_unit):
    assert classify(name)[:2] == ("gemm", math_unit)


def test_fbgemm_is_not_a_gemm():
    kernel_class, math_unit, _ = classify("void fbgemm_gpu::permute_2D_data_kernel<false, int, "
                                          "int>(int, int, int const*)")
    assert kernel_class != "gemm" and math_unit is None


@pytest.mark.parametrize("name", ["my_custom_kernel(float*)", "",
                                  "void cub::DeviceRadixSortOnesweepKernel<...>"])
def test_unknown_names_are_none(name):
    assert classify(name) == (None, None, None)


def test_none_name_is_unknown():
    assert classify(None) == (None, None, None)


def _first(pred):
    return min(i for i, r in enumerate(RULES) if pred(r))


def _last(pred):
    return max(i for i, r in enumerate(RULES) if pred(r))


def test_rule_order():
    attention = _last(lambda r: r.kernel_class == "attention")
    convolution = _first(lambda r: r.kernel_class == "convolution")
    assert attention < _first(lambda r: r.kernel_class == "softmax")
    assert attention < convolution < _first(lambda r: r.kernel_class == "gemm")
    # Inductor's templates say their kind outright; every other GEMM rule comes after the convolutions
    assert (_last(lambda r: r.kernel_class == "convolution")
            < _first(lambda r: r.kernel_class == "gemm" and not r.pattern.startswith("triton_")))
    assert _last(lambda r: r.pattern.startswith("triton_")) < _first(lambda r: "convol" in r.pattern)
    assert _last(lambda r: r.pattern == "fbgemm") < _first(lambda r: r.kernel_class == "gemm")
    assert (_last(lambda r: r.kernel_class == "communication")
            < _first(lambda r: r.kernel_class == "reduction"))
    assert (_first(lambda r: "ffma" in r.pattern and r.kernel_class == "gemm")
            < _first(lambda r: "xmma" in r.pattern and r.kernel_class == "gemm"))
    assert _first(lambda r: r.pattern == "copy") < _first(lambda r: "elementwise" in r.pattern)


def test_attention_wins_over_softmax_and_gemm_words():
    # a fused attention name carrying softmax, wgmma and cutlass words is still attention
    assert classify("flash_fwd_kernel<cutlass::Softmax, wgmma, s16816gemm>")[0] == "attention"
    assert classify("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16")[0] == "attention"


def test_rules_are_well_formed():
    for rule in RULES:
        assert rule.kernel_class in KERNEL_CLASSES
        # A GEMM's unit is known but for the one family whose name does not tell it (bare matmul).
        if rule.kernel_class == "gemm" and "matmul(_[a-z0-9_]*)?$" not in rule.pattern:
            assert rule.math_unit in MATH_UNITS, rule.pattern
        elif rule.kernel_class not in MATH_CLASSES:
            assert rule.math_unit is None, rule.pattern
        assert rule.why
        # DuckDB's RE2 has no look-arounds or back-references
        assert "(?=" not in rule.pattern and "(?!" not in rule.pattern
        assert "(?<" not in rule.pattern and "\\1" not in rule.pattern


def test_rules_table_rows():
    rows = rules_table()
    assert [r["order"] for r in rows] == list(range(1, len(RULES) + 1))
    first = RULES[0]
    assert rows[0] == {"order": 1, "pattern": first.pattern, "kernel_class": first.kernel_class,
                       "gemm_class": None, "math_unit": first.math_unit, "why": first.why}
    # gemm_class mirrors math_unit for GEMM rules only
    assert {(r["kernel_class"] == "gemm", r["gemm_class"] == r["math_unit"]) for r in rows
            if r["math_unit"]} == {(True, True), (False, False)}


def test_rows_land_in_the_columns_of_their_tables():
    """class_rows()/rule_rows() follow the tables' columns (rule_rows() is inserted positionally)."""
    from tracekit.store.database import connect

    con = connect(":memory:")
    names = ["volta_sgemm_128x64_nn", "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16",
             "SubTensorOpWithScalar1d", "mystery_kernel"]
    con.executemany("INSERT INTO kernel_classes (name, kernel_class, gemm_class, math_unit, rule) VALUES (?, ?, ?, ?, ?)",
                    class_rows(names))
    con.execute("DELETE FROM kernel_rules")  # connect() stored them: store them again, positionally
    con.executemany("INSERT INTO kernel_rules VALUES (?, ?, ?, ?, ?, ?)", rule_rows())
    got = con.execute("SELECT name, kernel_class, gemm_class, math_unit, rule IS NOT NULL "
                      "FROM kernel_classes ORDER BY name").fetchall()
    assert got == [
        ("SubTensorOpWithScalar1d", "elementwise", None, None, True),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16", "attention", None, TC, True),
        ("mystery_kernel", None, None, None, False),
        ("volta_sgemm_128x64_nn", "gemm", SIMT, SIMT, True),
    ]
    (rules,) = con.execute("SELECT count(*) FROM kernel_rules WHERE why = (SELECT why FROM kernel_rules "
                           "WHERE rule_order = 1) AND pattern = ?", [RULES[0].pattern]).fetchone()
    assert rules == 1
    con.close()


def test_classify_many_keeps_order_and_length():
    names = ["volta_sgemm_128x64_nn", "nope", "volta_sgemm_128x64_nn", "attn_fwd"]
    got = classify_many(names)
    assert [g[0] for g in got] == ["gemm", None, "gemm", "attention"]
    assert classify_many([]) == []


def test_duckdb_regexes_agree_with_python():
    """The stored rules table classifies the same in SQL (RE2) as in Python."""
    names = [c.values[0] for c in CASES] + [n for s in SAMPLE_STEMS for n in _sample_names(s)]
    names += NOT_GEMMS + ["my_custom_kernel(float*)", "gcnAsmConv1x1U", "MIOpenGroupConvUni"]
    con = duckdb.connect()
    con.execute("CREATE TABLE rules (rule_order INTEGER, pattern VARCHAR, kernel_class VARCHAR, "
                "math_unit VARCHAR)")
    con.executemany("INSERT INTO rules VALUES (?, ?, ?, ?)",
                    [(r["order"], r["pattern"], r["kernel_class"], r["math_unit"])
                     for r in rules_table()])
    con.execute("CREATE TABLE names (name VARCHAR)")
    con.executemany("INSERT INTO names VALUES (?)", [(n,) for n in set(names)])
    sql = dict(con.execute(
        "SELECT name, arg_min(kernel_class || ':' || coalesce(math_unit, ''), rule_order) "
        "FROM names LEFT JOIN rules ON regexp_matches(name, pattern, 'i') GROUP BY name").fetchall())
    for name in names:
        kernel_class, math_unit, _ = classify(name)
        expected = None if kernel_class is None else f"{kernel_class}:{math_unit or ''}"
        assert sql[name] == expected, name


def test_queries_count_attention_as_tensor_core_matrix_math(sample_con):
    """summary's tensor_core_pct covers GEMMs, convolutions and attention; gemm_classes only GEMMs."""
    from tracekit.analysis.named_queries import run_named
    from tracekit.outputs.render import records

    summary = {r["trace"]: r["tensor_core_pct"] for r in records(run_named(sample_con, "summary"))}
    # the fused-attention variants ran no GEMM: before math_unit their share was NULL ('—')
    assert summary == pytest.approx({"naive": 100.0, "naive_inplace": 100.0, "sdpa_math": 0.0,
                                     "sdpa_cudnn": 100.0, "sdpa_default": 100.0, "sdpa_efficient": 100.0,
                                     "sdpa_flash": 100.0, "flex": 100.0})
    gemms = {r["trace"] for r in records(run_named(sample_con, "gemm_classes"))}
    assert gemms == {"naive", "naive_inplace", "sdpa_math"}
    top = records(run_named(sample_con, "top_kernels", {"trace": "sdpa_flash", "limit": "1"}))
    assert [(r["kernel_class"], r["gemm_class"], r["math_unit"]) for r in top] == [("attention", None, TC)]
    math = records(run_named(sample_con, "top_kernels", {"trace": "sdpa_math", "limit": "1"}))
    assert [(r["kernel_class"], r["gemm_class"], r["math_unit"]) for r in math] == [("gemm", SIMT, SIMT)]


def test_unclassified_lists_the_rest_with_its_share_of_each_trace():
    from tracekit.analysis.named_queries import named_queries

    con = duckdb.connect()  # a stand-in for the kernels view, with the columns the query reads
    con.execute("CREATE TABLE kernels (trace VARCHAR, name VARCHAR, kernel_class VARCHAR, dur_us DOUBLE)")
    con.executemany("INSERT INTO kernels VALUES (?, ?, ?, ?)", [
        ("a", "mystery", None, 10.0), ("a", "mystery", None, 10.0), ("a", "volta_sgemm", "gemm", 80.0),
        ("b", "mystery", None, 5.0), ("b", "volta_sgemm", "gemm", 95.0), ("c", "idle", None, 0.0)])
    sql = named_queries()["unclassified"].sql
    assert con.execute(sql, {"trace": None}).fetchall() == [("mystery", 2, 3, 25.0, 20.0),
                                                           ("idle", 1, 1, 0.0, None)]
    assert con.execute(sql, {"trace": "b"}).fetchall() == [("mystery", 1, 1, 5.0, 5.0)]


def test_classify_does_not_import_torch():
    import subprocess
    code = "import sys, tracekit.store.classify; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
