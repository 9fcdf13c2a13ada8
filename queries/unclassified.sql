-- Which kernel names did the classification rules miss?
-- A row per kernel name no rule matched (kernel_class NULL), busiest first: add a rule in
-- tracekit/analysis/classify.py, or tell us the name.
-- keys: kernel, total_us, max_pct_of_trace
-- columns:
--   kernel: kernel name
--   traces: how many traces ran it
--   calls: launches in all
--   total_us: GPU time in all, microseconds
--   max_pct_of_trace: its largest share of one trace's kernel time, percent (NULL: no kernel time)
-- params:
--   trace = NULL: only this trace
WITH picked AS (
    -- times in whole nanoseconds, whose sums are exact in any order: the same figures on a
    -- database, a lake or Spark, whatever order the rows come in
    SELECT trace, name, kernel_class, round(dur_us * 1e3) AS ns FROM kernels WHERE $trace IS NULL OR trace = $trace
), per_trace AS (
    SELECT trace, name, count(*) AS calls, sum(ns) AS total_ns,
           100.0 * sum(ns) / nullif(any_value(t.kernel_ns), 0) AS pct_of_trace
    FROM picked
    JOIN (SELECT trace, sum(ns) AS kernel_ns FROM picked GROUP BY trace) t USING (trace)
    WHERE kernel_class IS NULL
    GROUP BY trace, name
)
SELECT name AS kernel, count(*) AS traces, CAST(sum(calls) AS BIGINT) AS calls, round(sum(total_ns) / 1e3, 1) AS total_us,
       round(max(pct_of_trace), 1) AS max_pct_of_trace
FROM per_trace
GROUP BY name
ORDER BY total_us DESC, kernel;
