-- Derives one trace's rows (trace_id = $trace_id) from its event_rows. Run statement by statement,
-- inside the load's transaction. Category names are matched case-insensitively and include the
-- older Kineto spellings (Operator, Runtime, Kernel, Memcpy, Memset) so old traces load too.
-- Each statement reads `args` once per row, with one json_extract of every key it needs.

INSERT INTO step_rows
SELECT $trace_id, CAST(regexp_extract(name, '^ProfilerStep#(\d+)$', 1) AS INTEGER) AS step,
       min(ts_ns), max(ts_ns + greatest(dur_ns, 0))
FROM event_rows
WHERE trace_id = $trace_id AND ph = 'X' AND regexp_full_match(name, 'ProfilerStep#\d+')
  AND lower(cat) IN ('user_annotation', 'cpu_op', 'operator')
GROUP BY step;

CREATE OR REPLACE TEMP TABLE _steps AS
SELECT step, ts_ns, end_ns FROM step_rows WHERE trace_id = $trace_id;

-- CPU ops: cpu_op, record_function ranges (user_annotation) and 2021's Operator. An op's id is
-- its event's row number in event_rows: unique, in file order, and free to compute.
CREATE OR REPLACE TEMP TABLE _ops AS
SELECT op_id, cat, name, ts_ns, dur_ns, pid, tid, TRY_CAST(a[1] AS BIGINT) AS external_id, a
FROM (
    SELECT rowid AS op_id, cat, name, ts_ns, coalesce(dur_ns, 0) AS dur_ns, pid, tid,
           json_extract(args, ['$."External id"', '$."Input Dims"', '$."Input type"']) AS a
    FROM event_rows
    WHERE trace_id = $trace_id AND ph = 'X' AND ts_ns IS NOT NULL
      AND lower(cat) IN ('cpu_op', 'user_annotation', 'operator')
);

-- Runtime and driver calls: the launches (and syncs, mallocs) on the CPU.
CREATE OR REPLACE TEMP TABLE _rt AS
SELECT rowid AS rt_id, cat, name, ts_ns, coalesce(dur_ns, 0) AS dur_ns, pid, tid,
       json_extract(args, ['$.correlation', '$."External id"', '$."external id"']) AS a
FROM event_rows
WHERE trace_id = $trace_id AND ph = 'X' AND ts_ns IS NOT NULL
  AND lower(cat) IN ('cuda_runtime', 'cuda_driver', 'runtime', 'hip_runtime', 'hip_driver');

-- Threads as small integers, so the sweep sorts and matches on fixed-width keys.
CREATE OR REPLACE TEMP TABLE _threads AS
SELECT pid, tid, row_number() OVER (ORDER BY pid, tid) AS thread
FROM (SELECT DISTINCT pid, tid FROM _ops UNION SELECT DISTINCT pid, tid FROM _rt);

-- One sweep per thread over op starts, op ends and runtime calls (probes), in time order, counts
-- the ops open at each point: an op's depth is the count open before it starts, and the innermost
-- op open at a probe sits at depth count - 1. At one instant: ends of ops that lasted come first,
-- then starts (the longest first, so a parent precedes its child), then probes, then the ends of
-- zero-length ops; `pos` numbers the points so that later joins need no tie-breaking.
CREATE OR REPLACE TEMP TABLE _sweep AS
WITH op_threads AS (
    SELECT o.op_id, o.ts_ns, o.dur_ns, t.thread FROM _ops o JOIN _threads t USING (pid, tid)
), points AS (
    SELECT thread, ts_ns AS t, 1 AS ord, -dur_ns AS longest_first, op_id AS id, 1 AS delta FROM op_threads
    UNION ALL
    SELECT thread, ts_ns + dur_ns, CASE WHEN dur_ns > 0 THEN 0 ELSE 3 END, 0, op_id, -1 FROM op_threads
    UNION ALL
    SELECT t.thread, r.ts_ns, 2, 0, r.rt_id, 0 FROM _rt r JOIN _threads t USING (pid, tid)
)
SELECT * FROM (
    SELECT thread, id, delta,
           row_number() OVER w AS pos,
           (sum(delta) OVER (w ROWS UNBOUNDED PRECEDING) - greatest(delta, 0))::INTEGER AS open_before
    FROM points
    WINDOW w AS (PARTITION BY thread ORDER BY t, ord, longest_first, id)
)
WHERE delta <> -1;

