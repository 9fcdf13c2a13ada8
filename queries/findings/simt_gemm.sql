-- simt_gemm: GEMMs and convolutions running on CUDA cores (SIMT FMAs) that Tensor Cores could run
-- why: an fp32 matmul with TF32 off, or the math SDPA backend's upcast to fp32, runs as FFMA on the CUDA cores at a fraction of the Tensor Cores' rate: on an H200, 67 TFLOP/s of fp32 against 495 of TF32
-- fix: torch.backends.cuda.matmul.allow_tf32 = True (or torch.set_float32_matmul_precision('high')), or bf16 under torch.autocast; on a GPU whose Tensor Cores have no TF32 or BF16 (Volta, Turing), fp16 under torch.autocast with a GradScaler; for SDPA, let it pick a fused backend (flash, memory-efficient, cuDNN) rather than math, in bf16 where its inputs are fp32 (flash and cuDNN take fp16 and bf16 alone)
-- saving: estimate: per steady step, each SIMT GEMM's time less the least time Tensor Cores could take for it (view gemm_math's roofline: its FLOPs at the device's dense TF32 peak, or for fp32 on a GPU without TF32 the BF16 or FP16 peak autocast would reach, or its bytes at the memory's bandwidth, whichever is slower); NULL when the trace lacks input shapes or tracekit has no figures for the GPU; the replay (whatif tensor-cores) runs them at the share of that roofline cuBLAS's Tensor Core GEMMs of their size reach (tracekit/replay/tensor_core_model.py)
-- params:
--   trace = NULL: only this trace
--   min_share_pct = 1: ignore traces where SIMT matrix math is less than this share of GPU time per step
--   max_evidence = 20: at most this many kernels named in the evidence
WITH simt AS (
    SELECT k.*, w.steps
    FROM kernels k
    JOIN steady_window w ON w.trace = k.trace AND w.step IS NOT DISTINCT FROM k.step
    WHERE k.math_unit = 'simt' AND k.kernel_class IN ('gemm', 'convolution')
      AND ($trace IS NULL OR k.trace = $trace)
), estimates AS (
    -- The saving of each SIMT GEMM op with a shape and a device figure; ops without stay NULL. An
    -- fp32 GEMM on a GPU without TF32 would run in bf16 or fp16 under autocast: that peak.
    SELECT g.trace, sum(greatest(g.gemm_us - r.roofline_us, 0)) AS saving_us, count(*) AS ops
    FROM gemm_math g
    JOIN steady_window w ON w.trace = g.trace AND w.step IS NOT DISTINCT FROM g.step
    JOIN trace_files f ON f.trace = g.trace
    JOIN _trace_specs sp ON sp.trace_id = f.trace_id
    CROSS JOIN LATERAL (SELECT greatest(g.flops / (coalesce(g.tensor_core_tflops, CASE WHEN g.dtype = 'float'
                                                   THEN coalesce(sp.bf16_tflops, sp.fp16_tflops) END) * 1e6),
                                        g.bytes / (sp.memory_tb_s * 1e6)) AS roofline_us) r
    WHERE g.math_unit = 'simt' AND r.roofline_us IS NOT NULL AND ($trace IS NULL OR g.trace = $trace)
    GROUP BY g.trace
), per_trace AS (
    SELECT s.trace, any_value(s.steps) AS steps, count(*) AS kernels, sum(round(s.dur_us * 1e3)) / 1e3 AS simt_us,
           count(*) FILTER (WHERE s.kernel_class = 'convolution') AS convolutions,
           count(DISTINCT s.cpu_op_id) AS ops,
           bool_or(s.cpu_op_path LIKE '%scaled_dot_product%' OR s.cpu_op_path LIKE '%_math%') AS in_sdpa_math,
           mode(s.cpu_op_path) AS typical_path,
           to_json(list(struct_pack(source := 'kernels', trace := s.trace, name := s.name,
                                    ts_ns := CAST(round(s.ts_us * 1000) AS BIGINT),
                                    dur_ns := CAST(round(s.dur_us * 1000) AS BIGINT),
                                    correlation := s.correlation, cpu_op_id := s.cpu_op_id)
                        ORDER BY s.dur_us DESC, s.ts_us)[1:CAST($max_evidence AS INTEGER)]) AS evidence
    FROM simt s
    GROUP BY s.trace
)
SELECT p.trace, 'simt_gemm' AS rule,
       CASE WHEN e.saving_us IS NULL THEN 'medium'
            WHEN e.saving_us / p.steps >= 0.10 * t.gpu_us_per_step THEN 'high'
            WHEN e.saving_us / p.steps >= 0.03 * t.gpu_us_per_step THEN 'medium' ELSE 'low' END AS severity,
       format('{:.0f}% of GPU time per step is matrix math on CUDA cores (SIMT), not Tensor Cores',
              100.0 * p.simt_us / p.steps / t.gpu_us_per_step) AS title,
       format('{} SIMT kernels ({} convolutions) from {} ops in {} steady step(s): {:.1f} µs per step of the step''s {:.1f} µs of GPU time; mostly from {}',
              p.kernels, p.convolutions, p.ops, p.steps, p.simt_us / p.steps, t.gpu_us_per_step,
              coalesce(p.typical_path, 'an op the trace does not name'))
         || CASE WHEN e.saving_us IS NULL THEN '; the saving is unknown (no input shapes recorded, or no Tensor Core figures for this GPU)'
                 ELSE format('; on Tensor Cores they would take about {:.1f} µs', p.simt_us / p.steps - e.saving_us / p.steps) END
         AS detail,
       -- Advice the GPU can take: Volta and Turing Tensor Cores have neither TF32 nor BF16, MI100/MI200's no TF32.
       CASE WHEN a.no_tf32_or_bf16 THEN 'run under torch.autocast(dtype=torch.float16), with torch.amp.GradScaler in training: this GPU''s Tensor Cores have no TF32 or BF16 (Volta, Turing)'
                 || CASE WHEN p.in_sdpa_math THEN '; for attention, a fused SDPA backend (memory-efficient) instead of math' ELSE '' END
            WHEN a.no_tf32 THEN 'run under torch.autocast(dtype=torch.bfloat16): this GPU''s matrix cores have no TF32'
            -- flash and cuDNN take fp16 and bf16 alone: on fp32 inputs SDPA's fused backend is the
            -- memory-efficient one, at about the SIMT GEMMs' pace (tracekit/replay/attention_fix.py)
            WHEN p.in_sdpa_math AND m.fp32_inputs THEN 'run attention in bf16 (torch.autocast(dtype=torch.bfloat16), or q, k and v cast to bf16) so that scaled_dot_product_attention can use flash or cuDNN instead of the math backend: its inputs are fp32, which flash and cuDNN do not take; or allow TF32: torch.backends.cuda.matmul.allow_tf32 = True'
            WHEN p.in_sdpa_math THEN 'let scaled_dot_product_attention use a fused backend (flash, memory-efficient or cuDNN) instead of the math one, which upcasts to fp32; or allow TF32: torch.backends.cuda.matmul.allow_tf32 = True'
            WHEN p.convolutions > 0 THEN 'torch.backends.cudnn.allow_tf32 = True and torch.backends.cuda.matmul.allow_tf32 = True, or run under torch.autocast(dtype=torch.bfloat16)'
            ELSE 'torch.backends.cuda.matmul.allow_tf32 = True (or torch.set_float32_matmul_precision(''high'')), or run under torch.autocast(dtype=torch.bfloat16)' END AS fix,
       -- the math SDPA backend's fix is a fused backend: its whole call as one kernel
       CASE WHEN p.in_sdpa_math AND NOT coalesce(a.no_tf32_or_bf16, FALSE) THEN 'fuse-attention' ELSE 'tensor-cores' END AS whatif,
       e.saving_us / p.steps AS estimate_us_per_step,
       p.evidence
FROM per_trace p
JOIN step_totals t USING (trace)
LEFT JOIN estimates e USING (trace)
-- (the input types' JSON text, read as text: the same on Spark)
LEFT JOIN (SELECT trace, bool_or(CAST(input_types AS VARCHAR) LIKE '["float"%') AS fp32_inputs
           FROM cpu_ops WHERE name = 'aten::_scaled_dot_product_attention_math' GROUP BY trace) m USING (trace)
LEFT JOIN (SELECT f.trace, (sp.tf32_tflops IS NULL AND sp.bf16_tflops IS NULL AND sp.fp16_tflops IS NOT NULL)
                           OR f.gpu_arch IN ('sm_70', 'sm_72', 'sm_75') AS no_tf32_or_bf16,
                  sp.tf32_tflops IS NULL AND sp.bf16_tflops IS NOT NULL AS no_tf32
           FROM trace_files f LEFT JOIN _trace_specs sp ON sp.trace_id = f.trace_id) a USING (trace)
WHERE 100.0 * p.simt_us / p.steps >= CAST($min_share_pct AS DOUBLE) * t.gpu_us_per_step;
