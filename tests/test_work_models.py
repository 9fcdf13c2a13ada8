"""The work models (tracekit/store/knowledge/op_work_models.csv): each formula against a count by
hand on a real op of a real trace, its work split over the op's kernels by their time, and the
roofline that kernels.roofline_us, bound and pct_of_roofline draw from it."""

import duckdb
import pytest

from conftest import ROOT, SAMPLE_TRACES, TEST_DATA, named_traces_db
from tracekit.ingest.loader import load_file
from tracekit.store.database import connect, connect_for_queries
from tracekit.store.work_models import FAMILIES, formulas_markdown, rules, to_sql

H200 = TEST_DATA / "h200"
TRACES = {
    "naive": SAMPLE_TRACES / "naive.json.gz",
    "sdpa_flash": SAMPLE_TRACES / "sdpa_flash.json.gz",
    "train_bf16": H200 / "train_bf16" / "train_sdpa_default.json.gz",
    "train_fp32": H200 / "train_fp32" / "train_sdpa_default.json.gz",
    "train_flash": H200 / "fixes" / "train_sdpa_flash.json.gz",
    "train_gpt2": H200 / "loops" / "train_gpt2.json.gz",
    "train_no_item": H200 / "fixes" / "train_no_item.json.gz",
    "train_copy_pinned": H200 / "fixes" / "train_copy_pinned.json.gz",
    "mi300": TEST_DATA / "foreign" / "amd_mi300_gfx942_bf16_gemm.json.gz",
    "a100": TEST_DATA / "foreign" / "a100_sxm4_80gb_fp16_gemm_ampere.json.gz",
    "resnet": H200 / "work_models" / "train_resnet50.json.gz",
    "more_ops": TEST_DATA / "h100" / "more_ops" / "train_more_ops.json.gz",
}


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return named_traces_db(tmp_path_factory, "work", TRACES)


def _first_op(db, trace, op):
    """The first call of `op` in `trace` that launched kernels: its shapes, and its kernels' work summed."""
    con = connect_for_queries(db)
    try:
        return con.execute(
            "SELECT o.input_dims, o.input_types, sum(k.flops), sum(k.bytes), sum(k.model_flops), "
            "       any_value(k.work_family), count(*) "
            "FROM kernels k JOIN traces t ON t.trace = k.trace JOIN cpu_op_rows o ON o.op_id = k.cpu_op_id "
            "JOIN trace_files f ON f.trace_id = o.trace_id AND f.trace = k.trace "
            "WHERE k.trace = ? AND k.cpu_op = ? GROUP BY o.op_id, o.input_dims, o.input_types, o.ts_ns "
            "ORDER BY o.ts_ns LIMIT 1", [trace, op]).fetchone()
    finally:
        con.close()


