-- unfused_elementwise: elementwise ops run one kernel each, back to back (view elementwise_chains: a GELU written out as pow, tanh, muls and adds; an RMSNorm as pow, mean, rsqrt and muls; casts between them), where one fused kernel would run the chain
-- why: each kernel of the chain reads its inputs from GPU memory and writes its output back, so a chain of n ops moves the tensor some 2n times where a fused kernel reads it once and writes it once; each is a launch and the CPU's dispatch of its own, and in training each op's backward is its own kernels too
-- fix: call the fused op where PyTorch has one (F.gelu(x, approximate="tanh") for the tanh GELU, in transformers activation_function="gelu_pytorch_tanh" in place of "gelu_new"; F.rms_norm for an RMSNorm; F.silu, F.layer_norm), or torch.compile the module, which fuses the chain and its backward into one kernel each
-- saving: estimate: per steady step, the chains' GPU time less each chain's fused_us (one pass over the tensor at the pace its own kernels kept); the replay (whatif fuse-elementwise) runs each chain as one kernel of fused_us and its backward (autograd's nodes for the chain's ops) as one kernel moving half as much again (the output's gradient and the saved input read, the input's gradient written) at the backward kernels' pace, their launches but the first gone (a norm's forward keeps the dispatch before its second: the fused norm calls its kernel's op)
-- params:
--   trace = NULL: only this trace
--   min_us_per_step = 20: ignore traces whose chains a fused kernel would shorten by less GPU time per step than this
--   max_evidence = 20: at most this many chains named in the evidence, the longest first
WITH chains AS (
    SELECT c.*, w.steps
    FROM elementwise_chains c
    JOIN steady_window w ON w.trace = c.trace AND w.step IS NOT DISTINCT FROM c.step
    WHERE ($trace IS NULL OR c.trace = $trace)
), patterns AS (
    -- the chains of one sequence of ops: the layers of a model run the same one
    SELECT trace, ops, count(*) AS chains, any_value(kernels) AS kernels, sum(round(gpu_us * 1e3)) / 1e3 AS gpu_us
    FROM chains GROUP BY trace, ops
), top_pattern AS (
    -- the most GPU time; of two alike, the first ops in text order, whatever order the rows come in
    SELECT trace, ops, chains, kernels, count(*) OVER (PARTITION BY trace) AS patterns
    FROM patterns
    QUALIFY row_number() OVER (PARTITION BY trace ORDER BY gpu_us DESC, ops) = 1
), per_trace AS (
    SELECT trace, any_value(steps) AS steps, count(*) AS chains, sum(kernels) AS kernels, sum(round(gpu_us * 1e3)) / 1e3 AS gpu_us,
           -- the chains a fused pass is estimated for (a kernel's bytes unknown: not)
           count(fused_us) AS estimated, sum(gpu_us - fused_us) AS saved_us, sum(fused_us) AS fused_us,
           to_json(list(struct_pack(source := 'cpu_ops', trace := trace, name := ops,
                                    ts_ns := CAST(round(ts_us * 1000) AS BIGINT),
                                    dur_ns := CAST(round((end_us - ts_us) * 1000) AS BIGINT), cpu_op_id := first_op_id)
                        ORDER BY gpu_us DESC, ts_us)[1:CAST($max_evidence AS INTEGER)]) AS evidence
    FROM chains GROUP BY trace
)
SELECT p.trace, 'unfused_elementwise' AS rule,
       -- unestimated, the chains' own GPU time bounds what fusing saves of it
       CASE WHEN coalesce(p.saved_us, p.gpu_us) / p.steps >= 0.10 * t.gpu_us_per_step THEN 'high'
            WHEN coalesce(p.saved_us, p.gpu_us) / p.steps >= 0.03 * t.gpu_us_per_step THEN 'medium' ELSE 'low' END AS severity,
       format('Elementwise ops one kernel each: {} chain(s) per step in {} kernels, {:.1f} µs of GPU time per step in the forward; the most: {}',
              CASE WHEN p.chains % p.steps = 0 THEN CAST(p.chains // p.steps AS VARCHAR) ELSE format('{:.1f}', p.chains / p.steps) END,
              CASE WHEN p.kernels % p.steps = 0 THEN CAST(p.kernels // p.steps AS VARCHAR) ELSE format('{:.1f}', p.kernels / p.steps) END,
              p.gpu_us / p.steps, x.ops) AS title,
       format('{} chain(s) in {} steady step(s), of {} sequence(s) of ops; the most GPU time: {} ({} kernels, {} time(s))',
              p.chains, p.steps, x.patterns, x.ops, x.kernels, x.chains)
         || CASE WHEN p.estimated > 0
                 THEN format('; fused, one pass over each tensor at the pace of the chains'' own kernels: about {:.1f} µs per step', p.fused_us / p.steps)
                 ELSE '' END
         || CASE WHEN p.estimated < p.chains
                 THEN format('; {} of the chains not estimated: a full-size kernel''s bytes are unknown (no shapes recorded, or no work model for its op)',
                             p.chains - p.estimated)
                 ELSE '' END AS detail,
       'call the fused op where PyTorch has one: F.gelu(x, approximate="tanh") for the tanh GELU (in transformers, activation_function="gelu_pytorch_tanh" in place of "gelu_new"), F.rms_norm for an RMSNorm, F.silu, F.layer_norm; or torch.compile the module, which fuses the chain and its backward into one kernel each' AS fix,
       'fuse-elementwise' AS whatif,
       p.saved_us / p.steps AS estimate_us_per_step,
       p.evidence
FROM per_trace p
JOIN top_pattern x USING (trace)
JOIN step_totals t USING (trace)
WHERE coalesce(p.saved_us, p.gpu_us) / p.steps >= CAST($min_us_per_step AS DOUBLE);
