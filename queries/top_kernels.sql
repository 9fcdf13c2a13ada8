-- Which kernels take the GPU's time? The top kernels of each trace by total GPU time.
-- keys: trace, rank, kernel, total_us, pct_of_kernel_time
-- columns:
--   trace: trace name
--   rank: 1 for the busiest kernel of the trace
--   kernel: kernel name
--   kernel_class: gemm, convolution, attention, softmax, ... (NULL: no rule knows the name)
--   gemm_class: tensor_core, simt or NULL (not a GEMM, or a GEMM whose name does not tell its unit)
--   math_unit: tensor_core, simt, or NULL (not matrix math, or the name does not say)
--   calls: launches
--   total_us: GPU time in all, microseconds
--   avg_us: GPU time per launch, microseconds
--   pct_of_kernel_time: share of the trace's kernel time, percent
-- params:
--   trace = NULL: only this trace
--   limit = 5: kernels per trace
WITH per_kernel AS (
    SELECT trace, name, any_value(kernel_class) AS kernel_class, any_value(gemm_class) AS gemm_class,
           any_value(math_unit) AS math_unit,
           -- in whole nanoseconds, whose sums are exact in any order: the same ranks and roundings
           -- on a database, a lake or Spark, whatever order the rows come in
           count(*) AS calls, sum(round(dur_us * 1e3)) AS total_ns
    FROM kernels
    WHERE $trace IS NULL OR trace = $trace
    GROUP BY trace, name
), ranked AS (
    SELECT *, row_number() OVER (PARTITION BY trace ORDER BY total_ns DESC, name) AS rank,
           100.0 * total_ns / sum(total_ns) OVER (PARTITION BY trace) AS pct_of_kernel_time
    FROM per_kernel
)
SELECT trace, rank, name AS kernel, kernel_class, gemm_class, math_unit, calls, round(total_ns / 1e3, 1) AS total_us,
       round(total_ns / calls / 1e3, 1) AS avg_us, round(pct_of_kernel_time, 1) AS pct_of_kernel_time
FROM ranked
WHERE rank <= CAST($limit AS INTEGER)
ORDER BY trace, rank;