# Each case: trace, the op that launched the kernels, its Input Dims as recorded, and FLOPs,
# bytes and model FLOPs counted by hand from them (bf16 2 bytes, fp32 4, int64 8, bool 1).
CASES = [
    # GEMMs: 2·M·N·K; A and B read, C written.
    ("train_copy_pinned", "aten::mm", "[[4096,4096],[4096,4096]]",
     2 * 4096 ** 3, 3 * 4096 * 4096 * 2, None),
    # addmm(bias[4096], A, B): 2MNK + MN for the bias; the bias read too.
    ("train_copy_pinned", "aten::addmm", "[[4096],[4096,4096],[4096,4096],[],[]]",
     2 * 4096 ** 3 + 4096 * 4096, 4096 * 2 + 3 * 4096 * 4096 * 2, None),
    # bmm [64,2048,64]·[64,64,2048]: 2·64·2048·2048·64; C is [64,2048,2048].
    ("naive", "aten::bmm", "[[64,2048,64],[64,64,2048]]",
     2 * 64 * 2048 * 2048 * 64, (2 * 64 * 2048 * 64 + 64 * 2048 * 2048) * 2, None),
    # A split-K GEMM on an MI300X (Tensile's GSU kernel and its PostGSU reduction): the op's 2MNK
    # over its two kernels.
    ("mi300", "aten::mm", "[[256,131072],[131072,512]]",
     2 * 256 * 131072 * 512, (256 * 131072 + 131072 * 512 + 256 * 512) * 2, None),
    # Attention, causal (Concrete Inputs' is_causal True): pairs = S(S+1)/2.
    # flash forward, q [4,16,2048,64]: 2·B·H·pairs·(D+Dv); q, k, v read and O written.
    ("sdpa_flash", "aten::_flash_attention_forward", "[[4,2048,16,64],[4,2048,16,64],[4,2048,16,64],[],[],[],[],[],[],[],[],[],[],[],[]]",
     2 * 4 * 16 * (2048 * 2049 // 2) * 128, 4 * 4 * 16 * 2048 * 64 * 2, None),
    # flash backward, q [8,16,1024,64]: five matmuls executed (3D + 2Dv), four in the model.
    ("train_flash", "aten::_flash_attention_backward", "[[8,1024,16,64],[8,1024,16,64],[8,1024,16,64],[8,1024,16,64],[8,1024,16,64],[8,16,1024],[],[],[],[],[],[],[2],[],[],[],[]]",
     2 * 8 * 16 * (1024 * 1025 // 2) * 320, 2 * 4 * 8 * 16 * 1024 * 64 * 2, 2 * 8 * 16 * (1024 * 1025 // 2) * 256),
    # cuDNN backward, q [8,4,256,64] bf16, over its main kernel, dO·O and the dQ conversion.
    ("train_bf16", "aten::_cudnn_attention_backward", None,
     2 * 8 * 4 * (256 * 257 // 2) * 320, 2 * 4 * 8 * 4 * 256 * 64 * 2, 2 * 8 * 4 * (256 * 257 // 2) * 256),
    # efficient backward in fp32, q [8,4,256,64].
    ("train_fp32", "aten::_efficient_attention_backward", None,
     2 * 8 * 4 * (256 * 257 // 2) * 320, 2 * 4 * 8 * 4 * 256 * 64 * 4, 2 * 8 * 4 * (256 * 257 // 2) * 256),
    # softmax [4,16,2048,2048] bf16: 3 per element, read and written.
    ("naive", "aten::_softmax", "[[4,16,2048,2048],[],[]]", 3 * 4 * 16 * 2048 * 2048, 2 * 4 * 16 * 2048 * 2048 * 2, None),
    # log_softmax backward [8192,50257] fp32: dy and y read, dx written.
    ("train_gpt2", "aten::_log_softmax_backward_data", "[[8192,50257],[8192,50257],[],[]]",
     3 * 8192 * 50257, 3 * 8192 * 50257 * 4, None),
    # layer norm [8,1024,768] fp32, γ and β [768]: 7 per element.
    ("train_gpt2", "aten::native_layer_norm", "[[8,1024,768],[],[768],[768],[]]",
     7 * 8 * 1024 * 768, 2 * 8 * 1024 * 768 * 4 + 2 * 768 * 4, None),
    # its backward, mean and rstd [8,1024,1]: 13 per element; dy, x read, dx written; γ read, dγ dβ written.
    ("train_gpt2", "aten::native_layer_norm_backward", "[[8,1024,768],[8,1024,768],[],[8,1024,1],[8,1024,1],[768],[768],[]]",
     13 * 8 * 1024 * 768, 3 * 8 * 1024 * 768 * 4 + 2 * 8 * 1024 * 4 + 3 * 768 * 4, None),
    # cross-entropy: nll_loss forward reads the 8192 targets and one log-probability each.
    ("train_gpt2", "aten::nll_loss_forward", "[[8192,50257],[8192],[],[],[]]", 8192, 8192 * 8 + 8192 * 4 + 4, None),
    ("train_gpt2", "aten::nll_loss_backward", "[[],[8192,50257],[8192],[],[],[],[]]", 8192, 8192 * 8 + 8192 * 4 + 4, None),
    # embedding backward: dy [1,1024,768] added into 1024 rows (num_weights, Concrete Inputs).
    ("train_gpt2", "aten::embedding_dense_backward", "[[1,1024,768],[1,1024],[],[],[]]",
     1024 * 768, 1024 * 768 * 4 + 1024 * 8 + 1024 * 768 * 4, None),
    # gather of 8192·768 fp32 elements: read and written.
    ("train_gpt2", "aten::gather", "[[50257,768],[],[8192,768],[],[8192,768]]", 0, 2 * 8192 * 768 * 4, None),
    # cat of [0] and [8,12,1024,64] bf16 (OpaqueType<2u> in the kernel's name).
    ("train_gpt2", "aten::cat", "[[[0],[8,12,1024,64]],[]]", 0, 2 * 8 * 12 * 1024 * 64 * 2, None),
    # copy_ (a cast): fp32 read, bf16 written.
    ("train_copy_pinned", "aten::copy_", "[[4096,4096],[4096,4096],[]]", 0, 4096 * 4096 * (2 + 4), None),
    # elementwise: mul by a Python scalar (a 0-dim double that does not promote bf16).
    ("naive", "aten::mul", "[[4,16,2048,2048],[]]", 4 * 16 * 2048 * 2048, 2 * 4 * 16 * 2048 * 2048 * 2 + 8, None),
    # masked_fill_ with a [2048,2048] bool mask broadcast.
    ("naive", "aten::masked_fill_", "[[4,16,2048,2048],[2048,2048],[]]",
     4 * 16 * 2048 * 2048, 2 * 4 * 16 * 2048 * 2048 * 2 + 2048 * 2048, None),
    # where(cond 0-dim bool, x, y bf16 [4096,256]): the output in x's dtype.
    ("train_no_item", "aten::where", "[[],[4096,256],[4096,256]]", 4096 * 256, 1 + 3 * 4096 * 256 * 2, None),
    # a comparison writes bools.
    ("train_no_item", "aten::ge", "[[4096,256],[]]", 4096 * 256, 4096 * 256 * (2 + 1), None),
    # dropout [8,1024,768] fp32: x read, y and the mask written.
    ("train_gpt2", "aten::native_dropout", "[[8,1024,768],[],[]]", 2 * 8 * 1024 * 768, 8 * 1024 * 768 * (4 + 4 + 1), None),
    ("train_gpt2", "aten::tanh_backward", "[[8,1024,3072],[8,1024,3072]]", 2 * 8 * 1024 * 3072, 3 * 8 * 1024 * 3072 * 4, None),
    # reductions: sum over dim 0 keepdim of [4096,4096] bf16 writes 4096; mean over all writes 1.
    ("train_copy_pinned", "aten::sum", "[[4096,4096],[],[],[]]", 4096 * 4096, (4096 * 4096 + 4096) * 2, None),
    ("train_copy_pinned", "aten::mean", "[[4096,4096],[],[],[]]", 4096 * 4096, (4096 * 4096 + 1) * 4, None),
    # ResNet-50, batch 32, bf16 channels_last (tests/data/h200/work_models). The stem convolution,
    # x [32,3,224,224], w [64,3,7,7], padding 3, stride 2: P = Q = ⌊(224 + 6 − 6 − 1)/2⌋ + 1 = 112;
    # 2·N·K·P·Q·C·R·S; x and w read, y [32,64,112,112] written.
    ("resnet", "aten::cudnn_convolution", "[[32,3,224,224],[64,3,7,7],[],[],[],[],[],[],[]]",
     2 * 32 * 64 * 112 * 112 * 3 * 7 * 7, (32 * 3 * 224 * 224 + 64 * 3 * 7 * 7 + 32 * 64 * 112 * 112) * 2, None),
    # the last 1x1 convolution's backward, dy [32,2048,7,7], x [32,512,7,7], output_mask [True,
    # True, False]: dgrad and wgrad, each 2·numel(dy)·C; dy, x, w read, dx and dw written.
    ("resnet", "aten::convolution_backward", "[[32,2048,7,7],[32,512,7,7],[2048,512,1,1],[],[],[],[],[],[],[],[]]",
     2 * 2 * 32 * 2048 * 49 * 512, (32 * 2048 * 49 + 2 * 32 * 512 * 49 + 2 * 2048 * 512) * 2, None),
    # batch norm in training, x [32,64,112,112] bf16: 7 per element; the fp32 statistics per channel.
    ("resnet", "aten::native_batch_norm", "[[32,64,112,112],[64],[64],[64],[64],[],[],[]]",
     7 * 32 * 64 * 112 * 112, 2 * 32 * 64 * 112 * 112 * 2 + 6 * 64 * 4, None),
    ("resnet", "aten::native_batch_norm_backward",
     "[[32,2048,7,7],[32,2048,7,7],[2048],[2048],[2048],[2048],[2048],[],[],[]]",
     13 * 32 * 2048 * 49, 3 * 32 * 2048 * 49 * 2 + 6 * 2048 * 4, None),
    # the stem's max pool, 3x3, stride 2, padding 1: [32,64,112,112] to [32,64,56,56], nine compares
    # an output; x read, the maxima (bf16) and their int64 indices written.
    ("resnet", "aten::max_pool2d_with_indices", "[[32,64,112,112],[],[],[],[],[]]",
     32 * 64 * 56 * 56 * 9, 32 * 64 * 112 * 112 * 2 + 32 * 64 * 56 * 56 * (2 + 8), None),
    # its backward: dy and the indices read, dx written.
    ("resnet", "aten::max_pool2d_with_indices_backward", "[[32,64,56,56],[32,64,112,112],[],[],[],[],[],[32,64,56,56]]",
     32 * 64 * 56 * 56, 32 * 64 * 56 * 56 * (2 + 8) + 32 * 64 * 112 * 112 * 2, None),
    # The ops of tests/data/h100/more_ops (an H100; fp16 autocast, fp32 where autocast keeps it).
    # avg_pool2d 2x2 of [32,64,56,56] fp16: [32,64,28,28], 4 adds and a divide an output; x read, y written.
    ("more_ops", "aten::avg_pool2d", "[[32,64,56,56],[],[],[],[],[],[]]",
     32 * 64 * 28 * 28 * 5, (32 * 64 * 56 * 56 + 32 * 64 * 28 * 28) * 2, None),
    # its backward: each dy divided and added into its 4 inputs; dy read, dx written.
    ("more_ops", "aten::avg_pool2d_backward", "[[32,64,28,28],[32,64,56,56],[],[],[],[],[],[]]",
     32 * 64 * 28 * 28 * 5, (32 * 64 * 28 * 28 + 32 * 64 * 56 * 56) * 2, None),
    # bilinear upsampling x2 of [32,64,28,28] fp32: 9 FLOPs an output of [32,64,56,56].
    ("more_ops", "aten::upsample_bilinear2d", "[[32,64,28,28],[],[],[],[]]",
     9 * 32 * 64 * 56 * 56, (32 * 64 * 28 * 28 + 32 * 64 * 56 * 56) * 4, None),
    # its backward: 12 FLOPs a dy (4 weighted adds), dx [32,64,28,28] written.
    ("more_ops", "aten::upsample_bilinear2d_backward", "[[32,64,56,56],[],[],[],[],[]]",
     12 * 32 * 64 * 56 * 56, (32 * 64 * 56 * 56 + 32 * 64 * 28 * 28) * 4, None),
    # nearest x0.5 (scale_factor, no output_size): copies only; [32,64,56,56] read, [32,64,28,28] written.
    ("more_ops", "aten::upsample_nearest2d", "[[32,64,56,56],[],[],[]]",
     0, (32 * 64 * 56 * 56 + 32 * 64 * 28 * 28) * 4, None),
    ("more_ops", "aten::upsample_nearest2d_backward", "[[32,64,28,28],[],[],[],[]]",
     32 * 64 * 28 * 28, (32 * 64 * 28 * 28 + 32 * 64 * 56 * 56) * 4, None),
    # an embedding bag of 100,000 x 128 fp32 rows, 640 indices in 32 bags (sum): a row added per
    # index; the rows, indices and offsets read, 32 bags written.
    ("more_ops", "aten::_embedding_bag", "[[100000,128],[640],[32],[],[],[],[],[],[]]",
     640 * 128, 640 * 128 * 4 + 640 * 8 + 32 * 8 + 32 * 128 * 4, None),
    # losses over [32,256] fp32, reduction mean: 3 (MSE) and 5 (smooth L1) an element; x, y read, a scalar written.
    ("more_ops", "aten::mse_loss", "[[32,256],[32,256],[]]", 3 * 32 * 256, 2 * 32 * 256 * 4 + 4, None),
    ("more_ops", "aten::smooth_l1_loss", "[[32,256],[32,256],[],[]]", 5 * 32 * 256, 2 * 32 * 256 * 4 + 4, None),
    # backwards: the scalar dl, x and y read, dx written.
    ("more_ops", "aten::mse_loss_backward", "[[],[32,256],[32,256],[],[32,256]]",
     3 * 32 * 256, 4 + 3 * 32 * 256 * 4, None),
    ("more_ops", "aten::smooth_l1_loss_backward", "[[],[32,256],[32,256],[],[],[32,256]]",
     4 * 32 * 256, 4 + 3 * 32 * 256 * 4, None),
    # rfft over the last dim of [32,256] fp32: 2.5·256·log2(256) a row; 129 complex outputs a row.
    ("more_ops", "aten::_fft_r2c", "[[32,256],[],[],[]]", 2.5 * 32 * 256 * 8, 32 * 256 * 4 + 32 * 129 * 2 * 4, None),
    # random fills of [32,256] fp32 (bernoulli_ reads its p tensor too), cumsum, log_sigmoid.
    ("more_ops", "aten::normal_", "[[32,256],[],[],[]]", 32 * 256, 32 * 256 * 4, None),
    ("more_ops", "aten::bernoulli_", "[[32,256],[32,256],[]]", 32 * 256, 2 * 32 * 256 * 4, None),
    ("more_ops", "aten::cumsum", "[[32,256],[],[]]", 32 * 256, 2 * 32 * 256 * 4, None),
    ("more_ops", "aten::log_sigmoid_forward", "[[32,256]]", 4 * 32 * 256, 2 * 32 * 256 * 4, None),
    # clip_grad_norm_'s foreach norm and AMP's unscale over the model's 12,886,336 fp32 gradients
    # (conv 64·64·3·3 + 64, bag 100,000·128, head 192·256 + 256): 2 an element; read (and written).
    ("more_ops", "aten::_foreach_norm", None, 2 * 12886336, 12886336 * 4, None),
    ("more_ops", "aten::_amp_foreach_non_finite_check_and_unscale_", None, 2 * 12886336, 2 * 12886336 * 4, None),
]


@pytest.mark.parametrize("trace, op, dims, flops, nbytes, model_flops", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_each_formula_matches_a_count_by_hand(db, trace, op, dims, flops, nbytes, model_flops):
    recorded, _, got_flops, got_bytes, got_model, family, _ = _first_op(db, trace, op)
    if dims is not None:
        assert recorded == dims
    assert family is not None
    assert got_flops == pytest.approx(flops, rel=1e-9, abs=1e-9)
    assert got_bytes == pytest.approx(nbytes, rel=1e-9)
    assert got_model == pytest.approx(model_flops if model_flops is not None else flops, rel=1e-9, abs=1e-9)


def test_an_op_of_several_kernels_splits_its_work_by_their_time(db):
    # The MI300X's split-K GEMM: 1085 us of GSU kernel and 5 us of reduction share 2·256·131072·512.
    con = connect_for_queries(db)
    try:
        rows = con.execute("SELECT name, dur_us, flops FROM kernels WHERE trace = 'mi300' AND cpu_op = 'aten::mm' "
                           "ORDER BY ts_us LIMIT 2").fetchall()
        backward = con.execute(
            "SELECT cpu_op_id, list(dur_us ORDER BY ts_us), list(flops ORDER BY ts_us) FROM kernels "
            "WHERE trace = 'train_bf16' AND cpu_op = 'aten::_cudnn_attention_backward' GROUP BY cpu_op_id "
            "ORDER BY min(ts_us) LIMIT 1").fetchone()
    finally:
        con.close()
    total = 2 * 256 * 131072 * 512
    assert [r[1] for r in rows] == [1085.0, 5.0]
    assert rows[0][2] == pytest.approx(total * 1085 / 1090) and rows[1][2] == pytest.approx(total * 5 / 1090)
    _, durations, flops = backward
    assert len(durations) == 3
    for dur, share in zip(durations, flops):
        assert share == pytest.approx(2 * 8 * 4 * (256 * 257 // 2) * 320 * dur / sum(durations))


def test_roofline_takes_the_tensor_core_peak_for_matrix_math_and_the_vector_peak_for_the_rest(db):
    # H200: BF16 989.5 TFLOP/s dense, FP32 on CUDA cores 67, 4.8 TB/s (gpu_specs).
    con = connect_for_queries(db)
    try:
        gemm, softmax = (con.execute(
            "SELECT flops, bytes, dur_us, peak_tflops, roofline_us, bound, pct_of_roofline FROM kernels "
            "WHERE trace = 'naive' AND cpu_op = ? ORDER BY ts_us LIMIT 1", [op]).fetchone()
            for op in ("aten::bmm", "aten::_softmax"))
        math = con.execute("SELECT count(*), count(*) FILTER (WHERE g.roofline_us = k.roofline_us) FROM gemm_math g "
                           "JOIN kernels k USING (trace, name, cpu_op_id) WHERE g.trace = 'naive' "
                           "AND g.gemm_us = k.dur_us").fetchone()
    finally:
        con.close()
    flops, nbytes, dur, peak, roofline, bound, pct = gemm
    # 34.4 GFLOP at 989.5 TFLOP/s: 34.7 us; 570 MB at 4.8 TB/s: 118.8 us: memory-bound (C is 512 MB).
    assert peak == 989.5 and roofline == pytest.approx(max(flops / 989.5e6, nbytes / 4.8e6))
    assert roofline == pytest.approx(570425344 / 4.8e6) and bound == "memory"
    assert pct == pytest.approx(100 * roofline / dur)
    flops, nbytes, dur, peak, roofline, bound, pct = softmax
    # 805 MFLOP at 67 TFLOP/s: 12 us; 1.07 GB at 4.8 TB/s: 223.7 us.
    assert peak == 67 and bound == "memory" and roofline == pytest.approx(1073741824 / 4.8e6)
    assert 10 < pct < 100
    assert math[0] == 12 and math[1] == 12  # gemm_math's roofline is the kernels view's


def test_work_is_null_where_the_trace_cannot_say(db):
    con = connect_for_queries(db)
    try:
        no_shapes = con.execute("SELECT count(*), count(flops), count(bytes), count(roofline_us), "
                                "list(DISTINCT work_missing) FROM kernels WHERE trace = 'a100'").fetchone()
        # The MI300 trace names no device: work known, roofline not.
        mi300 = con.execute("SELECT count(flops), count(roofline_us), count(work_missing) FROM kernels "
                            "WHERE trace = 'mi300'").fetchone()
        # Kernels whose op no formula knows: train_gpt2's position ids (aten::arange).
        no_formula = con.execute("SELECT count(*), count(flops), list(DISTINCT work_missing) FROM kernels "
                                 "WHERE trace = 'train_gpt2' AND cpu_op = 'aten::arange'").fetchone()
    finally:
        con.close()
    assert no_shapes[0] == 5 and no_shapes[1:] == (0, 0, 0, ["no shapes recorded"])
    assert mi300 == (20, 0, 0)
    assert no_formula == (10, 0, ["no formula for its op"])


def test_most_gpu_time_of_the_real_traces_is_modelled(db):
    con = connect_for_queries(db)
    try:
        shares = dict(con.execute(
            "SELECT trace, 100 * sum(dur_us) FILTER (WHERE flops IS NOT NULL AND bytes IS NOT NULL) / sum(dur_us) "
            "FROM kernels WHERE cpu_op IS NOT NULL GROUP BY trace").fetchall())
    finally:
        con.close()
    # Of the kernels launched inside the trace (a trace's first kernels may have been launched before it began).
    for trace in ("naive", "sdpa_flash", "train_copy_pinned", "train_no_item"):
        assert shares[trace] >= 90, trace
    # With the optimizer's foreach kernels (tests/test_work_model_foreach.py): all, or nearly.
    assert shares["train_bf16"] == pytest.approx(100) and shares["train_gpt2"] > 99.9


def test_the_formulas_file_is_well_formed():
    rows = rules()
    assert len(rows) >= 40 and {row["family"] for row in rows} == set(FAMILIES)
    assert all(row["source"] and row["flops"] for row in rows)
    # The names a formula uses become SQL: d0[-1] the last dim of input 0, c2[1] a list's element.
    assert to_sql("2 * d0[-1] * n1 * s1") == ("2 * TRY_CAST(json_extract(dims, '$[0][#-1]') AS DOUBLE) * ins[2].n * ins[2].s")
    assert to_sql("wm_item(ct2; 0) + c2[1] + cb4") == (
        "wm_item(json_extract_string(conc, '$[2]'), 0) + wm_item(json_extract_string(conc, '$[2]'), 1) "
        "+ wm_bool(json_extract_string(conc, '$[4]'))")
    assert to_sql("") == "NULL"
    # As _op_work renders them: each shape value a column, whose SQL is kept once for all formulas.
    bound = {}
    assert to_sql("2 * d0[-1] * d0[-1] * n1 + c2", bound) == "2 * f_d0_m1 * f_d0_m1 * ins[2].n + f_c2"
    assert to_sql("wm_reduce_out(x0; ct1) * s0 + d0[-1]", bound) == "wm_reduce_out(f_x0, f_ct1) * ins[1].s + f_d0_m1"
    assert bound == {"f_d0_m1": "TRY_CAST(json_extract(dims, '$[0][#-1]') AS DOUBLE)",
                     "f_c2": "TRY_CAST(json_extract_string(conc, '$[2]') AS DOUBLE)",
                     "f_x0": "json_extract(dims, '$[0]')", "f_ct1": "json_extract_string(conc, '$[1]')"}
    # Every op pattern is a regular expression DuckDB (RE2) takes, as the loader runs it.
    con = duckdb.connect()
    for row in rows:
        con.execute("SELECT regexp_full_match('aten::mm', ?)", [row["op"]]).fetchone()
    with pytest.raises(duckdb.Error):
        con.execute("SELECT regexp_full_match('aten::mm', ?)", ["aten::(mm"]).fetchone()


def test_the_docs_show_every_formula_as_the_file_has_it():
    assert formulas_markdown() in (ROOT / "docs" / "work-models.md").read_text(encoding="utf-8")


def test_flex_attention_says_its_block_mask_is_not_in_the_trace(tmp_path):
    # Inductor's flex attention template kernels compute the blocks the block mask's values name;
    # Kineto writes only the mask tensors' shapes (KV_NUM_BLKS [1, 1, 16], KV_IDX [1, 1, 16, 16]).
    # The backward's row-sum kernel (triton_per_) reads no mask: it just has no formula.
    con = connect(tmp_path / "flex.duckdb")
    for file in (SAMPLE_TRACES / "flex.json.gz", H200 / "work_models" / "flex_attention.json.gz"):
        assert load_file(con, file).status == "loaded"
    con.close()
    con = connect_for_queries(tmp_path / "flex.duckdb")
    try:
        rows = con.execute("SELECT trace, cpu_op, count(*), count(flops), count(bytes), any_value(work_missing) "
                           "FROM kernels WHERE cpu_op LIKE 'triton_%' GROUP BY ALL ORDER BY ALL").fetchall()
    finally:
        con.close()
    mask = "flex attention: which blocks it computes is not in the trace (block mask values)"
    assert rows == [("flex", "triton_tem_fused_flex_attention_0", 6, 0, 0, mask),
                    ("flex_attention", "triton_per_fused_flex_attention_backward_0", 5, 0, 0, "no formula for its op"),
                    ("flex_attention", "triton_tem_fused_flex_attention_0", 5, 0, 0, mask),
                    ("flex_attention", "triton_tem_fused_flex_attention_backward_1", 5, 0, 0, mask)]
