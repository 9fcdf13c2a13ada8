-- launch_bound: steps in which the GPU sits idle most of the time, waiting for the CPU to launch work
-- why: each kernel costs the CPU microseconds to launch (Python, the dispatcher, the CUDA runtime); when a step launches many short kernels the CPU cannot keep ahead of the GPU, and the step takes as long as the launching, not the computing
-- fix: capture the step in a CUDA graph (torch.cuda.graphs, or torch.compile(mode='reduce-overhead')), fuse kernels with torch.compile, or give each kernel more work (a bigger batch)
-- saving: step (wall) time, not GPU time: the step's CPU span less its GPU busy time per steady step, the most a launch-free step (a CUDA graph) could gain; an upper bound
-- params:
--   trace = NULL: only this trace
--   max_busy_pct = 50: report traces whose GPU is busy less than this share of the step span
--   min_kernels = 10: and which launch at least this many kernels per step of their own (fewer: one big call's overhead, not launches); a kernel a CUDA graph replayed has no launch of its own left to graph
--   min_stall_us = 1000: the fix replayed (whatif) keeps the thread's own stretches of at least this long, work no CUDA graph holds (a sleep, host-side work): gpu_idle's stalls
--   max_evidence = 20: at most this many steps named in the evidence
WITH launches AS (
    SELECT r.trace, sum(round(r.dur_us * 1e3)) / 1e3 / any_value(w.steps) AS launch_us_per_step, count(*) / any_value(w.steps) AS calls_per_step
    FROM runtime r
    JOIN steady_window w ON w.trace = r.trace AND w.step IS NOT DISTINCT FROM r.step
    WHERE regexp_matches(lower(r.name), 'launch')
    GROUP BY r.trace
), kernel_times AS (
    SELECT k.trace, median(k.dur_us) AS median_kernel_us
    FROM kernels k
    JOIN steady_window w ON w.trace = k.trace AND w.step IS NOT DISTINCT FROM k.step
    GROUP BY k.trace
), graphed AS (
    -- Kernels a CUDA graph replayed (torch.cuda.CUDAGraph, torch.compile's CUDA graph trees): one
    -- graph launch ran them all, so capturing the step again saves none of their launches.
    SELECT k.trace, count(*) / any_value(w.steps) AS graphed_per_step
    FROM kernels k
    JOIN steady_window w ON w.trace = k.trace AND w.step IS NOT DISTINCT FROM k.step
    JOIN (SELECT DISTINCT trace, correlation FROM runtime WHERE name LIKE '%GraphLaunch%') g
         ON g.trace = k.trace AND g.correlation = k.correlation
    GROUP BY k.trace
), step_list AS (
    SELECT s.trace, to_json(list(struct_pack(source := 'steps', trace := s.trace, name := 'ProfilerStep#' || s.step,
                                             ts_ns := CAST(round(s.ts_us * 1000) AS BIGINT),
                                             dur_ns := CAST(round(s.dur_us * 1000) AS BIGINT), step := s.step)
                                 ORDER BY s.step)[1:CAST($max_evidence AS INTEGER)]) AS evidence
    FROM steady_steps s GROUP BY s.trace
)
SELECT t.trace, 'launch_bound' AS rule,
       CASE WHEN t.gpu_us_per_step < 0.25 * t.cpu_us_per_step THEN 'high' ELSE 'medium' END AS severity,
       -- under 1% and under a millisecond keep their digits: a GPU busy 50 µs of 13.4 ms is not "0%: 0.1 ms"
       format('The GPU is busy {}% of each step''s CPU span: {} of {:.1f} ms',
              CASE WHEN t.gpu_us_per_step < 0.01 * t.cpu_us_per_step THEN format('{:.1f}', 100.0 * t.gpu_us_per_step / t.cpu_us_per_step)
                   ELSE format('{:.0f}', 100.0 * t.gpu_us_per_step / t.cpu_us_per_step) END,
              CASE WHEN t.gpu_us_per_step < 1000 THEN format('{:.0f} µs', t.gpu_us_per_step)
                   ELSE format('{:.1f} ms', t.gpu_us_per_step / 1000) END,
              t.cpu_us_per_step / 1000) AS title,
       format('{:.0f} kernels per step over {} steady step(s), median kernel {:.1f} µs; the CPU spends {:.1f} ms per step in {:.0f} launch calls',
              t.kernels_per_step, t.steps, k.median_kernel_us, coalesce(l.launch_us_per_step, 0) / 1000,
              coalesce(l.calls_per_step, 0))
       || CASE WHEN g.graphed_per_step > 0 THEN format('; {:.0f} of the kernels per step a CUDA graph replayed', g.graphed_per_step)
               ELSE '' END AS detail,
       'capture the step in a CUDA graph (torch.compile(mode=''reduce-overhead'') or torch.cuda.CUDAGraph), fuse kernels with torch.compile, or give each launch more work (a bigger batch)' AS fix,
       'cuda-graph:' || $min_stall_us AS whatif,
       t.cpu_us_per_step - t.gpu_us_per_step AS estimate_us_per_step,
       sl.evidence
FROM step_totals t
JOIN kernel_times k USING (trace)
LEFT JOIN launches l USING (trace)
LEFT JOIN step_list sl USING (trace)
LEFT JOIN graphed g USING (trace)
WHERE ($trace IS NULL OR t.trace = $trace)
  AND t.cpu_us_per_step IS NOT NULL AND t.gpu_us_per_step IS NOT NULL
  AND t.gpu_us_per_step < CAST($max_busy_pct AS DOUBLE) / 100 * t.cpu_us_per_step
  AND t.kernels_per_step - coalesce(g.graphed_per_step, 0) >= CAST($min_kernels AS DOUBLE);
