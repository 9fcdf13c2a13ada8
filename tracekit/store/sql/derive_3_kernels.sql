-- Stage 3: kernel rows, with the work (FLOPs, bytes) their ops' recorded shapes say they did.

-- Kernels a CUDA graph replayed: those of a cudaGraphLaunch (hipGraphLaunch) in the trace, and,
-- launched before it, those that share their correlation id with other kernels (one launch call,
-- many kernels: only a graph launch makes several). Their launch names no op: the ops ran at the
-- graph's capture, which is in the trace only if the profiler saw it.
CREATE OR REPLACE TEMP TABLE _graph_kernels AS
SELECT g.event_id FROM _gpu_ops g
WHERE g.op = 'kernel' AND g.correlation IN (SELECT correlation FROM runtime_rows
                                            WHERE trace_id = $trace_id AND name LIKE '%GraphLaunch%')
UNION
SELECT event_id FROM _gpu_ops
WHERE op = 'kernel' AND cpu_op_id IS NULL AND correlation IS NOT NULL AND correlation <> 0
QUALIFY count(*) OVER (PARTITION BY correlation) > 1;

-- A CUDA graph captured inside the trace (torch.cuda.graph, CUDA graph trees): while a thread
-- captures a stream (cudaStreamBeginCapture to cudaStreamEndCapture), the process's calls that
-- launch work into it run nothing, and each replay of the graph (a cudaGraphLaunch, which names no
-- graph) runs that work again in the order it was captured. A replay takes the latest capture
-- before it that launched as many kernels, copies and fills as the replay ran, unless another such
-- capture ran other ops or shapes; and its k-th activity (by start) the op of the k-th launch:
-- exact for a graph captured on one stream. replay: the graph launch's correlation id;
-- first_replay: the first replay of its capture. The guard is a LIKE, not the marks' expression:
-- a tenth of the time over a big trace's runtime calls.
-- @if EXISTS (SELECT 1 FROM runtime_rows WHERE trace_id = $trace_id AND name LIKE '%StreamBeginCapture%')
CREATE OR REPLACE TEMP TABLE _captured AS
WITH marks AS (
    SELECT pid, tid, ts_ns, regexp_matches(name, 'BeginCapture') AS begins,
           lead(ts_ns) OVER (PARTITION BY pid, tid ORDER BY ts_ns) AS next_ns
    FROM runtime_rows
    WHERE trace_id = $trace_id AND regexp_matches(name, '^(cuda|hip)Stream(Begin|End)Capture')
), launches AS (
    -- any thread's launches while the stream is captured (autograd's thread runs the backward of
    -- a captured training step): those that ran nothing then, one a correlation id (a launch may
    -- have a runtime and a driver row)
    SELECT m.pid, m.ts_ns AS begun_ns, r.ts_ns, r.correlation, r.cpu_op_id
    FROM marks m JOIN runtime_rows r ON r.trace_id = $trace_id AND r.pid = m.pid AND r.ts_ns > m.ts_ns
         AND (m.next_ns IS NULL OR r.ts_ns < m.next_ns)
    WHERE m.begins
      AND regexp_matches(lower(r.name), 'launchkernel|memcpy|memset') AND NOT regexp_matches(lower(r.name), 'graphlaunch|hostfunc')
      AND r.correlation NOT IN (SELECT correlation FROM _gpu_ops WHERE correlation IS NOT NULL)
    QUALIFY row_number() OVER (PARTITION BY m.pid, m.ts_ns, r.correlation ORDER BY r.cpu_op_id NULLS LAST, r.ts_ns) = 1
), captured AS (
    SELECT pid, begun_ns, cpu_op_id, row_number() OVER (PARTITION BY pid, begun_ns ORDER BY ts_ns, correlation) AS k
    FROM launches
), captures AS (
    -- each capture's launches, and what they ran: its ops' names and shapes in order
    SELECT l.pid, l.begun_ns, count(*) AS launches,
           hash(string_agg(coalesce(o.name, '?') || coalesce(CAST(o.input_dims AS VARCHAR), ''), '|' ORDER BY l.ts_ns, l.correlation)) AS ran
    FROM launches l LEFT JOIN cpu_op_rows o ON o.trace_id = $trace_id AND o.op_id = l.cpu_op_id
    GROUP BY l.pid, l.begun_ns
), replays AS (
    SELECT r.correlation, r.ts_ns, r.pid, count(g.event_id) AS activities
    FROM runtime_rows r JOIN _gpu_ops g ON g.correlation = r.correlation
    WHERE r.trace_id = $trace_id AND r.name LIKE '%GraphLaunch%'
    GROUP BY r.correlation, r.ts_ns, r.pid
), candidates AS (
    SELECT p.correlation, w.pid, w.begun_ns, w.ran
    FROM replays p JOIN captures w ON w.pid = p.pid AND w.launches = p.activities AND w.begun_ns < p.ts_ns
), matched AS (
    -- the latest; where two captures before the replay launched as many but ran other ops or
    -- shapes (graphs of one size per shape), which one it replays is not in the trace: none
    SELECT correlation, pid, begun_ns FROM candidates
    WHERE correlation IN (SELECT correlation FROM candidates GROUP BY correlation HAVING count(DISTINCT ran) = 1)
    QUALIFY row_number() OVER (PARTITION BY correlation ORDER BY begun_ns DESC) = 1
), activities AS (
    SELECT event_id, op, correlation, row_number() OVER (PARTITION BY correlation ORDER BY ts_ns, event_id) AS k
    FROM _gpu_ops WHERE correlation IN (SELECT correlation FROM matched)
)
-- op_id NULL: the launch had no op around it at capture
SELECT a.event_id, c.cpu_op_id AS op_id, a.correlation AS replay,
       a.correlation = min(a.correlation) OVER (PARTITION BY m.pid, m.begun_ns) AS first_replay
