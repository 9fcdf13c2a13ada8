-- How close did each kind of work run to the device's roofline?
-- A row per trace and work family (kernels.work_family: gemm, attention, softmax, norm, elementwise,
-- ..., collective; '(none)' for kernels no formula knows), from the work models (docs/work-models.md):
-- the kernels' FLOPs and bytes from their ops' recorded shapes, against the GPU's peaks (gpu_specs);
-- a collective's bytes from its comms args, against its link (interconnects).
-- keys: trace, work_family, gpu_us, roofline_pct
-- columns:
--   trace: trace name
--   work_family: the formula's family; '(none)': no formula knows the kernel's op
--   kernels: kernel launches
--   gpu_us: their GPU time, microseconds
--   modelled_pct: share of gpu_us whose FLOPs and bytes are known, percent
--   tflops: their FLOPs over their GPU time, TFLOP/s
--   tb_s: their bytes over their GPU time, TB/s (collectives: the bytes over their link, busbw)
--   memory_bound_pct: share of the modelled time in kernels the memory bounds, percent (a
--                     collective's link bounds it: bound 'network', not counted here)
--   roofline_us: the least time the device could take for the modelled kernels, microseconds
--   roofline_pct: roofline_us over the modelled kernels' GPU time, percent (100: at the roofline;
--                 above 100: the data came from cache, not memory)
-- params:
--   trace = NULL: only this trace
SELECT trace, coalesce(work_family, '(none)') AS work_family, count(*) AS kernels,
       -- the trace's times summed in whole nanoseconds (ns), exact in any order: the same figures
       -- and roundings on a database, a lake or Spark, whatever order the rows come in (the work
       -- models' flops, bytes and roofline_us are no whole numbers of anything: their sums may
       -- differ in the last bits)
       round(sum(ns) / 1e3, 1) AS gpu_us,
       round(100.0 * coalesce(sum(ns) FILTER (WHERE flops IS NOT NULL AND bytes IS NOT NULL), 0)
             / sum(ns), 1) AS modelled_pct,
       round(sum(flops) FILTER (WHERE bytes IS NOT NULL) / sum(ns) FILTER (WHERE flops IS NOT NULL AND bytes IS NOT NULL)
             / 1e3, 1) AS tflops,
       round(sum(bytes) FILTER (WHERE flops IS NOT NULL) / sum(ns) FILTER (WHERE flops IS NOT NULL AND bytes IS NOT NULL)
             / 1e3, 2) AS tb_s,
       round(100.0 * sum(ns) FILTER (WHERE bound = 'memory') / sum(ns) FILTER (WHERE bound IS NOT NULL), 1)
         AS memory_bound_pct,
       round(sum(roofline_us), 1) AS roofline_us,
       round(100.0 * sum(roofline_us) / (sum(ns) FILTER (WHERE roofline_us IS NOT NULL) / 1e3), 1) AS roofline_pct
FROM (SELECT *, round(dur_us * 1e3) AS ns FROM kernels) AS k
WHERE ($trace IS NULL OR trace = $trace)
GROUP BY trace, coalesce(work_family, '(none)')
ORDER BY trace, gpu_us DESC, work_family;
