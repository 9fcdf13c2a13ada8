-- host_sync: calls that make the CPU wait for the GPU in the middle of a steady step: cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize (and HIP's), and device-to-host copies of a few bytes (.item())
-- why: while the CPU waits it launches nothing, so the GPU drains its queue and then idles until the CPU has launched the step's next work: the step pays the GPU's tail and the CPU's launch time one after the other instead of overlapped
-- fix: keep values on the GPU (torch.where or masks instead of a Python if on a tensor, no .item(), .tolist() or print of GPU tensors in the step), read results every N steps, copy inputs with non_blocking=True from pinned memory, and drop explicit torch.cuda.synchronize() calls; an op that sizes its output by the GPU's data (a boolean index's nonzero, masked_select, unique, repeat_interleave) reads the size: multiply by the mask or use torch.where, or give the size (nonzero_static, output_size); GradScaler's own read before each optimizer step (view scaler_checks) goes with a fused optimizer (AdamW(fused=True)) or bf16 autocast without a scaler
-- saving: per steady step, the CPU's time blocked in these calls, capped at the GPU's idle time in the step (the ProfilerStep span less the GPU's busy time): without the waits the CPU runs ahead, so the step can shrink by what it waited but not below the GPU's busy time. NULL for a trace without ProfilerStep spans, which give no step to cap it by. A bare synchronize with nothing launched after it in its step (made by no ATen op: a loop timing its steps, as tracekit capture does, inside a record_function range or not) is left out: it is there on purpose, and the idle it leaves at the next step's start is gpu_idle's to report; a value read there (loss.item() to log it, .cpu()) counts, since the next step's launches wait for it as any other step's work would
-- params:
--   trace = NULL: only this trace
--   max_copy_bytes = 1024: a device-to-host copy of at most this many bytes is a scalar read (.item(), .tolist(), a Python if on a GPU tensor)
--   step_end_syncs = 0: 1 also counts bare synchronize calls with nothing launched after them in their step
--   max_evidence = 20: at most this many calls named in the evidence
WITH gpu_work AS (
    SELECT trace, correlation FROM kernels
    UNION SELECT trace, correlation FROM memcpy
    UNION SELECT trace, correlation FROM memset
), last_launch AS (
    -- The last call in each step that queued GPU work.
    SELECT r.trace, r.step, max(r.ts_us) AS last_launch_us
    FROM runtime r JOIN gpu_work g ON g.trace = r.trace AND g.correlation = r.correlation
    GROUP BY r.trace, r.step
), waits AS (
    SELECT r.trace, r.name, r.ts_us, r.dur_us, r.correlation, r.cpu_op_id, r.step, w.steps,
           m.bytes AS copy_bytes, coalesce(r.ts_us < x.last_launch_us, FALSE) AS mid_step,
           -- The op that called it: its chain of ops where it launched GPU work, with ProfilerStep#N for each step.
           regexp_replace(coalesce(o.op_path, o.name, 'Python (no op open)'), '#[0-9]+', '#N', 'g') AS chain,
           -- an op whose output's size is the GPU's data (a boolean index's nonzero, in the forward
           -- and in its backward alike): the CPU reads the size before it can go on
           nullif(regexp_extract(coalesce(o.op_path, o.name, ''),
                                 '(aten::(nonzero|nonzero_numpy|masked_select|_unique|_unique2|unique_consecutive|unique_dim|unique_dim_consecutive|repeat_interleave|bincount))( →|$)', 1),
                  '') AS shape_op,
           -- GradScaler's own read before the optimizer's step: no .item() of the user's
           s.optimizer AS scaler_before
    FROM runtime r
    JOIN steady_window w ON w.trace = r.trace AND w.step IS NOT DISTINCT FROM r.step
    LEFT JOIN memcpy m ON m.trace = r.trace AND m.correlation = r.correlation
    LEFT JOIN cpu_ops o ON o.trace = r.trace AND o.op_id = r.cpu_op_id
    LEFT JOIN last_launch x ON x.trace = r.trace AND x.step IS NOT DISTINCT FROM r.step
    -- a call inside GradScaler's read (its copy, its sync)
    LEFT JOIN scaler_checks s ON s.trace = r.trace AND s.pid = r.pid AND s.tid = r.tid
                             AND r.ts_us >= s.ts_us AND r.ts_us <= s.ts_us + s.dur_us
    WHERE ($trace IS NULL OR r.trace = $trace)
      AND (regexp_matches(r.name, '^(cuda|hip)(Device|Stream|Event)Synchronize|^cu(Ctx|Stream|Event)Synchronize')
           OR (m.kind = 'DtoH' AND m.bytes <= CAST($max_copy_bytes AS BIGINT)))
), callers AS (
    -- a read for an output's size is the sizing op's, wherever it was called from
    SELECT *, coalesce(shape_op, chain) AS caller FROM waits
), groups AS (
    SELECT w.trace, w.caller, w.scaler_before, w.shape_op, any_value(w.steps) AS steps,
           string_agg(DISTINCT trim(regexp_extract(w.chain, '^([^→]*)', 1)), '; '
                      ORDER BY trim(regexp_extract(w.chain, '^([^→]*)', 1))) AS made_in, count(*) AS calls, sum(round(w.dur_us * 1e3)) / 1e3 AS blocked_us,
           count(w.copy_bytes) AS copies, count(*) FILTER (WHERE w.mid_step) AS mid_step, max(w.copy_bytes) AS max_copy_bytes,
           string_agg(DISTINCT w.name, ', ' ORDER BY w.name) FILTER (WHERE w.copy_bytes IS NULL) AS names,
           to_json(list(struct_pack(source := 'runtime', trace := w.trace, name := w.name,
                                    ts_ns := CAST(round(w.ts_us * 1000) AS BIGINT),
                                    dur_ns := CAST(round(w.dur_us * 1000) AS BIGINT),
                                    correlation := w.correlation, cpu_op_id := w.cpu_op_id)
                        ORDER BY w.dur_us DESC, w.ts_us, w.correlation)[1:CAST($max_evidence AS INTEGER)]) AS evidence
    FROM callers w
    -- at a step's end, a read (a copy, or a wait an ATen op makes) counts; a bare synchronize, in no
    -- op or in a record_function range only, is the loop timing its steps
    WHERE w.mid_step OR w.copy_bytes IS NOT NULL OR w.caller LIKE '%aten::%'
       OR CAST($step_end_syncs AS INTEGER) = 1
    GROUP BY w.trace, w.caller, w.scaler_before, w.shape_op
), estimates AS (
    SELECT g.*, t.cpu_us_per_step, t.gpu_us_per_step,
           CASE WHEN t.cpu_us_per_step IS NOT NULL
                THEN least(g.blocked_us / g.steps, greatest(t.cpu_us_per_step - coalesce(t.gpu_us_per_step, 0), 0)) END AS saving_us
    FROM groups g JOIN step_totals t USING (trace)
)
SELECT e.trace, 'host_sync' AS rule,
       CASE WHEN e.saving_us IS NULL THEN 'medium'
            WHEN e.saving_us >= 0.10 * e.cpu_us_per_step THEN 'high'
            WHEN e.saving_us >= 0.03 * e.cpu_us_per_step THEN 'medium' ELSE 'low' END AS severity,
       CASE WHEN e.scaler_before IS NOT NULL THEN format('GradScaler''s inf/NaN check before each {} step: ', e.scaler_before) ELSE '' END
       || CASE WHEN e.copies > 0
            THEN format('{} device-to-host cop{} of {} B or less per step{} from {}',
                        CASE WHEN e.copies % e.steps = 0 THEN CAST(e.copies // e.steps AS VARCHAR) ELSE format('{:.1f}', e.copies / e.steps) END,
                        CASE WHEN e.copies = e.steps THEN 'y' ELSE 'ies' END, e.max_copy_bytes,
                        coalesce(' and ' || e.names, ''), e.caller || coalesce(' (in ' || CASE WHEN e.shape_op IS NOT NULL AND e.made_in <> e.shape_op THEN e.made_in END || ')', ''))
            ELSE format('{} {} per step from {}',
                        CASE WHEN e.calls % e.steps = 0 THEN CAST(e.calls // e.steps AS VARCHAR) ELSE format('{:.1f}', e.calls / e.steps) END,
                        e.names, e.caller) END
         || format(': the CPU waits {:.1f} µs per step', e.blocked_us / e.steps) AS title,
       format('{} call(s) in {} steady step(s), {} with more GPU work launched after it in its step; ',
              e.calls, e.steps, CASE WHEN e.mid_step = e.calls THEN 'each' ELSE format('{} of them', e.mid_step) END)
         || CASE WHEN e.saving_us IS NULL THEN 'the trace has no ProfilerStep spans, so the saving is not estimated'
                 ELSE format('the GPU is idle {:.1f} µs of each step''s {:.1f} µs CPU span, which caps the saving',
                             greatest(e.cpu_us_per_step - coalesce(e.gpu_us_per_step, 0), 0), e.cpu_us_per_step) END AS detail,
       CASE WHEN e.scaler_before IS NOT NULL
                 THEN 'the read is GradScaler.step checking the gradients for inf/NaN before it lets the optimizer step, not an .item() of your code: '
                      || CASE WHEN e.scaler_before IN ('Adam', 'AdamW', 'SGD')
                              THEN format('torch.optim.{}(model.parameters(), ..., fused=True) takes the check into its fused kernel and GradScaler reads nothing', e.scaler_before)
                              ELSE 'an optimizer with a fused implementation (Adam, AdamW, SGD with fused=True) takes the check into its kernel and GradScaler reads nothing' END
                      || '; or train under bf16 autocast, which needs no GradScaler, on a GPU with BF16 (Ampere and later)'
            WHEN e.shape_op IS NOT NULL
                 THEN e.shape_op || ' sizes its output by the GPU''s data, so the CPU waits to read the size: for a boolean index (x[mask], a loss over masked elements) multiply by the mask or use torch.where(mask, x, 0), and divide by mask.sum() on the GPU; where a bound on the size is known, torch.nonzero_static(mask, size=N) or repeat_interleave(..., output_size=N); else move it out of the step'
            WHEN e.copies > 0 OR e.caller LIKE '%aten::item%' OR e.caller LIKE '%_local_scalar_dense%'
                 THEN 'keep the value on the GPU (torch.where or a mask instead of a Python if on a tensor), or read it every N steps; to log it, copy it into pinned memory with non_blocking=True and read it a step later'
            WHEN regexp_matches(e.caller, 'aten::(to|_to_copy|copy_)$')
                 THEN 'copy from pinned memory with non_blocking=True (pin_memory=True in the DataLoader, or tensor.pin_memory()), so the copy does not wait for the stream'
            WHEN (e.caller LIKE 'ProfilerStep#N' OR e.caller = 'Python (no op open)') AND e.names LIKE '%EventSynchronize%'
                      AND e.names NOT LIKE '%DeviceSynchronize%' AND e.names NOT LIKE '%StreamSynchronize%'
                 THEN 'a CUDA event waited on in the step (end.synchronize() before end.elapsed_time(), as a loop timing each step does): keep each step''s events and read their elapsed_time every N steps or after the loop'
            WHEN e.caller LIKE 'ProfilerStep#N' OR e.caller = 'Python (no op open)'
                 THEN 'drop the explicit torch.cuda.synchronize() (or stream/event synchronize) from the step, or do it every N steps; time steps with CUDA events'
            ELSE 'find what needs the result on the CPU in ' || e.caller || ' and keep it on the GPU, or move it out of the step' END AS fix,
       -- The calls by the op that made them (the outermost of its chain), or by name where no op did.
       CASE WHEN e.scaler_before IN ('Adam', 'AdamW', 'SGD') THEN 'fuse-optimizer'
            WHEN e.scaler_before IS NOT NULL THEN 'drop-scaler-checks' ELSE
       'drop-sync:' || CASE WHEN e.copies = 0 AND NOT regexp_matches(e.caller, '^[a-z_]+::') THEN replace(e.names, ', ', '|')
                            ELSE trim(regexp_extract(e.caller, '^([^→]*)', 1)) END END AS whatif,
       e.saving_us AS estimate_us_per_step,
       e.evidence
FROM estimates e;