-- The ops with their depth and place in the sweep.
CREATE OR REPLACE TEMP TABLE _op_pos AS
SELECT id AS op_id, thread, pos, greatest(open_before, 0) AS depth FROM _sweep WHERE delta = 1;

-- Who encloses what: each op's parent, and each runtime call's innermost op, is the latest op that
-- started before it on its thread at the depth just above it (ASOF on the sweep position).
CREATE OR REPLACE TEMP TABLE _enclosing AS
SELECT w.kind, w.id, o.op_id AS enclosing_id
FROM (
    SELECT 'op' AS kind, op_id AS id, thread, pos, depth - 1 AS want FROM _op_pos WHERE depth > 0
    UNION ALL
    SELECT 'rt', id, thread, pos, open_before - 1 FROM _sweep WHERE delta = 0 AND open_before > 0
) w
ASOF JOIN _op_pos o ON o.thread = w.thread AND o.depth = w.want AND w.pos > o.pos;

-- What the sweep found about each op, in narrow rows, so the wide ones are joined once.
CREATE OR REPLACE TEMP TABLE _op_links AS
SELECT p.op_id, p.depth, e.enclosing_id AS parent_id, parent.name AS parent, st.step
FROM _op_pos p
LEFT JOIN (SELECT id, enclosing_id FROM _enclosing WHERE kind = 'op') e ON e.id = p.op_id
LEFT JOIN (SELECT op_id, name FROM _ops) parent ON parent.op_id = e.enclosing_id
JOIN (
    SELECT o.op_id, CASE WHEN o.ts_ns < s.end_ns THEN s.step END AS step
    FROM (SELECT op_id, ts_ns FROM _ops) o ASOF LEFT JOIN _steps s ON o.ts_ns >= s.ts_ns
) st ON st.op_id = p.op_id;

INSERT INTO cpu_op_rows
SELECT $trace_id, c.op_id, c.cat, c.name, c.ts_ns, c.dur_ns, c.pid, c.tid, c.external_id,
       c.a[2], c.a[3], l.depth, l.parent_id, l.parent, l.step, NULL
FROM _ops c JOIN _op_links l USING (op_id);

-- Kernels, memcpys and memsets, with the keys of their args.
CREATE OR REPLACE TEMP TABLE _gpu AS
SELECT CASE WHEN lower(cat) = 'kernel' THEN 'kernel'
            WHEN lower(cat) IN ('gpu_memcpy', 'memcpy') THEN 'memcpy' ELSE 'memset' END AS op,
       name, ts_ns, dur_ns,
       TRY_CAST(a[1] AS INTEGER) AS device, TRY_CAST(a[2] AS INTEGER) AS stream,
       TRY_CAST(a[3] AS BIGINT) AS correlation, TRY_CAST(coalesce(a[4], a[5]) AS BIGINT) AS external_id,
       TRY_CAST(a[6] AS INTEGER[]) AS grid, TRY_CAST(a[7] AS INTEGER[]) AS block,
       TRY_CAST(a[8] AS INTEGER) AS registers_per_thread, TRY_CAST(a[9] AS BIGINT) AS shared_memory_bytes,
       TRY_CAST(a[10] AS DOUBLE) AS blocks_per_sm, TRY_CAST(a[11] AS DOUBLE) AS warps_per_sm,
       TRY_CAST(a[12] AS DOUBLE) AS est_occupancy_pct, TRY_CAST(a[13] AS BIGINT) AS bytes, event_id
FROM (
    SELECT cat, name, ts_ns, dur_ns, rowid AS event_id,
           json_extract(args, ['$.device', '$.stream', '$.correlation', '$."External id"', '$."external id"',
                               '$.grid', '$.block', '$."registers per thread"', '$."shared memory"',
                               '$."blocks per SM"', '$."warps per SM"', '$."est. achieved occupancy %"',
                               '$.bytes']) AS a
    FROM event_rows
    WHERE trace_id = $trace_id AND ph = 'X'
      AND lower(cat) IN ('kernel', 'gpu_memcpy', 'memcpy', 'gpu_memset', 'memset')
);

