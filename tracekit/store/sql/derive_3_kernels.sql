-- Stage 3: kernel rows, with the FLOPs of the GEMMs and fused attention calls their ops record.

-- The FLOPs of each GEMM op whose input shapes the trace records (record_shapes): 2 * batch * m
-- * n * k from `Input Dims` (addmm and baddbmm take the bias first). A kernel carries them when
-- it is the only kernel its op launched; an op that split its GEMM over several kernels (split-K
-- and its reduction) leaves them NULL rather than guess each kernel's share.
CREATE OR REPLACE TEMP TABLE _op_flops AS
WITH gemms AS (
    SELECT op_id, name, a[2] AS dims, a[3] AS types,
           CASE WHEN name IN ('aten::addmm', 'aten::baddbmm') THEN 1 ELSE 0 END AS x,
           name IN ('aten::bmm', 'aten::baddbmm') AS batched
    FROM _ops
    WHERE name IN ('aten::mm', 'aten::bmm', 'aten::addmm', 'aten::baddbmm')
      AND op_id IN (SELECT cpu_op_id FROM _gpu_ops WHERE op = 'kernel')
), shaped AS (
    SELECT op_id, json_extract_string(types, '$[' || x || ']') AS dtype,
           CASE WHEN batched THEN TRY_CAST(json_extract(dims, '$[' || x || '][0]') AS DOUBLE) ELSE 1 END AS b,
           TRY_CAST(json_extract(dims, '$[' || x || '][' || (CASE WHEN batched THEN 1 ELSE 0 END) || ']') AS DOUBLE) AS m,
           TRY_CAST(json_extract(dims, '$[' || x || '][' || (CASE WHEN batched THEN 2 ELSE 1 END) || ']') AS DOUBLE) AS k,
           TRY_CAST(json_extract(dims, '$[' || (x + 1) || '][' || (CASE WHEN batched THEN 2 ELSE 1 END) || ']') AS DOUBLE) AS n
    FROM gemms
)
SELECT s.op_id, 2 * s.b * s.m * s.n * s.k AS flops, s.dtype,
       -- Its inputs read and its output written once, at the dtype's size: the least it must move.
       (s.b * s.m * s.k + s.b * s.k * s.n + s.b * s.m * s.n)
         * CASE s.dtype WHEN 'double' THEN 8 WHEN 'float' THEN 4 WHEN 'c10::BFloat16' THEN 2 WHEN 'c10::Half' THEN 2 END
         AS gemm_bytes
FROM shaped s
JOIN (SELECT cpu_op_id, count(*) AS kernels FROM _gpu_ops WHERE op = 'kernel' GROUP BY cpu_op_id) c
  ON c.cpu_op_id = s.op_id
WHERE c.kernels = 1 AND s.b * s.m * s.n * s.k > 0;

