-- Which GEMMs ran on Tensor Cores, and which as plain FP32 SIMT on the CUDA cores?
-- A row per trace that ran any GEMM kernel (kernel_class 'gemm'; convolutions and fused attention
-- are not counted here, summary's tensor_core_pct covers them; rules: `tracekit schema`, table
-- kernel_rules).
-- keys: trace, tensor_core_pct, simt_us
-- columns:
--   trace: trace name
--   tensor_core_gemms: GEMM kernel launches on Tensor Cores (nvjet, tensorop, bf16/fp16/tf32 xmma, ...)
--   simt_gemms: GEMM kernel launches on CUDA cores (sgemm, *_ffma_*, gemv, ...)
--   tensor_core_us: GPU time of the Tensor Core GEMMs, microseconds
--   simt_us: GPU time of the SIMT GEMMs, microseconds
--   tensor_core_pct: share of GEMM time on Tensor Cores, percent
--   simt_kernels: distinct SIMT GEMM kernel names, ' | '-separated
-- params:
--   trace = NULL: only this trace
SELECT trace,
       count(*) FILTER (WHERE math_unit = 'tensor_core') AS tensor_core_gemms,
       count(*) FILTER (WHERE math_unit = 'simt') AS simt_gemms,
       -- times summed in whole nanoseconds, exact in any order: the same rounding on a database,
       -- a lake or Spark, whatever order the rows come in
       round(coalesce(sum(round(dur_us * 1e3)) FILTER (WHERE math_unit = 'tensor_core'), 0) / 1e3, 1) AS tensor_core_us,
       round(coalesce(sum(round(dur_us * 1e3)) FILTER (WHERE math_unit = 'simt'), 0) / 1e3, 1) AS simt_us,
       round(100.0 * coalesce(sum(round(dur_us * 1e3)) FILTER (WHERE math_unit = 'tensor_core'), 0)
             / sum(round(dur_us * 1e3)), 1) AS tensor_core_pct,
       string_agg(DISTINCT name, ' | ' ORDER BY name) FILTER (WHERE math_unit = 'simt') AS simt_kernels
FROM kernels
WHERE kernel_class = 'gemm' AND ($trace IS NULL OR trace = $trace)
GROUP BY trace
ORDER BY trace;
