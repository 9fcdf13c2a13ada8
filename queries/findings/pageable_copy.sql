-- pageable_copy: host-to-device and device-to-host copies from or to pageable (not pinned) host memory inside steady steps
-- why: the GPU cannot read pageable memory directly: the driver stages each copy through a pinned buffer, at a fraction of the link's bandwidth, and the call waits for the copy (and, host to device, for the stream before it), so the copy overlaps neither the GPU's compute nor the CPU's launches
-- fix: pin the host memory (pin_memory=True in the DataLoader, or tensor.pin_memory() once for a buffer you reuse) and copy with .to(device, non_blocking=True); to read results back, copy into a pinned buffer with non_blocking=True
-- saving: NULL: pinned, the copy runs at the link's full bandwidth and can overlap compute, but how much of it hides depends on what else the step has to run beside it, which the trace cannot say; the severity is the copies' share of the step's GPU time (high from 10%, medium from 3%), and the detail gives their bandwidth
-- params:
--   trace = NULL: only this trace
--   min_bytes = 65536: ignore copies smaller than this many bytes each: latency, not bandwidth, sets their time, and pinning saves next to nothing
--   max_evidence = 20: at most this many copies named in the evidence
WITH copies AS (
    SELECT m.*, w.steps
    FROM memcpy m
    JOIN steady_window w ON w.trace = m.trace AND w.step IS NOT DISTINCT FROM m.step
    WHERE ($trace IS NULL OR m.trace = $trace)
      AND m.kind IN ('HtoD', 'DtoH') AND m.name ILIKE '%pageable%'
      AND coalesce(m.bytes, CAST($min_bytes AS BIGINT)) >= CAST($min_bytes AS BIGINT)
), groups AS (
    SELECT c.trace, c.kind, coalesce(c.cpu_op_path, c.cpu_op, 'an op the trace does not name') AS path,
           any_value(c.steps) AS steps, count(*) AS copies, sum(c.bytes) AS bytes, count(c.bytes) AS sized,
           sum(round(c.dur_us * 1e3)) / 1e3 AS copy_us, sum(round(c.dur_us * 1e3)) FILTER (WHERE c.bytes IS NOT NULL) / 1e3 AS sized_us,
           to_json(list(struct_pack(source := 'memcpy', trace := c.trace, name := c.name,
                                    ts_ns := CAST(round(c.ts_us * 1000) AS BIGINT),
                                    dur_ns := CAST(round(c.dur_us * 1000) AS BIGINT),
                                    correlation := c.correlation, cpu_op_id := c.cpu_op_id,
                                    source_file := c.source_file, source_line := c.source_line,
                                    source_function := c.source_function)
                        ORDER BY c.dur_us DESC, c.ts_us, c.correlation)[1:CAST($max_evidence AS INTEGER)]) AS evidence
    FROM copies c
    GROUP BY c.trace, c.kind, coalesce(c.cpu_op_path, c.cpu_op, 'an op the trace does not name')
)
SELECT g.trace, 'pageable_copy' AS rule,
       CASE WHEN g.copy_us / g.steps >= 0.10 * t.gpu_us_per_step THEN 'high'
            WHEN g.copy_us / g.steps >= 0.03 * t.gpu_us_per_step THEN 'medium' ELSE 'low' END AS severity,
       format('{} Memcpy {} of {} per step {} pageable memory in {}',
              CASE WHEN g.copies % g.steps = 0 THEN CAST(g.copies // g.steps AS VARCHAR) ELSE format('{:.1f}', g.copies / g.steps) END,
              g.kind, CASE WHEN g.sized = g.copies THEN format('{:.1f} MiB', g.bytes / g.copies / 1048576.0) ELSE 'unknown size' END,
              CASE g.kind WHEN 'HtoD' THEN 'from' ELSE 'to' END,
              g.path) AS title,
       format('{} cop{} in {} steady step(s): {:.1f} µs of GPU time per step, {:.1f}% of the step''s {:.1f} µs of GPU time',
              g.copies, CASE WHEN g.copies = 1 THEN 'y' ELSE 'ies' END, g.steps, g.copy_us / g.steps,
              100.0 * g.copy_us / g.steps / t.gpu_us_per_step, t.gpu_us_per_step)
         || CASE WHEN g.sized_us > 0 THEN format(', at {:.1f} GB/s', g.bytes / (g.sized_us * 1000.0)) ELSE '' END
         || '; the CPU waits for each one, so it neither overlaps compute nor lets the CPU launch ahead' AS detail,
       CASE g.kind WHEN 'HtoD' THEN 'pin the source (pin_memory=True in the DataLoader, or tensor.pin_memory() once for a buffer you reuse) and copy with .to(device, non_blocking=True)'
            ELSE 'copy into a pinned buffer (torch.empty(..., pin_memory=True), then buffer.copy_(x, non_blocking=True)) and synchronize once when you read it' END AS fix,
       'pin-copies' AS whatif,
       g.copy_us / g.steps AS estimate_us_per_step,
       g.evidence
FROM groups g JOIN step_totals t USING (trace);
