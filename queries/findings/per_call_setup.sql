-- per_call_setup: work rebuilt on every call that could be built once: tensors made from constants (aten::ones, full, arange, eye, linspace, scalar_tensor) and the masks made from them (tril, triu, logical_not, where), as the math SDPA backend builds its causal mask, and aten::_safe_softmax's checks for fully masked rows
-- why: a constant tensor or a mask that depends only on shapes comes out the same on every call, yet it costs kernel launches and GPU time in each step; the math backend also checks every softmax row for -inf (isneginf, all, where), a pass over the whole score matrix that fused attention kernels never make
-- fix: build the tensor or mask once and reuse it (register_buffer in __init__, or a cache keyed by shape and device), or pass is_causal=True to scaled_dot_product_attention instead of a mask; for the math backend, let SDPA pick a fused backend (flash, memory-efficient, cuDNN), which applies the causal mask inside its kernel
-- saving: the GPU time of those kernels per steady step, which building them once (or a fused backend) removes
-- params:
--   trace = NULL: only this trace
--   min_us_per_step = 5: ignore setup that costs less GPU time per step than this
--   max_evidence = 20: at most this many kernels named in the evidence
--
-- Left out on purpose: aten::zeros, zero_ and the *_like factories. In the training captures they make
-- buffers that are written afterwards (embedding_dense_backward's gradient, nll_loss_backward's
-- output, the backward's seed), which must be fresh on every call. And the work of backward
-- formulas (ClampBackward1's scalar_tensor and where), which is PyTorch's, not the model's.
WITH tagged AS (
    SELECT k.*, w.steps,
           CASE WHEN regexp_matches(k.cpu_op_path, '(^|→ )aten::_safe_softmax → ')
                     AND NOT regexp_matches(k.cpu_op_path, 'aten::_safe_softmax → aten::_?softmax( →|$)') THEN 'checks'
                WHEN regexp_matches(k.cpu_op_path, '(^|→ )aten::(ones|full|arange|eye|linspace|scalar_tensor)( →|$)') THEN 'constant'
                -- tril, triu, logical_not and where count only beside a constant of the same op (below).
                WHEN regexp_matches(k.cpu_op_path, '(^|→ )aten::(tril|triu|logical_not|where)( →|$)') THEN 'mask'
           END AS kind,
           -- The op each piece of setup work is made in: the one above the first setup op of its chain.
           coalesce(nullif(trim(regexp_extract(regexp_extract(k.cpu_op_path,
                        '^(.*?)(?: → )?aten::(?:_safe_softmax|ones|full|arange|eye|linspace|scalar_tensor|tril|triu|logical_not|where)(?: →|$)', 1),
                        '([^→]*)$', 1)), ''), 'Python code (no op above it)') AS parent,
           CASE WHEN regexp_matches(k.cpu_op_path, '(^|→ )aten::_safe_softmax → ')
                THEN regexp_extract(k.cpu_op_path, 'aten::_safe_softmax → (aten::[A-Za-z_]+)', 1)
                ELSE regexp_extract(k.cpu_op_path, 'aten::(?:ones|full|arange|eye|linspace|scalar_tensor|tril|triu|logical_not|where)(?: →|$)', 0)
           END AS setup_op
    FROM kernels k
    JOIN steady_window w ON w.trace = k.trace AND w.step IS NOT DISTINCT FROM k.step
    WHERE ($trace IS NULL OR k.trace = $trace)
      AND regexp_matches(k.cpu_op_path, '(^|→ )aten::(_safe_softmax|ones|full|arange|eye|linspace|scalar_tensor|tril|triu|logical_not|where)( →|$)')
      -- A backward formula's constants are PyTorch's to make, not the model's to cache.
      AND NOT regexp_matches(k.cpu_op_path, 'Backward[0-9]*( →|$)')
), setup AS (
    SELECT t.*, CASE WHEN t.kind = 'checks' THEN 'checks' ELSE 'build' END AS work,
           trim(regexp_replace(t.setup_op, ' →$', '')) AS op
    FROM tagged t
    WHERE t.kind IS NOT NULL
      AND (t.kind <> 'mask' OR EXISTS (SELECT 1 FROM tagged c WHERE c.trace = t.trace AND c.parent = t.parent AND c.kind = 'constant'))
), groups AS (
    SELECT s.trace, s.parent, s.work, any_value(s.steps) AS steps, count(*) AS kernels, sum(round(s.dur_us * 1e3)) / 1e3 AS setup_us,
           count(DISTINCT coalesce(s.step, -1)) AS steps_seen,
           bool_or(s.op IN ('aten::tril', 'aten::triu')) AS triangular,
           bool_or(s.kind = 'mask') AS masks,
           bool_or(s.cpu_op_path LIKE '%_scaled_dot_product_attention_math%') AS in_sdpa_math,
           string_agg(DISTINCT s.op, ', ' ORDER BY s.op) AS ops,
           to_json(list(struct_pack(source := 'kernels', trace := s.trace, name := s.name,
                                    ts_ns := CAST(round(s.ts_us * 1000) AS BIGINT),
                                    dur_ns := CAST(round(s.dur_us * 1000) AS BIGINT),
                                    correlation := s.correlation, cpu_op_id := s.cpu_op_id)
                        ORDER BY s.ts_us, s.correlation)[1:CAST($max_evidence AS INTEGER)]) AS evidence
    FROM setup s
    GROUP BY s.trace, s.parent, s.work
)
SELECT g.trace, 'per_call_setup' AS rule,
       CASE WHEN g.setup_us / g.steps >= 0.10 * t.gpu_us_per_step THEN 'high'
            WHEN g.setup_us / g.steps >= 0.03 * t.gpu_us_per_step THEN 'medium' ELSE 'low' END AS severity,
       format('{} on every call in {}: {} kernels, {:.1f} µs of GPU time per step',
              CASE WHEN g.work = 'checks' THEN 'aten::_safe_softmax checks each row for full masking'
                   WHEN g.triangular THEN 'A causal mask rebuilt'
                   WHEN g.masks THEN 'A mask rebuilt'
                   ELSE 'Constant tensors rebuilt' END,
              g.parent,
              CASE WHEN g.kernels % g.steps = 0 THEN CAST(g.kernels // g.steps AS VARCHAR) ELSE format('{:.1f}', g.kernels / g.steps) END,
              g.setup_us / g.steps) AS title,
       format('{} kernels in {} steady step(s), the same in each, from {}; {:.1f}% of the step''s {:.1f} µs of GPU time',
              g.kernels, g.steps, g.ops, 100.0 * g.setup_us / g.steps / t.gpu_us_per_step, t.gpu_us_per_step) AS detail,
       CASE WHEN g.in_sdpa_math
                 THEN 'let scaled_dot_product_attention use a fused backend (flash, memory-efficient or cuDNN): with is_causal=True they mask inside the kernel, with no mask to build and no rows to check'
            WHEN g.work = 'checks' THEN 'use torch.softmax where no row can be fully masked, or a fused attention backend'
            WHEN g.masks THEN 'build the mask once and reuse it (register_buffer in __init__, or a cache keyed by shape and device), or pass is_causal=True to scaled_dot_product_attention instead of a mask'
            ELSE 'create the tensors once and reuse them (register_buffer in __init__, or a cache keyed by shape and device)' END AS fix,
       -- The kernels of those ops (for building, outside _safe_softmax, whose checks are the other finding).
       CASE WHEN g.in_sdpa_math THEN 'fuse-attention' ELSE 'drop:' || CASE WHEN g.work = 'checks' THEN 'aten::_safe_softmax → (' || replace(g.ops, ', ', '|') || ')'
                       ELSE '^(?!.*aten::_safe_softmax → )(.*→ )?(' || replace(g.ops, ', ', '|') || ')( →|$)' END END AS whatif,
       g.setup_us / g.steps AS estimate_us_per_step,
       g.evidence
FROM groups g JOIN step_totals t USING (trace)
-- Rebuilt on every call: present in each steady step.
WHERE g.steps_seen = g.steps AND g.setup_us / g.steps >= CAST($min_us_per_step AS DOUBLE);
