-- peak_copy: a step's memory peak holds a copy beside the tensor it copied
-- why: an out-of-place op (masked_fill, or a clone, contiguous or to inside another op) allocates a whole copy; where the code still holds the original (a variable kept while the copy goes on to softmax), both are live at the step's peak, and the copy is memory the step need not have held
-- fix: use the in-place form (masked_fill_ for masked_fill, ...), or drop the reference to the original before the next op, so the copy is not made or the original is freed first
-- saving: no time: up to the copy's bytes off the step's peak (memory_steps), as much as the peak falls when the copy goes, which the trace cannot replay; needs memory events (capture with --profile-memory)
-- unsaved: the copy costs memory, not time: it raises the step's peak, which a replay of time does not measure
-- params:
--   trace = NULL: only this trace
--   min_peak_pct = 5: ignore copies smaller than this share of the step's peak, percent
--   max_evidence = 20: at most this many copying ops named in the evidence
WITH copies AS (
    -- Each block at a steady step's peak allocated by a copy op, with a block of its size allocated
    -- before it and live at the peak too: the copy was made while the original was held, and is
    -- held beside it. (A join, not EXISTS: Spark runs no correlated subquery with these predicates.)
    SELECT DISTINCT c.trace, c.step, c.device_type, c.device, c.addr, c.allocated_us, c.bytes, c.cpu_op_id,
           c.cpu_op_path,
           coalesce(nullif(trim(regexp_extract(regexp_extract(c.cpu_op_path, '^(.*?)(?: → )?aten::(?:clone|contiguous|to|_to_copy)(?: →|$)', 1),
                                               '([^→]*)$', 1)), ''),
                    regexp_extract(c.cpu_op_path, 'aten::(?:clone|contiguous|to|_to_copy)', 0)) AS culprit
    FROM memory_peak_blocks c
    JOIN steady_window w ON w.trace = c.trace AND w.step IS NOT DISTINCT FROM c.step
    JOIN memory_peak_blocks o ON o.trace = c.trace AND o.step IS NOT DISTINCT FROM c.step AND o.device_type = c.device_type
                             AND o.device = c.device AND o.bytes = c.bytes AND o.allocated_us < c.allocated_us
    WHERE ($trace IS NULL OR c.trace = $trace)
      AND regexp_matches(c.cpu_op_path, '(^|→ )aten::(clone|contiguous|to|_to_copy)( →|$)')
), groups AS (
    SELECT c.trace, c.culprit, c.device_type, any_value(c.device) AS device, count(DISTINCT c.step) AS steps,
           max(c.bytes) AS bytes, string_agg(DISTINCT c.cpu_op_path, '; ' ORDER BY c.cpu_op_path) AS paths,
           max(s.peak_allocated_bytes) AS peak_bytes, any_value(w.steps) AS steady_steps,
           to_json(list(struct_pack(source := 'cpu_ops', trace := c.trace, name := o.name,
                                    ts_ns := CAST(round(o.ts_us * 1000) AS BIGINT),
                                    dur_ns := CAST(round(o.dur_us * 1000) AS BIGINT), cpu_op_id := c.cpu_op_id)
                        ORDER BY o.ts_us, c.cpu_op_id)[1:CAST($max_evidence AS INTEGER)]) AS evidence
    FROM copies c
    JOIN memory_steps s ON s.trace = c.trace AND s.step IS NOT DISTINCT FROM c.step AND s.device_type = c.device_type
                       AND s.device = c.device
    JOIN cpu_ops o ON o.trace = c.trace AND o.op_id = c.cpu_op_id
    JOIN (SELECT trace, any_value(steps) AS steps FROM steady_window GROUP BY trace) w ON w.trace = c.trace
    GROUP BY c.trace, c.culprit, c.device_type
    HAVING max(c.bytes) >= CAST($min_peak_pct AS DOUBLE) / 100 * max(s.peak_allocated_bytes)
)
SELECT g.trace, 'peak_copy' AS rule,
       CASE WHEN g.bytes >= 0.25 * g.peak_bytes THEN 'high' WHEN g.bytes >= 0.10 * g.peak_bytes THEN 'medium'
            ELSE 'low' END AS severity,
       format('The {} memory peak holds a {:.1f} MiB copy from {} beside the tensor it copied',
              CASE WHEN g.device_type = 'cpu' THEN 'CPU' ELSE 'GPU' END, g.bytes / 1048576.0, g.culprit) AS title,
       format('In {} of {} steady step(s) the peak ({:.1f} MiB) holds {:.1f} MiB ({:.0f}%) made by {}, and a block of the same size allocated before it',
              g.steps, g.steady_steps, g.peak_bytes / 1048576.0, g.bytes / 1048576.0, 100.0 * g.bytes / g.peak_bytes,
              g.paths) AS detail,
       CASE WHEN g.culprit LIKE '%masked_fill' THEN 'use masked_fill_ (in place) instead of masked_fill'
            WHEN g.culprit IN ('aten::contiguous', 'aten::clone', 'aten::to', 'aten::_to_copy')
                 THEN 'drop the ' || replace(g.culprit, 'aten::', '') || '(), or the reference to the original before the next op'
            ELSE 'use the in-place form of ' || g.culprit || ', or drop the reference to the original before the next op' END AS fix,
       CAST(NULL AS VARCHAR) AS whatif, CAST(NULL AS DOUBLE) AS estimate_us_per_step, g.evidence
FROM groups g;