-- The op each External id that a runtime call or GPU event carries names (Kineto makes them
-- unique; a foreign trace may not: the latest op wins).
CREATE OR REPLACE TEMP TABLE _op_by_external AS
SELECT x.external_id, o.op_id, o.pid, o.tid, o.ts_ns, o.ts_ns + o.dur_ns AS end_ns
FROM (
    SELECT external_id, max(op_id) AS op_id FROM _ops
    WHERE external_id IN (SELECT TRY_CAST(coalesce(a[2], a[3]) AS BIGINT) FROM _rt)
       OR external_id IN (SELECT external_id FROM _gpu)
    GROUP BY external_id
) x
JOIN _ops o USING (op_id);

-- A call's op is the one its External id names when that op encloses the call on its thread (some
-- traces give calls an External id equal to their correlation id, naming an unrelated op);
-- otherwise the innermost op that encloses it.
INSERT INTO runtime_rows
SELECT $trace_id, r.cat, r.name, r.ts_ns, r.dur_ns, r.pid, r.tid, r.correlation, r.external_id,
       CASE WHEN x.pid = r.pid AND x.tid = r.tid AND x.ts_ns <= r.ts_ns AND x.end_ns >= r.ts_ns + r.dur_ns
            THEN x.op_id ELSE e.enclosing_id END,
       CASE WHEN r.ts_ns < s.end_ns THEN s.step END
FROM (SELECT *, TRY_CAST(a[1] AS BIGINT) AS correlation, TRY_CAST(coalesce(a[2], a[3]) AS BIGINT) AS external_id
      FROM _rt) r
LEFT JOIN _op_by_external x ON x.external_id = r.external_id
LEFT JOIN _enclosing e ON e.kind = 'rt' AND e.id = r.rt_id
ASOF LEFT JOIN _steps s ON r.ts_ns >= s.ts_ns;

-- The launch of each correlation id (driver and runtime may both carry one: prefer the runtime).
CREATE OR REPLACE TEMP TABLE _launch AS
SELECT correlation, cpu_op_id, ts_ns, external_id, step FROM runtime_rows
WHERE trace_id = $trace_id AND correlation IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY correlation
                           ORDER BY lower(cat) LIKE '%runtime%' DESC, ts_ns, name) = 1;

-- ROCm traces may give a kernel no correlation, only the External id of its launch call.
CREATE OR REPLACE TEMP TABLE _launch_by_external AS
SELECT external_id, cpu_op_id, ts_ns, step FROM runtime_rows
WHERE trace_id = $trace_id AND external_id IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY external_id ORDER BY lower(name) LIKE '%launch%' DESC, ts_ns, name) = 1;


-- GPU work belongs to its launch's op. Only without a launch in the trace does a kernel's own
-- External id name its op, and only when it has no correlation id that could be mistaken for one.
CREATE OR REPLACE TEMP TABLE _gpu_linked AS
WITH linked AS (
    SELECT g.*, coalesce(g.external_id, l.external_id) AS launch_external_id,
           CASE WHEN l.correlation IS NOT NULL THEN l.cpu_op_id
                WHEN le.external_id IS NOT NULL THEN le.cpu_op_id
                WHEN g.correlation IS NULL THEN x.op_id END AS cpu_op_id,
           coalesce(l.step, le.step) AS step, l.correlation IS NULL AND le.external_id IS NULL AS orphan
    FROM _gpu g
    LEFT JOIN _launch l ON l.correlation = g.correlation
    LEFT JOIN _launch_by_external le ON g.correlation IS NULL AND le.external_id = g.external_id
    LEFT JOIN _op_by_external x ON x.external_id = g.external_id
)
-- The step of the launch (runtime_rows has it); work without a launch in the trace takes the step
-- its own start falls in.
SELECT * EXCLUDE (orphan) FROM linked WHERE NOT orphan
UNION ALL
SELECT o.* EXCLUDE (orphan, step), CASE WHEN o.ts_ns < s.end_ns THEN s.step END
FROM (SELECT * FROM linked WHERE orphan) o ASOF LEFT JOIN _steps s ON o.ts_ns >= s.ts_ns;

-- The chain of op names above each op that launched GPU work, outermost first. Record-function
-- ranges and ProfilerStep#N (an Operator in 2021's Kineto) are steps and labels, not ops: left
-- out. The walk up reads a narrow copy of the tree, keeps one row per op (USING KEY) and stops
-- 64 ops up, marking the cut with '… → ': a recursion that kept every level would hold ops x
-- depth growing paths (a trace of 250 nested copies of the same ops ran out of memory that way).
CREATE OR REPLACE TEMP TABLE _tree AS
SELECT op_id, parent_id, name,
       CASE WHEN lower(cat) IN ('cpu_op', 'operator') AND NOT regexp_full_match(name, 'ProfilerStep#\d+')
            THEN name END AS label
