"""Kernel classification: real kernel names per GPU generation, the sample traces, rule order."""

import glob
import sys
from collections import Counter
from pathlib import Path

import duckdb
import pytest

from conftest import SAMPLE_TRACES, read_trace
from tracekit.classify import (GEMM_CLASSES, KERNEL_CLASSES, RULES, classify, classify_many,
                               rules_table)

TC, SIMT = "tensor_core", "simt"

# (name, kernel_class, gemm_class), names as cuBLAS/cuDNN/PyTorch/NCCL print them in profiles.
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
    ("fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, "
     "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)", "attention", None),
    ("fmha_cutlassB_bf16_aligned_64x64_k64_sm80(PyTorchMemEffAttention::AttentionBackwardKernel"
     "<cutlass::arch::Sm80, cutlass::bfloat16_t, true, false, false, 64, 64, 64, false>::Params)",
     "attention", None),
    ("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, "
     "cutlass::bfloat16_t>, false, false, false>(flash::Flash_fwd_params)", "attention", None),
    ("flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel", "attention", None),
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
     "cga1x1x1_kernel0_0", "attention", None),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x128_1x4x1_"
     "cga1x1x1", "attention", None),
    ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<...> > >"
     "(...)", "attention", None),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
     "cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, "
     "true, false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)",
     "attention", None),
    ("triton_tem_fused_flex_attention_0", "attention", None),
    ("triton_tem_fused_flex_attention_backward_2", "attention", None),
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
    ("void ck_tile::kentry<256, 2, ck_tile::FmhaFwdKernel<...> >(...)", "attention", None),
    ("attn_fwd", "attention", None),
    ("_attn_fwd", "attention", None),
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
CASES = [pytest.param(n, k, g, id=f"{gen}-{i}")
         for gen, rows in (("volta", VOLTA), ("ampere", AMPERE), ("hopper", HOPPER), ("amd", AMD))
         for i, (n, k, g) in enumerate(rows)]


@pytest.mark.parametrize("name,kernel_class,gemm_class", CASES)
def test_real_names(name, kernel_class, gemm_class):
    got = classify(name)
    assert got[:2] == (kernel_class, gemm_class), got[2]
    assert got[2]


def _sample_names(stem):
    events = read_trace(SAMPLE_TRACES / f"{stem}.json.gz")["traceEvents"]
    return sorted({e["name"] for e in events if e.get("cat") == "kernel"})


SAMPLE_STEMS = sorted(Path(p).name.split(".")[0] for p in glob.glob(str(SAMPLE_TRACES / "*.json.gz")))


def test_there_are_eight_sample_traces():
    assert len(SAMPLE_STEMS) == 8


@pytest.mark.parametrize("stem", SAMPLE_STEMS)
def test_every_sample_kernel_is_classified(stem):
    names = _sample_names(stem)
    assert names
    unclassified = [n for n, (k, _, _) in zip(names, classify_many(names)) if k is None]
    assert unclassified == []


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
def test_fused_attention_traces_are_one_attention_kernel(stem):
    assert _class_counts(stem) == {("attention", None): 1}


@pytest.mark.parametrize("name,gemm_class", [
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_"
     "aligna4_alignc4_execute_kernel__5x_cublas", SIMT),
    ("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_ffma_execute_kernel", SIMT),
    ("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_stage3_warpsize2x4x1_"
     "tensor16x8x16_kernel", TC),
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize256x128x32_warpgroupsize2x1x1_"
     "execute_segment_k_off_kernel__5x_cublas", TC),
])
def test_xmma_is_simt_with_ffma_and_tensor_core_with_bf16_or_tf32(name, gemm_class):
    assert classify(name)[:2] == ("gemm", gemm_class)


def test_fbgemm_is_not_a_gemm():
    kernel_class, gemm_class, _ = classify("void fbgemm_gpu::permute_2D_data_kernel<false, int, "
                                           "int>(int, int, int const*)")
    assert kernel_class != "gemm" and gemm_class is None


@pytest.mark.parametrize("name", ["my_custom_kernel(float*)", "",
                                  "void cub::DeviceRadixSortOnesweepKernel<...>",
                                  "ck_tile::GroupedGemmKernel<...>"])
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
    assert attention < _first(lambda r: r.kernel_class == "softmax")
    assert attention < _first(lambda r: r.kernel_class == "gemm")
    assert _last(lambda r: r.pattern == "fbgemm") < _first(lambda r: r.kernel_class == "gemm")
    assert (_last(lambda r: r.kernel_class == "communication")
            < _first(lambda r: r.kernel_class == "reduction"))
    assert _first(lambda r: "ffma" in r.pattern) < _first(lambda r: "xmma" in r.pattern)
    assert _first(lambda r: r.pattern == "copy") < _first(lambda r: "elementwise" in r.pattern)


def test_attention_wins_over_softmax_and_gemm_words():
    # a fused attention name carrying softmax, wgmma and cutlass words is still attention
    assert classify("flash_fwd_kernel<cutlass::Softmax, wgmma, s16816gemm>")[0] == "attention"
    assert classify("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16")[0] == "attention"


def test_rules_are_well_formed():
    for rule in RULES:
        assert rule.kernel_class in KERNEL_CLASSES
        assert (rule.kernel_class == "gemm") == (rule.gemm_class in GEMM_CLASSES)
        assert rule.why
        # DuckDB's RE2 has no look-arounds or back-references
        assert "(?=" not in rule.pattern and "(?!" not in rule.pattern
        assert "(?<" not in rule.pattern


def test_rules_table_rows():
    rows = rules_table()
    assert [r["order"] for r in rows] == list(range(1, len(RULES) + 1))
    assert rows[0] == {"order": 1, "pattern": RULES[0].pattern,
                       "kernel_class": RULES[0].kernel_class, "gemm_class": RULES[0].gemm_class,
                       "why": RULES[0].why}


def test_classify_many_keeps_order_and_length():
    names = ["volta_sgemm_128x64_nn", "nope", "volta_sgemm_128x64_nn", "attn_fwd"]
    got = classify_many(names)
    assert [g[0] for g in got] == ["gemm", None, "gemm", "attention"]
    assert classify_many([]) == []


def test_duckdb_regexes_agree_with_python():
    """The stored rules table classifies the same in SQL (RE2) as in Python."""
    names = [c.values[0] for c in CASES] + [n for s in SAMPLE_STEMS for n in _sample_names(s)]
    names += ["my_custom_kernel(float*)"]
    con = duckdb.connect()
    con.execute("CREATE TABLE rules (rule_order INTEGER, pattern VARCHAR, kernel_class VARCHAR, "
                "gemm_class VARCHAR)")
    con.executemany("INSERT INTO rules VALUES (?, ?, ?, ?)",
                    [(r["order"], r["pattern"], r["kernel_class"], r["gemm_class"])
                     for r in rules_table()])
    con.execute("CREATE TABLE names (name VARCHAR)")
    con.executemany("INSERT INTO names VALUES (?)", [(n,) for n in names])
    sql = dict(con.execute(
        "SELECT name, arg_min(kernel_class || ':' || coalesce(gemm_class, ''), rule_order) "
        "FROM names LEFT JOIN rules ON regexp_matches(name, pattern, 'i') GROUP BY name").fetchall())
    for name in names:
        kernel_class, gemm_class, _ = classify(name)
        expected = None if kernel_class is None else f"{kernel_class}:{gemm_class or ''}"
        assert sql[name] == expected, name


def test_classify_does_not_import_torch():
    import subprocess
    code = "import sys, tracekit.classify; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
