-- unfused_attention: attention computed op by op (view attention_chains: softmax(Q·Kᵀ)·V as a matmul, the scaling, a mask, the softmax and another matmul, each its own kernels), as eager attention code does
-- why: each kernel between the two matmuls reads and writes the whole S×T score matrix in GPU memory (the scaling, the mask, the softmax, casts to fp32 and back, dropout), and each is a launch of its own; a fused attention kernel keeps the scores on chip and runs the chain as one
-- fix: call torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, or attn_mask=...) in place of the chain, which runs a fused backend (flash, memory-efficient or cuDNN); in transformers, load the model with attn_implementation="sdpa" (or "flash_attention_2")
-- saving: estimate: per steady step, the GPU time of the kernels the chains' forward launched other than their matmuls (what a fused kernel leaves out; its matmuls' time stays); the replay (whatif fuse-attention-chains) runs each chain, and its backward, as one kernel at its matmuls' Tensor Core roofline (a chain on fp32 inputs, whose SDPA is the memory-efficient kernel: its SIMT matmuls at their own pace)
-- params:
--   trace = NULL: only this trace
--   min_us_per_step = 5: ignore chains whose kernels take less GPU time per step than this
--   max_evidence = 20: at most this many kernels named in the evidence
--
-- Chains inside scaled_dot_product_attention's math backend are simt_gemm's (its whatif fuse-attention
-- replays the whole call): this rule is for attention the model's own code computes.
WITH chains AS (
    SELECT c.*, w.steps
    FROM attention_chains c
    JOIN steady_window w ON w.trace = c.trace AND w.step IS NOT DISTINCT FROM c.step
    JOIN cpu_ops q ON q.trace = c.trace AND q.op_id = c.qk_op_id
    WHERE ($trace IS NULL OR c.trace = $trace)
      AND coalesce(q.parent, '') NOT LIKE '%scaled_dot_product%'
), kernel_ops AS (
    -- narrow rows (names are joined back for the evidence alone): sorting kernel names costs
    SELECT k.trace, k.correlation, k.ts_us, k.dur_us, k.kernel_class = 'gemm' AS is_matmul, k.cpu_op AS op,
           o.pid, o.tid, o.ts_us AS op_ts_us, o.ts_us + o.dur_us AS op_end_us
    FROM kernels k
    JOIN cpu_ops o ON o.trace = k.trace AND o.op_id = k.cpu_op_id
    JOIN (SELECT DISTINCT trace, pid, tid FROM chains) t ON t.trace = o.trace AND t.pid = o.pid AND t.tid = o.tid
), swept AS (
    -- The chain open on the launching op's thread when the op began: the latest to start at or
    -- before it, by a sort of the thread's chains and ops (chains on a thread never overlap), not a
    -- join of every chain with every op of its thread.
    SELECT x.*, last_value(x.chain_end_us IGNORE NULLS) OVER (PARTITION BY x.trace, x.pid, x.tid ORDER BY x.at_us, x.is_kernel
                                                              ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS open_end_us
    FROM (SELECT c.trace, c.pid, c.tid, c.ts_us AS at_us, 0 AS is_kernel, c.end_us AS chain_end_us,
                 CAST(NULL AS BIGINT) AS correlation, CAST(NULL AS DOUBLE) AS ts_us, CAST(NULL AS DOUBLE) AS dur_us,
                 CAST(NULL AS BOOLEAN) AS is_matmul, CAST(NULL AS VARCHAR) AS op, CAST(NULL AS DOUBLE) AS op_end_us
          FROM chains c
          UNION ALL
          SELECT trace, pid, tid, op_ts_us, 1, NULL, correlation, ts_us, dur_us, is_matmul, op, op_end_us
          FROM kernel_ops) x
), chain_kernels AS (
    -- the kernels the chain's ops launched: ops on its thread inside its span
    SELECT trace, correlation, ts_us, dur_us, is_matmul, op
    FROM swept
    WHERE is_kernel = 1 AND op_end_us <= open_end_us
), longest AS (
    SELECT c.trace, k.name, c.ts_us, c.dur_us, c.correlation, k.cpu_op_id
    FROM (SELECT trace, correlation, ts_us, dur_us FROM chain_kernels
          QUALIFY row_number() OVER (PARTITION BY trace ORDER BY dur_us DESC, ts_us) <= CAST($max_evidence AS INTEGER)) c
    JOIN kernels k ON k.trace = c.trace AND k.correlation = c.correlation AND k.ts_us = c.ts_us
), per_trace AS (
    SELECT k.trace, any_value(c.steps) AS steps, any_value(c.chains) AS chains, count(*) AS kernels,
           sum(round(k.dur_us * 1e3)) / 1e3 AS chain_us, sum(round(k.dur_us * 1e3)) FILTER (WHERE NOT k.is_matmul) / 1e3 AS rest_us,
           count(*) FILTER (WHERE NOT k.is_matmul) AS rest_kernels,
           any_value(c.queries) AS queries, any_value(c.keys) AS keys, any_value(c.head_dim) AS head_dim,
           string_agg(DISTINCT k.op, ', ' ORDER BY k.op) FILTER (WHERE NOT k.is_matmul) AS rest_ops
    FROM chain_kernels k
    JOIN (SELECT trace, any_value(steps) AS steps, count(*) AS chains, min(queries) AS queries, max(keys) AS keys,
                 min(head_dim) AS head_dim
          FROM chains GROUP BY trace) c USING (trace)
    GROUP BY k.trace
), evidence AS (
    SELECT trace, to_json(list(struct_pack(source := 'kernels', trace := trace, name := name,
                                           ts_ns := CAST(round(ts_us * 1000) AS BIGINT),
                                           dur_ns := CAST(round(dur_us * 1000) AS BIGINT),
                                           correlation := correlation, cpu_op_id := cpu_op_id)
                               ORDER BY dur_us DESC, ts_us)) AS evidence
    FROM longest GROUP BY trace
), counted AS (
    SELECT p.*, e.evidence FROM per_trace p JOIN evidence e USING (trace)
)
SELECT p.trace, 'unfused_attention' AS rule,
       CASE WHEN coalesce(p.rest_us, 0) / p.steps >= 0.10 * t.gpu_us_per_step THEN 'high'
            WHEN coalesce(p.rest_us, 0) / p.steps >= 0.03 * t.gpu_us_per_step THEN 'medium' ELSE 'low' END AS severity,
       format('Attention computed op by op: {} chain(s) of softmax(Q·Kᵀ)·V per step, {:.1f} µs of GPU time per step in {} kernels',
              CASE WHEN p.chains % p.steps = 0 THEN CAST(p.chains // p.steps AS VARCHAR) ELSE format('{:.1f}', p.chains / p.steps) END,
              p.chain_us / p.steps,
              CASE WHEN p.kernels % p.steps = 0 THEN CAST(p.kernels // p.steps AS VARCHAR) ELSE format('{:.1f}', p.kernels / p.steps) END) AS title,
       format('{} chain(s) in {} steady step(s), {} queries by {} keys, head dimension {}: their matmuls and {} kernels between them ({}), {:.1f} µs per step, each reading and writing the whole score matrix',
              p.chains, p.steps, p.queries, p.keys, p.head_dim, p.rest_kernels, coalesce(p.rest_ops, 'none'),
              coalesce(p.rest_us, 0) / p.steps) AS detail,
       'call torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, or attn_mask=...) in place of the chain: it runs a fused backend (flash, memory-efficient or cuDNN); in transformers, load the model with attn_implementation="sdpa" (or "flash_attention_2")' AS fix,
       'fuse-attention-chains' AS whatif,
       coalesce(p.rest_us, 0) / p.steps AS estimate_us_per_step,
       p.evidence
FROM counted p
JOIN step_totals t USING (trace)
WHERE p.chain_us / p.steps >= CAST($min_us_per_step AS DOUBLE);
