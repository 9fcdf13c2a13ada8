-- How well does each kernel fill the GPU: occupancy, registers and shared memory.
-- A row per trace and kernel name, busiest first. Values come from CUPTI's launch records; AMD
-- traces leave most of them NULL.
-- keys: trace, kernel, total_us, est_occupancy_pct
-- columns:
--   trace: trace name
--   kernel: kernel name
--   kernel_class: gemm, attention, softmax, ...
--   calls: launches
--   total_us: GPU time in all, microseconds
--   avg_dur_us: GPU time per launch, microseconds
--   est_occupancy_pct: CUPTI's estimated achieved occupancy, percent (mean over launches)
--   registers_per_thread: registers per thread (the most seen)
--   shared_memory_bytes: shared memory per block, bytes (the most seen)
--   blocks_per_sm: resident blocks per SM (mean)
--   warps_per_sm: resident warps per SM (mean)
-- params:
--   trace = NULL: only this trace
SELECT trace, name AS kernel, any_value(kernel_class) AS kernel_class, count(*) AS calls,
       -- times in whole nanoseconds and CUPTI's fractions in millionths, whole numbers whose sum is
       -- exact: the same sums and means (and their rounding) whatever order the rows come in, on a
       -- database, a lake or Spark
       round(sum(round(dur_us * 1e3)) / 1e3, 1) AS total_us, round(avg(round(dur_us * 1e3)) / 1e3, 1) AS avg_dur_us,
       round(avg(round(est_occupancy_pct * 1e6)) / 1e6, 1) AS est_occupancy_pct,
       max(registers_per_thread) AS registers_per_thread,
       max(shared_memory_bytes) AS shared_memory_bytes,
       round(avg(round(blocks_per_sm * 1e6)) / 1e6, 2) AS blocks_per_sm,
       round(avg(round(warps_per_sm * 1e6)) / 1e6, 2) AS warps_per_sm
FROM kernels
WHERE $trace IS NULL OR trace = $trace
GROUP BY trace, name
ORDER BY trace, total_us DESC, kernel;
