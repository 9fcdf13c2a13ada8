-- Derives one trace's rows (trace_id = $trace_id) from its event_rows. Run statement by statement,
-- inside the load's transaction. Category names are matched case-insensitively and include the
-- older Kineto spellings (Operator, Runtime, Kernel, Memcpy, Memset) so old traces load too.

INSERT INTO step_rows
SELECT $trace_id, CAST(regexp_extract(name, '^ProfilerStep#(\d+)$', 1) AS INTEGER) AS step,
       min(ts_ns), max(ts_ns + greatest(dur_ns, 0))
FROM event_rows
WHERE trace_id = $trace_id AND ph = 'X' AND regexp_full_match(name, 'ProfilerStep#\d+')
  AND lower(cat) IN ('user_annotation', 'cpu_op', 'operator')
GROUP BY step;

CREATE OR REPLACE TEMP TABLE _steps AS
SELECT step, ts_ns, end_ns FROM step_rows WHERE trace_id = $trace_id;

CREATE OR REPLACE TEMP TABLE _ops AS
SELECT row_number() OVER (ORDER BY pid, tid, ts_ns, dur_ns DESC, name) - 1 AS op_id,
       cat, name, ts_ns, coalesce(dur_ns, 0) AS dur_ns, pid, tid,
       TRY_CAST(json_extract_string(args, '$."External id"') AS BIGINT) AS external_id,
       json_extract(args, '$."Input Dims"') AS input_dims,
       json_extract(args, '$."Input type"') AS input_types
FROM event_rows
WHERE trace_id = $trace_id AND ph = 'X' AND ts_ns IS NOT NULL
  AND lower(cat) IN ('cpu_op', 'user_annotation', 'operator');

-- Depth = ops still open on the thread when this one starts: a running sum over starts (+1) and
-- ends (-1). Ends at an instant sort before starts there, except a zero-length op's own end.
CREATE OR REPLACE TEMP TABLE _depth AS
WITH boundaries AS (
    SELECT op_id, pid, tid, ts_ns AS t, 1 AS ord, -dur_ns AS longest_first, 1 AS delta FROM _ops
    UNION ALL
    SELECT op_id, pid, tid, ts_ns + dur_ns, CASE WHEN dur_ns > 0 THEN 0 ELSE 2 END, 0, -1 FROM _ops
), running AS (
    SELECT op_id, delta,
           sum(delta) OVER (PARTITION BY pid, tid ORDER BY t, ord, longest_first, op_id
                            ROWS UNBOUNDED PRECEDING) - delta AS open_before
    FROM boundaries
)
SELECT op_id, greatest(open_before, 0)::INTEGER AS depth FROM running WHERE delta = 1;

CREATE OR REPLACE TEMP TABLE _ops_d AS
SELECT o.*, d.depth FROM _ops o JOIN _depth d USING (op_id);

INSERT INTO cpu_op_rows
SELECT $trace_id, c.op_id, c.cat, c.name, c.ts_ns, c.dur_ns, c.pid, c.tid, c.external_id,
       c.input_dims, c.input_types, c.depth,
       CASE WHEN c.depth > 0 THEN p.op_id END, CASE WHEN c.depth > 0 THEN p.name END,
       CASE WHEN c.ts_ns < s.end_ns THEN s.step END, NULL
FROM _ops_d c
ASOF LEFT JOIN _ops_d p ON c.pid = p.pid AND c.tid = p.tid AND c.depth - 1 = p.depth AND c.ts_ns >= p.ts_ns
ASOF LEFT JOIN _steps s ON c.ts_ns >= s.ts_ns;

-- One op per External id (Kineto makes them unique; a foreign trace may not).
CREATE OR REPLACE TEMP TABLE _op_by_external AS
SELECT external_id, op_id FROM _ops_d WHERE external_id IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY external_id ORDER BY depth DESC, op_id) = 1;

