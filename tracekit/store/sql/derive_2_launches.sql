-- Stage 2: GPU work, each kernel, copy and fill linked to the runtime call that launched it and
-- to that call's op, with the op's path.

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
       TRY_CAST(a[12] AS DOUBLE) AS est_occupancy_pct,
       -- a size below 0 is no size: unknown, as a ROCm copy's (anomalies counts it), never summed
       CASE WHEN TRY_CAST(a[13] AS BIGINT) >= 0 THEN TRY_CAST(a[13] AS BIGINT) END AS bytes, event_id
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
WITH ops AS (
    SELECT op_id, external_id, pid, tid, ts_ns, dur_ns FROM cpu_op_rows WHERE trace_id = $trace_id
)
SELECT x.external_id, o.op_id, o.pid, o.tid, o.ts_ns, o.ts_ns + o.dur_ns AS end_ns
FROM (
    SELECT external_id, max(op_id) AS op_id FROM ops
    WHERE external_id IN (SELECT TRY_CAST(coalesce(a[2], a[3]) AS BIGINT) FROM _rt)
       OR external_id IN (SELECT external_id FROM _gpu)
    GROUP BY external_id
) x
JOIN ops o USING (op_id);

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


-- Each step's span as the GPU ran it, where Kineto wrote one (a profiler schedule does).
CREATE OR REPLACE TEMP TABLE _gpu_steps AS
SELECT CAST(regexp_extract(name, '^ProfilerStep#(\d+)$', 1) AS INTEGER) AS step,
       min(ts_ns) AS ts_ns, max(ts_ns + greatest(dur_ns, 0)) AS end_ns
FROM event_rows
WHERE trace_id = $trace_id AND ph = 'X' AND lower(cat) = 'gpu_user_annotation'
  AND regexp_full_match(name, 'ProfilerStep#\d+')
GROUP BY step;

