-- Where are the Memcpy kernels, and which CPU ops and source lines caused them?
-- A row per trace, copy kind, chain of CPU ops and source line that issued the copies; a trace without any
-- memcpy gets one row with memcpy_count 0, so "none" is an answer too.
-- keys: trace, kind, memcpy_count, memcpy_mib, memcpy_us
-- columns:
--   trace: trace name
--   kind: DtoD, HtoD, DtoH, PtoP, ... (NULL when the trace has none)
--   caused_by: the CPU ops that issued them, outermost first (e.g. aten::masked_fill → aten::clone → aten::copy_)
--   source: the user's code around those ops, 'file:line in function' (e.g. 'model.py:42 in forward';
--           the line torch records, a function's first line for a call made while profiling);
--           NULL when the trace has no Python stack (record with with_stack=True,
--           `tracekit capture --with-stack`)
--   memcpy_count: number of copies
--   memcpy_bytes: bytes copied in all, over the copies of known size (NULL when the trace records
--                 no copy's size, as ROCm traces do not)
--   unknown_size_copies: copies whose size the trace does not record (left out of the byte figures)
--   memcpy_mib: the same in MiB
--   memcpy_us: GPU time of the copies, microseconds
--   avg_bytes: bytes per copy of known size
--   steps_with_memcpy: distinct ProfilerStep#N that hold one
-- params:
--   trace = NULL: only this trace
SELECT t.trace, m.kind, m.cpu_op_path AS caused_by,
       m.source_file || ':' || m.source_line || ' in ' || m.source_function AS source,
       count(m.ts_us) AS memcpy_count,
       CAST(CASE WHEN count(m.ts_us) = 0 THEN 0 ELSE sum(m.bytes) END AS BIGINT) AS memcpy_bytes,
       count(m.ts_us) - count(m.bytes) AS unknown_size_copies,
       round(CASE WHEN count(m.ts_us) = 0 THEN 0 ELSE sum(m.bytes) END / 1048576.0, 2) AS memcpy_mib,
       round(coalesce(sum(round(m.dur_us * 1e3)), 0) / 1e3, 1) AS memcpy_us,  -- summed in whole ns: exact in any order
       CAST(round(avg(m.bytes)) AS BIGINT) AS avg_bytes,
       count(DISTINCT m.step) AS steps_with_memcpy
FROM traces t
LEFT JOIN memcpy m ON m.trace = t.trace
WHERE $trace IS NULL OR t.trace = $trace
GROUP BY t.trace, m.kind, m.cpu_op_path, m.source_file, m.source_line, m.source_function
ORDER BY t.trace, memcpy_bytes DESC NULLS LAST, memcpy_count DESC, m.kind, caused_by, source;
