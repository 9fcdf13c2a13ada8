-- Perfetto-compatible views: Perfetto trace processor's tables (slice, thread_track, thread,
-- process, track, flow, counter, counter_track, trace_bounds) and its table functions
-- ancestor_slice(id) and descendant_slice(id), made from tracekit's event_rows as Perfetto's JSON
-- importer makes them from the same file, so a query saved in Perfetto's SQL runs here (see
-- docs/perfetto-views.md). Times are integer nanoseconds, as in Perfetto: the trace's own clock
-- (Kineto's `ts` times 1000), with no zero moved to the trace's start.
-- tracekit holds several traces: every view has a `trace` column, and ids (slice, track, utid,
-- upid, flow, counter) are unique across all of them, numbered from 0 in trace_id then time order
-- (a trace loaded later never renumbers an earlier one's rows; removing a trace renumbers the later
-- ones': keep (trace, ts, name), not an id, to find a row again).

-- The events Perfetto makes slices of: complete events (ph X with a dur) on their thread's track,
-- and instants (ph i or I) on their thread's (s 't', the default), their process's (s 'p') or
-- the trace's (s 'g') track. `pid` and `tid` name the track ('' where the kind has none).
CREATE OR REPLACE VIEW _perfetto_events AS
SELECT trace_id, cat, name, ts_ns, CASE WHEN ph = 'X' THEN dur_ns ELSE 0 END AS dur_ns, args, kind,
       CASE WHEN kind = 'global' THEN '' ELSE coalesce(pid, '') END AS pid,
       CASE WHEN kind = 'thread' THEN coalesce(tid, '') ELSE '' END AS tid
FROM (
    SELECT *, CASE WHEN ph = 'X' OR coalesce(s, 't') = 't' THEN 'thread' WHEN s = 'p' THEN 'process' ELSE 'global' END
                AS kind
    FROM event_rows
    WHERE ts_ns IS NOT NULL AND ((ph = 'X' AND dur_ns IS NOT NULL) OR (ph IN ('i', 'I') AND coalesce(s, 't') IN ('t', 'p', 'g')))
);

-- Every value of every counter event (ph C): one row per arg, as Perfetto reads them (a number, or
-- text that reads as one; NULL for anything else, which Perfetto skips).
CREATE OR REPLACE VIEW _perfetto_counter_values AS
WITH args AS (
    SELECT trace_id, name, id, pid, ts_ns, args, unnest(json_keys(args)) AS arg_key
    FROM event_rows
    WHERE ph = 'C' AND ts_ns IS NOT NULL AND json_type(args) = 'OBJECT'
)
SELECT trace_id, coalesce(pid, '') AS pid, ts_ns,
       name || CASE WHEN id IS NOT NULL AND id <> '' THEN ' id: ' || id ELSE '' END || ' ' || arg_key AS counter_name,
       TRY_CAST(json_extract_string(args, '$."' || replace(arg_key, '"', '\"') || '"') AS DOUBLE) AS value
FROM args;

-- Each track: one per thread (pid, tid) with slices or a thread_name, per process with
-- process-scoped instants, per trace with global instants, and per counter (on its process;
-- `tid` holds the counter's name, as Perfetto names it: "<name> <arg key>", "<name> id: <id> <arg key>").
CREATE OR REPLACE VIEW _perfetto_tracks AS
WITH keys AS (
    SELECT DISTINCT trace_id, kind, pid, tid FROM _perfetto_events
    UNION
    SELECT trace_id, 'thread', coalesce(pid, ''), coalesce(tid, '') FROM event_rows WHERE ph = 'M' AND name = 'thread_name'
    UNION
    SELECT trace_id, 'counter', pid, counter_name FROM _perfetto_counter_values
)
SELECT row_number() OVER (ORDER BY trace_id, kind DESC, pid, tid) - 1 AS track_id, trace_id, kind, pid, tid FROM keys;

-- Every slice with its id (in time order within each trace), its track, its depth and its parent.
-- A sweep over each track's starts and ends (at one instant ends first, then starts, longer ones
-- first, so a parent precedes its child) gives each slice's place (pos) and depth: the slices open
-- when it starts. A zero-length slice opens none (Perfetto closes it where it starts). Its parent:
-- the latest slice to start before it one level up (ASOF on pos), which is the slice it started in.
CREATE OR REPLACE VIEW _perfetto_slices AS
WITH numbered AS (
    SELECT row_number() OVER (ORDER BY e.trace_id, e.ts_ns, e.dur_ns DESC, t.track_id, e.cat, e.name) - 1 AS id,
           e.trace_id, e.cat, e.name, e.ts_ns, e.dur_ns, e.args, t.track_id
    FROM _perfetto_events e JOIN _perfetto_tracks t USING (trace_id, kind, pid, tid)
), points AS (
    SELECT track_id, id, ts_ns AS t, 1 AS ord, -dur_ns AS longest_first, CASE WHEN dur_ns > 0 THEN 1 ELSE 0 END AS delta,
           TRUE AS is_start
    FROM numbered
    UNION ALL
    SELECT track_id, id, ts_ns + dur_ns, 0, 0, -1, FALSE FROM numbered WHERE dur_ns > 0
), swept AS (
    SELECT id, row_number() OVER w AS pos,
           CAST(sum(delta) OVER (w ROWS UNBOUNDED PRECEDING) - greatest(delta, 0) AS INTEGER) AS depth, is_start
    FROM points
    WINDOW w AS (PARTITION BY track_id ORDER BY t, ord, longest_first, id)
), starts AS (
    SELECT n.id, n.trace_id, n.cat, n.name, n.ts_ns, n.dur_ns, n.args, n.track_id, s.pos, s.depth
    FROM numbered n JOIN swept s ON s.id = n.id AND s.is_start
)
SELECT c.id, c.trace_id, c.cat, c.name, c.ts_ns, c.dur_ns, c.args, c.track_id, c.pos, c.depth, p.id AS parent_id
FROM starts c
ASOF LEFT JOIN (SELECT track_id, depth, pos, id FROM starts WHERE dur_ns > 0) p
  ON p.track_id = c.track_id AND p.depth = c.depth - 1 AND c.pos > p.pos;

-- Processes and threads, with the keys that tie them to tracks.
CREATE OR REPLACE VIEW _perfetto_processes AS
WITH pids AS (
    SELECT DISTINCT trace_id, pid FROM _perfetto_tracks WHERE kind <> 'global'
    UNION
    SELECT trace_id, coalesce(pid, '') FROM event_rows WHERE ph = 'M' AND name = 'process_name'
), named AS (
    SELECT trace_id, coalesce(pid, '') AS pid, json_extract_string(args, '$.name') AS name
    FROM event_rows WHERE ph = 'M' AND name = 'process_name'
    -- as a thread's name (_perfetto_threads): the latest, of two at one time the greatest
    QUALIFY row_number() OVER (PARTITION BY trace_id, coalesce(pid, '')
                               ORDER BY ts_ns DESC NULLS LAST, json_extract_string(args, '$.name') DESC NULLS LAST) = 1
)
SELECT row_number() OVER (ORDER BY p.trace_id, p.pid) - 1 AS upid, p.trace_id, p.pid,
       coalesce(n.name, CASE WHEN TRY_CAST(p.pid AS BIGINT) IS NULL AND p.pid <> '' THEN p.pid END) AS name
FROM pids p LEFT JOIN named n ON n.trace_id = p.trace_id AND n.pid = p.pid;

CREATE OR REPLACE VIEW _perfetto_threads AS
WITH named AS (
    SELECT trace_id, coalesce(pid, '') AS pid, coalesce(tid, '') AS tid, json_extract_string(args, '$.name') AS name
    FROM event_rows WHERE ph = 'M' AND name = 'thread_name'
    -- the latest name; two at one time (Kineto names a reused thread id twice), the greatest: a
    -- choice that rows read in any order (a lake's, Spark's) make alike
    QUALIFY row_number() OVER (PARTITION BY trace_id, coalesce(pid, ''), coalesce(tid, '')
                               ORDER BY ts_ns DESC NULLS LAST, json_extract_string(args, '$.name') DESC NULLS LAST) = 1
)
SELECT row_number() OVER (ORDER BY t.trace_id, t.pid, t.tid) - 1 AS utid, t.track_id, t.trace_id, t.pid, t.tid,
       coalesce(n.name, CASE WHEN TRY_CAST(t.tid AS BIGINT) IS NULL AND t.tid <> '' THEN t.tid END) AS name, p.upid
FROM _perfetto_tracks t
JOIN _perfetto_processes p ON p.trace_id = t.trace_id AND p.pid = t.pid
LEFT JOIN named n ON n.trace_id = t.trace_id AND n.pid = t.pid AND n.tid = t.tid
WHERE t.kind = 'thread';

-- @view slice: Perfetto-compatible: Perfetto's `slice` table, one row per slice as Perfetto's JSON
-- importer makes them: every complete (ph X) event and every instant (ph i; dur 0). Kineto's GPU
-- events are slices too, on the thread track of their (pid = device, tid = stream), as Perfetto
-- shows them. Table functions ancestor_slice(id) and descendant_slice(id) give a slice's
-- ancestors and descendants (by parent_id), with these columns. A slice that starts inside another
-- and ends after it (Perfetto's importer drops it) is kept, nested under the one it starts in.
--   id, slice_id: the slice's id (unique across traces; see docs/perfetto-views.md)
--   ts: start, ns on the trace's clock (Kineto's ts times 1000, as Perfetto reads it)
--   dur: duration in ns (0 for an instant)
--   track_id: its track (thread_track, or track for instants of a process or of the trace)
--   category, cat: the event's cat (cpu_op, cuda_runtime, kernel, ...)
--   name: the event's name
--   depth: the slices on its track that enclose it (0 at the top)
--   parent_id: the innermost slice that encloses it on its track; NULL at depth 0
--   arg_set_id, thread_ts, thread_dur: NULL: tracekit keeps args as JSON (column args), and Kineto
--                                      writes no thread time (tts, tdur)
--   args: the event's args as JSON (json_extract(args, '$."External id"') where Perfetto says
--         EXTRACT_ARG(arg_set_id, 'args.External id'))
--   trace: the trace it comes from
CREATE OR REPLACE VIEW slice AS
SELECT s.id, s.ts_ns AS ts, s.dur_ns AS dur, s.track_id, s.cat AS category, s.name, s.depth, s.parent_id,
       CAST(NULL AS BIGINT) AS arg_set_id, CAST(NULL AS BIGINT) AS thread_ts, CAST(NULL AS BIGINT) AS thread_dur,
       s.cat, s.id AS slice_id, s.args, f.trace
FROM _perfetto_slices s JOIN trace_files f USING (trace_id);

-- @view process: Perfetto-compatible: Perfetto's `process` table, one row per pid of a trace
-- (named by a process_name event, or with slices, instants or counters).
--   upid, id: the process's id (unique across traces)
--   pid: the trace's pid, as a number (NULL where the trace writes text, as Kineto's 'Spans')
--   name: its process_name (Kineto writes the program's, e.g. python3), else a pid written as
--         text; NULL without either
--   start_ts, end_ts, parent_upid, uid, cmdline: NULL: a Kineto trace does not say
--   trace: the trace it comes from
CREATE OR REPLACE VIEW process AS
SELECT p.upid, p.upid AS id, TRY_CAST(p.pid AS BIGINT) AS pid, p.name,
       CAST(NULL AS BIGINT) AS start_ts, CAST(NULL AS BIGINT) AS end_ts, CAST(NULL AS BIGINT) AS parent_upid,
       CAST(NULL AS BIGINT) AS uid, CAST(NULL AS VARCHAR) AS cmdline, f.trace
FROM _perfetto_processes p JOIN trace_files f USING (trace_id);

-- @view thread: Perfetto-compatible: Perfetto's `thread` table, one row per thread (pid, tid) of a
-- trace; a GPU stream is a thread (tid = stream) of its device's process (pid = device).
--   utid, id: the thread's id (unique across traces)
--   tid: the trace's tid, as a number (NULL where the trace writes text)
--   name: its thread_name (Kineto: 'thread 480 (python3)', 'stream 7 '), else a tid written as
--         text (Kineto's 'PyTorch Profiler'); NULL without either. Of two names at one time (a
--         thread id Kineto saw twice: 'thread 760 (pt_autograd_0)', 'thread 760 (python3)') the
--         greatest, where Perfetto keeps the one it reads last
--   upid: its process (process.upid)
--   start_ts, end_ts: NULL: a Kineto trace does not say
--   is_main_thread: tid = pid
--   trace: the trace it comes from
CREATE OR REPLACE VIEW thread AS
SELECT t.utid, t.utid AS id, TRY_CAST(t.tid AS BIGINT) AS tid, t.name, t.upid,
       CAST(NULL AS BIGINT) AS start_ts, CAST(NULL AS BIGINT) AS end_ts, t.tid = t.pid AS is_main_thread, f.trace
FROM _perfetto_threads t JOIN trace_files f USING (trace_id);

-- @view track: Perfetto-compatible: Perfetto's `track` table, every timeline a slice or counter sits on.
--   id: the track's id (slice.track_id, counter.track_id; unique across traces)
--   name: a counter's name ("<event name> <arg key>"); 'global instants' for a trace's global
--         instants; NULL for thread and process tracks, as in Perfetto
--   type: 'thread_track', 'process_track', 'global_track' or 'process_counter_track'
--   parent_id: NULL: JSON traces have no track hierarchy
--   trace: the trace it comes from
CREATE OR REPLACE VIEW track AS
SELECT t.track_id AS id,
       CASE t.kind WHEN 'counter' THEN t.tid WHEN 'global' THEN 'global instants' END AS name,
       CASE t.kind WHEN 'thread' THEN 'thread_track' WHEN 'process' THEN 'process_track'
                   WHEN 'global' THEN 'global_track' ELSE 'process_counter_track' END AS type,
       CAST(NULL AS BIGINT) AS parent_id, f.trace
FROM _perfetto_tracks t JOIN trace_files f USING (trace_id);

-- @view thread_track: Perfetto-compatible: Perfetto's `thread_track` table, the track of each thread.
--   id: the track's id (slice.track_id)
--   name: NULL, as Perfetto leaves a JSON thread's track (its thread has the name)
--   type: 'thread_track'
--   utid: its thread (thread.utid)
--   parent_id: NULL
--   trace: the trace it comes from
CREATE OR REPLACE VIEW thread_track AS
SELECT t.track_id AS id, CAST(NULL AS VARCHAR) AS name, 'thread_track' AS type, t.utid,
       CAST(NULL AS BIGINT) AS parent_id, f.trace
FROM _perfetto_threads t JOIN trace_files f USING (trace_id);

-- @view process_track: Perfetto-compatible: Perfetto's `process_track` table, the track of each
-- process's process-scoped instants (ph i, s 'p').
--   id: the track's id (slice.track_id)
--   name: NULL
--   type: 'process_track'
--   upid: its process (process.upid)
--   trace: the trace it comes from
CREATE OR REPLACE VIEW process_track AS
SELECT t.track_id AS id, CAST(NULL AS VARCHAR) AS name, 'process_track' AS type, p.upid, f.trace
FROM _perfetto_tracks t
JOIN _perfetto_processes p ON p.trace_id = t.trace_id AND p.pid = t.pid
JOIN trace_files f ON f.trace_id = t.trace_id
WHERE t.kind = 'process';

-- @view counter_track: Perfetto-compatible: Perfetto's `counter_track` table, one track per
-- counter, that is per arg of a counter event (ph C) on its process, named as Perfetto names it.
--   id: the track's id (counter.track_id)
--   name: "<event name> <arg key>" ("<event name> id: <id> <arg key>" for an event with an id)
--   type: 'process_counter_track'
--   unit, description: NULL: a JSON trace does not say
--   upid: its process (process.upid)
--   trace: the trace it comes from
CREATE OR REPLACE VIEW counter_track AS
SELECT t.track_id AS id, t.tid AS name, 'process_counter_track' AS type, CAST(NULL AS VARCHAR) AS unit,
       CAST(NULL AS VARCHAR) AS description, p.upid, f.trace
FROM _perfetto_tracks t
JOIN _perfetto_processes p ON p.trace_id = t.trace_id AND p.pid = t.pid
JOIN trace_files f ON f.trace_id = t.trace_id
WHERE t.kind = 'counter';

-- @view process_counter_track: Perfetto-compatible: Perfetto's `process_counter_track`, the same
-- rows as counter_track (every counter of a JSON trace is a process's).
--   id, name, type, unit, description, upid, trace: as in counter_track
CREATE OR REPLACE VIEW process_counter_track AS
SELECT id, name, type, unit, description, upid, trace FROM counter_track;

-- @view counter: Perfetto-compatible: Perfetto's `counter` table, one row per value of a counter
-- event (ph C): each numeric arg is a value of its own track. (Kineto writes no counter events;
-- its memory records are instants, in slice.)
--   id: the value's id (unique across traces)
--   ts: when, ns on the trace's clock
--   track_id: its counter (counter_track.id)
--   value: the arg's value (a number, or text that reads as one)
--   arg_set_id: NULL
--   trace: the trace it comes from
CREATE OR REPLACE VIEW counter AS
SELECT row_number() OVER (ORDER BY v.trace_id, v.ts_ns, t.track_id) - 1 AS id, v.ts_ns AS ts, t.track_id,
       v.value, CAST(NULL AS BIGINT) AS arg_set_id, f.trace
FROM _perfetto_counter_values v
JOIN _perfetto_tracks t ON t.trace_id = v.trace_id AND t.kind = 'counter' AND t.pid = v.pid AND t.tid = v.counter_name
JOIN trace_files f ON f.trace_id = v.trace_id
WHERE v.value IS NOT NULL;

-- The slice each flow event (ph s, f) binds to on its thread's track: for a start, and an end
-- with bp 'e', the innermost slice open there (the deepest of those that start latest at or before
-- it, or, where that one has ended, the deepest that encloses it); for any other end, the next
-- slice to start there. `nth` pairs the k-th start of a (cat, name, id) with its k-th end, as
-- Perfetto's v1 flows pair them. Zero-length slices enclose nothing.
CREATE OR REPLACE VIEW _perfetto_flow_ends AS
WITH ends AS (
    SELECT e.trace_id, e.cat, e.name, e.id AS flow_key, e.ph, e.ts_ns, t.track_id,
           e.ph = 's' OR e.bp = 'e' AS binds_enclosing,
           row_number() OVER (PARTITION BY e.trace_id, e.cat, e.name, e.id, e.ph ORDER BY e.ts_ns) AS nth
    FROM event_rows e
    JOIN _perfetto_tracks t ON t.trace_id = e.trace_id AND t.kind = 'thread' AND t.pid = coalesce(e.pid, '')
                           AND t.tid = coalesce(e.tid, '')
    WHERE e.ph IN ('s', 'f') AND e.id IS NOT NULL AND e.ts_ns IS NOT NULL
), slices AS (
    SELECT track_id, ts_ns, ts_ns + dur_ns AS end_ns, dur_ns, pos, depth, id FROM _perfetto_slices
), open_slices AS (
    SELECT * FROM slices WHERE dur_ns > 0
), latest_start AS (
    SELECT x.*, o.ts_ns AS start_ns
    FROM (SELECT * FROM ends WHERE binds_enclosing) x
    ASOF LEFT JOIN open_slices o ON o.track_id = x.track_id AND x.ts_ns >= o.ts_ns
), latest AS (
    SELECT l.*, o.id AS slice_id, o.end_ns > l.ts_ns AS encloses
    FROM latest_start l LEFT JOIN open_slices o ON o.track_id = l.track_id AND o.ts_ns = l.start_ns
    QUALIFY row_number() OVER (PARTITION BY l.trace_id, l.cat, l.name, l.flow_key, l.ph, l.nth ORDER BY o.pos DESC) = 1
), outer_enclosing AS (
    SELECT l.trace_id, l.cat, l.name, l.flow_key, l.ph, l.nth, o.id AS slice_id
    FROM latest l JOIN open_slices o ON o.track_id = l.track_id AND o.ts_ns <= l.ts_ns AND o.end_ns > l.ts_ns
    WHERE NOT l.encloses
    QUALIFY row_number() OVER (PARTITION BY l.trace_id, l.cat, l.name, l.flow_key, l.ph, l.nth ORDER BY o.depth DESC) = 1
), following AS (
    SELECT x.trace_id, x.cat, x.name, x.flow_key, x.ph, x.nth, s.id AS slice_id
    FROM (SELECT * FROM ends WHERE NOT binds_enclosing) x
    ASOF LEFT JOIN slices s ON s.track_id = x.track_id AND s.ts_ns >= x.ts_ns
)
SELECT trace_id, cat, name, flow_key, ph, nth, slice_id FROM latest WHERE encloses
UNION ALL SELECT * FROM outer_enclosing
UNION ALL SELECT * FROM following;

-- @view flow: Perfetto-compatible: Perfetto's `flow` table, one row per flow, from a flow start (ph s)
-- to the end (ph f) of the same cat, name and id. Kineto's ac2g flows lead from a launch
-- (cudaLaunchKernel...) to the kernel or
-- copy it launched, its fwdbwd flows from a forward op to its backward op. A flow whose start or
-- end binds to no slice is left out, as Perfetto leaves it.
--   id: the flow's id (unique across traces)
--   slice_out: the slice it leaves (slice.id)
--   slice_in: the slice it enters (slice.id)
--   trace_id: the flow's id in the trace, as a number (Perfetto's name: the id the file gives it,
--             which for ac2g is the launch's correlation id); NULL where it is not a number
--   arg_set_id: NULL
--   category: the flow events' cat (ac2g, fwdbwd, ...)
--   trace: the trace it comes from (tracekit's name for the trace, not trace_id)
CREATE OR REPLACE VIEW flow AS
SELECT row_number() OVER (ORDER BY o.trace_id, o.slice_id, i.slice_id) - 1 AS id, o.slice_id AS slice_out,
       i.slice_id AS slice_in, TRY_CAST(o.flow_key AS BIGINT) AS trace_id, CAST(NULL AS BIGINT) AS arg_set_id,
       o.cat AS category, f.trace
FROM _perfetto_flow_ends o
JOIN _perfetto_flow_ends i ON i.trace_id = o.trace_id AND i.cat IS NOT DISTINCT FROM o.cat
                          AND i.name IS NOT DISTINCT FROM o.name AND i.flow_key = o.flow_key AND i.nth = o.nth
JOIN trace_files f ON f.trace_id = o.trace_id
WHERE o.ph = 's' AND i.ph = 'f' AND o.slice_id IS NOT NULL AND i.slice_id IS NOT NULL;

-- @view trace_bounds: Perfetto-compatible: Perfetto's `trace_bounds`, one row per trace: the first
-- start and the last end of its slices and counter values.
--   start_ts: the first start, ns on the trace's clock
--   end_ts: the last end
--   trace: the trace
CREATE OR REPLACE VIEW trace_bounds AS
WITH spans AS (
    SELECT trace_id, ts_ns, ts_ns + greatest(dur_ns, 0) AS end_ns FROM _perfetto_slices
    UNION ALL
    SELECT trace_id, ts_ns, ts_ns FROM _perfetto_counter_values
)
SELECT min(s.ts_ns) AS start_ts, max(s.end_ns) AS end_ts, f.trace
FROM spans s JOIN trace_files f USING (trace_id)
GROUP BY f.trace;

-- ancestor_slice(id): the slices above slice `id`, its parent first, with slice's columns, as
-- Perfetto's table function of that name (`SELECT * FROM ancestor_slice(42)`).
CREATE OR REPLACE MACRO ancestor_slice(slice_id) AS TABLE
WITH RECURSIVE slices AS MATERIALIZED (SELECT * FROM slice),
up(id, hops) AS (
    SELECT parent_id, 1 FROM slices WHERE id = slice_id AND parent_id IS NOT NULL
    UNION ALL
    SELECT s.parent_id, up.hops + 1 FROM slices s JOIN up ON s.id = up.id WHERE s.parent_id IS NOT NULL
)
SELECT s.* FROM slices s JOIN up USING (id) ORDER BY up.hops;

-- descendant_slice(id): the slices below slice `id` (children, their children, ...), in time
-- order, with slice's columns, as Perfetto's table function of that name.
CREATE OR REPLACE MACRO descendant_slice(slice_id) AS TABLE
WITH RECURSIVE slices AS MATERIALIZED (SELECT * FROM slice),
down(id) AS (
    SELECT id FROM slices WHERE parent_id = slice_id
    UNION ALL
    SELECT s.id FROM slices s JOIN down ON s.parent_id = down.id
)
SELECT s.* FROM slices s JOIN down USING (id) ORDER BY s.ts, s.depth;