-- GPU work belongs to its launch's op. Only without a launch in the trace does a kernel's own
-- External id name its op, and only when it has no correlation id that could be mistaken for one.
-- Narrow rows, by the work's event (a kernel's name runs to hundreds of bytes: a wide copy of
-- every GPU row here spilled 160 MB of the 1 GB benchmark trace's load to disk).
CREATE OR REPLACE TEMP TABLE _gpu_links AS
WITH linked AS (
    SELECT g.event_id, g.ts_ns, coalesce(g.external_id, l.external_id) AS launch_external_id,
           CASE WHEN l.correlation IS NOT NULL THEN l.cpu_op_id
                WHEN le.external_id IS NOT NULL THEN le.cpu_op_id
                WHEN g.correlation IS NULL THEN x.op_id END AS cpu_op_id,
           coalesce(l.step, le.step) AS step, l.correlation IS NULL AND le.external_id IS NULL AS orphan
    FROM _gpu g
    LEFT JOIN _launch l ON l.correlation = g.correlation
    LEFT JOIN _launch_by_external le ON g.correlation IS NULL AND le.external_id = g.external_id
    LEFT JOIN _op_by_external x ON x.external_id = g.external_id
)
-- The step of the launch (runtime_rows has it). Work whose launch is not in the trace (launched in
-- the profiler's warmup, while the GPU ran behind the CPU) takes the step of the GPU-side span its
-- start falls in (Kineto's gpu_user_annotation ProfilerStep#N, the step as the GPU ran it), and
-- no step in a trace without them: a GPU timestamp is never compared with a CPU step's span.
SELECT event_id, launch_external_id, cpu_op_id, step FROM linked WHERE NOT orphan
UNION ALL
SELECT o.event_id, o.launch_external_id, o.cpu_op_id, CASE WHEN o.ts_ns < s.end_ns THEN s.step END
FROM (SELECT * FROM linked WHERE orphan) o ASOF LEFT JOIN _gpu_steps s ON o.ts_ns >= s.ts_ns;

-- The chain of op names above each op that launched GPU work, outermost first. Record-function
-- ranges and ProfilerStep#N (an Operator in 2021's Kineto) are steps and labels, not ops: left
-- out. A path keeps the 64 ops nearest its op, marking a cut with '… → ' (a trace of 250 nested
-- copies of the same ops would otherwise hold paths of every level).
CREATE OR REPLACE TEMP TABLE _tree AS
SELECT op_id, parent_id, name,
       CASE WHEN lower(cat) IN ('cpu_op', 'operator') AND NOT regexp_full_match(name, 'ProfilerStep#\d+')
            THEN name END AS label
FROM cpu_op_rows WHERE trace_id = $trace_id;

-- Top down: each op with children gets its prefix (its labels and its ancestors', outermost
-- first) from its parent's, once, however many ops below share it; an op's path is its parent's
-- prefix and its own name. A walk up from each op built the same prefixes again for every op
-- below them: 1.6 CPU-s on the 1 GB benchmark trace, 0.6-0.7 this way. The prefixes stop 63 ops
-- down: an op deeper than that has its path walked up below.
CREATE OR REPLACE TEMP TABLE _paths AS
WITH RECURSIVE starts AS (
    SELECT cpu_op_id AS op_id FROM _gpu_links WHERE cpu_op_id IS NOT NULL
    UNION SELECT cpu_op_id FROM runtime_rows WHERE trace_id = $trace_id AND cpu_op_id IS NOT NULL
    UNION SELECT cpu_op_id FROM memory_rows WHERE trace_id = $trace_id AND cpu_op_id IS NOT NULL
), parents AS (
    SELECT op_id, parent_id, label FROM _tree WHERE op_id IN (SELECT parent_id FROM _tree)
), prefixes(op_id, prefix, levels) AS (
    SELECT op_id, CASE WHEN label IS NOT NULL THEN label || ' → ' ELSE '' END, 1 FROM parents WHERE parent_id IS NULL
    UNION ALL
    SELECT c.op_id, CASE WHEN c.label IS NOT NULL THEN p.prefix || c.label || ' → ' ELSE p.prefix END, p.levels + 1
    FROM prefixes p JOIN parents c ON c.parent_id = p.op_id
    WHERE p.levels < 63
)
SELECT s.op_id, t.name, CASE WHEN t.parent_id IS NULL THEN t.name ELSE p.prefix || t.name END AS op_path
FROM starts s JOIN _tree t USING (op_id) LEFT JOIN prefixes p ON p.op_id = t.parent_id
WHERE t.parent_id IS NULL OR p.op_id IS NOT NULL;

-- An op more than 63 ops down: the walk up from it, one row per op (USING KEY), 64 ops up.
-- @if EXISTS (SELECT 1 FROM cpu_op_rows WHERE trace_id = $trace_id AND depth >= 64)
INSERT INTO _paths
WITH RECURSIVE up(start_id, name, parent_id, op_path, levels) USING KEY (start_id) AS (
    SELECT op_id, name, parent_id, name, 1
    FROM _tree
    WHERE op_id IN (SELECT cpu_op_id FROM _gpu_links UNION SELECT cpu_op_id FROM runtime_rows WHERE trace_id = $trace_id
                    UNION SELECT cpu_op_id FROM memory_rows WHERE trace_id = $trace_id)
      AND op_id NOT IN (SELECT op_id FROM _paths)
    UNION
    SELECT up.start_id, up.name, p.parent_id,
           CASE WHEN p.label IS NOT NULL THEN p.label || ' → ' || up.op_path ELSE up.op_path END, up.levels + 1
    FROM up JOIN _tree p ON p.op_id = up.parent_id
    WHERE up.levels < 64
)
SELECT start_id AS op_id, name, CASE WHEN parent_id IS NULL THEN op_path ELSE '… → ' || op_path END AS op_path FROM up;
-- @end

UPDATE cpu_op_rows SET op_path = p.op_path
FROM _paths p
WHERE cpu_op_rows.trace_id = $trace_id AND cpu_op_rows.op_id = p.op_id;

-- GPU work with its op's name, path and source frame beside it: the views then read kernels without a join.
-- _paths holds every op that launched GPU work, with its name (a join with _ops for the name built
-- a hash table of every op: 1.36 M at 1 GB).
CREATE OR REPLACE TEMP TABLE _gpu_ops AS
SELECT g.*, k.launch_external_id, k.cpu_op_id, k.step, p.name AS cpu_op, p.op_path AS cpu_op_path,
       f.source_file, f.source_line, f.source_function
FROM _gpu g
JOIN _gpu_links k USING (event_id)
LEFT JOIN _op_frames f ON f.op_id = k.cpu_op_id
LEFT JOIN _paths p ON p.op_id = k.cpu_op_id;