CREATE OR REPLACE TEMP TABLE _rt AS
SELECT cat, name, ts_ns, coalesce(dur_ns, 0) AS dur_ns, pid, tid,
       TRY_CAST(json_extract_string(args, '$.correlation') AS BIGINT) AS correlation,
       TRY_CAST(json_extract_string(args, '$."External id"') AS BIGINT) AS external_id
FROM event_rows
WHERE trace_id = $trace_id AND ph = 'X' AND ts_ns IS NOT NULL
  AND lower(cat) IN ('cuda_runtime', 'cuda_driver', 'runtime', 'hip_runtime', 'hip_driver');

-- A call without an External id belongs to the latest op that started before it on its thread and
-- still encloses it (or that op's parent, or grandparent).
INSERT INTO runtime_rows
SELECT $trace_id, r.cat, r.name, r.ts_ns, r.dur_ns, r.pid, r.tid, r.correlation, r.external_id,
       coalesce(x.op_id,
                CASE WHEN near.ts_ns + near.dur_ns >= r.ts_ns + r.dur_ns THEN near.op_id END,
                CASE WHEN up1.ts_ns + up1.dur_ns >= r.ts_ns + r.dur_ns THEN up1.op_id END,
                CASE WHEN up2.ts_ns + up2.dur_ns >= r.ts_ns + r.dur_ns THEN up2.op_id END),
       CASE WHEN r.ts_ns < s.end_ns THEN s.step END
FROM _rt r
LEFT JOIN _op_by_external x ON x.external_id = r.external_id
ASOF LEFT JOIN _ops_d near ON near.pid = r.pid AND near.tid = r.tid AND r.ts_ns >= near.ts_ns
LEFT JOIN cpu_op_rows p1 ON p1.trace_id = $trace_id AND p1.op_id = near.op_id
LEFT JOIN _ops_d up1 ON up1.op_id = p1.parent_id
LEFT JOIN cpu_op_rows p2 ON p2.trace_id = $trace_id AND p2.op_id = up1.op_id
LEFT JOIN _ops_d up2 ON up2.op_id = p2.parent_id
ASOF LEFT JOIN _steps s ON r.ts_ns >= s.ts_ns;

-- The launch of each correlation id (driver and runtime may both carry one: prefer the runtime).
CREATE OR REPLACE TEMP TABLE _launch AS
SELECT correlation, cpu_op_id, ts_ns, external_id FROM runtime_rows
WHERE trace_id = $trace_id AND correlation IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY correlation
                           ORDER BY lower(cat) LIKE '%runtime%' DESC, ts_ns, name) = 1;

CREATE OR REPLACE TEMP TABLE _gpu AS
SELECT CASE WHEN lower(cat) = 'kernel' THEN 'kernel'
            WHEN lower(cat) IN ('gpu_memcpy', 'memcpy') THEN 'memcpy' ELSE 'memset' END AS op,
       name, ts_ns, dur_ns, args,
       TRY_CAST(json_extract_string(args, '$.device') AS INTEGER) AS device,
       TRY_CAST(json_extract_string(args, '$.stream') AS INTEGER) AS stream,
       TRY_CAST(json_extract_string(args, '$.correlation') AS BIGINT) AS correlation,
       TRY_CAST(json_extract_string(args, '$."External id"') AS BIGINT) AS external_id
FROM event_rows
WHERE trace_id = $trace_id AND ph = 'X'
  AND lower(cat) IN ('kernel', 'gpu_memcpy', 'memcpy', 'gpu_memset', 'memset');

-- ROCm traces may give a kernel no correlation, only the External id of its launch call.
CREATE OR REPLACE TEMP TABLE _launch_by_external AS
SELECT external_id, cpu_op_id, ts_ns FROM runtime_rows
WHERE trace_id = $trace_id AND external_id IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY external_id ORDER BY lower(name) LIKE '%launch%' DESC, ts_ns, name) = 1;

