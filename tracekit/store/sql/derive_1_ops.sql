-- Derives one trace's rows (trace_id = $trace_id) from its event_rows, in five stages
-- (derive_1_ops.sql to derive_5_transfers_busy.sql, run in that order; stage 1: steps and the CPU
-- op tree). Run statement by statement, inside the load's transaction. Category names are matched case-insensitively and include the
-- older Kineto spellings (Operator, Runtime, Kernel, Memcpy, Memset) so old traces load too.
-- Each statement reads `args` once per row, with one json_extract of every key it needs.

INSERT INTO step_rows
SELECT $trace_id, CAST(regexp_extract(name, '^ProfilerStep#(\d+)$', 1) AS INTEGER) AS step,
       min(ts_ns), max(ts_ns + greatest(dur_ns, 0)), 'profiler'
FROM event_rows
WHERE trace_id = $trace_id AND ph = 'X' AND regexp_full_match(name, 'ProfilerStep#\d+')
  AND lower(cat) IN ('user_annotation', 'cpu_op', 'operator')
GROUP BY step;

-- CPU ops: cpu_op, record_function ranges (user_annotation) and 2021's Operator. An op's id is
-- its event's row number in event_rows: unique, in file order, and free to compute. No args here:
-- the op tree needs none, and cpu_op_rows reads them as it is written (carried in this table
-- through the tree's statements, they spilled 300 MB of a 1 GB trace's load to disk).
CREATE OR REPLACE TEMP TABLE _ops AS
SELECT rowid AS op_id, cat, name, ts_ns, coalesce(dur_ns, 0) AS dur_ns, pid, tid
FROM event_rows
WHERE trace_id = $trace_id AND ph = 'X' AND ts_ns IS NOT NULL
  AND lower(cat) IN ('cpu_op', 'user_annotation', 'operator');

-- Runtime and driver calls: the launches (and syncs, mallocs) on the CPU.
CREATE OR REPLACE TEMP TABLE _rt AS
SELECT rowid AS rt_id, cat, name, ts_ns, coalesce(dur_ns, 0) AS dur_ns, pid, tid,
       json_extract(args, ['$.correlation', '$."External id"', '$."external id"']) AS a
FROM event_rows
WHERE trace_id = $trace_id AND ph = 'X' AND ts_ns IS NOT NULL
  AND lower(cat) IN ('cuda_runtime', 'cuda_driver', 'runtime', 'hip_runtime', 'hip_driver');

-- The allocator's [memory] instant events (torch.profiler's profile_memory): one per allocation
-- (Bytes > 0) or free (Bytes < 0), with the device's totals after it. Kineto writes cat
-- cpu_instant_event or none at all: the name says what they are.
CREATE OR REPLACE TEMP TABLE _mem AS
SELECT mem_id, ts_ns, pid, tid, TRY_CAST(a[1] AS INTEGER) AS device_type, TRY_CAST(a[2] AS INTEGER) AS device,
       TRY_CAST(a[3] AS BIGINT) AS addr, TRY_CAST(a[4] AS BIGINT) AS bytes,
       TRY_CAST(a[5] AS BIGINT) AS total_allocated, TRY_CAST(a[6] AS BIGINT) AS total_reserved