FROM cpu_op_rows WHERE trace_id = $trace_id;

CREATE OR REPLACE TEMP TABLE _paths AS
WITH RECURSIVE up(start_id, parent_id, op_path, levels) USING KEY (start_id) AS (
    SELECT op_id, parent_id, name, 1
    FROM _tree
    WHERE op_id IN (SELECT cpu_op_id FROM _gpu_linked WHERE cpu_op_id IS NOT NULL
                    UNION SELECT cpu_op_id FROM runtime_rows WHERE trace_id = $trace_id AND cpu_op_id IS NOT NULL)
    UNION
    SELECT up.start_id, p.parent_id,
           CASE WHEN p.label IS NOT NULL THEN p.label || ' → ' || up.op_path ELSE up.op_path END, up.levels + 1
    FROM up JOIN _tree p ON p.op_id = up.parent_id
    WHERE up.levels < 64
)
SELECT start_id AS op_id, CASE WHEN parent_id IS NULL THEN op_path ELSE '… → ' || op_path END AS op_path FROM up;

UPDATE cpu_op_rows SET op_path = p.op_path
FROM _paths p
WHERE cpu_op_rows.trace_id = $trace_id AND cpu_op_rows.op_id = p.op_id;

-- GPU work with its op's name and path beside it: the views then read kernels without a join.
CREATE OR REPLACE TEMP TABLE _gpu_ops AS
SELECT g.*, o.name AS cpu_op, p.op_path AS cpu_op_path
FROM _gpu_linked g
LEFT JOIN (SELECT op_id, name FROM _ops) o ON o.op_id = g.cpu_op_id
LEFT JOIN _paths p ON p.op_id = g.cpu_op_id;

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
       coalesce(f.flops, af.flops), coalesce(f.dtype, af.dtype), coalesce(f.gemm_bytes, af.bytes)
FROM _gpu_ops g LEFT JOIN _op_flops f ON f.op_id = g.cpu_op_id
LEFT JOIN _attn_flops af ON af.cpu_op_id = g.cpu_op_id AND af.ts_ns = g.ts_ns AND af.name = g.name
WHERE g.op = 'kernel';

-- Collectives: the kernels a communication rule knows by name (NCCL, RCCL, ...). Kineto writes
-- the collective's fields (`Collective name`, `Process Group Name`, `In msg nelems`, `dtype`,
-- `Seq`, ...) on the record_param_comms op that launched it and, in newer releases, on the kernel
-- too: the kernel's own value first, else its op's. The op is the one the kernel's External id
-- names, else the launch's op or one of the two ops above it. Both reads of args take only the
-- few rows they need.
CREATE OR REPLACE TEMP TABLE _comm_names AS
SELECT DISTINCT n.name
FROM (SELECT DISTINCT name FROM _gpu_ops WHERE op = 'kernel') n
JOIN kernel_rules r ON r.kernel_class = 'communication' AND regexp_matches(left(n.name, 8192), r.pattern, 'i');

CREATE OR REPLACE TEMP TABLE _comm_ops AS
SELECT o.op_id, o.ts_ns, o.dur_ns, e.a
FROM _ops o
JOIN (SELECT rowid AS op_id,
             json_extract_string(args, ['$."Collective name"', '$."Process Group Name"', '$."Process Group Description"',
                                        '$."Process Group Ranks"', '$."Group size"', '$.Seq', '$."In msg nelems"',
                                        '$."Out msg nelems"', '$.dtype', '$."Src Rank"', '$."Dst Rank"']) AS a
      FROM event_rows
      WHERE trace_id = $trace_id AND name = 'record_param_comms' AND ph = 'X') e USING (op_id);

CREATE OR REPLACE TEMP TABLE _comm_kernels AS
SELECT g.event_id, g.name, g.ts_ns, g.dur_ns, g.device, g.stream, g.correlation, g.step, ka.a,
       coalesce(by_id.op_id, c0.op_id, c1.op_id, c2.op_id) AS comm_op_id
