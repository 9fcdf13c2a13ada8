"""How long a GEMM that ran on the GPU's SIMT cores would take on its Tensor Cores: what the
`tensor-cores` fix replays it at.

Its roofline (its FLOPs at the Tensor Core peak of its dtype, or its bytes at the memory's
bandwidth, the longer) is a bound no kernel reaches: cuBLAS's Tensor Core GEMMs in the captures of
tests/data reach 6% of it at 10^7 FLOPs, 58% at 10^10, 82% at 10^11 (small GEMMs are their
prologue and epilogue and too few tiles for the GPU's SMs). A GEMM whose matrices have a dimension
that does not make rows of a multiple of 16 bytes (8 bf16 elements, 4 fp32 ones on TF32; GPT-2's
vocabulary of 50,257) cannot use the TMA-based kernels: cuBLAS runs it with older mma.sync kernels, at 13.5% of the GPU's
bf16 peak whatever its dtype (TF32's 129 TFLOP/s and bf16's 134 on the H100). So a GEMM takes its
roofline over the efficiency GEMMs of its size reach, or, unaligned, its FLOPs at that share of
the bf16 peak. benchmarks/tensor_core_efficiency.py measures both on 226 captures (the fixes the
model is checked against left out).
"""

import numpy as np

# (log10 FLOPs, the median efficiency of aligned Tensor Core GEMMs of that size): the half decades
# with ten traces or more of benchmarks/tensor_core_efficiency.py; between them, interpolated;
# beyond them, the nearest.
EFFICIENCY_BY_SIZE = ((7.0, 0.06), (8.0, 0.11), (8.5, 0.22), (9.5, 0.72), (10.0, 0.58), (10.5, 0.70), (11.0, 0.82))
UNALIGNED_SHARE_OF_BF16_PEAK = 0.135
ROW_BYTES = 16  # the row alignment cuBLAS's TMA-based kernels need


def rows_aligned_sql(dims, element_bytes):
    """SQL: whether the last two dimensions of each matrix of `dims` (an op's Input Dims, JSON) make
    rows of a multiple of ROW_BYTES at `element_bytes` an element (both: a matrix passed transposed
    keeps its shape in the trace but not its strides); NULL where the shapes are unknown."""
    elements = ROW_BYTES // element_bytes
    return (f"list_bool_and(list_transform(list_filter(TRY_CAST({dims} AS BIGINT[][]), lambda x: len(x) >= 2), "
            f"lambda x: x[-1] % {elements} = 0 AND x[-2] % {elements} = 0))")


def efficiency(flops):
    """The share of its roofline an aligned Tensor Core GEMM of `flops` reaches (array in, array out)."""
    sizes, shares = zip(*EFFICIENCY_BY_SIZE)
    return np.interp(np.log10(np.maximum(flops, 1.0)), sizes, shares)


def tensor_core_ns(roofline_ns, flops, aligned, bf16_peak_ns):
    """ns each GEMM would take on Tensor Cores: its roofline over efficiency(flops), or where not
    `aligned`, `bf16_peak_ns` (its FLOPs at the bf16 peak) over UNALIGNED_SHARE_OF_BF16_PEAK; where
    its FLOPs are unknown (flops < 0), its roofline."""
    known = flops > 0
    modelled = np.where(known, roofline_ns / efficiency(np.where(known, flops, 1.0)), roofline_ns)
    unaligned = known & ~aligned & (bf16_peak_ns > 0)
    return np.where(unaligned, np.maximum(modelled, bf16_peak_ns / UNALIGNED_SHARE_OF_BF16_PEAK),
                    modelled).astype(np.int64)