FROM (
    SELECT rowid AS mem_id, ts_ns, pid, tid,
           json_extract(args, ['$."Device Type"', '$."Device Id"', '$.Addr', '$.Bytes', '$."Total Allocated"',
                               '$."Total Reserved"']) AS a
    FROM event_rows
    WHERE trace_id = $trace_id AND ph = 'i' AND name = '[memory]' AND ts_ns IS NOT NULL
);

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
    UNION ALL
    -- memory events are probes too: the op open around an allocation made it (ids are event
    -- rows, so they never meet a runtime call's)
    SELECT t.thread, m.ts_ns, 2, 0, m.mem_id, 0 FROM _mem m JOIN _threads t USING (pid, tid)
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

-- A trace without ProfilerStep#N: its iterations where it marks them, as steps (source 'inferred').
-- A mark is a record_function range at the top of its thread, repeated: with a counter at the end
-- of its name (iteration_0, iter1, step 2, batch#3: the counter is the step) or named for an
-- iteration (train_step, iteration, batch: numbered in time order). Of such groups (by thread and
-- name less its counter), those whose ranges cover at least half of the time from their first start
-- to their last end (an iteration is most of the loop; a forward or a logging range is not), the
-- one of the most time is the trace's iterations.
-- @if NOT EXISTS (SELECT 1 FROM step_rows WHERE trace_id = $trace_id)
INSERT INTO step_rows
WITH marks AS (
    SELECT o.name, o.ts_ns, o.dur_ns, o.pid, o.tid,
           regexp_replace(o.name, '[ _#:.-]*[0-9]+$', '') AS base,
           TRY_CAST(regexp_extract(o.name, '([0-9]+)$', 1) AS INTEGER) AS counter
    FROM _ops o JOIN _op_pos p USING (op_id)
    WHERE lower(o.cat) = 'user_annotation' AND p.depth = 0 AND o.dur_ns > 0
      AND NOT EXISTS (SELECT 1 FROM step_rows WHERE trace_id = $trace_id)
), groups AS (
    SELECT pid, tid, base, count(*) AS marks, sum(dur_ns) AS covered_ns,
           count(DISTINCT counter) = count(*) AS numbered
    FROM marks
    GROUP BY pid, tid, base
    HAVING count(*) >= 2 AND base <> ''
       AND (count(counter) = count(*) OR regexp_matches(lower(base), '(^|[^a-z])(iter|iteration|step|batch)([^a-z]|$)|_step$'))
       AND sum(dur_ns) >= 0.5 * (max(ts_ns + dur_ns) - min(ts_ns))
), chosen AS (
    SELECT * FROM groups ORDER BY covered_ns DESC, marks DESC, base, pid, tid LIMIT 1
)
SELECT $trace_id,
       CASE WHEN c.numbered THEN m.counter
            ELSE CAST(row_number() OVER (ORDER BY m.ts_ns, m.name) - 1 AS INTEGER) END,
       m.ts_ns, m.ts_ns + m.dur_ns, 'inferred'
FROM marks m JOIN chosen c ON c.pid = m.pid AND c.tid = m.tid AND c.base = m.base;
-- @end

CREATE OR REPLACE TEMP TABLE _steps AS
SELECT step, ts_ns, end_ns FROM step_rows WHERE trace_id = $trace_id;

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

-- Source lines. A trace recorded with_stack=True holds python_function events, one per Python
-- call, named 'file.py(42): function', nested on their thread as the calls were (torch >= 1.12
-- writes them; built-ins are '<built-in method ...>', modules 'nn.Module: Linear_0'). An op's
-- source frame is the innermost of the user's frames that encloses it on its thread. A frame is
-- the user's unless its file is a library's:
--   - a file in <...> (<frozen importlib._bootstrap>, <string>);
--   - an absolute path (/..., C:/...) through site-packages or dist-packages, through Python's
--     own lib/pythonX.Y, or through a folder named like a module of library_modules of
--     library 'torch' (a torch built from source);
--   - a relative path whose first part, less .py, is a module of library_modules (torch,
--     triton, the standard library: torch writes paths relative to the sys.path entry they were
--     found under, so 'torch/nn/modules/module.py', 'enum.py', 'json/encoder.py').
-- A package installed from PyPI other than those reads as the user's when torch wrote its path
-- relative (click/core.py). The line is the one torch records: for a call made while profiling,
-- the first line of the function (its def), so it names the function rather than the statement;
-- for a frame already running when profiling started, the line it was running then.
-- The names are parsed once each (a trace repeats a few hundred names over millions of events).
-- A trace recorded without stacks has no frames: its ops take none.
-- @if EXISTS (SELECT 1 FROM event_rows WHERE trace_id = $trace_id AND lower(cat) = 'python_function')
CREATE OR REPLACE TEMP TABLE _user_frame_names AS
WITH names AS (
    SELECT name, regexp_extract(name, '^(.+)\((\d+)\): (.*)$', ['file', 'line', 'function']) AS parts
    FROM (SELECT DISTINCT name FROM event_rows
          WHERE trace_id = $trace_id AND lower(cat) = 'python_function' AND name NOT LIKE '<%')
), parsed AS (
    SELECT name, parts.file, TRY_CAST(parts.line AS INTEGER) AS line, parts.function,
           replace(parts.file, '\', '/') AS path
    FROM names WHERE parts.file <> ''
), judged AS (
    SELECT *, regexp_matches(path, '^(/|[A-Za-z]:/)') AS absolute,
           regexp_extract(path, '^([^/]+?)(\.py)?(/|$)', 1) AS first_part
    FROM parsed
)
SELECT name, file, line, function FROM judged
WHERE NOT starts_with(file, '<')
  AND NOT (absolute AND regexp_matches(path, '/(site-packages|dist-packages|lib/python[0-9.]+)/'))
  AND NOT (absolute AND list_has_any(string_split(path, '/'),
                                     (SELECT list(module) FROM library_modules WHERE library = 'torch')))
  AND NOT (NOT absolute AND first_part IN (SELECT module FROM library_modules));

CREATE OR REPLACE TEMP TABLE _user_frames AS
SELECT e.rowid AS frame_id, e.name, e.ts_ns, coalesce(e.dur_ns, 0) AS dur_ns, e.pid, e.tid
FROM event_rows e SEMI JOIN _user_frame_names n ON n.name = e.name
WHERE e.trace_id = $trace_id AND e.ph = 'X' AND e.ts_ns IS NOT NULL AND lower(e.cat) = 'python_function';

-- The same sweep as the op tree's, over the user's frames (a subset of properly nested calls
-- nests too) with each op's start as a probe: the innermost frame open at the probe sits at depth
-- count - 1. Only threads with such frames take part, so a trace without stacks costs nothing.
CREATE OR REPLACE TEMP TABLE _frame_sweep AS
WITH threads AS (
    SELECT pid, tid, row_number() OVER (ORDER BY pid, tid) AS thread FROM (SELECT DISTINCT pid, tid FROM _user_frames)
), points AS (
    SELECT t.thread, f.ts_ns AS t, 1 AS ord, -f.dur_ns AS longest_first, f.frame_id AS id, 1 AS delta
    FROM _user_frames f JOIN threads t USING (pid, tid)
    UNION ALL
    SELECT t.thread, f.ts_ns + f.dur_ns, CASE WHEN f.dur_ns > 0 THEN 0 ELSE 3 END, 0, f.frame_id, -1
    FROM _user_frames f JOIN threads t USING (pid, tid)
    UNION ALL
    SELECT t.thread, o.ts_ns, 2, 0, o.op_id, 0 FROM _ops o JOIN threads t USING (pid, tid)
)
SELECT * FROM (
    SELECT thread, id, delta, row_number() OVER w AS pos,
           (sum(delta) OVER (w ROWS UNBOUNDED PRECEDING) - greatest(delta, 0))::INTEGER AS open_before
    FROM points
    WINDOW w AS (PARTITION BY thread ORDER BY t, ord, longest_first, id)
)
WHERE delta <> -1;

CREATE OR REPLACE TEMP TABLE _op_frames AS
WITH frames AS (
    SELECT id AS frame_id, thread, pos, open_before AS depth FROM _frame_sweep WHERE delta = 1
), probes AS (
    SELECT id AS op_id, thread, pos, open_before - 1 AS want FROM _frame_sweep WHERE delta = 0 AND open_before > 0
)
SELECT p.op_id, n.file AS source_file, n.line AS source_line, n.function AS source_function
FROM probes p
ASOF JOIN frames f ON f.thread = p.thread AND f.depth = p.want AND p.pos > f.pos
JOIN (SELECT frame_id, name FROM _user_frames) u USING (frame_id)
JOIN _user_frame_names n USING (name);

DROP TABLE _frame_sweep;
DROP TABLE _user_frames;
DROP TABLE _user_frame_names;
-- @else
CREATE OR REPLACE TEMP TABLE _op_frames (op_id BIGINT, source_file VARCHAR, source_line INTEGER, source_function VARCHAR);
-- @end

-- The ops with their args, each read once. The join with _op_links picks the ops out of the
-- trace's events: filtered here, the events were estimated at a fifth of their number and DuckDB
-- built its hash table on them, args and all (4.1 CPU-s at 1 GB; 2.6 on _op_links' narrow rows,
-- the args parsed after the join).
INSERT INTO cpu_op_rows
SELECT $trace_id, op_id, cat, name, ts_ns, dur_ns, pid, tid, TRY_CAST(a[1] AS BIGINT), a[2], a[3],
       depth, parent_id, parent, step, NULL, source_file, source_line, source_function
FROM (
    SELECT l.op_id, e.cat, e.name, e.ts_ns, coalesce(e.dur_ns, 0) AS dur_ns, e.pid, e.tid,
           json_extract(e.args, ['$."External id"', '$."Input Dims"', '$."Input type"']) AS a,
           l.depth, l.parent_id, l.parent, l.step, f.source_file, f.source_line, f.source_function
    FROM event_rows e
    JOIN _op_links l ON l.op_id = e.rowid
    LEFT JOIN _op_frames f ON f.op_id = l.op_id
    WHERE e.trace_id = $trace_id
);

-- Memory events with their op and step; `seq` orders each device's events (time, then the
-- file's order), and an allocation's `freed_seq` is its block's free: the next event of its
-- address on its device, a free (NULL: never freed within the trace).
-- @if EXISTS (SELECT 1 FROM _mem)
INSERT INTO memory_rows
WITH placed AS (
    SELECT m.*, e.enclosing_id AS cpu_op_id, CASE WHEN m.ts_ns < s.end_ns THEN s.step END AS step,
           row_number() OVER (PARTITION BY m.device_type, m.device ORDER BY m.ts_ns, m.mem_id) AS seq
    FROM _mem m
    LEFT JOIN _enclosing e ON e.kind = 'rt' AND e.id = m.mem_id
    ASOF LEFT JOIN _steps s ON m.ts_ns >= s.ts_ns
), paired AS (
    SELECT *, lead(seq) OVER by_block AS next_seq, lead(bytes) OVER by_block AS next_bytes,
           lead(ts_ns) OVER by_block AS next_ns
    FROM placed
    WINDOW by_block AS (PARTITION BY device_type, device, addr ORDER BY seq)
)
SELECT $trace_id, mem_id, ts_ns, pid, tid, device_type, device, addr, bytes, total_allocated, total_reserved, seq,
       CASE WHEN bytes > 0 AND next_bytes < 0 THEN next_seq END,
       CASE WHEN bytes > 0 AND next_bytes < 0 THEN next_ns END, cpu_op_id, step
FROM paired;
-- @end
