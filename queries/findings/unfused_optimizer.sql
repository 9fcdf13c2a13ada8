-- unfused_optimizer: Adam, AdamW or SGD stepping with its default foreach implementation (view optimizer_steps): a pass over whole lists of tensors for each operation of the update, where its fused implementation makes one; or with its for-loop implementation (foreach=False, or fused=False with foreach unset): an op per parameter per operation, a launch and the CPU's dispatch each
-- why: the foreach step (and the for-loop step, a parameter at a time, with a launch per parameter per operation on top) reads and writes whole lists of tensors once per operation (Adam's weight decay mul, the moments' lerp and addcmul, sqrt, div, add, the update's addcdiv: some 20 times the parameters' bytes a step; SGD's momentum mul_ and add_, then the update's add_: 8 times); the fused kernel reads each state once and writes each once (Adam: the parameters, gradients and both moments read, the parameters and moments written, 7 times their bytes; SGD with momentum 5 times)
-- fix: torch.optim.AdamW(model.parameters(), ..., fused=True) (Adam and SGD take fused=True too), for parameters on the GPU; or torch.compile the optimizer's step
-- saving: estimate: per steady step, the unfused kernels' GPU time less that time scaled to the bytes a fused step moves (optimizer_steps.fused_bytes against the bytes the unfused kernels move, by their work models), at the bandwidth they reached; the replay (whatif fuse-optimizer) runs each step's unfused kernels as one kernel of that time, their launches but the first gone (a for-loop step's CPU time with them), and GradScaler's read before the step (view scaler_checks), which a fused step makes none of, waits no more
-- params:
--   trace = NULL: only this trace
--   min_us_per_step = 20: ignore steps the fused form would shorten by less GPU time than this
--   max_evidence = 20: at most this many optimizer steps named in the evidence
WITH steps AS (
    SELECT o.*, w.steps,
           -- the fused step's time: the unfused kernels' at the bytes a fused step moves
           -- NULL where a kernel's bytes are unknown (least would skip a NULL)
           CASE WHEN o.fused_bytes IS NOT NULL AND o.unfused_bytes > 0
                THEN o.unfused_us * least(o.fused_bytes / o.unfused_bytes, 1) END AS fused_us
    FROM optimizer_steps o
    JOIN steady_window w ON w.trace = o.trace AND w.step IS NOT DISTINCT FROM o.step
    WHERE ($trace IS NULL OR o.trace = $trace)
      AND o.optimizer IN ('Adam', 'AdamW', 'SGD') AND NOT o.fused AND o.unfused_kernels > 0
), per_trace AS (
    SELECT trace, any_value(steps) AS steps, any_value(optimizer) AS optimizer, count(*) AS optimizer_steps,
           -- the for-loop where any step ran it (a step a parameter at a time dispatches on the CPU too)
           CASE WHEN bool_or(implementation = 'for-loop') THEN 'for-loop' ELSE 'foreach' END AS implementation,
           sum(round((end_us - ts_us) * 1e3)) / 1e3 AS cpu_us,
           sum(unfused_kernels) AS kernels, sum(round(unfused_us * 1e3)) / 1e3 AS unfused_us, CASE WHEN count(fused_us) = count(*) THEN sum(fused_us) END AS fused_us,
           max(param_bytes) AS param_bytes, max(unfused_bytes) AS unfused_bytes, max(fused_bytes) AS fused_bytes,
           to_json(list(struct_pack(source := 'cpu_ops', trace := trace, name := 'Optimizer.step#' || optimizer || '.step',
                                    ts_ns := CAST(round(ts_us * 1000) AS BIGINT),
                                    dur_ns := CAST(round((end_us - ts_us) * 1000) AS BIGINT), cpu_op_id := op_id)
                        ORDER BY ts_us)[1:CAST($max_evidence AS INTEGER)]) AS evidence
    FROM steps
    GROUP BY trace
)
SELECT p.trace, 'unfused_optimizer' AS rule,
       CASE WHEN p.fused_us IS NULL THEN 'medium'
            WHEN (p.unfused_us - p.fused_us) / p.steps >= 0.10 * t.gpu_us_per_step THEN 'high'
            WHEN (p.unfused_us - p.fused_us) / p.steps >= 0.03 * t.gpu_us_per_step THEN 'medium' ELSE 'low' END AS severity,
       CASE WHEN p.implementation = 'for-loop'
            THEN format('{} steps a parameter at a time (its for-loop implementation): {} kernels, {:.1f} µs of GPU time and {:.1f} µs of the CPU per step',
                        p.optimizer,
                        CASE WHEN p.kernels % p.steps = 0 THEN CAST(p.kernels // p.steps AS VARCHAR) ELSE format('{:.1f}', p.kernels / p.steps) END,
                        p.unfused_us / p.steps, p.cpu_us / p.steps)
            ELSE format('{} steps with its foreach implementation: {} kernels, {:.1f} µs of GPU time per step',
                        p.optimizer,
                        CASE WHEN p.kernels % p.steps = 0 THEN CAST(p.kernels // p.steps AS VARCHAR) ELSE format('{:.1f}', p.kernels / p.steps) END,
                        p.unfused_us / p.steps) END AS title,
       format('{} optimizer step(s) in {} steady step(s)', p.optimizer_steps, p.steps)
         || CASE WHEN p.fused_us IS NULL THEN '; the kernels'' bytes are unknown (no work model for one of them), so the saving is not estimated'
                 ELSE format(': they move {:.1f} MB a step, {:.1f} times the parameters'' {:.1f} MB, where a fused step moves {:.0f} times; fused, about {:.1f} µs',
                             p.unfused_bytes / 1e6, p.unfused_bytes / p.param_bytes, p.param_bytes / 1e6,
                             p.fused_bytes / p.param_bytes, p.fused_us / p.steps) END
         || coalesce(format('; before each, GradScaler reads whether the gradients hold inf/NaN ({} read(s), the CPU waiting for the GPU: host_sync), which a fused step checks in its kernel',
                            c.reads), '') AS detail,
       format('torch.optim.{}(model.parameters(), ..., fused=True), for parameters on the GPU: one kernel a step in place of {}; or torch.compile the optimizer''s step',
              p.optimizer, CASE WHEN p.kernels % p.steps = 0 THEN CAST(p.kernels // p.steps AS VARCHAR) ELSE format('{:.1f}', p.kernels / p.steps) END)
         -- fused=False reads as "not fused", but with foreach unset it picks the for-loop
         || CASE WHEN p.implementation = 'for-loop' THEN ' (the for-loop, a parameter at a time, is what foreach=False runs, and fused=False with foreach unset, and PyTorch before 2.0 by default; since 2.0 the default, neither set, runs foreach)' ELSE '' END AS fix,
       'fuse-optimizer' AS whatif,
       (p.unfused_us - p.fused_us) / p.steps AS estimate_us_per_step,
       p.evidence
FROM per_trace p
JOIN step_totals t USING (trace)
LEFT JOIN (SELECT s.trace, count(*) AS reads
           FROM scaler_checks s JOIN steady_window w ON w.trace = s.trace AND w.step IS NOT DISTINCT FROM s.step
           WHERE s.optimizer IN ('Adam', 'AdamW', 'SGD') GROUP BY s.trace) c USING (trace)
-- a step GradScaler waits before is worth fusing for the wait alone
WHERE p.fused_us IS NULL OR (p.unfused_us - p.fused_us) / p.steps >= CAST($min_us_per_step AS DOUBLE) OR c.reads > 0;
