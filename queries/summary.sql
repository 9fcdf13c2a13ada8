-- How do the variants compare?
-- The article's table: a row per trace, fastest first by GPU time per step, then traces without GPU work by CPU time per step. Per-step figures are means over the steady steps (view steady_steps: all but the first step);
-- a trace without ProfilerStep#N counts as one step.
-- keys: trace, gpu_us_per_step, speedup_vs_naive
-- columns:
--   trace: trace name
--   variant: the variant `tracekit capture` recorded (NULL for foreign traces)
--   steps: steady steps averaged over
--   steps_averaged: which: 'first-last' of the step numbers (view steady_steps: neither the first
--                   step nor a step the profiler cut short), with ' (inferred)' for steps found
--                   from the trace's iterations (view steps); 'whole trace' for a trace without
--                   steps, whose "per step" figures are the whole trace's
--   kernels_per_step: kernel launches per step (NULL where the trace lost its GPU events: launches, no kernel;
--                     anomalies' 'launches but no GPU events')
--   gpu_us_per_step: GPU busy time per step, microseconds: the union of the kernel, memcpy and memset
--                    intervals on each device (view gpu_busy), so concurrent streams count once;
--                    NULL when the trace has no GPU events (CPU-only, or CUPTI lost them)
--   kernel_sum_us_per_step: the plain sum of kernel durations per step, microseconds (above
--                           gpu_us_per_step when kernels overlap on concurrent streams)
--   cpu_us_per_step: CPU time of the ProfilerStep#N span, microseconds
--   memcpy_per_step: memcpys per step (NULL where the trace lost its GPU events)
--   memcpy_bytes_per_step: bytes copied per step (NULL when the trace records no copy's size)
--   memcpy_mib_per_step: the same in MiB
--   tensor_core_pct: share of matrix-math time (GEMM, convolution, attention kernels of known math_unit) on Tensor Cores, percent (NULL: none ran)
--   top_kernel: the kernel with the most GPU time in the steady steps
--   top_kernel_occupancy_pct: its mean estimated achieved occupancy, percent
--   plan_ms: cuDNN first-call plan time, milliseconds (NULL: no cuDNN attention, or its first call in
--            the trace is no cold one: see cudnn_plan_time)
--   speedup_vs_naive: gpu_us_per_step of the naive trace of the same shape (view trace_shapes: the
--                     capture's shape, dtype, causal and workload on the same device) over this
--                     one's; for a trace without GPU work, cpu_us_per_step's
--   peak_mib: the most memory allocated at once in a steady step, MiB (view memory_steps: Kineto's
--             Total Allocated, as torch.cuda.max_memory_allocated); on the GPU when the trace records
--             GPU memory, else on the CPU; NULL when the trace has no memory events (captured without
--             profile_memory)
-- params:
--   trace = NULL: only this trace
WITH picked AS (
    SELECT trace, variant, metadata FROM traces
), step_counts AS (
    -- (times summed in whole nanoseconds, CUPTI's fractions in millionths: sums exact in any order,
    -- so each figure rounds the same on a database, a lake or Spark, whatever order the rows come in)
    SELECT s.trace, count(*) AS steps, avg(round(s.dur_us * 1e3)) / 1e3 AS cpu_us_per_step,
           CASE WHEN min(s.step) = max(s.step) THEN CAST(min(s.step) AS VARCHAR)
                ELSE CAST(min(s.step) AS VARCHAR) || '-' || CAST(max(s.step) AS VARCHAR) END
             || CASE WHEN bool_or(a.source = 'inferred') THEN ' (inferred)' ELSE '' END AS steps_averaged
    FROM steady_steps s JOIN steps a ON a.trace = s.trace AND a.step = s.step GROUP BY s.trace
), gpu_work AS (
    -- Everything the GPU ran in the steady window: the steady steps, or all of a trace without steps.
    -- (Joins with steady_window, not `step IN (...) OR trace NOT IN (...)`: Spark runs a NOT IN
    -- under an OR as a nested loop over every kernel, 20 s on 64 ranks where the join takes 3.)
    SELECT k.trace, k.name, round(k.dur_us * 1e3) AS ns, k.kernel_class, k.math_unit,
           round(k.est_occupancy_pct * 1e6) AS occupancy_millionths, 'kernel' AS what, NULL AS bytes
    FROM kernels k JOIN steady_window w ON w.trace = k.trace AND w.step IS NOT DISTINCT FROM k.step
    UNION ALL
    SELECT m.trace, m.name, round(m.dur_us * 1e3), NULL, NULL, NULL, 'memcpy', m.bytes
    FROM memcpy m JOIN steady_window w ON w.trace = m.trace AND w.step IS NOT DISTINCT FROM m.step
    UNION ALL
    SELECT z.trace, z.name, round(z.dur_us * 1e3), NULL, NULL, NULL, 'memset', z.bytes
    FROM memset z JOIN steady_window w ON w.trace = z.trace AND w.step IS NOT DISTINCT FROM z.step
), totals AS (
    SELECT trace,
           count(*) FILTER (WHERE what = 'kernel') AS kernels,
           count(*) FILTER (WHERE what = 'memcpy') AS memcpys,
           CAST(CASE WHEN count(*) FILTER (WHERE what = 'memcpy') = 0 THEN 0
                     ELSE sum(bytes) FILTER (WHERE what = 'memcpy') END AS BIGINT) AS memcpy_bytes,
           100.0 * coalesce(sum(ns) FILTER (WHERE math_unit = 'tensor_core'), 0)
                 / sum(ns) FILTER (WHERE math_unit IS NOT NULL) AS tensor_core_pct
    FROM gpu_work GROUP BY trace
), busy AS (
    SELECT b.trace, sum(round(b.busy_us * 1e3)) / 1e3 AS busy_us, sum(round(b.kernel_sum_us * 1e3)) / 1e3 AS kernel_sum_us
    FROM gpu_busy b JOIN steady_window w ON w.trace = b.trace AND w.step IS NOT DISTINCT FROM b.step
    GROUP BY b.trace
), by_kernel AS (
    SELECT trace, name, sum(ns) AS total_ns, avg(occupancy_millionths) / 1e6 AS occupancy_pct
    FROM gpu_work WHERE what = 'kernel' GROUP BY trace, name
), top AS (
    SELECT trace, name AS top_kernel, occupancy_pct AS top_kernel_occupancy_pct
    FROM by_kernel
    QUALIFY row_number() OVER (PARTITION BY trace ORDER BY total_ns DESC, name) = 1
), plans AS (
    SELECT trace, plan_ms FROM cudnn_plans
), memory AS (
    SELECT s.trace, max(s.peak_allocated_bytes) FILTER (WHERE s.device_type <> 'cpu') AS device_peak_bytes,
           max(s.peak_allocated_bytes) FILTER (WHERE s.device_type = 'cpu') AS cpu_peak_bytes
    FROM memory_steps s JOIN steady_window w ON w.trace = s.trace AND w.step IS NOT DISTINCT FROM s.step
    GROUP BY s.trace
), lost AS (
    -- traces whose launch calls are there but not the GPU work they launched (CUPTI lost it)
    -- (anomalies' 'launches but no GPU events')
    SELECT DISTINCT r.trace FROM runtime r
    WHERE r.name ILIKE '%launch%' AND NOT EXISTS (SELECT 1 FROM gpu_busy g WHERE g.trace = r.trace)
), rows AS (
    SELECT p.trace, p.variant,
           ts.shape,
           coalesce(sc.steps, 1) AS steps, coalesce(sc.steps_averaged, 'whole trace') AS steps_averaged,
           -- counts of GPU work are unknown (NULL) where the trace lost its GPU events (launches, none ran)
           CASE WHEN lost.trace IS NULL THEN coalesce(t.kernels, 0) / coalesce(sc.steps, 1) END AS kernels_per_step,
           CASE WHEN EXISTS (SELECT 1 FROM gpu_busy g WHERE g.trace = p.trace)
                THEN coalesce(bz.busy_us, 0) / coalesce(sc.steps, 1) END AS gpu_us_per_step,
           CASE WHEN EXISTS (SELECT 1 FROM gpu_busy g WHERE g.trace = p.trace)
                THEN coalesce(bz.kernel_sum_us, 0) / coalesce(sc.steps, 1) END AS kernel_sum_us_per_step,
           sc.cpu_us_per_step,
           CASE WHEN lost.trace IS NULL THEN coalesce(t.memcpys, 0) / coalesce(sc.steps, 1) END AS memcpy_per_step,
           CASE WHEN lost.trace IS NOT NULL THEN NULL WHEN t.trace IS NULL THEN 0 ELSE t.memcpy_bytes END
               / coalesce(sc.steps, 1) AS memcpy_bytes_per_step,
           t.tensor_core_pct, top.top_kernel, top.top_kernel_occupancy_pct, pl.plan_ms,
           coalesce(mem.device_peak_bytes, mem.cpu_peak_bytes) AS peak_bytes
    FROM picked p
    LEFT JOIN step_counts sc ON sc.trace = p.trace
    LEFT JOIN totals t ON t.trace = p.trace
    LEFT JOIN busy bz ON bz.trace = p.trace
    LEFT JOIN top ON top.trace = p.trace
    LEFT JOIN plans pl ON pl.trace = p.trace
    LEFT JOIN memory mem ON mem.trace = p.trace
    LEFT JOIN trace_shapes ts ON ts.trace = p.trace
    LEFT JOIN lost ON lost.trace = p.trace
), naive AS (
    SELECT shape, gpu_us_per_step AS naive_gpu_us, cpu_us_per_step AS naive_cpu_us FROM rows WHERE variant = 'naive'
    QUALIFY row_number() OVER (PARTITION BY shape ORDER BY trace) = 1
)
SELECT r.trace, r.variant, r.steps, r.steps_averaged, round(r.kernels_per_step, 1) AS kernels_per_step,
       round(r.gpu_us_per_step, 1) AS gpu_us_per_step, round(r.kernel_sum_us_per_step, 1) AS kernel_sum_us_per_step,
       round(r.cpu_us_per_step, 1) AS cpu_us_per_step, round(r.memcpy_per_step, 1) AS memcpy_per_step,
       CAST(round(r.memcpy_bytes_per_step) AS BIGINT) AS memcpy_bytes_per_step,
       round(r.memcpy_bytes_per_step / 1048576.0, 2) AS memcpy_mib_per_step,
       round(r.tensor_core_pct, 1) AS tensor_core_pct, r.top_kernel,
       round(r.top_kernel_occupancy_pct, 1) AS top_kernel_occupancy_pct, round(r.plan_ms, 3) AS plan_ms,
       round(CASE WHEN r.gpu_us_per_step IS NOT NULL THEN n.naive_gpu_us / r.gpu_us_per_step
                  ELSE n.naive_cpu_us / r.cpu_us_per_step END, 2) AS speedup_vs_naive, round(r.peak_bytes / 1048576.0, 2) AS peak_mib
FROM rows r
LEFT JOIN naive n ON n.shape = r.shape
WHERE $trace IS NULL OR r.trace = $trace
ORDER BY r.gpu_us_per_step > 0 DESC, r.gpu_us_per_step ASC NULLS LAST, r.cpu_us_per_step ASC NULLS LAST, r.trace;
