-- Which rank is slow, step by step?
-- A row per rank and step of each job (traces with a rank; see traces.job): the step's CPU span, the
-- time its collectives spent waiting for other ranks, and the rest, its own work. Ranks of a job
-- in lockstep take about as long per step, the fast ones waiting in collectives for the slow one,
-- so the rank with the most work (span less waiting) is the slowest: by how much is its work
-- less the median work of the other ranks. A trace without ProfilerStep#N counts as one step
-- (step NULL) spanning from the first start to the last end of its CPU ops and GPU work.
-- (The span, not the step's wall time of step_bounds.step_us: Spark runs this query, and the
-- critical path that step_us comes from is DuckDB's alone.)
-- keys: trace, rank, step, span_us, wait_us
-- columns:
--   trace: trace name
--   rank: its rank in the job
--   step: the ProfilerStep#N (NULL: a trace without steps)
--   span_us: the step's CPU span (ProfilerStep#N), microseconds; for a trace without steps, its
--            first event's start to its last event's end
--   wait_us: the time its collective kernels launched in the step waited for the last rank to
--            arrive (view collectives, wait_us), microseconds
--   work_us: span_us minus wait_us
--   vs_others_us: work_us minus the median work_us of the job's other ranks in the step
--   slowest_rank: the rank with the most work_us in the step (ties: the lower rank)
--   slowest_by_us: the slowest rank's vs_others_us: how much longer it worked than the others
-- params:
--   trace = NULL: only this trace's rows (compared with all the ranks of its job)
--   step = NULL: only this step
WITH windows AS (
    SELECT t.trace, t.rank, t.job, s.step, s.dur_us AS span_us
    FROM traces t JOIN steps s ON s.trace = t.trace
    WHERE t.rank IS NOT NULL
    UNION ALL
    SELECT t.trace, t.rank, t.job, NULL, round(max(w.end_us) - min(w.ts_us), 3)
    FROM traces t
    JOIN (SELECT trace, ts_us, ts_us + dur_us AS end_us FROM cpu_ops
          UNION ALL SELECT trace, ts_us, ts_us + dur_us FROM kernels
          UNION ALL SELECT trace, ts_us, ts_us + dur_us FROM memcpy
          UNION ALL SELECT trace, ts_us, ts_us + dur_us FROM memset) w ON w.trace = t.trace
    WHERE t.rank IS NOT NULL AND t.trace NOT IN (SELECT trace FROM steps)
    GROUP BY t.trace, t.rank, t.job
), waits AS (
    -- summed in whole nanoseconds, exact in any order
    SELECT trace, coalesce(step, -1) AS step_key, sum(round(wait_us * 1e3)) / 1e3 AS wait_us
    FROM collectives WHERE rank IS NOT NULL
    GROUP BY trace, coalesce(step, -1)
), work AS (
    SELECT w.trace, w.rank, w.job, w.step, coalesce(w.step, -1) AS step_key, w.span_us,
           round(coalesce(x.wait_us, 0.0), 3) AS wait_us, round(w.span_us - coalesce(x.wait_us, 0.0), 3) AS work_us
    FROM windows w LEFT JOIN waits x ON x.trace = w.trace AND x.step_key = coalesce(w.step, -1)
), others AS (
    SELECT a.trace, a.step_key, median(b.work_us) AS others_work_us
    FROM work a JOIN work b ON b.job = a.job AND b.step_key = a.step_key AND b.trace <> a.trace
    GROUP BY a.trace, a.step_key
), compared AS (
    SELECT w.*, round(w.work_us - o.others_work_us, 3) AS vs_others_us,
           row_number() OVER (PARTITION BY w.job, w.step_key ORDER BY w.work_us DESC, w.rank, w.trace) AS slowness
    FROM work w LEFT JOIN others o ON o.trace = w.trace AND o.step_key = w.step_key
), slowest AS (
    SELECT job, step_key, rank AS slowest_rank, vs_others_us AS slowest_by_us FROM compared WHERE slowness = 1
)
SELECT c.trace, c.rank, c.step, round(c.span_us, 1) AS span_us, round(c.wait_us, 1) AS wait_us,
       round(c.work_us, 1) AS work_us, round(c.vs_others_us, 1) AS vs_others_us, s.slowest_rank,
       round(s.slowest_by_us, 1) AS slowest_by_us
FROM compared c JOIN slowest s ON s.job = c.job AND s.step_key = c.step_key
WHERE ($step IS NULL OR c.step = $step) AND ($trace IS NULL OR c.trace = $trace)
ORDER BY c.job, c.step NULLS LAST, c.rank, c.trace;