CREATE OR REPLACE TEMP TABLE _gpu_linked AS
SELECT g.*, coalesce(g.external_id, l.external_id) AS launch_external_id,
       coalesce(x.op_id, l.cpu_op_id, le.cpu_op_id) AS cpu_op_id,
       CASE WHEN coalesce(l.ts_ns, le.ts_ns, g.ts_ns) < s.end_ns THEN s.step END AS step
FROM _gpu g
LEFT JOIN _launch l ON l.correlation = g.correlation
LEFT JOIN _op_by_external x ON x.external_id = g.external_id
LEFT JOIN _launch_by_external le ON g.correlation IS NULL AND le.external_id = g.external_id
ASOF LEFT JOIN _steps s ON coalesce(l.ts_ns, le.ts_ns, g.ts_ns) >= s.ts_ns;

INSERT INTO kernel_rows
SELECT $trace_id, name, ts_ns, dur_ns, device, stream, correlation, launch_external_id,
       TRY_CAST(json_extract(args, '$.grid') AS INTEGER[]),
       TRY_CAST(json_extract(args, '$.block') AS INTEGER[]),
       TRY_CAST(json_extract_string(args, '$."registers per thread"') AS INTEGER),
       TRY_CAST(json_extract_string(args, '$."shared memory"') AS BIGINT),
       TRY_CAST(json_extract_string(args, '$."blocks per SM"') AS DOUBLE),
       TRY_CAST(json_extract_string(args, '$."warps per SM"') AS DOUBLE),
       -- Kineto writes 0 when it could not compute occupancy (a kernel that ran had some).
       nullif(TRY_CAST(json_extract_string(args, '$."est. achieved occupancy %"') AS DOUBLE), 0),
       cpu_op_id, step
FROM _gpu_linked WHERE op = 'kernel';

INSERT INTO transfer_rows
SELECT $trace_id, op, name,
       CASE WHEN op = 'memcpy' THEN nullif(regexp_extract(name, '^Memcpy ([A-Za-z0-9]+)', 1), '')
            ELSE nullif(regexp_extract(name, '\(([^)]*)\)', 1), '') END,
       TRY_CAST(json_extract_string(args, '$.bytes') AS BIGINT),
       ts_ns, dur_ns, device, stream, correlation, launch_external_id, cpu_op_id, step
FROM _gpu_linked WHERE op <> 'kernel';

-- The chain of cpu_op names above each op that launched GPU work, outermost first.
UPDATE cpu_op_rows SET op_path = paths.op_path
FROM (
    WITH RECURSIVE up(start_id, at_id, parent_id, op_path) AS (
        SELECT o.op_id, o.op_id, o.parent_id, o.name
        FROM cpu_op_rows o
        WHERE o.trace_id = $trace_id AND o.op_id IN (
            SELECT cpu_op_id FROM _gpu_linked WHERE cpu_op_id IS NOT NULL
            UNION SELECT cpu_op_id FROM runtime_rows
            WHERE trace_id = $trace_id AND cpu_op_id IS NOT NULL)
        UNION ALL
        SELECT up.start_id, p.op_id, p.parent_id,
               CASE WHEN lower(p.cat) IN ('cpu_op', 'operator') THEN p.name || ' → ' || up.op_path
                    ELSE up.op_path END
        FROM up JOIN cpu_op_rows p ON p.trace_id = $trace_id AND p.op_id = up.parent_id
    )
    SELECT start_id, op_path FROM up WHERE parent_id IS NULL
) AS paths
WHERE cpu_op_rows.trace_id = $trace_id AND cpu_op_rows.op_id = paths.start_id;

DROP TABLE _steps;
DROP TABLE _ops;
DROP TABLE _depth;
DROP TABLE _ops_d;
DROP TABLE _op_by_external;
DROP TABLE _rt;
DROP TABLE _launch;
DROP TABLE _launch_by_external;
DROP TABLE _gpu;
DROP TABLE _gpu_linked;
