-- low_occupancy: kernels whose launch lets few warps reside on an SM, and what limits them
-- why: an SM hides memory and instruction latency by switching between resident warps; a launch whose registers per thread, shared memory per block or block size let few warps in (theoretical occupancy, view kernels) leaves it stalled unless the kernel makes up with instruction-level parallelism, as Tensor Core kernels (flash, cuDNN, nvjet) are built to; Kineto writes an achieved occupancy of 0 for blocks over 48 KiB of shared memory, so its own figure cannot be relied on
-- fix: for registers, cap them (__launch_bounds__, -maxrregcount) or choose smaller tiles; for shared memory, fewer pipeline stages or smaller tiles; for threads or blocks, launch bigger blocks; for a library kernel, another backend or configuration (check the time, not only the occupancy); for a collective's kernel (NCCL, RCCL), none: its time is the transfer and the wait for the other ranks
-- saving: not estimated (NULL): occupancy is not time, and a low figure is by design in many fast kernels; the finding says what limits the launch so it can be measured against another configuration
-- unsaved: occupancy is not time: a low figure is by design in many fast kernels (Tensor Core GEMMs among them); time the kernel against another configuration
-- params:
--   trace = NULL: only this trace
--   max_pct = 25: report kernels whose theoretical occupancy is below this percent
--   min_share_pct = 5: and which take at least this share of the GPU time per step
--   max_evidence = 20: at most this many launches named in the evidence
WITH low AS (
    SELECT k.*, w.steps
    FROM kernels k
    JOIN steady_window w ON w.trace = k.trace AND w.step IS NOT DISTINCT FROM k.step
    WHERE k.theoretical_occupancy_pct < CAST($max_pct AS DOUBLE) AND ($trace IS NULL OR k.trace = $trace)
), by_kernel AS (
    SELECT l.trace, l.name, any_value(l.steps) AS steps, count(*) AS launches, sum(round(l.dur_us * 1e3)) / 1e3 AS kernel_us,
           -- One launch shape per kernel name in practice; the most used one speaks for it.
           mode(l.theoretical_occupancy_pct) AS occupancy_pct, mode(l.occupancy_limiter) AS limiter,
           mode(l.registers_per_thread) AS registers, mode(l.shared_memory_bytes) AS shared_bytes,
           mode(l.block[1] * coalesce(l.block[2], 1) * coalesce(l.block[3], 1)) AS threads,
           avg(l.est_occupancy_pct) AS kineto_pct, count(l.est_occupancy_pct) AS kineto_known,
           any_value(l.math_unit) AS math_unit, any_value(l.kernel_class) AS kernel_class,
           to_json(list(struct_pack(source := 'kernels', trace := l.trace, name := l.name,
                                    ts_ns := CAST(round(l.ts_us * 1000) AS BIGINT),
                                    dur_ns := CAST(round(l.dur_us * 1000) AS BIGINT),
                                    correlation := l.correlation, cpu_op_id := l.cpu_op_id)
                        ORDER BY l.ts_us, l.correlation)[1:CAST($max_evidence AS INTEGER)]) AS evidence
    FROM low l
    GROUP BY l.trace, l.name
)
SELECT b.trace, 'low_occupancy' AS rule,
       CASE WHEN b.math_unit = 'tensor_core' OR b.kernel_class = 'communication' THEN 'info' ELSE 'low' END AS severity,
       format('{} runs at {:.1f}% theoretical occupancy, limited by {}',
              CASE WHEN length(b.name) > 80 THEN left(b.name, 77) || '...' ELSE b.name END,
              b.occupancy_pct, replace(b.limiter, '_', ' ')) AS title,
       format('{} launches, {:.1f} µs per step ({:.1f}% of the GPU time); {} registers per thread, {} bytes of shared memory and {} threads per block; Kineto''s achieved occupancy: {}',
              b.launches, b.kernel_us / b.steps, 100.0 * b.kernel_us / b.steps / t.gpu_us_per_step,
              b.registers, b.shared_bytes, b.threads,
              CASE WHEN b.kineto_known = 0 THEN 'none (it writes 0 for blocks over 48 KiB of shared memory, stored as NULL)'
                   ELSE format('{:.0f}%', b.kineto_pct) END)
         || CASE WHEN b.math_unit = 'tensor_core' THEN '; a Tensor Core kernel, built to run at low occupancy'
                 -- a block per channel by design, its time the transfer and the wait for the other ranks
                 WHEN b.kernel_class = 'communication' THEN '; a collective''s kernel, a block per channel by design: its time is the transfer and the wait for the other ranks, not its occupancy'
                 ELSE '' END
         AS detail,
       CASE WHEN b.kernel_class = 'communication'
            THEN 'nothing in the kernel to change: look at what the collective moves and waits for (query collective_bw for its bandwidth against the links'', collective_skew for the ranks that arrive late), and overlap it with compute'
            ELSE CASE b.limiter
            WHEN 'registers' THEN 'cap the registers per thread (__launch_bounds__, -maxrregcount) or use smaller tiles; for a library kernel, time another backend or configuration'
            WHEN 'shared_memory' THEN 'use fewer pipeline stages or smaller tiles so more blocks fit the SM''s shared memory'
            ELSE 'launch bigger blocks (more threads per block)' END END AS fix,
       CAST(NULL AS VARCHAR) AS whatif,
       CAST(NULL AS DOUBLE) AS estimate_us_per_step,
       b.evidence
FROM by_kernel b
JOIN step_totals t USING (trace)
WHERE 100.0 * b.kernel_us / b.steps >= CAST($min_share_pct AS DOUBLE) * t.gpu_us_per_step;