FROM activities a JOIN matched m ON m.correlation = a.correlation
JOIN captured c ON c.pid = m.pid AND c.begun_ns = m.begun_ns AND c.k = a.k
WHERE a.op = 'kernel';
-- @else
CREATE OR REPLACE TEMP TABLE _captured (event_id BIGINT, op_id BIGINT, replay BIGINT, first_replay BOOLEAN);
-- @end

-- The work of each op that launched kernels, from its recorded input shapes (record_shapes):
-- its FLOPs and the least bytes it must move, by the formula of its family in
-- knowledge/op_work_models.csv (the first row whose op pattern matches its name; rendered into
-- this statement by tracekit.store.work_models). A kernel's op is its launching op, or where that
-- has no formula, its parent or grandparent attention call (SDPA's kernels run under
-- _flash_attention_forward and the like). The helper macros read one input's shape and dtype.
-- A trace with no kernel launched by an op (a CPU-only one) has no work to work out.
-- @if EXISTS (SELECT 1 FROM _gpu_ops WHERE op = 'kernel' AND cpu_op_id IS NOT NULL) OR EXISTS (SELECT 1 FROM _captured)
CREATE OR REPLACE TEMP MACRO wm_elem_bytes(t) AS
    CASE t WHEN 'double' THEN 8 WHEN 'float' THEN 4 WHEN 'c10::BFloat16' THEN 2 WHEN 'c10::Half' THEN 2
           WHEN 'long int' THEN 8 WHEN 'long' THEN 8 WHEN 'int' THEN 4 WHEN 'short int' THEN 2 WHEN 'signed char' THEN 1
           WHEN 'unsigned char' THEN 1 WHEN 'bool' THEN 1 WHEN 'c10::complex<float>' THEN 8
           WHEN 'c10::complex<double>' THEN 16 WHEN 'c10::complex<c10::Half>' THEN 4
           -- FP4 packs two values a byte: its element type (Float4_e2m1fn_x2) is the byte
           ELSE CASE WHEN t LIKE 'c10::Float8%' OR t LIKE 'c10::Float4%' THEN 1 END END;

CREATE OR REPLACE TEMP MACRO wm_prod(x) AS
    CASE WHEN json_array_length(x) = 0 THEN 1.0 ELSE list_product(TRY_CAST(x AS DOUBLE[])) END;

-- Elements of one input: a tensor's shape, or a tensor list's shapes summed; NULL for a scalar,
-- None, or a list Kineto wrote no shapes for.
CREATE OR REPLACE TEMP MACRO wm_numel(x, t) AS
    CASE WHEN x IS NULL OR json_type(x) <> 'ARRAY' THEN NULL
         WHEN t = 'TensorList' THEN CASE WHEN json_array_length(x) > 0 AND json_type(x, '$[0]') = 'ARRAY'
                                         THEN list_sum(list_transform(CAST(x AS JSON[]), lambda e: wm_prod(e))) END
         WHEN wm_elem_bytes(t) IS NULL THEN NULL
         ELSE wm_prod(x) END;

