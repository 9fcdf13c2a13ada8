-- Stage 5: copies and fills, and each device's busy time per step; then the scratch tables go
-- (IF EXISTS: those a guarded block of a trace with nothing for it never made).

INSERT INTO transfer_rows
SELECT $trace_id, op, name,
       CASE WHEN op = 'memcpy' THEN nullif(regexp_extract(name, '^Memcpy ([A-Za-z0-9]+)', 1), '')
            ELSE nullif(regexp_extract(name, '\(([^)]*)\)', 1), '') END,
       bytes, ts_ns, dur_ns, device, stream, correlation, launch_external_id, cpu_op_id, step, cpu_op, cpu_op_path,
       source_file, source_line, source_function
FROM _gpu_ops WHERE op <> 'kernel';

-- How long each device was busy in each step: the union of its kernel, memcpy and memset
-- intervals (kernels on concurrent streams overlap, so their plain sum can exceed the step).
-- An island is a run of intervals that overlap or touch; busy time is the sum of island spans.
INSERT INTO gpu_busy_rows
WITH work AS (
    SELECT step, device, ts_ns AS s, ts_ns + greatest(dur_ns, 0) AS e, op, greatest(dur_ns, 0) AS d
    FROM _gpu_ops WHERE ts_ns IS NOT NULL
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
DROP TABLE _mem;
DROP TABLE _threads;
DROP TABLE _sweep;
DROP TABLE _op_pos;
DROP TABLE _enclosing;
DROP TABLE _op_links;
DROP TABLE _op_frames;
DROP TABLE _op_by_external;
DROP TABLE _launch;
DROP TABLE _launch_by_external;
DROP TABLE _gpu;
DROP TABLE _gpu_links;
DROP TABLE _tree;
DROP TABLE _paths;
DROP TABLE _gpu_ops;
DROP TABLE _op_rules;
DROP TABLE IF EXISTS _op_work;
DROP TABLE IF EXISTS _kernel_work;
DROP TABLE IF EXISTS _work_unsteady;
DROP TABLE IF EXISTS _inferred_op_work;
DROP TABLE IF EXISTS _graph_kernels;
DROP TABLE _comm_names;
DROP TABLE IF EXISTS _comm_ops;
DROP TABLE IF EXISTS _comm_kernels;
DROP TABLE IF EXISTS _cpu_collectives;
