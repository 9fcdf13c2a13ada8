-- How much CPU time does cuDNN spend building its attention plan on the first call?
-- A row per trace that calls cuDNN attention (see the views cudnn_attention_calls and cudnn_plans). The first call
-- builds (or finds cached) the execution plan; later calls reuse it.
-- keys: trace, op, plan_ms
-- columns:
--   trace: trace name
--   op: the cuDNN attention op timed
--   calls: calls in the trace
--   first_call_ms: CPU time of the first call, milliseconds
--   steady_call_ms: median CPU time of the other calls, milliseconds
--   plan_ms: first_call_ms - steady_call_ms, the cost of building the plan; NULL when the first call
--            in the trace costs less than twice a steady one: it is not the process's first (a
--            profiler schedule's window opened later) and found its plan built, so the trace does
--            not hold the plan's cost (a difference of noise, even below 0, is no plan time)
--   first_call_step: step of the first call
-- params:
--   trace = NULL: only this trace
SELECT trace, op, calls, round(first_call_ms, 3) AS first_call_ms, round(steady_call_ms, 3) AS steady_call_ms,
       round(plan_ms, 3) AS plan_ms, first_call_step
FROM cudnn_plans
WHERE $trace IS NULL OR trace = $trace
ORDER BY trace;