-- The query-key pairs attention computes: all of them, or those a causal mask (top-left aligned,
-- as SDPA's is_causal) keeps; NULL when whether it is causal is unknown.
CREATE OR REPLACE TEMP MACRO wm_pairs(sq, sk, causal) AS
    CASE WHEN causal IS NULL THEN NULL WHEN NOT causal THEN sq * sk
         WHEN sq <= sk THEN sq * (sq + 1) / 2 ELSE sk * (sk + 1) / 2 + (sq - sk) * sk END;

CREATE OR REPLACE TEMP MACRO wm_bool(t) AS CASE t WHEN 'True' THEN true WHEN 'False' THEN false END;

-- Element j of a list Kineto wrote as text ("[1, 1]"), a number; flag j of "[True, False]" as 1 or 0.
-- (Concrete Inputs write a float as Python does, "[2., 2.]": not JSON until "2." is "2.0".)
CREATE OR REPLACE TEMP MACRO wm_item(t, j) AS
    CASE WHEN json_valid(regexp_replace(t, '(\d)\.(\D|$)', '\1.0\2', 'g'))
         THEN TRY_CAST(json_extract(regexp_replace(t, '(\d)\.(\D|$)', '\1.0\2', 'g'), '$[' || j || ']') AS DOUBLE) END;
CREATE OR REPLACE TEMP MACRO wm_flag(t, j) AS
    CASE wm_bool(trim(split_part(trim(t, '[]'), ',', j + 1))) WHEN true THEN 1 WHEN false THEN 0 END;

-- A convolution's output size along one dim: ⌊(h + 2·pad − dil·(r − 1) − 1) / stride⌋ + 1.
CREATE OR REPLACE TEMP MACRO wm_conv_out(h, r, pad, stride, dil) AS
    floor((h + 2 * pad - dil * (r - 1) - 1) / stride) + 1;

-- The elements a reduction of input shape x over the dims in t ("[1, 2]", "-1"; empty: all) writes.
CREATE OR REPLACE TEMP MACRO wm_reduce_out(x, t) AS
    CASE WHEN t IS NULL OR trim(t) IN ('', '[]') THEN 1.0
         ELSE wm_prod(x) / list_product(list_transform(
                  TRY_CAST(CASE WHEN starts_with(t, '[') THEN t ELSE '[' || t || ']' END AS INTEGER[]),
                  lambda j: TRY_CAST(json_extract(x, '$[' || ((j + json_array_length(x)) % json_array_length(x)) || ']') AS DOUBLE)))
    END;

-- The bytes of a dtype given as c10::ScalarType's number (a dtype argument: _scaled_mm's out_dtype,
-- cumsum's dtype): 0 uint8, 1 int8, 2 int16, 3 int32, 4 int64, 5 fp16, 6 fp32, 7 fp64, 11 bool,
-- 15 bf16; else `otherwise`.
CREATE OR REPLACE TEMP MACRO wm_scalar_type_bytes(code, otherwise) AS
    CASE code WHEN 0 THEN 1 WHEN 1 THEN 1 WHEN 2 THEN 2 WHEN 3 THEN 4 WHEN 4 THEN 8 WHEN 5 THEN 2 WHEN 6 THEN 4
              WHEN 7 THEN 8 WHEN 11 THEN 1 WHEN 15 THEN 2 ELSE otherwise END;

-- Which work model (a row of op_work_models.csv) each launching op takes: on its own, the
-- loader renders _op_work below with the rows and formulas of these rules alone (binding all of them took
-- 0.08 s, two fifths of a small trace's statements).
CREATE OR REPLACE TEMP TABLE _op_rules AS
WITH rules(rule, pattern, family, dtype_of) AS (
    VALUES /*work_rules*/
), named AS (
    -- The first rule whose pattern matches, for each op name of the trace: constant patterns in a
    -- CASE, compiled once (a join on the patterns compiled one per name and pattern: 8 s for a
    -- trace of 5,000 op names).
    SELECT n.name, n.rule, r.family
    FROM (SELECT name, /*work_match*/ AS rule FROM (SELECT DISTINCT name FROM _tree)) n
    JOIN rules r ON r.rule = n.rule
), launchers AS (
    SELECT DISTINCT cpu_op_id AS op_id FROM _gpu_ops WHERE op = 'kernel' AND cpu_op_id IS NOT NULL
    UNION SELECT op_id FROM _captured WHERE op_id IS NOT NULL
), attention AS (
    SELECT t.op_id, n.rule FROM _tree t JOIN named n ON n.name = t.name WHERE n.family = 'attention'
), below_attention AS (
    -- the ops one and two levels under an attention call: up the tree only to such a call, as
    -- elsewhere an ancestor's formula would claim kernels its work does not cover (aten::embedding's
    -- arange, a composite's fills); walked down from the few attention calls, not up from every launcher
    SELECT c.op_id, a.op_id AS ancestor, a.rule, 1 AS level FROM attention a JOIN _tree c ON c.parent_id = a.op_id
    UNION ALL
    SELECT g.op_id, a.op_id, a.rule, 2
    FROM attention a JOIN _tree c ON c.parent_id = a.op_id JOIN _tree g ON g.parent_id = c.op_id
), chosen AS (
    SELECT l.op_id AS launcher, l.op_id, n.rule, 0 AS level
    FROM launchers l JOIN _tree t ON t.op_id = l.op_id JOIN named n ON n.name = t.name
    UNION ALL
    SELECT l.op_id, b.ancestor, b.rule, b.level FROM launchers l JOIN below_attention b ON b.op_id = l.op_id
)
SELECT launcher, op_id, rule FROM chosen
QUALIFY row_number() OVER (PARTITION BY launcher ORDER BY level) = 1;
-- @else
CREATE OR REPLACE TEMP TABLE _op_rules (launcher BIGINT, op_id BIGINT, rule INTEGER);
-- @end

-- Only ops with a rule have work: without one (no op matched, no shapes recorded), none is worked out.
-- @if EXISTS (SELECT 1 FROM _op_rules WHERE rule IS NOT NULL)
CREATE OR REPLACE TEMP TABLE _op_work AS
WITH rules(rule, pattern, family, dtype_of) AS (
    VALUES /*work_rules_used*/
), chosen AS (
    SELECT launcher, op_id, rule FROM _op_rules
), kernel_hints AS (
    -- What the op's kernels name of a tensor list's dtype, which Input type leaves out: the element
    -- size of ATen's copy kernels (CatArrayBatchedCopy<OpaqueType<4u>>) or the element type of a
    -- foreach or fused optimizer kernel's functor (multi_tensor_apply_kernel<..., BinaryOpScalarFunctor<float,
    -- 1, 1, 0>, ...>, FusedAdamMathFunctor<c10::BFloat16, 4, ...>);
    -- and the blocks of its multi_tensor_apply kernels, a block per chunk of a tensor.
    SELECT c.op_id,
           max(coalesce(TRY_CAST(regexp_extract(g.name, 'OpaqueType<(\d+)u?>', 1) AS INTEGER),
                        wm_elem_bytes(regexp_extract(g.name, 'Functor<([\w:]+(<[^<>]*>)?), (\([\w:]+\))?\d+,', 1))))
               AS kernel_elem_bytes,
           max(nullif(regexp_extract(g.name, 'Functor<([\w:]+(<[^<>]*>)?), (\([\w:]+\))?\d+,', 1), '')) AS kernel_elem_type,
           sum(list_product(g.grid)) FILTER (WHERE g.name LIKE '%multi_tensor_apply_kernel<%') AS list_blocks
    FROM chosen c
    JOIN (SELECT cpu_op_id AS launcher, name, grid FROM _gpu_ops WHERE op = 'kernel'
          UNION ALL  -- a captured op's kernels, as its graph's first replay ran them
          SELECT p.op_id, g.name, g.grid FROM _captured p JOIN _gpu_ops g ON g.event_id = p.event_id
          WHERE p.first_replay) g ON g.launcher = c.launcher
    WHERE g.name LIKE '%OpaqueType<%' OR g.name LIKE '%multi_tensor_apply_kernel<%'
    GROUP BY c.op_id
), gradients AS (
    -- Each step's gradients, as its backward's AccumulateGrad calls recorded them: the elements
    -- of a list of tensors shaped as the parameters (an optimizer's params, grads and moments),
    -- and the chunks multi_tensor_apply cuts them into (kChunkSize, 65,536 elements, in ATen's
    -- native/cuda/MultiTensorApply.cuh).
    SELECT step, sum(n) AS elements, sum(ceil(n / 65536)) AS chunks
    FROM (SELECT step, wm_numel(json_extract(input_dims, '$[0]'), json_extract_string(input_types, '$[0]')) AS n
          FROM cpu_op_rows WHERE trace_id = $trace_id AND name = 'torch::autograd::AccumulateGrad')
    GROUP BY step HAVING count(n) = count(*)
), calls AS (
    -- Each op with what its work depends on; `shape` names it, so that the many calls of one
    -- shape (every layer, every step) are worked out once. list_elements: where Kineto wrote no
    -- shapes for an op's tensor lists ([], a long list), the elements of each, from the step's
    -- gradients, when they are the lists: their chunks are the blocks the op's kernels ran.
    SELECT ch.op_id, ch.rule, o.input_dims AS dims, o.input_types AS types, c.conc, h.kernel_elem_bytes,
           h.kernel_elem_type,
           CASE WHEN h.list_blocks IS NULL OR gr.chunks <> h.list_blocks THEN NULL
                WHEN list_contains(list_transform(CAST(o.input_dims AS JSON[]), lambda x, i:
                         CAST(o.input_types AS VARCHAR[])[i] = 'TensorList' AND json_array_length(x) = 0), true)
                THEN gr.elements END AS list_elements,
           concat_ws('|', ch.rule, o.input_dims, o.input_types, c.conc, h.kernel_elem_bytes, h.kernel_elem_type,
                     list_elements) AS shape
    FROM (SELECT DISTINCT op_id, rule FROM chosen) ch
    JOIN cpu_op_rows o ON o.trace_id = $trace_id AND o.op_id = ch.op_id
    -- Concrete Inputs, read for these ops alone
    LEFT JOIN (SELECT rowid AS op_id, json_extract(args, '$."Concrete Inputs"') AS conc FROM event_rows
               WHERE trace_id = $trace_id AND rowid IN (SELECT op_id FROM chosen)) c ON c.op_id = ch.op_id
    LEFT JOIN kernel_hints h ON h.op_id = ch.op_id
    LEFT JOIN gradients gr ON gr.step IS NOT DISTINCT FROM o.step
), inputs AS (
    SELECT s.*, r.family, r.dtype_of,
           list_transform(CAST(s.dims AS JSON[]), lambda x, i: {
               'n': CASE WHEN CAST(s.types AS VARCHAR[])[i] = 'TensorList' AND json_array_length(x) = 0
                         THEN s.list_elements ELSE wm_numel(x, CAST(s.types AS VARCHAR[])[i]) END,
               's': wm_elem_bytes(CAST(s.types AS VARCHAR[])[i]),
               'r': json_array_length(x)}) AS ins,
           len(list_filter(CAST(s.types AS VARCHAR[]), lambda t: t = 'TensorList')) AS tensor_lists
    FROM (SELECT DISTINCT ON (shape) shape, rule, dims, types, conc, kernel_elem_bytes, kernel_elem_type, list_elements
          FROM calls) s
    JOIN rules r ON r.rule = s.rule
), sized AS (
    -- nmax: the broadcast output's elements; smax: the widest dtype among inputs that are not
    -- 0-dim (a Python scalar does not promote a tensor: x * 0.5 stays bf16); in_bytes: all inputs.
    SELECT *, list_max(list_transform(ins, lambda x: x.n)) AS nmax,
           coalesce(list_max(list_transform(list_filter(ins, lambda x: x.r > 0), lambda x: x.s)), ins[1].s) AS smax,
           list_sum(list_transform(ins, lambda x: x.n * x.s)) AS in_bytes
    FROM inputs
), shape_values AS (
    -- each shape value the formulas read (a formula's d0[1], c2), a column read once for all of them
    SELECT * /*work_shape_values*/
    FROM sized
), work AS (
    -- a tensor list's dtype: the one its kernels name, if they do
    SELECT shape, family, CASE json_extract_string(types, '$[' || dtype_of || ']') WHEN 'TensorList' THEN kernel_elem_type
                               ELSE json_extract_string(types, '$[' || dtype_of || ']') END AS dtype,
           CAST(/*work_flops*/ AS DOUBLE) AS flops,
           CAST(/*work_bytes*/ AS DOUBLE) AS bytes,
           CAST(/*work_model_flops*/ AS DOUBLE) AS model_flops,
           CASE WHEN list_elements IS NOT NULL THEN 'step gradients' ELSE 'op shapes' END AS work_source,
           -- why, where flops or bytes stay NULL
           CASE WHEN dims IS NULL THEN 'no shapes recorded'
                WHEN list_contains(list_transform(ins, lambda x, i: CAST(types AS VARCHAR[])[i] = 'TensorList'
                                                  AND x.n IS NULL), true) THEN 'a tensor list without shapes'
                WHEN tensor_lists > 0 AND kernel_elem_bytes IS NULL THEN 'a tensor list without a dtype'
                WHEN family = 'attention' AND conc IS NULL THEN 'no is_causal (Concrete Inputs)'
                WHEN flops IS NOT NULL THEN 'no bytes formula'
                ELSE 'shapes incomplete' END AS work_missing
    FROM shape_values
)
SELECT c.launcher, k.op_id, w.family, w.dtype, w.flops, w.bytes, w.model_flops, w.work_source, w.work_missing
FROM chosen c JOIN calls k USING (op_id) JOIN work w USING (shape);

-- Each kernel's share of its op's work: the op's FLOPs and bytes split over the kernels it (and
-- the ops under it up to two levels) launched, by their time (a split-K GEMM and its reduction,
-- cuDNN attention's backward and its dO·O and dQ kernels). op_kernels: how many shared it.
CREATE OR REPLACE TEMP TABLE _kernel_work AS
SELECT g.event_id, w.op_id, w.family, w.dtype,
       CASE WHEN g.replay IS NOT NULL THEN 'graph capture' ELSE w.work_source END AS work_source, w.work_missing,
       w.flops * g.dur_ns / nullif(sum(g.dur_ns) OVER (PARTITION BY w.op_id, g.replay), 0) AS flops,
       w.bytes * g.dur_ns / nullif(sum(g.dur_ns) OVER (PARTITION BY w.op_id, g.replay), 0) AS bytes,
       w.model_flops * g.dur_ns / nullif(sum(g.dur_ns) OVER (PARTITION BY w.op_id, g.replay), 0) AS model_flops,
       w.flops AS op_flops, w.bytes AS op_bytes, w.model_flops AS op_model_flops,
       count(*) OVER (PARTITION BY w.op_id, g.replay) AS op_kernels
-- a graph's kernels ran the ops of its capture, not the op around its replay: each replay's
-- kernels the work of the ops that launched them at capture (_captured), where it is in the trace
FROM (SELECT event_id, dur_ns, cpu_op_id AS launcher, NULL AS replay FROM _gpu_ops
      WHERE op = 'kernel' AND event_id NOT IN (SELECT event_id FROM _graph_kernels)
      UNION ALL
      SELECT p.event_id, g.dur_ns, p.op_id, p.replay FROM _captured p JOIN _gpu_ops g ON g.event_id = p.event_id) g
JOIN _op_work w ON w.launcher = g.launcher;
-- @else
CREATE OR REPLACE TEMP TABLE _kernel_work (event_id BIGINT, op_id BIGINT, family VARCHAR, dtype VARCHAR, work_source VARCHAR,
                                           work_missing VARCHAR, flops DOUBLE, bytes DOUBLE, model_flops DOUBLE,
                                           op_flops DOUBLE, op_bytes DOUBLE, op_model_flops DOUBLE, op_kernels BIGINT);
-- @end

-- The work of kernels whose launch is not in the trace (launched before the profiler's window
-- opened, while the GPU ran behind the CPU): that of the kernels of the same name, grid and block
-- the trace holds the launch of, where each of those was the one kernel of its op and all did the
-- same work (the steady loop repeating its shapes); where they differ, or any has no work or
-- shared its op with other kernels, no one value is the kernel's and its work stays NULL. The
-- rule checks itself on the launched kernels first: a trace whose shapes change under one launch
-- geometry (a kernel whose work no other of its name, grid and block did, beside others that all
-- agree) could have hidden such a kernel before its window, and infers nothing.
-- Only a trace with kernels launched before it, and work to take from others, has any to infer.
-- A CUDA graph's kernels whose capture is not in the trace take the work the same way: from the
-- kernels of their name, grid and block launched outside a graph.
-- @if (EXISTS (SELECT 1 FROM _gpu_ops WHERE op = 'kernel' AND cpu_op_id IS NULL) OR EXISTS (SELECT 1 FROM _graph_kernels)) AND EXISTS (SELECT 1 FROM _kernel_work)
CREATE OR REPLACE TEMP TABLE _work_unsteady AS
WITH works AS (
    SELECT g.name, g.grid, g.block, w.family, w.op_flops, w.op_bytes, w.op_model_flops, count(*) AS kernels
    FROM _gpu_ops g JOIN _kernel_work w ON w.event_id = g.event_id
    WHERE g.op = 'kernel' AND g.grid IS NOT NULL AND g.block IS NOT NULL AND w.op_kernels = 1
      AND w.op_flops IS NOT NULL AND w.op_bytes IS NOT NULL
    GROUP BY ALL
)
-- a kernel that, its launch hidden, would take the work the others of its geometry agree on
SELECT EXISTS (SELECT 1 FROM works GROUP BY name, grid, block HAVING count(*) = 2 AND min(kernels) = 1) AS unsteady;

CREATE OR REPLACE TEMP TABLE _inferred_work AS
WITH unlaunched AS (
    SELECT DISTINCT name, grid, block FROM _gpu_ops
    WHERE op = 'kernel' AND (cpu_op_id IS NULL OR event_id IN (SELECT event_id FROM _graph_kernels))
      AND grid IS NOT NULL AND block IS NOT NULL
), launched AS (
    SELECT g.name, g.grid, g.block, w.family, w.dtype, w.op_flops, w.op_bytes, w.op_model_flops, w.op_kernels
    FROM _gpu_ops g LEFT JOIN _kernel_work w ON w.event_id = g.event_id
    WHERE g.op = 'kernel' AND g.cpu_op_id IS NOT NULL AND g.grid IS NOT NULL AND g.block IS NOT NULL
      AND g.event_id NOT IN (SELECT event_id FROM _graph_kernels)
)
-- (the dtype only picks the peak: ops of one work in two dtypes leave it NULL)
SELECT l.name, l.grid, l.block, any_value(l.family) AS family,
       CASE WHEN count(DISTINCT l.dtype) = 1 AND count(l.dtype) = count(*) THEN any_value(l.dtype) END AS dtype,
       any_value(l.op_flops) AS flops, any_value(l.op_bytes) AS bytes, any_value(l.op_model_flops) AS model_flops
FROM launched l SEMI JOIN unlaunched u ON u.name = l.name AND u.grid = l.grid AND u.block = l.block
WHERE NOT (SELECT unsteady FROM _work_unsteady)
GROUP BY l.name, l.grid, l.block
HAVING count(*) = count(l.op_flops) AND count(*) = count(l.op_bytes) AND max(l.op_kernels) = 1
   AND count(DISTINCT (l.family, l.op_flops, l.op_bytes, l.op_model_flops)) = 1;
-- @else
CREATE OR REPLACE TEMP TABLE _work_unsteady AS SELECT false AS unsteady;
CREATE OR REPLACE TEMP TABLE _inferred_work (name VARCHAR, grid INTEGER[], block INTEGER[], family VARCHAR,
                                             dtype VARCHAR, flops DOUBLE, bytes DOUBLE, model_flops DOUBLE);
-- @end

-- The same for kernels that ran an op of several kernels (grouped GEMM's data preparation and
-- GEMM, cuDNN attention's backward): a run of kernels with no launch in the trace, one after
-- another on a stream, whose names, grids and blocks are, in order, those of the ops of several
-- kernels the trace holds the launch of, where all those ops did the same work, takes that work,
-- split over the run by their time as a launched op's is. A run that two such sequences match,
-- a kernel that two runs would claim, or a sequence one of whose kernels other launched ops ran
-- too, takes none; nor does any in a trace the rule above found unsteady.
-- @if EXISTS (SELECT 1 FROM _kernel_work WHERE op_kernels > 1) AND (EXISTS (SELECT 1 FROM _gpu_ops WHERE op = 'kernel' AND cpu_op_id IS NULL) OR EXISTS (SELECT 1 FROM _graph_kernels))
CREATE OR REPLACE TEMP TABLE _inferred_op_work AS
WITH unlaunched AS (
    SELECT event_id FROM _gpu_ops WHERE op = 'kernel' AND cpu_op_id IS NULL UNION SELECT event_id FROM _graph_kernels
), signed AS (
    -- each kernel's name, grid and block as one number (a 64-bit hash), its op where launched: the
    -- op whose work it shares, else its launching op
    SELECT g.event_id, g.device, g.stream, g.ts_ns, g.dur_ns, hash(g.name, g.grid, g.block) AS sig,
           u.event_id IS NOT NULL AS unlaunched, coalesce(w.op_id, g.cpu_op_id) AS op_key, w.op_kernels,
           w.family, w.dtype, w.op_flops, w.op_bytes, w.op_model_flops
    FROM _gpu_ops g
    LEFT JOIN unlaunched u ON u.event_id = g.event_id
    LEFT JOIN _kernel_work w ON w.event_id = g.event_id
    WHERE g.op = 'kernel'
), launched_ops AS (
    -- each launched op as the sequence of its kernels
    SELECT op_key, list(sig ORDER BY ts_ns, event_id) AS kernels, any_value(op_kernels) AS op_kernels,
           any_value(family) AS family, any_value(dtype) AS dtype, any_value(op_flops) AS flops,
           any_value(op_bytes) AS bytes, any_value(op_model_flops) AS model_flops
    FROM signed WHERE NOT unlaunched AND op_key IS NOT NULL
    GROUP BY op_key
), sequences AS (
    SELECT kernels, len(kernels) AS m, any_value(family) AS family,
           CASE WHEN count(DISTINCT dtype) = 1 AND count(dtype) = count(*) THEN any_value(dtype) END AS dtype,
           any_value(flops) AS flops, any_value(bytes) AS bytes, any_value(model_flops) AS model_flops
    FROM launched_ops WHERE op_kernels > 1 GROUP BY kernels
    HAVING count(*) = count(flops) AND count(*) = count(bytes)
       AND count(DISTINCT (family, flops, bytes, model_flops)) = 1
), ambiguous AS (
    -- a sequence one of whose kernels other launched ops ran too (alone, or among other kernels):
    -- a run of it may have been those ops
    SELECT DISTINCT q.kernels
    FROM (SELECT kernels, unnest(kernels) AS sig FROM sequences) q
    JOIN (SELECT DISTINCT kernels, unnest(kernels) AS sig FROM launched_ops) o ON o.sig = q.sig AND o.kernels <> q.kernels
), numbered AS (
    SELECT event_id, device, stream, sig, dur_ns, unlaunched,
           row_number() OVER (PARTITION BY device, stream ORDER BY ts_ns, event_id) AS pos
    FROM signed
), ahead AS (
    -- from each unlaunched kernel that could begin a run, the next 16 on its stream (a longer op
    -- is not matched): a range join, not a window over every kernel of a replay-heavy trace
    SELECT s.event_id, list(n.sig ORDER BY n.pos) AS kernels, list(n.unlaunched ORDER BY n.pos) AS unlaunched_ahead,
           list(n.event_id ORDER BY n.pos) AS events, list(n.dur_ns ORDER BY n.pos) AS durations
    FROM numbered s
    JOIN numbered n ON n.device IS NOT DISTINCT FROM s.device AND n.stream IS NOT DISTINCT FROM s.stream
         AND n.pos BETWEEN s.pos AND s.pos + 15
    WHERE s.unlaunched AND s.sig IN (SELECT kernels[1] FROM sequences)
    GROUP BY s.event_id
), runs AS (
    SELECT a.event_id AS run, list_slice(a.events, 1, q.m) AS events, list_slice(a.durations, 1, q.m) AS durations,
           q.family, q.dtype, q.flops, q.bytes, q.model_flops
    FROM ahead a JOIN sequences q ON list_slice(a.kernels, 1, q.m) = q.kernels
    WHERE list_bool_and(list_slice(a.unlaunched_ahead, 1, q.m)) AND q.kernels NOT IN (SELECT kernels FROM ambiguous)
    QUALIFY count(*) OVER (PARTITION BY a.event_id) = 1
), kernels AS (
    SELECT run, unnest(events) AS event_id, unnest(durations) AS dur_ns, list_sum(durations) AS run_ns,
           family, dtype, flops, bytes, model_flops
    FROM runs
)
SELECT event_id, family, dtype, flops * dur_ns / nullif(run_ns, 0) AS flops, bytes * dur_ns / nullif(run_ns, 0) AS bytes,
       model_flops * dur_ns / nullif(run_ns, 0) AS model_flops
FROM kernels
WHERE NOT (SELECT unsteady FROM _work_unsteady)
QUALIFY count(*) OVER (PARTITION BY event_id) = 1;
-- @else
CREATE OR REPLACE TEMP TABLE _inferred_op_work (event_id BIGINT, family VARCHAR, dtype VARCHAR, flops DOUBLE,
                                                bytes DOUBLE, model_flops DOUBLE);
-- @end

INSERT INTO kernel_rows
SELECT $trace_id, g.name, g.ts_ns, g.dur_ns, g.device, g.stream, g.correlation, g.launch_external_id, g.grid, g.block,
       g.registers_per_thread, g.shared_memory_bytes, g.blocks_per_sm, g.warps_per_sm,
       -- Kineto writes 0 when it could not compute occupancy (a kernel that ran had some).
       nullif(g.est_occupancy_pct, 0), g.cpu_op_id, g.step, g.cpu_op, g.cpu_op_path,
       coalesce(w.flops, i.flops, io.flops), coalesce(w.dtype, i.dtype, io.dtype), coalesce(w.bytes, i.bytes, io.bytes),
       coalesce(w.model_flops, i.model_flops, io.model_flops), coalesce(w.family, i.family, io.family),
       g.source_file, g.source_line, g.source_function,
       CASE WHEN coalesce(w.flops, w.bytes) IS NOT NULL THEN w.work_source
            WHEN i.flops IS NOT NULL THEN 'identical kernel' WHEN io.flops IS NOT NULL THEN 'identical op' END,
       CASE WHEN coalesce(w.flops, i.flops, io.flops) IS NOT NULL AND coalesce(w.bytes, i.bytes, io.bytes) IS NOT NULL THEN NULL
            WHEN r.event_id IS NOT NULL AND c.event_id IS NULL
                 THEN 'a CUDA graph replay whose capture is not in the trace'
            -- a replay whose capture is in the trace: its op there has no formula, or there was none
            WHEN r.event_id IS NOT NULL AND w.event_id IS NULL
                 THEN CASE WHEN c.names_op THEN 'no formula for its op'
                           ELSE 'a CUDA graph replay whose capture names no op for it' END
            WHEN g.cpu_op_id IS NULL THEN 'no launch in the trace, no identical kernel that agrees'
            -- a flex attention kernel (Inductor's template) computes the blocks its block mask's
            -- values name (KV_NUM_BLKS, KV_IDX and their full-block twins): Kineto records their shapes only
            WHEN w.event_id IS NULL AND g.cpu_op LIKE 'triton_tem_%flex_attention%'
                 THEN 'flex attention: which blocks it computes is not in the trace (block mask values)'
            WHEN w.event_id IS NULL THEN 'no formula for its op'
            ELSE w.work_missing END
FROM _gpu_ops g
-- by the kernel's event: one integer key, where the op, start and name (a kernel name runs to
-- hundreds of bytes) took 0.8 s to hash and match for the 294 k kernels of 1 GB
LEFT JOIN _kernel_work w ON w.event_id = g.event_id
LEFT JOIN _graph_kernels r ON r.event_id = g.event_id
LEFT JOIN _inferred_op_work io ON io.event_id = g.event_id
LEFT JOIN _inferred_work i ON (g.cpu_op_id IS NULL OR r.event_id IS NOT NULL)
     AND i.name = g.name AND i.grid = g.grid AND i.block = g.block
-- joined, not asked of each kernel in a subquery: DuckDB kept every kernel's row (names, op paths)
-- twice to answer two such subqueries, which at 1 GB spilled 0.7 GB under the load's memory limit
LEFT JOIN (SELECT event_id, bool_or(op_id IS NOT NULL) AS names_op FROM _captured GROUP BY event_id) c
     ON c.event_id = g.event_id
WHERE g.op = 'kernel';
