-- @view trace_shapes: what a trace ran, for comparing like with like: the speed-up against naive
-- (query summary) and the report's "fastest" compare only traces of one shape on one device.
--   trace: trace name
--   device: the GPU it ran on (device 0's name, 'an unnamed GPU' when the trace does not name it),
--           or 'the CPU' for a trace without GPU work
--   shape: the capture's B x H x S x D, dtype, causal and workload (forward or train) on that
--          device, e.g. '1x2x128x32 fp32 causal forward on the CPU'; NULL for a trace without the
--          capture's metadata (a foreign trace: its shape is unknown, so it matches none)
CREATE OR REPLACE VIEW trace_shapes AS
SELECT trace, device, dims || ' on ' || device AS shape
FROM (
    SELECT t.trace,
           CASE WHEN EXISTS (SELECT 1 FROM gpu_busy g WHERE g.trace = t.trace)
                THEN coalesce(t.device_name, 'an unnamed GPU') ELSE 'the CPU' END AS device,
           json_extract_string(t.metadata, '$.batch') || 'x' || json_extract_string(t.metadata, '$.heads')
             || 'x' || json_extract_string(t.metadata, '$.seq_len') || 'x'
             || json_extract_string(t.metadata, '$.head_dim') || ' ' || json_extract_string(t.metadata, '$.dtype')
             || CASE WHEN json_extract_string(t.metadata, '$.causal') = 'true' THEN ' causal' ELSE '' END
             || ' ' || coalesce(json_extract_string(t.metadata, '$.workload'), 'forward') AS dims
    FROM traces t
) s;

-- @view attention_chains: attention computed op by op, as eager attention code does: softmax(Q·Kᵀ)·V
-- as a matmul, the scaling, a mask, the softmax (and any casts or dropout between) and another
-- matmul, each its own kernels, where a fused kernel (scaled_dot_product_attention's flash,
-- memory-efficient or cuDNN backend) runs them as one. One row per chain: a softmax over a matrix
-- of three dimensions or more whose thread's last matmul before it made a matrix of that shape
-- (after the softmax before it, if any) and whose first matmul after it multiplies that matrix
-- (before the next softmax).
--   trace, step, pid, tid: where it ran (its softmax's step; the thread of its ops)
--   ts_us, end_us: the chain's CPU span, from the Q·Kᵀ matmul's start to the ·V matmul's end
--   queries, keys, head_dim: S, T and D of its Q·Kᵀ ([.., S, D] × [.., D, T] → [.., S, T])
--   qk_op_id, softmax_op_id, av_op_id: its three ops (cpu_ops.op_id), the outermost of each nest
CREATE OR REPLACE VIEW attention_chains AS
WITH ops AS (
    SELECT o.trace, o.op_id, o.step, o.pid, o.tid, o.ts_us, o.ts_us + o.dur_us AS end_us,
           o.name IN ('aten::softmax', 'aten::_softmax', 'aten::_safe_softmax') AS is_softmax,
           -- the last two dimensions of the first and the second input, from Kineto's Input Dims text
           -- with its brackets as < and > (a bracket in a pattern is written one way in DuckDB's
           -- regular expressions and another in Spark's)
           TRY_CAST(regexp_extract(o.dims, '^<<([0-9]+,)+([0-9]+),([0-9]+)>', 2) AS BIGINT) AS a_rows,
           TRY_CAST(regexp_extract(o.dims, '^<<([0-9]+,)+([0-9]+),([0-9]+)>', 3) AS BIGINT) AS a_cols,
           TRY_CAST(regexp_extract(o.dims, '^<<[0-9,]*>,<([0-9]+,)+([0-9]+),([0-9]+)>', 2) AS BIGINT) AS b_rows,
           TRY_CAST(regexp_extract(o.dims, '^<<[0-9,]*>,<([0-9]+,)+([0-9]+),([0-9]+)>', 3) AS BIGINT) AS b_cols
    FROM (SELECT c.*,
                 -- baddbmm's first input is the term it adds (a mask as a bias): its two factors follow
                 CASE WHEN c.name = 'aten::baddbmm'
                      THEN regexp_replace(replace(replace(c.input_dims, '[', '<'), ']', '>'), '^<<[0-9,]*>,', '<')
                      ELSE replace(replace(c.input_dims, '[', '<'), ']', '>') END AS dims
          FROM cpu_ops c) o
    WHERE o.name IN ('aten::matmul', 'aten::bmm', 'aten::baddbmm', 'aten::softmax', 'aten::_softmax', 'aten::_safe_softmax')
      -- the outermost of a nest (aten::matmul → aten::bmm, aten::softmax → aten::_softmax)
      AND coalesce(o.parent, '') NOT IN ('aten::matmul', 'aten::bmm', 'aten::baddbmm', 'aten::softmax',
                                         'aten::_softmax', 'aten::_safe_softmax')
), ordered AS (
    -- Each op's neighbours on its thread, by a sort, not a join of every softmax with every matmul
    -- (a trace of a thousand steps holds thousands of each, of one shape).
    SELECT o.*,
           last_value(CASE WHEN NOT o.is_softmax THEN struct_pack(op_id := o.op_id, ts_us := o.ts_us, a_rows := o.a_rows,
                                                                  a_cols := o.a_cols, b_rows := o.b_rows, b_cols := o.b_cols) END IGNORE NULLS)
               OVER (PARTITION BY o.trace, o.pid, o.tid ORDER BY o.ts_us, o.op_id
                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_mm,
           first_value(CASE WHEN NOT o.is_softmax THEN struct_pack(op_id := o.op_id, ts_us := o.ts_us, end_us := o.end_us,
                                                                   a_rows := o.a_rows, a_cols := o.a_cols, b_rows := o.b_rows) END IGNORE NULLS)
               OVER (PARTITION BY o.trace, o.pid, o.tid ORDER BY o.ts_us, o.op_id
                     ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS after_mm,
           last_value(CASE WHEN o.is_softmax THEN o.ts_us END IGNORE NULLS)
               OVER (PARTITION BY o.trace, o.pid, o.tid ORDER BY o.ts_us, o.op_id
                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS softmax_before_us,
           first_value(CASE WHEN o.is_softmax THEN o.ts_us END IGNORE NULLS)
               OVER (PARTITION BY o.trace, o.pid, o.tid ORDER BY o.ts_us, o.op_id
                     ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS softmax_after_us
    FROM ops o
)
SELECT trace, step, pid, tid, before_mm.ts_us AS ts_us, after_mm.end_us AS end_us, a_rows AS queries, a_cols AS keys,
       before_mm.a_cols AS head_dim, before_mm.op_id AS qk_op_id, op_id AS softmax_op_id, after_mm.op_id AS av_op_id
FROM ordered
WHERE is_softmax AND a_rows IS NOT NULL
  -- Q·Kᵀ: [.., S, D] × [.., D, T] made the softmax's [.., S, T]
  AND before_mm.a_rows = a_rows AND before_mm.b_cols = a_cols AND before_mm.a_cols = before_mm.b_rows
  AND (softmax_before_us IS NULL OR before_mm.ts_us > softmax_before_us)
  -- ·V: [.., S, T] × [.., T, Dv]
  AND after_mm.a_rows = a_rows AND after_mm.a_cols = a_cols AND after_mm.b_rows = a_cols
  AND (softmax_after_us IS NULL OR after_mm.ts_us < softmax_after_us);

-- @view optimizer_steps: each torch.optim step (its Optimizer.step#NAME.step range) and the GPU work
-- its ops launched: what unfused_optimizer reports and fuse-optimizer replays fused.
--   trace, step, optimizer (Adam, AdamW, SGD, ...), op_id (cpu_ops.op_id of the range), pid, tid,
--   ts_us, end_us: the range
--   kernels, gpu_us: its kernels and their GPU time
--   implementation: 'fused' (an aten::_fused_* op), 'foreach' (aten::_foreach_* ops: a pass over
--     each list of tensors per operation, the default), 'for-loop' (more kernels of other ops than
--     of foreach ones: one op per parameter per operation, as foreach=False, or fused=False with
--     foreach unset, runs it); NULL where the step launched nothing
--   foreach_kernels, foreach_us, foreach_bytes: those of its foreach ops (aten::_foreach_*) and the
--     bytes they move by their work models (NULL where a kernel's bytes are unknown)
--   unfused_kernels, unfused_us, unfused_bytes: the same of the ops a fused step replaces: its
--     foreach ops, or a for-loop step's others (a step hook's foreach ops, such as a clip's, stay); 0
--     for a fused step
--   param_bytes: the parameters' bytes, half the least one operation of the step moves over all
--     its tensors (one tensor in and one out, such as sqrt, moves the parameters' bytes twice; a
--     third for SGD without momentum, whose update reads two tensors and writes one)
--   fused_bytes: the bytes its fused implementation (fused=True) moves a step, each state read once
--     and written once: Adam and AdamW read the parameters, gradients and both moments and write
--     the parameters and moments (7 times param_bytes); SGD with momentum (a mul_ of its momentum
--     buffers) reads the parameters, gradients and buffers and writes the parameters and buffers
--     (5 times), without it 3 times; NULL for other optimizers
--   fused: whether the step ran a fused implementation (an aten::_fused_* op)
CREATE OR REPLACE VIEW optimizer_steps AS
WITH ranges AS (
    SELECT o.trace, o.op_id, o.step, o.pid, o.tid, o.ts_us, o.ts_us + o.dur_us AS end_us,
           replace(replace(o.name, 'Optimizer.step#', ''), '.step', '') AS optimizer
    FROM cpu_ops o
    WHERE o.name LIKE 'Optimizer.step#%.step'
), kernel_ops AS (
    SELECT k.trace, k.dur_us, k.bytes, k.cpu_op AS op, o.pid, o.tid, o.ts_us AS op_ts_us, o.ts_us + o.dur_us AS op_end_us
    FROM kernels k
    JOIN cpu_ops o ON o.trace = k.trace AND o.op_id = k.cpu_op_id
    JOIN (SELECT DISTINCT trace, pid, tid FROM ranges) t ON t.trace = o.trace AND t.pid = o.pid AND t.tid = o.tid
), swept AS (
    -- the range open on the launching op's thread when the op began (ranges on a thread never
    -- overlap): a sort of the thread's ranges and ops, not a join of every range with every op
    SELECT x.*,
           last_value(x.range_id IGNORE NULLS) OVER (PARTITION BY x.trace, x.pid, x.tid ORDER BY x.at_us, x.is_kernel
                                                     ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS open_range,
           last_value(x.range_end_us IGNORE NULLS) OVER (PARTITION BY x.trace, x.pid, x.tid ORDER BY x.at_us, x.is_kernel
                                                         ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS open_end_us
    FROM (SELECT trace, pid, tid, ts_us AS at_us, 0 AS is_kernel, op_id AS range_id, end_us AS range_end_us,
                 CAST(NULL AS DOUBLE) AS dur_us, CAST(NULL AS DOUBLE) AS bytes, CAST(NULL AS VARCHAR) AS op,
                 CAST(NULL AS DOUBLE) AS op_end_us
          FROM ranges
          UNION ALL
          SELECT trace, pid, tid, op_ts_us, 1, NULL, NULL, dur_us, bytes, op, op_end_us FROM kernel_ops) x
), per_op AS (
    -- (times summed in whole nanoseconds, here and below, exact in any order: the same on a
    -- database, a lake or Spark, whatever order the rows come in)
    SELECT trace, open_range AS range_id, op, count(*) AS n, count(bytes) AS with_bytes, sum(round(dur_us * 1e3)) AS ns,
           sum(bytes) AS bytes, op LIKE 'aten::_foreach%' AS foreach, op LIKE 'aten::_fused%' AS fused_op
    FROM swept
    WHERE is_kernel = 1 AND op_end_us <= open_end_us
    GROUP BY trace, open_range, op
), implementations AS (
    -- a for-loop step launches a kernel per parameter per operation, more than the foreach kernels
    -- a step hook inside the range may add (clip_grad_norm_'s _foreach_norm and _foreach_mul_)
    SELECT trace, range_id,
           CASE WHEN bool_or(fused_op) THEN 'fused'
                WHEN coalesce(sum(n) FILTER (WHERE foreach), 0) >= coalesce(sum(n) FILTER (WHERE NOT foreach), 0) THEN 'foreach'
                ELSE 'for-loop' END AS implementation
    FROM per_op GROUP BY trace, range_id
), unfused_ops AS (
    -- the ops a fused step replaces: a foreach step's foreach ops, a for-loop step's other ops
    SELECT p.*, i.implementation,
           (i.implementation = 'foreach' AND p.foreach) OR (i.implementation = 'for-loop' AND NOT p.foreach) AS unfused
    FROM per_op p JOIN implementations i USING (trace, range_id)
), momentum AS (
    -- SGD's momentum scales its buffers (a mul_, which moves them twice); without it its one
    -- update (params += -lr * grads, after weight decay's add) moves the parameters' bytes 3
    -- times: the least an operation of the step moves, over these passes, is the parameters' bytes
    SELECT r.trace, r.op_id AS range_id,
           coalesce(bool_or(p.op IN ('aten::_foreach_mul_', 'aten::mul_') AND p.unfused), FALSE) AS momentum,
           CASE WHEN any_value(r.optimizer) = 'SGD'
                     AND NOT coalesce(bool_or(p.op IN ('aten::_foreach_mul_', 'aten::mul_') AND p.unfused), FALSE)
                THEN 3 ELSE 2 END AS param_passes
    FROM ranges r LEFT JOIN unfused_ops p ON p.trace = r.trace AND p.range_id = r.op_id
    GROUP BY r.trace, r.op_id
)
SELECT r.trace, r.step, r.optimizer, r.op_id, r.pid, r.tid, r.ts_us, r.end_us,
       coalesce(sum(p.n), 0) AS kernels, coalesce(sum(p.ns), 0) / 1e3 AS gpu_us,
       any_value(p.implementation) AS implementation,
       coalesce(sum(p.n) FILTER (WHERE p.foreach), 0) AS foreach_kernels,
       coalesce(sum(p.ns) FILTER (WHERE p.foreach), 0) / 1e3 AS foreach_us,
       CASE WHEN sum(p.n) FILTER (WHERE p.foreach) = sum(p.with_bytes) FILTER (WHERE p.foreach)
            THEN sum(p.bytes) FILTER (WHERE p.foreach) END AS foreach_bytes,
       coalesce(sum(p.n) FILTER (WHERE p.unfused), 0) AS unfused_kernels,
       coalesce(sum(p.ns) FILTER (WHERE p.unfused), 0) / 1e3 AS unfused_us,
       CASE WHEN sum(p.n) FILTER (WHERE p.unfused) = sum(p.with_bytes) FILTER (WHERE p.unfused)
            THEN sum(p.bytes) FILTER (WHERE p.unfused) END AS unfused_bytes,
       min(p.bytes) FILTER (WHERE p.unfused AND p.n = p.with_bytes) / any_value(m.param_passes) AS param_bytes,
       min(p.bytes) FILTER (WHERE p.unfused AND p.n = p.with_bytes) / any_value(m.param_passes)
         * CASE WHEN r.optimizer IN ('Adam', 'AdamW') THEN 7
                WHEN r.optimizer = 'SGD' THEN CASE WHEN any_value(m.momentum) THEN 5 ELSE 3 END
           END AS fused_bytes,
       coalesce(bool_or(p.fused_op), FALSE) AS fused
FROM ranges r
LEFT JOIN unfused_ops p ON p.trace = r.trace AND p.range_id = r.op_id
LEFT JOIN momentum m ON m.trace = r.trace AND m.range_id = r.op_id
GROUP BY r.trace, r.step, r.optimizer, r.op_id, r.pid, r.tid, r.ts_us, r.end_us;

-- @view scaler_checks: the scalar reads GradScaler.step makes to check the gradients for inf/NaN
-- before it lets the optimizer step (`if not sum(v.item() for v in found_inf_per_device)`): a
-- read (aten::item, or a bare aten::_local_scalar_dense) whose next op beside it on its thread is
-- an Optimizer.step#NAME.step range, after AMP unscaled the step's gradients
-- (aten::_amp_foreach_non_finite_check_and_unscale_) on that thread. The read right before the
-- step alone: a loss.item() the user logs between scaler.unscale_() and scaler.step() is theirs
-- (a model on several GPUs has one read a GPU, and the others count as the user's). A step the
-- read found inf/NaN in has no optimizer step: there the read is followed by the op of
-- scaler.update() (aten::_amp_update_scale_), no optimizer step having run since the unscale. The
-- user's code has no .item() to drop there: an optimizer whose fused implementation takes the
-- check into its kernel (Adam, AdamW, SGD with fused=True) makes no read, nor does bf16 autocast,
-- which needs no scaler.
--   trace, step, op_id (cpu_ops.op_id of the read), pid, tid, ts_us, dur_us: the read
--   optimizer, optimizer_op_id: the optimizer (Adam, AdamW, SGD, ...) and the cpu_ops.op_id of the
--     step range the read let run (view optimizer_steps); a skipped step's read has the optimizer
--     of its thread's other reads and no optimizer_op_id
CREATE OR REPLACE VIEW scaler_checks AS
WITH unscaled AS (
    -- where AMP first unscaled gradients in each step of each thread
    SELECT trace, pid, tid, step, min(ts_us) AS first_unscale_us
    FROM cpu_ops
    WHERE name = 'aten::_amp_foreach_non_finite_check_and_unscale_'
    GROUP BY trace, pid, tid, step
), siblings AS (
    -- the ops of those steps and threads, each with the next op beside it
    SELECT o.trace, o.op_id, o.name, o.step, o.pid, o.tid, o.ts_us, o.dur_us, u.first_unscale_us,
           lead(o.name) OVER (PARTITION BY o.trace, o.pid, o.tid, o.parent_id ORDER BY o.ts_us, o.op_id) AS next_name,
           lead(o.op_id) OVER (PARTITION BY o.trace, o.pid, o.tid, o.parent_id ORDER BY o.ts_us, o.op_id) AS next_op_id,
           -- the last optimizer step to start before this op in its step
           max(CASE WHEN o.name LIKE 'Optimizer.step#%.step' THEN o.ts_us END)
             OVER (PARTITION BY o.trace, o.pid, o.tid, o.step ORDER BY o.ts_us, o.op_id
                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS stepped_us
    FROM cpu_ops o
    JOIN unscaled u ON u.trace = o.trace AND u.pid = o.pid AND u.tid = o.tid AND u.step IS NOT DISTINCT FROM o.step
), reads AS (
    SELECT trace, step, op_id, pid, tid, ts_us, dur_us,
           CASE WHEN next_name LIKE 'Optimizer.step#%.step'
                THEN replace(replace(next_name, 'Optimizer.step#', ''), '.step', '') END AS stepped,
           CASE WHEN next_name LIKE 'Optimizer.step#%.step' THEN next_op_id END AS optimizer_op_id
    FROM siblings
    WHERE name IN ('aten::item', 'aten::_local_scalar_dense') AND ts_us > first_unscale_us
      AND (next_name LIKE 'Optimizer.step#%.step'
           -- a skipped step: scaler.update() next, no optimizer step since the unscale
           OR (next_name = 'aten::_amp_update_scale_' AND coalesce(stepped_us < first_unscale_us, TRUE)))
)
SELECT * FROM (
    SELECT trace, step, op_id, pid, tid, ts_us, dur_us,
           coalesce(stepped, first_value(stepped IGNORE NULLS) OVER (PARTITION BY trace, pid, tid ORDER BY ts_us
                                                                    ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)) AS optimizer,
           optimizer_op_id
    FROM reads
) r WHERE optimizer IS NOT NULL;

-- @view elementwise_chain_ops: the kernels of the chains of view elementwise_chains, a row each: which
-- ops a chain holds (a cast of a weight launched among them is not one of them, nor a residual add
-- before it or a cast to another dtype after it).
--   trace, step, pid, tid: where the kernel ran (its step) and the thread of its op
--   op_step, run: the chain's step (of its ops) and number on that thread (with trace, pid, tid:
--     the chain)
--   chain_first_op_id: the chain's first op (elementwise_chains.first_op_id)
--   op_id, op, op_ts_us, op_end_us: the op that launched the kernel (cpu_ops), and its CPU span
--   ts_us, dur_us, work_family, bytes: the kernel's start, time, work family and bytes moved
--   elements: the op's largest input, in elements; chain_elements: the chain's full size
--   full_pass: the kernel reads or writes the full size (not a reduction)
CREATE OR REPLACE VIEW elementwise_chain_ops AS
WITH launched AS (
    SELECT k.trace, k.step, o.step AS op_step, k.ts_us, k.dur_us, k.bytes, k.work_family, o.op_id, o.name AS op, o.pid, o.tid,
           o.ts_us AS op_ts_us, o.ts_us + o.dur_us AS op_end_us,
           -- pointwise ops (the work models' elementwise family less those that sample, resample or
           -- transform: random fills, dropout's draw, upsampling, FFTs), row reductions (not pools or
           -- scans) and casts: a fused op (F.rms_norm after a residual's dropout) draws no numbers
           ((k.work_family = 'elementwise'
             AND NOT regexp_matches(o.name, '(normal|uniform|exponential|cauchy|geometric|random|bernoulli)_$|dropout|upsample|fft|^fbgemm::'))
            OR (k.work_family = 'reduction'
                AND regexp_matches(o.name, '^aten::(sum|mean|amax|amin|max|min|norm|linalg_vector_norm|logsumexp|std|var|std_mean|var_mean)$'))
            OR (o.name = 'aten::copy_' AND coalesce(k.cpu_op_path, '') LIKE '%aten::_to_copy%'))
           -- a graph replay's kernels carry the work of the ops that captured them: not this launch's
           AND o.name LIKE 'aten::%' AND k.work_source IS DISTINCT FROM 'graph capture'
           AND coalesce(k.cpu_op_path, '') NOT LIKE '%evaluate_function%'
           AND coalesce(k.cpu_op_path, '') NOT LIKE '%scaled_dot_product%' AS kind_fuses,
           list_transform(CAST(o.input_dims AS JSON[]),
                          lambda x: CASE WHEN json_array_length(x) > 0
                                         THEN list_product(TRY_CAST(x AS BIGINT[])) END) AS input_elements,
           -- the dtype it reads (a cast's source) and a cast's target
           CASE WHEN o.name = 'aten::copy_' THEN o.input_types->>'$[1]' ELSE o.input_types->>'$[0]' END AS reads_dtype,
           CASE WHEN o.name = 'aten::copy_' THEN o.input_types->>'$[0]' END AS casts_to,
           -- a cast made inside another op (autocast's of aten::linear's input), not the user's .to()
           split_part(coalesce(k.cpu_op_path, ''), ' → ', 1) NOT IN ('aten::to', 'aten::_to_copy', 'aten::copy_',
                                                                   'aten::type_as', '') AS cast_inside_an_op
    FROM kernels k JOIN cpu_ops o ON o.trace = k.trace AND o.op_id = k.cpu_op_id
), elsewhere AS (
    -- the ops inside spans whose kernels are other rules' to fuse (attention chains, an optimizer's
    -- step or zero_grad): a sort of each thread's spans and candidate ops, the latest end of the
    -- spans begun before an op past its start (a join of every op with every span took 20 s on 1 GB)
    SELECT trace, op_id FROM (
        SELECT trace, op_id, at_us,
               max(span_end_us) OVER (PARTITION BY trace, pid, tid ORDER BY at_us, is_op ROWS UNBOUNDED PRECEDING) AS open_end_us
        FROM (SELECT trace, pid, tid, ts_us AS at_us, 0 AS is_op, end_us AS span_end_us, CAST(NULL AS BIGINT) AS op_id
              FROM attention_chains
              UNION ALL
              SELECT trace, pid, tid, ts_us, 0, ts_us + dur_us, NULL FROM cpu_ops WHERE name LIKE 'Optimizer.%#%'
              UNION ALL
              SELECT DISTINCT trace, pid, tid, op_ts_us, 1, NULL, op_id FROM launched WHERE kind_fuses))
    WHERE op_id IS NOT NULL AND at_us < open_end_us
), judged AS (
    SELECT l.*, l.kind_fuses AND e.op_id IS NULL AS fusable
    FROM launched l LEFT JOIN (SELECT DISTINCT trace, op_id FROM elsewhere) e ON e.trace = l.trace AND e.op_id = l.op_id
), runs AS (
    -- a chain never crosses a step's start: the step's last op and the next one's first are not one
    SELECT *, sum(CASE WHEN fusable THEN 0 ELSE 1 END)
                  OVER (PARTITION BY trace, pid, tid, op_step ORDER BY op_ts_us, ts_us ROWS UNBOUNDED PRECEDING) AS run
    FROM judged
), sized AS (
    -- the chain's size is its pointwise ops' and reductions': a cast beside them may be of a bigger
    -- tensor (autocast's of the next Linear's weight, launched before the activation's own cast)
    SELECT *, max(CASE WHEN work_family IS DISTINCT FROM 'copy' THEN elements END)
                  OVER (PARTITION BY trace, pid, tid, op_step, run) AS chain_elements
    FROM (SELECT *, list_max(input_elements) AS elements FROM runs WHERE fusable)
), members AS (
    -- of the full size, or a side tensor of it (a row's statistic, [B, T, 1] of [B, T, H]; a
    -- broadcast operand) whose size divides it; a smaller cast (autocast's of a weight) stays out,
    -- as no fusion removes it
    SELECT * FROM sized
    WHERE elements IS NULL OR chain_elements IS NULL OR elements = chain_elements
       OR (work_family IS DISTINCT FROM 'copy' AND chain_elements % elements = 0)
), placed AS (
    -- in the order the kernels ran (an op's cast inside it runs before its own kernel)
    SELECT *, row_number() OVER (PARTITION BY trace, pid, tid, op_step, run ORDER BY ts_us, op_ts_us) AS place,
           coalesce(elements = chain_elements, false) AS of_full_size,
           -- a residual add: two tensors of the full size from outside the chain
           coalesce(work_family = 'elementwise' AND array_length(list_filter(input_elements, lambda n: n = chain_elements)) >= 2,
                    false) AS joins_two
    FROM members
), ends AS (
    SELECT *, min(CASE WHEN of_full_size THEN place END) OVER chain AS first_full,
           max(CASE WHEN of_full_size THEN place END) OVER chain AS last_full,
           min(CASE WHEN of_full_size AND work_family = 'reduction' THEN place END) OVER chain AS first_reduction
    FROM placed
    WINDOW chain AS (PARTITION BY trace, pid, tid, op_step, run)
), opened AS (
    -- the fused op (F.rms_norm, F.gelu) reads one tensor of the chain's size: the chain starts at
    -- its first op over that size (ops on smaller tensors before it, rotary's cos and sin, are a
    -- chain of their own), after it where that op joins two such tensors and a norm follows (a row
    -- reduction, then the full size again): the residual add makes the norm's input, where an add
    -- before a ReLU and a pool, or a loss's own ops, are the fused kernel's
    SELECT *, first_full + CASE WHEN max(CASE WHEN place = first_full AND joins_two THEN 1 ELSE 0 END) OVER chain = 1
                                     AND first_reduction < last_full THEN 1 ELSE 0 END AS opens_at
    FROM ends
    WINDOW chain AS (PARTITION BY trace, pid, tid, op_step, run)
), typed AS (
    SELECT *, first_value(CASE WHEN place >= opens_at THEN reads_dtype END IGNORE NULLS)
                  OVER (PARTITION BY trace, pid, tid, op_step, run ORDER BY place
                        ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS chain_dtype
    FROM opened
), closed AS (
    -- and writes its output in the dtype it read: a last cast to another dtype that the next op
    -- makes (autocast's of the next Linear's input, from a norm kept in fp32) stays; one back to
    -- that dtype (after an upcast inside the chain), or the user's own, goes
    SELECT *, last_full - max(CASE WHEN place = last_full AND cast_inside_an_op AND casts_to <> chain_dtype THEN 1 ELSE 0 END)
                              OVER (PARTITION BY trace, pid, tid, op_step, run) AS closes_at
    FROM typed
), parts AS (
    -- what lies before the chain's start or after its end is judged as a chain of its own, of its
    -- own size (none where its ops have no size: a loss's scalars after its sum)
    SELECT *, CASE WHEN place < coalesce(opens_at, 1) THEN 0 WHEN place > coalesce(closes_at, place) THEN 2 ELSE 1 END AS part
    FROM closed
), resized AS (
    SELECT *, CASE WHEN part = 1 THEN chain_elements
                   ELSE max(CASE WHEN work_family IS DISTINCT FROM 'copy' THEN elements END)
                            OVER (PARTITION BY trace, pid, tid, op_step, run, part) END AS part_elements
    FROM parts
), counted AS (
    SELECT *, count(*) OVER part AS chain_kernels,
           count(CASE WHEN work_family = 'elementwise' THEN 1 END) OVER part AS chain_elementwise,
           count(CASE WHEN work_family = 'copy' THEN 1 END) OVER part AS chain_casts,
           arg_min(op_id, op_ts_us) OVER part AS chain_first_op_id,
           dense_rank() OVER (PARTITION BY trace, pid, tid, op_step ORDER BY run, part) AS chain_number
    FROM resized
    WHERE part = 1 OR chain_elements IS NULL
       OR (part_elements IS NOT NULL
           AND (elements = part_elements OR (work_family IS DISTINCT FROM 'copy' AND part_elements % elements = 0)))
    WINDOW part AS (PARTITION BY trace, pid, tid, op_step, run, part)
)
SELECT trace, step, op_step, pid, tid, chain_number AS run, chain_first_op_id, op_id, op, op_ts_us, op_end_us, ts_us,
       dur_us, work_family, elements, part_elements AS chain_elements, bytes,
       elements = part_elements AND work_family IS DISTINCT FROM 'reduction' AS full_pass
-- a cast of a tensor of known size counts toward the chain's pointwise kernels:
-- x.float().square().mean() fuses to one reduction of the bf16 tensor
FROM counted
WHERE chain_kernels >= 3
  AND (chain_elementwise >= 2 OR (chain_elementwise = 1 AND chain_casts >= 1 AND part_elements IS NOT NULL));

-- @view elementwise_chains: elementwise ops run one kernel each, back to back, where one fused
-- kernel (torch.compile's, or a fused op such as F.gelu or F.rms_norm) would read the tensor once
-- and write it once, as in GPT-2's tanh GELU written out in 8 ops (transformers' gelu_new) or an
-- RMSNorm as pow, mean, rsqrt and muls, with casts between them. One row per chain of three
-- kernels or more in a row on one thread's launches, two or more of them elementwise (or one and a
-- cast, in a chain of known size), each
-- launched by a pointwise ATen op, a row reduction (sum, mean, amax, var...) or a cast, of the
-- chain's full size or of a size that divides it (a row's statistic, a broadcast operand; a
-- smaller cast, autocast's of a weight, stays out, as no fusion removes it), from its first op
-- over the full size to its last (what the fused op reads and writes: not the residual add that
-- joins two tensors of that size before a norm, nor a last cast of its output to another dtype
-- that the next op makes, autocast's for the next Linear; a cast back to the dtype it read is in;
-- what lies before or after is judged as a chain of its own), outside autograd's
-- backward (a chain's backward is its forward's, fused with it), an optimizer's step or zero_grad
-- (unfused_optimizer's), scaled_dot_product_attention and attention chains (unfused_attention's),
-- and not a CUDA graph's replay; the next kernel of any other op ends it.
--   trace, step, pid, tid: where it ran (its first kernel's step; the thread of its ops)
--   ts_us, end_us: the chain's CPU span, from its first op's start to its last op's end
--   first_op_id, last_op_id: its first and last launching ops (cpu_ops.op_id)
--   kernels, gpu_us: its kernels and their GPU time
--   ops: the launching ops in order, joined by ' → '
--   elements: the largest input of its ops, in elements (NULL: no shapes recorded)
--   bytes: the bytes its kernels move (their work models'; NULL where one is unknown)
--   fused_bytes: what one fused kernel would move: the fewest bytes of a kernel of the chain over
--     the full size that is not a reduction (one read of the tensor and one write, in its
--     narrowest dtype)
--   fused_us: fused_bytes at the pace the chain's full-size kernels kept (their µs a byte), and
--     no less than its shortest kernel (NULL: bytes unknown)
CREATE OR REPLACE VIEW elementwise_chains AS
WITH chains AS (
    SELECT trace, pid, tid, op_step, run, arg_min(step, ts_us) AS step, min(op_ts_us) AS ts_us, max(op_end_us) AS end_us,
           arg_min(op_id, op_ts_us) AS first_op_id, arg_max(op_id, op_ts_us) AS last_op_id,
           -- times summed in whole nanoseconds, exact in any order: the same chains, ranks and
           -- estimates on a database, a lake or Spark, whatever order the rows come in
           count(*) AS kernels, sum(round(dur_us * 1e3)) / 1e3 AS gpu_us, min(dur_us) FILTER (WHERE full_pass) AS shortest_us,
           string_agg(op, ' → ' ORDER BY op_ts_us, ts_us) AS ops,
           max(chain_elements) AS elements,
           CASE WHEN count(bytes) = count(*) THEN sum(bytes) END AS bytes,
           min(bytes) FILTER (WHERE full_pass) AS fused_bytes,
           -- NULL where a full pass's bytes are unknown: its pace is not the chain's
           CASE WHEN count(bytes) FILTER (WHERE full_pass) = count(*) FILTER (WHERE full_pass)
                THEN sum(round(dur_us * 1e3)) FILTER (WHERE full_pass AND bytes > 0) / 1e3 / sum(bytes) FILTER (WHERE full_pass AND bytes > 0)
           END AS us_per_byte
    FROM elementwise_chain_ops
    GROUP BY trace, pid, tid, op_step, run
)
SELECT trace, step, pid, tid, ts_us, end_us, first_op_id, last_op_id, kernels, gpu_us, ops, elements, bytes,
       fused_bytes,
       -- greatest skips a NULL: an unknown pace is no estimate
       CASE WHEN fused_bytes IS NOT NULL AND us_per_byte IS NOT NULL
            THEN greatest(fused_bytes * us_per_byte, shortest_us) END AS fused_us
FROM chains;