FROM _gpu_ops g
JOIN (SELECT rowid AS event_id,
             json_extract_string(args, ['$."Collective name"', '$."Process Group Name"', '$."Process Group Description"',
                                        '$."Process Group Ranks"', '$."Group size"', '$.Seq', '$."In msg nelems"',
                                        '$."Out msg nelems"', '$.dtype', '$."Src Rank"', '$."Dst Rank"']) AS a
      FROM event_rows
      WHERE trace_id = $trace_id AND ph = 'X' AND lower(cat) = 'kernel'
        AND name IN (SELECT name FROM _comm_names)) ka USING (event_id)
LEFT JOIN (SELECT x.external_id, x.op_id FROM _op_by_external x JOIN _comm_ops c USING (op_id)) by_id
       ON by_id.external_id = g.launch_external_id
LEFT JOIN _comm_ops c0 ON c0.op_id = g.cpu_op_id
LEFT JOIN (SELECT op_id, parent_id FROM cpu_op_rows WHERE trace_id = $trace_id) up1 ON up1.op_id = g.cpu_op_id
LEFT JOIN _comm_ops c1 ON c1.op_id = up1.parent_id
LEFT JOIN (SELECT op_id, parent_id FROM cpu_op_rows WHERE trace_id = $trace_id) up2 ON up2.op_id = up1.parent_id
LEFT JOIN _comm_ops c2 ON c2.op_id = up2.parent_id
WHERE g.op = 'kernel';

INSERT INTO collective_rows
WITH fields AS (
    SELECT k.event_id, k.name, k.ts_ns, k.dur_ns, k.device, k.stream, k.correlation, k.step, c.op_id AS cpu_op_id,
           c.ts_ns AS cpu_ts_ns, c.dur_ns AS cpu_dur_ns,
           coalesce(k.a[1], c.a[1]) AS collective_name, coalesce(k.a[2], c.a[2]) AS process_group,
           coalesce(k.a[3], c.a[3]) AS process_group_desc, coalesce(k.a[4], c.a[4]) AS process_group_ranks,
           TRY_CAST(coalesce(k.a[5], c.a[5]) AS INTEGER) AS group_size, TRY_CAST(coalesce(k.a[6], c.a[6]) AS BIGINT) AS seq,
           TRY_CAST(coalesce(k.a[7], c.a[7]) AS BIGINT) AS in_nelems, TRY_CAST(coalesce(k.a[8], c.a[8]) AS BIGINT) AS out_nelems,
           coalesce(k.a[9], c.a[9]) AS dtype, TRY_CAST(coalesce(k.a[10], c.a[10]) AS INTEGER) AS src_rank,
           TRY_CAST(coalesce(k.a[11], c.a[11]) AS INTEGER) AS dst_rank
    FROM _comm_kernels k LEFT JOIN _comm_ops c ON c.op_id = k.comm_op_id
), named AS (
    -- The collective from torch's name for it ('allreduce', '_allgather_base', 'all_to_allv'...),
    -- else from the kernel's before its parameters (ncclDevKernel_AllReduce_Sum_f32_RING_LL,
    -- ncclKernel_SendRecv_...); the bytes of an element from torch's dtype name.
    SELECT *, regexp_replace(lower(coalesce(collective_name, split_part(name, '(', 1))), '[^a-z]', '', 'g') AS squashed,
           CASE lower(dtype) WHEN 'byte' THEN 1 WHEN 'char' THEN 1 WHEN 'bool' THEN 1 WHEN 'qint8' THEN 1
                WHEN 'quint8' THEN 1 WHEN 'half' THEN 2 WHEN 'bfloat16' THEN 2 WHEN 'short' THEN 2 WHEN 'uint16' THEN 2
                WHEN 'float' THEN 4 WHEN 'int' THEN 4 WHEN 'uint32' THEN 4 WHEN 'complexhalf' THEN 4 WHEN 'qint32' THEN 4
                WHEN 'double' THEN 8 WHEN 'long' THEN 8 WHEN 'uint64' THEN 8 WHEN 'complexfloat' THEN 8
                WHEN 'complexdouble' THEN 16
                ELSE CASE WHEN lower(dtype) LIKE 'float8%' THEN 1 END END AS dtype_bytes
    FROM fields
)
SELECT $trace_id, name, ts_ns, dur_ns, device, stream, correlation, step,
       CASE WHEN squashed LIKE '%alltoall%' THEN 'all_to_all'
            WHEN squashed LIKE '%allreduce%' THEN 'all_reduce'
            WHEN squashed LIKE '%allgather%' THEN 'all_gather'
            WHEN squashed LIKE '%reducescatter%' THEN 'reduce_scatter'
            WHEN squashed LIKE '%broadcast%' THEN 'broadcast'
            WHEN squashed LIKE '%sendrecv%' OR squashed LIKE 'send%' OR squashed LIKE 'recv%'
                 OR squashed LIKE '%kernelsend%' OR squashed LIKE '%kernelrecv%' THEN 'send_recv'
            WHEN squashed LIKE '%barrier%' THEN 'barrier'
            WHEN squashed LIKE '%gather%' THEN 'gather'
            WHEN squashed LIKE '%scatter%' THEN 'scatter'
            WHEN squashed LIKE '%reduce%' THEN 'reduce' END,
       collective_name, process_group, process_group_desc, process_group_ranks, group_size, seq,
       row_number() OVER (PARTITION BY process_group ORDER BY ts_ns, correlation, event_id),
       in_nelems, out_nelems, dtype, in_nelems * dtype_bytes, out_nelems * dtype_bytes, src_rank, dst_rank,
       cpu_op_id, cpu_ts_ns, cpu_dur_ns
