-- What is odd in each trace: negative or zero durations, unknown categories, dropped events?
-- Valid but unusual input loads as written; this query is where it shows. A row per trace, oddity
-- and category, with how many events and the earliest one as an example. Negative durations come
-- from clock skew or a hand-edited trace and make sums of time wrong; zero durations are events too
-- short for the clock or never closed; an unknown category is one Kineto does not write, which no
-- view picks up; 'a device tracekit does not read' counts the events Kineto writes for devices and
-- runtimes no view reads (MTIA, HPU, XPU, GCU, PrivateUse1, Glow: their kernels are in no GPU figure);
-- 'dropped on load' counts what `tracekit load --lenient` left out, and why;
-- 'launches but no GPU events' is a trace whose kernel launches CUPTI did not record (the GPU
-- side is missing: every GPU figure is unknown, not zero), 'GPU events but no CPU ops' one
-- whose kernels no op can be blamed for (profiled without CPU activities), 'GPU events without
-- their launch' the kernels, copies and fills whose launch call is not in a trace that has launch
-- calls (launched before the profiler's window opened): no op, and the step of the GPU-side step
-- span their start falls in (none when the trace has no such spans).
-- keys: trace, oddity, events
-- columns:
--   trace: trace name
--   oddity: negative duration, zero duration, no duration, negative size (a copy's or fill's bytes),
--           unknown category, a device tracekit does
--           not read, dropped on load,
--           launches but no GPU events, GPU events but no CPU ops, GPU events without their launch
--   cat: the events' category (NULL for dropped on load)
--   events: how many events have it
--   example: the earliest such event's name (its first 120 characters), the drop reasons, or the
--            first launch call / GPU event
--   example_ts_us: that event's start, microseconds on the trace's clock
--   example_dur_us: that event's duration, microseconds
-- params:
--   trace = NULL: only this trace
WITH odd AS (
    SELECT trace, cat, name, ts_ns, dur_ns,
           CASE WHEN dur_ns < 0 THEN 'negative duration'
                WHEN dur_ns = 0 THEN 'zero duration'
                ELSE 'no duration' END AS oddity
    FROM events
    WHERE ph = 'X' AND (dur_ns <= 0 OR dur_ns IS NULL)
    UNION ALL
    SELECT trace, cat, name, ts_ns, dur_ns, 'unknown category' AS oddity
    FROM events
    -- Kineto's activity types, the flow and trace categories it adds, and the older spellings.
    WHERE cat IS NOT NULL AND lower(cat) NOT IN (
        'cpu_op', 'user_annotation', 'gpu_user_annotation', 'gpu_memcpy', 'gpu_memset', 'kernel',
        'external_correlation', 'cuda_runtime', 'cuda_driver', 'cpu_instant_event', 'python_function',
        'overhead', 'cuda_sync', 'cuda_profiler_range', 'collective_comm', 'mtia_runtime',
        'mtia_ccp_events', 'glow_runtime', 'hpu_op', 'xpu_runtime', 'xpu_driver',
        'privateuse1_runtime', 'privateuse1_driver', 'hip_runtime', 'hip_driver', 'ac2g', 'fwdbwd',
        'trace', 'operator', 'runtime', 'memcpy', 'memset', 'async')
      AND NOT regexp_matches(lower(cat), '^(mtia|hpu|xpu|privateuse1|glow|gcu)_')
    UNION ALL
    SELECT trace, cat, name, ts_ns, dur_ns, 'a device tracekit does not read' AS oddity
    FROM events
    -- Kineto's categories of devices other than CUDA and ROCm GPUs (libkineto's ActivityType names:
    -- mtia_ccp_events, mtia_runtime, hpu_op, xpu_runtime, gcu_runtime, ...): loaded, in no view
    WHERE regexp_matches(lower(cat), '^(mtia|hpu|xpu|privateuse1|glow|gcu)_')
    UNION ALL
    -- a copy or fill of fewer than 0 bytes: its size is unknown (memcpy's NULL), not summed
    SELECT trace, cat, name, ts_ns, dur_ns, 'negative size' AS oddity
    FROM events
    WHERE ph = 'X' AND lower(cat) IN ('gpu_memcpy', 'memcpy', 'gpu_memset', 'memset')
      AND TRY_CAST(json_extract(args, '$.bytes') AS BIGINT) < 0
), ranked AS (
    SELECT *, count(*) OVER (PARTITION BY trace, oddity, cat) AS events,
           row_number() OVER (PARTITION BY trace, oddity, cat ORDER BY ts_ns, name, dur_ns) AS nth
    FROM odd
    WHERE $trace IS NULL OR trace = $trace
)
SELECT trace, oddity, cat, events, left(name, 120) AS example, ts_ns / 1000.0 AS example_ts_us,
       dur_ns / 1000.0 AS example_dur_us
FROM ranked
WHERE nth = 1
UNION ALL
SELECT trace, 'dropped on load' AS oddity, NULL AS cat, dropped_events AS events,
       dropped_reasons AS example, NULL AS example_ts_us, NULL AS example_dur_us
FROM trace_files
WHERE dropped_events > 0 AND ($trace IS NULL OR trace = $trace)
UNION ALL
-- The two below look at whole traces: counted on the few traces that lack one side, found first.
SELECT t.trace, 'launches but no GPU events' AS oddity, any_value(r.cat) AS cat, count(*) AS events,
       min(r.name) AS example, min(r.ts_ns) / 1000.0 AS example_ts_us, NULL AS example_dur_us
FROM trace_files t JOIN runtime_rows r USING (trace_id)
WHERE r.name ILIKE '%launch%' AND ($trace IS NULL OR t.trace = $trace)
  AND t.trace_id NOT IN (SELECT trace_id FROM kernel_rows UNION SELECT trace_id FROM transfer_rows)
GROUP BY t.trace
UNION ALL
SELECT t.trace, 'GPU events but no CPU ops' AS oddity, NULL AS cat, count(*) AS events, min(g.name) AS example,
       min(g.ts_ns) / 1000.0 AS example_ts_us, NULL AS example_dur_us
FROM trace_files t
JOIN (SELECT trace_id, name, ts_ns FROM kernel_rows UNION ALL SELECT trace_id, name, ts_ns FROM transfer_rows) g
  USING (trace_id)
WHERE ($trace IS NULL OR t.trace = $trace) AND t.trace_id NOT IN (SELECT DISTINCT trace_id FROM cpu_op_rows)
GROUP BY t.trace
UNION ALL
SELECT t.trace, 'GPU events without their launch' AS oddity, NULL AS cat, count(*) AS events,
       min(g.name) AS example, min(g.ts_ns) / 1000.0 AS example_ts_us, NULL AS example_dur_us
FROM trace_files t
JOIN (SELECT trace_id, name, ts_ns, correlation FROM kernel_rows
      UNION ALL SELECT trace_id, name, ts_ns, correlation FROM transfer_rows) g USING (trace_id)
WHERE ($trace IS NULL OR t.trace = $trace) AND g.correlation IS NOT NULL
  AND t.trace_id IN (SELECT trace_id FROM runtime_rows WHERE correlation IS NOT NULL)
  AND NOT EXISTS (SELECT 1 FROM runtime_rows r WHERE r.trace_id = g.trace_id AND r.correlation = g.correlation)
GROUP BY t.trace
ORDER BY trace, oddity, cat;
