-- graph_kernels_missing: CUDA or HIP graph launches (cudaGraphLaunch, hipGraphLaunch, cuGraphLaunch) whose kernels the trace does not show
-- why: a graph replay is one runtime call on the CPU; its kernels, copies and fills reach the trace only when the profiler records the graph's GPU activity. When they are missing, the steps' GPU time, busy share and kernel counts leave the graph's work out, and every per-step figure (and every other rule's share of the step) is computed without it
-- fix: profile with a PyTorch and CUPTI that record the kernels of graph replays (recent Kineto does: the RTX 5080 replay trace in tests/data/foreign shows all 36 ops of each replay), or profile one step eagerly, without the graph, to see its kernels; time the replay itself with CUDA events
-- saving: NULL: nothing runs slower; the finding says that the trace undercounts the GPU's work
-- unsaved: nothing runs slower: the trace leaves kernels out, so the figures per step count less GPU work than ran
-- params:
--   trace = NULL: only this trace
--   max_evidence = 20: at most this many launches named in the evidence
WITH gpu_work AS (
    SELECT trace, correlation FROM kernels
    UNION SELECT trace, correlation FROM memcpy
    UNION SELECT trace, correlation FROM memset
), launches AS (
    SELECT r.*, w.steps,
           NOT EXISTS (SELECT 1 FROM gpu_work g WHERE g.trace = r.trace AND g.correlation = r.correlation) AS missing
    FROM runtime r
    JOIN steady_window w ON w.trace = r.trace AND w.step IS NOT DISTINCT FROM r.step
    WHERE ($trace IS NULL OR r.trace = $trace)
      AND regexp_matches(r.name, '^(cuda|hip|cu)GraphLaunch')
), groups AS (
    SELECT l.trace, l.name, any_value(l.steps) AS steps, count(*) AS launches,
           count(*) FILTER (WHERE l.missing) AS missing, sum(round(l.dur_us * 1e3)) FILTER (WHERE l.missing) / 1e3 AS launch_us,
           min(l.cpu_op) AS typical_op,
           to_json(list(struct_pack(source := 'runtime', trace := l.trace, name := l.name,
                                    ts_ns := CAST(round(l.ts_us * 1000) AS BIGINT),
                                    dur_ns := CAST(round(l.dur_us * 1000) AS BIGINT),
                                    correlation := l.correlation, cpu_op_id := l.cpu_op_id)
                        ORDER BY l.ts_us, l.correlation) FILTER (WHERE l.missing)[1:CAST($max_evidence AS INTEGER)]) AS evidence
    FROM launches l
    GROUP BY l.trace, l.name
)
SELECT g.trace, 'graph_kernels_missing' AS rule,
       -- Medium when every steady step undercounts its GPU work; info when only some launches lack theirs.
       CASE WHEN g.missing >= g.steps THEN 'medium' ELSE 'info' END AS severity,
       format('{} of {} {} call(s) in steady steps show no GPU work: the steps'' GPU time leaves the graphs out',
              g.missing, g.launches, g.name) AS title,
       format('{} {} per step{}, none of them with a kernel, memcpy or memset of its correlation id in the trace; the figures per step (step_totals, gpu_busy) count only the work launched outside graphs{}',
              CASE WHEN g.missing % g.steps = 0 THEN CAST(g.missing // g.steps AS VARCHAR) ELSE format('{:.1f}', g.missing / g.steps) END,
              g.name, coalesce(' from ' || regexp_replace(g.typical_op, '#[0-9]+$', '#N'), ''),
              coalesce(format(' ({:.1f} µs per step of GPU work from other launches)', t.gpu_us_per_step), '')) AS detail,
       CASE WHEN g.name LIKE 'hip%' THEN 'profile with a ROCm and PyTorch whose profiler (roctracer/rocprofiler) records the kernels of graph replays, or profile one step eagerly without the graph to see its kernels'
            ELSE 'profile with a PyTorch and CUPTI that record the kernels of graph replays (recent Kineto does), or profile one step eagerly without the graph to see its kernels; time the replay with CUDA events' END AS fix,
       CAST(NULL AS VARCHAR) AS whatif,
       CAST(NULL AS DOUBLE) AS estimate_us_per_step,
       g.evidence
FROM groups g
JOIN step_totals t USING (trace)
WHERE g.missing > 0;