-- The FLOPs of each fused attention call (flash, memory-efficient, cuDNN; forward and backward)
-- from its op's recorded shapes: q [B, H, Sq, D], k [B, H, Sk, D], v [B, H, Sk, Dv]. The forward
-- runs two matmuls (Q·Kᵀ over D, P·V over Dv), the backward five (Q·Kᵀ again, dV, dP, dQ, dK): 2 *
-- B * H * pairs * (D + Dv) and 2 * B * H * pairs * (3D + 2Dv). pairs is Sq * Sk, or with is_causal the
-- query-key pairs the mask keeps (top-left aligned, as SDPA's is_causal): the FLOPs the kernel must
-- do, not the ones a dense kernel would. is_causal is read from Kineto's `Concrete Inputs` at its
-- place in each op's schema; a trace without them (torch < 2.1) or a value that is not a bool
-- leaves the FLOPs NULL rather than guess. The math backend is left out: its bmm kernels carry
-- their own GEMM FLOPs above. The op's longest kernel (its own or a child op's, two levels down)
-- carries the call's FLOPs; the small kernels beside it (dO·O, dQ conversion) carry none.
CREATE OR REPLACE TEMP TABLE _attn_flops AS
WITH schema_places(name, pass, q, is_causal) AS (
    VALUES ('aten::_scaled_dot_product_flash_attention', 'forward', 0, 4),
           ('aten::_scaled_dot_product_efficient_attention', 'forward', 0, 6),
           ('aten::_scaled_dot_product_cudnn_attention', 'forward', 0, 6),
           ('aten::_scaled_dot_product_flash_attention_backward', 'backward', 1, 11),
           ('aten::_scaled_dot_product_efficient_attention_backward', 'backward', 1, 11),
           ('aten::_scaled_dot_product_cudnn_attention_backward', 'backward', 1, 14)
), calls AS (
    SELECT o.op_id, s.pass, json_extract_string(o.a[3], '$[' || s.q || ']') AS dtype,
           TRY_CAST(json_extract(o.a[2], '$[' || s.q || '][0]') AS DOUBLE) AS b,
           TRY_CAST(json_extract(o.a[2], '$[' || s.q || '][1]') AS DOUBLE) AS h,
           TRY_CAST(json_extract(o.a[2], '$[' || s.q || '][2]') AS DOUBLE) AS sq,
           TRY_CAST(json_extract(o.a[2], '$[' || s.q || '][3]') AS DOUBLE) AS d,
           TRY_CAST(json_extract(o.a[2], '$[' || (s.q + 1) || '][2]') AS DOUBLE) AS sk,
           TRY_CAST(json_extract(o.a[2], '$[' || (s.q + 2) || '][3]') AS DOUBLE) AS dv,
           CASE json_extract_string(e.args, '$."Concrete Inputs"[' || s.is_causal || ']')
               WHEN 'True' THEN true WHEN 'False' THEN false END AS is_causal
    FROM _ops o JOIN schema_places s USING (name)
    -- Concrete Inputs only for these few ops: reading them for every op would cost every load.
    JOIN (SELECT rowid AS op_id, args FROM event_rows
          WHERE trace_id = $trace_id AND name IN (SELECT name FROM schema_places)) e USING (op_id)
), sized AS (
    SELECT *, CASE WHEN is_causal IS NULL THEN NULL
                   WHEN NOT is_causal THEN sq * sk
                   WHEN sq <= sk THEN sq * (sq + 1) / 2
                   ELSE sk * (sk + 1) / 2 + (sq - sk) * sk END AS pairs
    FROM calls
), under AS (
    -- The call's own op and the ops up to two levels below it: the kernels any of them launched.
    SELECT op_id AS call_id, op_id FROM sized
    UNION ALL SELECT s.op_id, c.op_id FROM sized s JOIN _tree c ON c.parent_id = s.op_id
    UNION ALL SELECT s.op_id, g.op_id FROM sized s JOIN _tree c ON c.parent_id = s.op_id
                                                 JOIN _tree g ON g.parent_id = c.op_id
), longest AS (
    SELECT u.call_id, k.cpu_op_id, k.ts_ns, k.name,
           row_number() OVER (PARTITION BY u.call_id ORDER BY k.dur_ns DESC, k.ts_ns, k.name) AS rank
    FROM under u JOIN _gpu_ops k ON k.cpu_op_id = u.op_id AND k.op = 'kernel'
)
SELECT l.cpu_op_id, l.ts_ns, l.name, s.dtype,
       2 * s.b * s.h * s.pairs * CASE s.pass WHEN 'forward' THEN s.d + s.dv ELSE 3 * s.d + 2 * s.dv END AS flops,
       -- q, k, v read and the output written once (the backward also reads dO and O and writes
       -- dQ, dK, dV: twice that): the least it must move.
       s.b * s.h * (s.sq * s.d + s.sk * s.d + s.sk * s.dv + s.sq * s.dv) * CASE s.pass WHEN 'forward' THEN 1 ELSE 2 END
         * CASE s.dtype WHEN 'double' THEN 8 WHEN 'float' THEN 4 WHEN 'c10::BFloat16' THEN 2 WHEN 'c10::Half' THEN 2 END
         AS bytes
FROM longest l JOIN sized s ON s.op_id = l.call_id
WHERE l.rank = 1 AND s.pairs > 0 AND s.d > 0 AND s.dv > 0 AND s.b * s.h > 0;

INSERT INTO kernel_rows
SELECT $trace_id, g.name, g.ts_ns, g.dur_ns, g.device, g.stream, g.correlation, g.launch_external_id, g.grid, g.block,
       g.registers_per_thread, g.shared_memory_bytes, g.blocks_per_sm, g.warps_per_sm,
       -- Kineto writes 0 when it could not compute occupancy (a kernel that ran had some).
       nullif(g.est_occupancy_pct, 0), g.cpu_op_id, g.step, g.cpu_op, g.cpu_op_path,
       coalesce(f.flops, af.flops), coalesce(f.dtype, af.dtype), coalesce(f.gemm_bytes, af.bytes),
       g.source_file, g.source_line, g.source_function
FROM _gpu_ops g LEFT JOIN _op_flops f ON f.op_id = g.cpu_op_id
LEFT JOIN _attn_flops af ON af.cpu_op_id = g.cpu_op_id AND af.ts_ns = g.ts_ns AND af.name = g.name
WHERE g.op = 'kernel';
