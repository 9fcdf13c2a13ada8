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
    SELECT trace, name, kernel_class, dur_us FROM kernels WHERE $trace IS NULL OR trace = $trace
), per_trace AS (
    SELECT trace, name, count(*) AS calls, sum(dur_us) AS total_us,
           100.0 * sum(dur_us) / nullif(any_value(t.kernel_us), 0) AS pct_of_trace
    FROM picked
    JOIN (SELECT trace, sum(dur_us) AS kernel_us FROM picked GROUP BY trace) t USING (trace)
    WHERE kernel_class IS NULL
    GROUP BY trace, name
)
SELECT name AS kernel, count(*) AS traces, CAST(sum(calls) AS BIGINT) AS calls, round(sum(total_us), 1) AS total_us,
       round(max(pct_of_trace), 1) AS max_pct_of_trace
FROM per_trace
GROUP BY name
ORDER BY total_us DESC, kernel;
