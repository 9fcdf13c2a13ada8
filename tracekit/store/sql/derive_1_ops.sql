-- Derives one trace's rows (trace_id = $trace_id) from its event_rows, in five stages
-- (derive_1_ops.sql to derive_5_transfers_busy.sql, run in that order; stage 1: steps and the CPU
-- op tree). Run statement by statement, inside the load's transaction. Category names are matched case-insensitively and include the
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