FROM named;

INSERT INTO transfer_rows
SELECT $trace_id, op, name,
       CASE WHEN op = 'memcpy' THEN nullif(regexp_extract(name, '^Memcpy ([A-Za-z0-9]+)', 1), '')
            ELSE nullif(regexp_extract(name, '\(([^)]*)\)', 1), '') END,
       bytes, ts_ns, dur_ns, device, stream, correlation, launch_external_id, cpu_op_id, step, cpu_op, cpu_op_path
FROM _gpu_ops WHERE op <> 'kernel';

-- How long each device was busy in each step: the union of its kernel, memcpy and memset
-- intervals (kernels on concurrent streams overlap, so their plain sum can exceed the step).
-- An island is a run of intervals that overlap or touch; busy time is the sum of island spans.
INSERT INTO gpu_busy_rows
WITH work AS (
    SELECT step, device, ts_ns AS s, ts_ns + greatest(dur_ns, 0) AS e, op, greatest(dur_ns, 0) AS d
    FROM _gpu_linked WHERE ts_ns IS NOT NULL
), reach AS (
    SELECT *, max(e) OVER (PARTITION BY step, device ORDER BY s, e
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach_ns
    FROM (SELECT step, device, s, e, d, op FROM work)
), islands AS (
    SELECT *, sum(CASE WHEN reach_ns IS NULL OR s > reach_ns THEN 1 ELSE 0 END)
                  OVER (PARTITION BY step, device ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS island
    FROM reach
), spans AS (
    SELECT step, device, island, max(e) - min(s) AS busy_ns FROM islands GROUP BY step, device, island
)
SELECT $trace_id, b.step, b.device, busy_ns, kernel_ns, memcpy_ns, memset_ns, kernels, first_ns, last_ns
FROM (SELECT step, device, sum(busy_ns) AS busy_ns FROM spans GROUP BY step, device) b
JOIN (SELECT step, device,
             sum(d) FILTER (WHERE op = 'kernel') AS kernel_ns, sum(d) FILTER (WHERE op = 'memcpy') AS memcpy_ns,
             sum(d) FILTER (WHERE op = 'memset') AS memset_ns, count(*) FILTER (WHERE op = 'kernel') AS kernels,
             min(s) AS first_ns, max(e) AS last_ns
      FROM islands GROUP BY step, device) t
  ON t.step IS NOT DISTINCT FROM b.step AND t.device IS NOT DISTINCT FROM b.device;

DROP TABLE _steps;
DROP TABLE _ops;
DROP TABLE _rt;
DROP TABLE _threads;
DROP TABLE _sweep;
DROP TABLE _op_pos;
DROP TABLE _enclosing;
DROP TABLE _op_links;
DROP TABLE _op_by_external;
DROP TABLE _launch;
DROP TABLE _launch_by_external;
DROP TABLE _gpu;
DROP TABLE _gpu_linked;
DROP TABLE _tree;
DROP TABLE _paths;
DROP TABLE _gpu_ops;
DROP TABLE _op_flops;
DROP TABLE _attn_flops;
DROP TABLE _comm_names;
DROP TABLE _comm_ops;
DROP TABLE _comm_kernels;
