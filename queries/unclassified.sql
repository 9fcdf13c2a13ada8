-- Which kernel names did the classification rules miss?
-- A row per kernel name no rule matched (kernel_class NULL): add a rule in tracekit/classify.py,
-- or tell us the name.
-- columns:
--   kernel: kernel name
--   traces: how many traces ran it
--   calls: launches in all
--   total_us: GPU time in all, microseconds
-- params:
--   trace = NULL: only this trace
SELECT name AS kernel, count(DISTINCT trace) AS traces, count(*) AS calls, sum(dur_us) AS total_us
FROM kernels
WHERE kernel_class IS NULL AND ($trace IS NULL OR trace = $trace)
GROUP BY name
ORDER BY total_us DESC, kernel;
