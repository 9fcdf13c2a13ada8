-- Views over what tracekit knows about GPUs (tracekit/knowledge/*.csv): TEMP views, made on every
-- connection with the knowledge tables, so any database gets this tracekit's figures.

-- @view gemm_math: each CPU op that ran GEMM kernels with input shapes recorded (record_shapes):
-- its FLOPs and bytes from `Input Dims`, its kernels' GPU time, and what the device's Tensor
-- Cores could do with it (the roofline: the slower of computing at peak and moving its bytes at
-- the memory's bandwidth).
--   trace, step: trace name and step of the launch
--   cpu_op_id, cpu_op: the op (aten::mm, bmm, addmm, baddbmm), cpu_op_path: its chain of ops
--   math_unit: tensor_core or simt, of its GEMM kernels (the slowest one's when they differ)
--   kernels, gemm_us: its GEMM kernels and their GPU time, microseconds
--   batch, m, n, k: the GEMM's shape; dtype: its first input's dtype (float, c10::BFloat16, ...)
--   flops: 2 * batch * m * n * k; bytes: the inputs read and the output written once
--   achieved_tflops: flops over gemm_us
--   tensor_core_tflops: the device's dense Tensor Core peak for this dtype (TF32 for float),
--                       NULL for a GPU or dtype tracekit has no figure for (see gpu_specs)
--   roofline_us: max(flops at that peak, bytes at the device's memory bandwidth), microseconds:
--                the least time Tensor Cores could take
--   pct_of_peak: achieved_tflops over tensor_core_tflops, percent
CREATE OR REPLACE TEMP VIEW gemm_math AS
WITH ops AS (
    SELECT k.trace, k.step, k.cpu_op_id, any_value(k.cpu_op) AS cpu_op, any_value(k.cpu_op_path) AS cpu_op_path,
           arg_max(k.math_unit, k.dur_us) AS math_unit, count(*) AS kernels, sum(k.dur_us) AS gemm_us
    FROM kernels k
    WHERE k.kernel_class = 'gemm' AND k.cpu_op IN ('aten::mm', 'aten::bmm', 'aten::addmm', 'aten::baddbmm')
    GROUP BY k.trace, k.step, k.cpu_op_id
), shaped AS (
    SELECT g.*, t.device_name,
           -- addmm and baddbmm take the bias first; mm and bmm the two factors.
           CASE WHEN g.cpu_op IN ('aten::addmm', 'aten::baddbmm') THEN 1 ELSE 0 END AS a,
           o.input_dims AS dims, o.input_types AS types
    FROM ops g
    JOIN cpu_ops o ON o.trace = g.trace AND o.op_id = g.cpu_op_id
    JOIN traces t ON t.trace = g.trace
), sized AS (
    SELECT s.*,
           CASE WHEN s.cpu_op IN ('aten::bmm', 'aten::baddbmm')
                THEN TRY_CAST(json_extract(s.dims, '$[' || s.a || '][0]') AS BIGINT) ELSE 1 END AS batch,
           TRY_CAST(json_extract(s.dims, '$[' || s.a || '][' || (CASE WHEN s.cpu_op IN ('aten::bmm', 'aten::baddbmm') THEN 1 ELSE 0 END) || ']') AS BIGINT) AS m,
           TRY_CAST(json_extract(s.dims, '$[' || s.a || '][' || (CASE WHEN s.cpu_op IN ('aten::bmm', 'aten::baddbmm') THEN 2 ELSE 1 END) || ']') AS BIGINT) AS k,
           TRY_CAST(json_extract(s.dims, '$[' || (s.a + 1) || '][' || (CASE WHEN s.cpu_op IN ('aten::bmm', 'aten::baddbmm') THEN 2 ELSE 1 END) || ']') AS BIGINT) AS n,
           json_extract_string(s.types, '$[' || s.a || ']') AS dtype
    FROM shaped s
), costed AS (
    SELECT z.*, 2.0 * batch * m * n * k AS flops,
           (batch * m * k + batch * k * n + batch * m * n)
             * CASE dtype WHEN 'double' THEN 8 WHEN 'float' THEN 4 WHEN 'c10::BFloat16' THEN 2 WHEN 'c10::Half' THEN 2 END
             AS bytes,
           CASE dtype WHEN 'float' THEN sp.tf32_tflops WHEN 'c10::BFloat16' THEN sp.bf16_tflops
                      WHEN 'c10::Half' THEN sp.fp16_tflops END AS tensor_core_tflops,
           sp.memory_tb_s
    FROM sized z
    LEFT JOIN gpu_specs sp ON regexp_matches(z.device_name, sp.name_pattern)
    QUALIFY row_number() OVER (PARTITION BY z.trace, z.step, z.cpu_op_id ORDER BY length(sp.name_pattern) DESC NULLS LAST) = 1
)
SELECT trace, step, cpu_op_id, cpu_op, cpu_op_path, math_unit, kernels, gemm_us, batch, m, n, k, dtype, flops, bytes,
       flops / gemm_us / 1e6 AS achieved_tflops, tensor_core_tflops,
       greatest(flops / (tensor_core_tflops * 1e6), bytes / (memory_tb_s * 1e6)) AS roofline_us,
       100.0 * flops / gemm_us / 1e6 / tensor_core_tflops AS pct_of_peak
FROM costed;
