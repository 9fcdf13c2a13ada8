-- gpu_idle: gaps on a GPU between its kernels, copies and fills inside steady steps, with what the CPU was doing then
-- why: while the GPU waits for work the step runs on without it: a sync or a device-to-host copy drained its queue, data loading held the CPU, the CPU computed on host tensors (input preparation on the main thread), the thread stalled (a sleep, a lock, host-side work), or Python and op dispatch could not launch kernels as fast as the GPU ran them, or the host's work around a CUDA graph's replay (input copies, guards) held it
-- fix: per cause (the finding says which): drop the sync or read results every N steps; for an op that sizes its output by the GPU's data (a boolean index's nonzero), multiply by the mask or give the size; for GradScaler's inf/NaN check before the optimizer's step, a fused optimizer (fused=True) or bf16 autocast without a scaler; load data in DataLoader workers with pinned memory; prepare inputs in workers or on the GPU; move a stall off the step; around a CUDA graph's replay, keep inputs in its static buffers; for slow launching, capture the step in a CUDA graph or torch.compile it, fuse small ops, or give each kernel more work
-- saving: estimate: the time of the gaps per steady step (NULL for a trace without steps: no step to save it in), an upper bound; the replay of the cause's fix (whatif) says what the step would save
-- unsaved: a gap whose cause no named change removes: work queued behind another stream or an event, a launch not in the trace, or the host's work around a CUDA graph's replay
-- params:
--   trace = NULL: only this trace
--   min_gap_us = 50: ignore gaps shorter than this; a launch costs the CPU 5-20 µs, so shorter gaps are launch latency, not a stall (the training captures in tests/data/h200 idle 11-14 ms of a 17-19 ms step in gaps of 50 µs or more)
--   step_end_syncs = 0: 1 also counts the idle a bare synchronize with nothing launched after it in its step held back (a loop that syncs at the end of each step to time it, as tracekit capture does); left out by default, as host_sync leaves those syncs out; a value read there (loss.item() to log it, .cpu()) counts either way, as does the CPU's own time after such a sync
--   min_host_op_us = 100: a gap the CPU spent in an ATen op that made no CUDA call (computing on host tensors: input preparation, a metric) for at least this long is host work, not launching
--   min_stall_us = 1000: a gap the CPU's own time explains is a stall when the launching thread made no runtime call, and no other thread of its process launched GPU work, for at least this long before the launch (a sleep, a lock, logging); shorter stretches are the pace of Python launching kernels, and a thread that waited while another launched (autograd's thread through the forward) is no stall
--   max_evidence = 20: at most this many gaps named in the evidence
WITH busy AS (
    SELECT 'kernels' AS source, trace, device, step, name, correlation, ts_us, ts_us + dur_us AS end_us FROM kernels
    UNION ALL
    SELECT 'memcpy', trace, device, step, name, correlation, ts_us, ts_us + dur_us FROM memcpy
    UNION ALL
    SELECT 'memset', trace, device, step, name, correlation, ts_us, ts_us + dur_us FROM memset
), ordered AS (
    SELECT b.*,
           -- Busy until the latest end of all earlier work on the device: streams overlap.
           max(b.end_us) OVER (PARTITION BY b.trace, b.device ORDER BY b.ts_us, b.end_us, b.correlation, b.name
                               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS idle_from_us,
           lag(b.step) OVER (PARTITION BY b.trace, b.device ORDER BY b.ts_us, b.end_us, b.correlation, b.name) AS prev_step
    FROM busy b
    WHERE $trace IS NULL OR b.trace = $trace
), launches AS (
    -- The runtime call that queued each GPU op (one call queues a whole CUDA graph); prev_end_us:
    -- where its thread's call before it ended (its own time runs from there).
    SELECT trace, correlation, pid, tid, step, name, ts_us, end_us, prev_end_us, prev_work_end_us
    FROM (SELECT r.trace, r.correlation, r.pid, r.tid, r.step, r.name, r.ts_us, r.ts_us + r.dur_us AS end_us,
                 lag(r.ts_us + r.dur_us) OVER (PARTITION BY r.trace, r.pid, r.tid ORDER BY r.ts_us, r.dur_us, r.correlation) AS prev_end_us,
                 -- where the thread's last call other than a query ended (cudaStreamIsCapturing, which
                 -- copy_ makes before its copy, asks and does nothing; a malloc does something)
                 max(CASE WHEN NOT regexp_matches(r.name, 'IsCapturing|GetDevice|GetLastError|PeekAtLastError|GetErrorString|GetAttribute|Occupancy|GetFuncBySymbol|GetVersion')
                          THEN r.ts_us + r.dur_us END)
                     OVER (PARTITION BY r.trace, r.pid, r.tid ORDER BY r.ts_us, r.dur_us, r.correlation
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_work_end_us
          FROM runtime r
          WHERE $trace IS NULL OR r.trace = $trace) x
    WHERE correlation IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY trace, correlation ORDER BY ts_us, tid, name) = 1
), process_launches AS (
    -- Where the process's last call that queued GPU work, on any of its threads, ended before each
    -- such call: a thread silent for a while is no stall when another launched meanwhile (autograd's
    -- thread, idle through the forward the main thread launched, takes over at backward()).
    SELECT l.trace, l.correlation,
           max(l.end_us) OVER (PARTITION BY l.trace, l.pid ORDER BY l.ts_us, l.end_us, l.correlation
                               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS process_prev_end_us
    FROM launches l
    WHERE EXISTS (SELECT 1 FROM busy b WHERE b.trace = l.trace AND b.correlation = l.correlation)
), graphed_steps AS (
    -- Steps most of whose kernels a CUDA graph replayed (one graph launch ran them): their launches
    -- are already one, and the CPU's time between replays is the host's work around them.
    SELECT b.trace, b.step
    FROM busy b
    LEFT JOIN (SELECT DISTINCT trace, correlation FROM runtime WHERE name LIKE '%GraphLaunch%') g
         ON g.trace = b.trace AND g.correlation = b.correlation
    WHERE b.source = 'kernels'
    GROUP BY b.trace, b.step
    HAVING count(g.correlation) >= 0.5 * count(*)
), gaps AS (
    -- Idle time before a GPU op, when it and the op before it both belong to steady steps.
    SELECT o.trace, o.device, o.idle_from_us AS gap_start_us, o.ts_us - o.idle_from_us AS gap_us, w.steps,
           o.source AS next_source, o.name AS next_name, o.correlation AS next_correlation,
           o.ts_us AS next_ts_us, o.end_us - o.ts_us AS next_dur_us,
           l.pid, l.tid, l.ts_us AS launch_us, l.end_us AS launch_end_us, l.ts_us - l.prev_end_us AS stretch_us,
           -- the thread made no call, and no thread of its process launched, for this long
           l.ts_us - greatest(l.prev_end_us, pl.process_prev_end_us) AS quiet_us,
           l.prev_work_end_us,
           l.name LIKE '%GraphLaunch%' OR gs.step IS NOT NULL AS graphed
    FROM ordered o
    JOIN steady_window w ON w.trace = o.trace AND w.step IS NOT DISTINCT FROM o.step
    JOIN steady_window p ON p.trace = o.trace AND p.step IS NOT DISTINCT FROM o.prev_step
    LEFT JOIN launches l ON l.trace = o.trace AND l.correlation = o.correlation
    LEFT JOIN process_launches pl ON pl.trace = o.trace AND pl.correlation = o.correlation
    LEFT JOIN graphed_steps gs ON gs.trace = o.trace AND gs.step IS NOT DISTINCT FROM o.step
    WHERE o.ts_us - o.idle_from_us >= CAST($min_gap_us AS DOUBLE)
), last_launch AS (
    SELECT l.trace, l.step, max(l.ts_us) AS last_launch_us
    FROM launches l
    WHERE EXISTS (SELECT 1 FROM busy b WHERE b.trace = l.trace AND b.correlation = l.correlation)
    GROUP BY l.trace, l.step
), wait_calls AS (
    -- CPU calls that wait for the GPU: syncs, and the calls of copies that block (to the host, or from pageable memory).
    SELECT r.trace, r.name, r.ts_us, r.dur_us, r.correlation, r.cpu_op, m.kind AS copy_kind,
           -- the op that made it, the outermost of its chain, as host_sync names a sync's fix: the
           -- same .item() found by both rules is one fix, one saving
           CASE WHEN regexp_matches(coalesce(o.op_path, ''), '^[a-z_]+::')
                THEN trim(regexp_extract(o.op_path, '^([^→]*)', 1)) END AS caller_op,
           s.optimizer AS scaler_before, coalesce(m.name ILIKE '%pageable%', FALSE) AS pageable,
           -- an op that sizes its output by the GPU's data reads the size (host_sync names them alike)
           nullif(regexp_extract(coalesce(o.op_path, r.cpu_op, ''), '(aten::(nonzero|nonzero_numpy|masked_select|_unique|_unique2|unique_consecutive|unique_dim|unique_dim_consecutive|repeat_interleave|bincount))( →|$)', 1), '') AS shape_op,
           -- A bare synchronize after the step's last launch is a loop timing its steps; a value
           -- read there (loss.item() to log it, .cpu()) is the user's, and holds the next step back.
           coalesce(r.ts_us >= x.last_launch_us, TRUE) AND m.kind IS NULL AND coalesce(r.cpu_op, '') NOT LIKE 'aten::%' AS ends_step
    FROM runtime r
    LEFT JOIN memcpy m ON m.trace = r.trace AND m.correlation = r.correlation
    LEFT JOIN last_launch x ON x.trace = r.trace AND x.step IS NOT DISTINCT FROM r.step
    LEFT JOIN cpu_ops o ON o.trace = r.trace AND o.op_id = r.cpu_op_id
    -- a call inside GradScaler's read (its copy, its sync)
    LEFT JOIN scaler_checks s ON s.trace = r.trace AND s.pid = r.pid AND s.tid = r.tid
                             AND r.ts_us >= s.ts_us AND r.ts_us <= s.ts_us + s.dur_us
    WHERE ($trace IS NULL OR r.trace = $trace)
      AND (regexp_matches(r.name, '^(cuda|hip)(Device|Stream|Event)Synchronize|^cu(Ctx|Stream|Event)Synchronize')
           OR m.kind = 'DtoH' OR m.name LIKE '%Pageable%')
), waits AS (
    -- GradScaler's read before the optimizer's step, and a sizing op's, are no plain wait of the user's code
    SELECT *, CASE WHEN scaler_before IS NOT NULL THEN 'scaler' WHEN shape_op IS NOT NULL THEN 'shape'
                   WHEN copy_kind IS NULL THEN 'sync' ELSE 'copy' END AS kind
    FROM wait_calls
), wait_sweep AS (
    -- The latest wait to start at or before each gap's start: a sort, not a gaps-by-waits join.
    SELECT x.*, max(x.wait_ts_us) OVER (PARTITION BY x.trace ORDER BY x.ts_us, x.is_gap
                                        ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS last_wait_us
    FROM (SELECT trace, ts_us, 0 AS is_gap, ts_us AS wait_ts_us, CAST(NULL AS INTEGER) AS device FROM waits
          UNION ALL
          SELECT trace, gap_start_us, 1, CAST(NULL AS DOUBLE), device FROM gaps) x
), split AS (
    -- A wait the CPU was in when the GPU ran out of work owns the part of the gap it held the CPU
    -- back by: without it, the CPU would have gone on that much earlier. The rest of the gap is the
    -- CPU's own time to the next launch. Work queued before the gap began waited on the GPU's side.
    SELECT g.trace, g.device, g.gap_start_us, g.gap_us, g.steps, g.next_source, g.next_name, g.next_correlation,
           g.next_ts_us, g.next_dur_us, g.pid, g.tid, g.launch_us, g.launch_end_us, g.stretch_us, g.quiet_us, g.prev_work_end_us, g.graphed,
           w.name AS wait_name, w.kind AS wait_kind, w.pageable, w.ends_step, w.ts_us AS wait_ts_us, w.dur_us AS wait_dur_us,
           w.correlation AS wait_correlation, w.cpu_op AS wait_op, w.caller_op, w.scaler_before, w.shape_op,
           CASE WHEN g.launch_us IS NULL OR g.launch_end_us <= g.gap_start_us OR w.ts_us IS NULL THEN 0
                ELSE least(g.gap_us, g.gap_start_us - w.ts_us) END AS wait_us,
           greatest(g.gap_start_us, coalesce(w.ts_us + w.dur_us, g.gap_start_us)) AS cpu_from_us
    FROM gaps g
    JOIN wait_sweep s ON s.is_gap = 1 AND s.trace = g.trace AND s.ts_us = g.gap_start_us AND s.device IS NOT DISTINCT FROM g.device
    LEFT JOIN waits w ON w.trace = g.trace AND w.ts_us = s.last_wait_us AND g.gap_start_us <= w.ts_us + w.dur_us
    QUALIFY row_number() OVER (PARTITION BY g.trace, g.device, g.gap_start_us ORDER BY w.dur_us DESC, w.correlation) = 1
), probes AS (
    -- When the CPU's own part of a gap is, the launching thread's time from the wait (or the gap's
    -- start) to the launch, look at its midpoint.
    SELECT s.trace, s.device, s.gap_start_us, s.pid, s.tid, (s.cpu_from_us + greatest(s.launch_us, s.cpu_from_us)) / 2 AS probe_us
    FROM split s WHERE s.gap_us > s.wait_us AND s.launch_end_us > s.gap_start_us
), probe_depths AS (
    -- Each probe at each nesting depth its thread has ops at.
    SELECT p.trace, p.device, p.gap_start_us, p.pid, p.tid, p.probe_us, d.depth
    FROM probes p JOIN (SELECT DISTINCT trace, pid, tid, depth FROM cpu_ops
                        WHERE $trace IS NULL OR trace = $trace) d USING (trace, pid, tid)
), op_sweep AS (
    -- CPU ops of one nesting depth never overlap on a thread, so the one open at a probe, if any,
    -- is the latest of that depth to start at or before it: found by a sort of the thread's ops
    -- and probes, as wait_sweep finds waits. Not DuckDB's ASOF JOIN: Spark has none, and over every
    -- trace of a 1 GB database (no $trace) it ran for more than 15 minutes where this takes 1.2 s.
    SELECT x.*, last_value(x.op_id IGNORE NULLS) OVER (PARTITION BY x.trace, x.pid, x.tid, x.depth
                                                       ORDER BY x.ts_us, x.is_probe, x.op_id
                                                       ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS open_op_id
    FROM (SELECT c.trace, c.pid, c.tid, c.depth, c.ts_us, 0 AS is_probe, c.op_id,
                 CAST(NULL AS INTEGER) AS device, CAST(NULL AS DOUBLE) AS gap_start_us
          FROM cpu_ops c JOIN (SELECT DISTINCT trace, pid, tid FROM probes) t USING (trace, pid, tid)
          UNION ALL
          SELECT trace, pid, tid, depth, probe_us, 1, NULL, device, gap_start_us FROM probe_depths) x
), open_ops AS (
    -- the sweep carries each op's id alone (a sort of every op of the probes' threads); the few
    -- ops found open are read back whole
    SELECT s.trace, s.device, s.gap_start_us, c.name, c.cat, s.depth, c.op_id, c.ts_us, c.dur_us, c.parent
    FROM op_sweep s
    JOIN cpu_ops c ON c.trace = s.trace AND c.op_id = s.open_op_id
    WHERE s.is_probe = 1 AND s.ts_us <= c.ts_us + c.dur_us
), busy_cpu AS (
    -- What the launching thread was doing: the outermost CPU op open (a record_function range where
    -- no op was, ProfilerStep#N aside); data loading where any op open says so.
    SELECT o.trace, o.device, o.gap_start_us, o.name, o.op_id, o.ts_us, o.dur_us, o.parent,
           bool_or(o.name ILIKE '%dataloader%') OVER (PARTITION BY o.trace, o.device, o.gap_start_us) AS loading
    FROM open_ops o
    WHERE o.name NOT LIKE 'ProfilerStep#%'
    QUALIFY row_number() OVER (PARTITION BY o.trace, o.device, o.gap_start_us
                               ORDER BY o.cat = 'cpu_op' DESC, CASE WHEN o.cat = 'cpu_op' THEN o.depth ELSE -o.depth END, o.op_id) = 1
), causes AS (
    -- Each gap's parts, by cause, each with the event it is explained by and the gap's span to draw.
    SELECT s.trace, s.device, s.steps, s.gap_start_us, s.gap_us, s.wait_us AS idle_us, s.wait_kind AS cause, s.ends_step,
           s.wait_name || coalesce(' in ' || regexp_replace(s.wait_op, '#[0-9]+$', '#N'), '')
             || CASE WHEN s.shape_op IS NOT NULL AND s.shape_op <> s.wait_op THEN ' of ' || s.shape_op ELSE '' END AS doing,
           'runtime' AS source, s.wait_name AS name, s.wait_ts_us AS ts_us, s.wait_dur_us AS dur_us,
           s.wait_correlation AS correlation, CAST(NULL AS BIGINT) AS cpu_op_id,
           s.wait_name, s.wait_op, s.caller_op, s.pageable, CAST(NULL AS DOUBLE) AS stretch_us, CAST(NULL AS DOUBLE) AS quiet_us,
           s.scaler_before, s.shape_op
    FROM split s WHERE s.wait_us > 0
    UNION ALL
    SELECT s.trace, s.device, s.steps, s.gap_start_us, s.gap_us, s.gap_us - s.wait_us,
           CASE WHEN s.launch_us IS NULL THEN 'unlaunched' WHEN s.launch_end_us <= s.gap_start_us THEN 'queued'
                WHEN c.loading THEN 'data'
                -- an op on host tensors held the thread: work the CPU does, not launching
                WHEN c.name LIKE 'aten::%' AND c.dur_us >= CAST($min_host_op_us AS DOUBLE)
                     -- the user's own op, not one inside another op, and no view or allocation
                     AND NOT regexp_matches(coalesce(c.parent, ''), '^aten::|Backward|^autograd::')
                     AND NOT regexp_matches(c.name, '^aten::(t|view|_unsafe_view|reshape|_reshape_alias|flatten|unflatten|split|split_with_sizes|chunk|transpose|permute|expand|squeeze|unsqueeze|slice|select|narrow|as_strided|detach|alias|contiguous|empty|empty_like|empty_strided|resize_|set_|lift_fresh|numpy_T)$')
                     -- between the thread's last call that queued GPU work or waited and the launch: it made none
                     AND c.ts_us >= coalesce(s.prev_work_end_us, s.launch_us - s.stretch_us) AND c.ts_us + c.dur_us <= s.launch_us THEN 'host'
                WHEN s.quiet_us >= CAST($min_stall_us AS DOUBLE) THEN 'stall'
                -- the next work is a CUDA graph's replay, or comes before one in a step a graph runs
                WHEN s.graphed THEN 'graph' ELSE 'cpu' END,
           FALSE,
           CASE WHEN s.launch_us IS NULL OR s.launch_end_us <= s.gap_start_us THEN s.next_name
                ELSE coalesce(c.name, 'Python between ops') END,
           CASE WHEN c.name IS NULL THEN s.next_source ELSE 'cpu_ops' END,
           coalesce(c.name, s.next_name), coalesce(c.ts_us, s.next_ts_us), coalesce(c.dur_us, s.next_dur_us),
           CASE WHEN c.name IS NULL THEN s.next_correlation END, c.op_id,
           NULL, NULL, NULL, FALSE, s.stretch_us, s.quiet_us, NULL, NULL
    FROM split s LEFT JOIN busy_cpu c ON c.trace = s.trace AND c.device IS NOT DISTINCT FROM s.device AND c.gap_start_us = s.gap_start_us
    WHERE s.gap_us > s.wait_us
), counted AS (
    SELECT * FROM causes WHERE NOT (ends_step AND CAST($step_end_syncs AS INTEGER) = 0)
), by_doing AS (
    SELECT trace, cause, doing, sum(round(idle_us * 1e3)) / 1e3 / any_value(steps) AS idle_us,
           row_number() OVER (PARTITION BY trace, cause ORDER BY sum(round(idle_us * 1e3)) DESC, doing) AS rank
    FROM counted GROUP BY trace, cause, doing
), groups AS (
    SELECT c.trace, c.cause, any_value(c.steps) AS steps, count(*) AS gaps, sum(round(c.idle_us * 1e3)) / 1e3 AS idle_us, max(c.gap_us) AS longest_us,
           count(DISTINCT c.device) AS devices, max(c.stretch_us) AS longest_stretch_us,
           max(c.quiet_us) AS longest_quiet_us,
           -- What the cause's fix acts on: the waits by name, or by the op that made them; the stalls from the shortest.
           string_agg(DISTINCT coalesce(c.caller_op, c.wait_name), '|' ORDER BY coalesce(c.caller_op, c.wait_name)) AS sync_targets,
           string_agg(DISTINCT coalesce(c.caller_op, c.wait_op, c.wait_name), '|'
                      ORDER BY coalesce(c.caller_op, c.wait_op, c.wait_name)) AS copy_targets, bool_or(c.pageable) AS pageable,
           string_agg(DISTINCT c.shape_op, '|' ORDER BY c.shape_op) AS shape_ops,
           -- the fix of GradScaler's reads: a fused optimizer, where every read came before one that has a fused step
           bool_and(c.scaler_before IN ('Adam', 'AdamW', 'SGD')) AS scaler_fusable, any_value(c.scaler_before) AS scaler_before,
           min(c.stretch_us) FILTER (WHERE c.cause = 'stall') AS shortest_stall_us,
           to_json(list(struct_pack(source := c.source, trace := c.trace, name := c.name,
                                    ts_ns := CAST(round(c.ts_us * 1000) AS BIGINT), dur_ns := CAST(round(c.dur_us * 1000) AS BIGINT),
                                    correlation := c.correlation, cpu_op_id := c.cpu_op_id, device := c.device,
                                    gap_ts_ns := CAST(round(c.gap_start_us * 1000) AS BIGINT),
                                    gap_dur_ns := CAST(round(c.gap_us * 1000) AS BIGINT))
                        ORDER BY c.idle_us DESC, c.gap_start_us, c.device)[1:CAST($max_evidence AS INTEGER)]) AS evidence
    FROM counted c GROUP BY c.trace, c.cause
), tops AS (
    SELECT trace, cause, string_agg(format('{} {:.1f} µs', doing, idle_us), '; ' ORDER BY rank) AS top_doing,
           max(CASE WHEN rank = 1 THEN doing END) AS first_doing
    FROM by_doing WHERE rank <= 3 GROUP BY trace, cause
)
SELECT g.trace, 'gpu_idle' AS rule,
       CASE WHEN g.idle_us / g.steps >= 0.10 * s.step_us THEN 'high'
            WHEN g.idle_us / g.steps >= 0.03 * s.step_us THEN 'medium' ELSE 'low' END AS severity,
       format('GPU idle {} in gaps of {} µs or more while {}',
              CASE WHEN s.has_steps THEN format('{:.1f} µs per step ({:.0f}% of the step''s CPU span)', g.idle_us / g.steps,
                                                100.0 * g.idle_us / g.steps / s.step_us)
                   ELSE format('{:.1f} µs in a trace without steps ({:.0f}% of it)', g.idle_us,
                               100.0 * g.idle_us / s.step_us) END, $min_gap_us,
              CASE g.cause WHEN 'sync' THEN 'the CPU waited in ' || x.first_doing
                           WHEN 'scaler' THEN 'the CPU waited for GradScaler''s inf/NaN check before the optimizer''s step: ' || x.first_doing
                           WHEN 'shape' THEN 'the CPU waited to read the size of an output the GPU''s data sets: ' || x.first_doing
                           WHEN 'copy' THEN 'the CPU waited for a copy: ' || x.first_doing
                           WHEN 'data' THEN 'the CPU loaded data'
                           WHEN 'host' THEN 'the CPU computed on host tensors, making no CUDA call (most in ' || x.first_doing || ')'
                           WHEN 'stall' THEN format('the CPU stalled: no runtime call, and no launch on another thread, for up to {:.1f} ms (most in {})',
                                                    g.longest_quiet_us / 1000, x.first_doing)
                           WHEN 'cpu' THEN 'the CPU ran Python and ops (most in ' || x.first_doing || ')'
                           WHEN 'graph' THEN 'the CPU prepared a CUDA graph''s replay (most in ' || x.first_doing || ')'
                           WHEN 'queued' THEN 'the next work was already queued (waiting on another stream or an event)'
                           ELSE 'the next work''s launch is not in the trace' END) AS title,
       format('{} gap(s) in {}{}, longest {:.1f} µs; idle µs {} by what the CPU was doing: {}',
              g.gaps, CASE WHEN s.has_steps THEN format('{} steady step(s)', g.steps) ELSE 'the trace' END, CASE WHEN g.devices > 1 THEN format(' on {} devices', g.devices) ELSE '' END, g.longest_us,
              CASE WHEN s.has_steps THEN 'per step' ELSE 'in the trace' END, x.top_doing)
       || CASE WHEN g.cause = 'graph' THEN '; no fix replayed: the step''s kernels are already one CUDA graph launch, '
                                           || 'and what the host does before it (input copies, guards, Python) no named change removes'
               WHEN g.cause = 'queued' THEN '; no fix replayed: the work waited on another stream or an event, not on the CPU, '
                                            || 'and what to change there the trace does not name'
               WHEN g.cause = 'unlaunched' THEN '; no fix replayed: with no launch in the trace, nothing says what held the work back'
               ELSE '' END AS detail,
       CASE g.cause
            WHEN 'sync' THEN 'drop the sync, or sync once every N steps: read results (loss.item(), .cpu(), print) only when you log them, and time with CUDA events rather than torch.cuda.synchronize()'
            WHEN 'scaler' THEN 'the wait is GradScaler.step reading whether the gradients hold inf/NaN, not an .item() of your code: '
                               || CASE WHEN g.scaler_fusable THEN format('torch.optim.{}(model.parameters(), ..., fused=True) checks in its fused kernel and GradScaler reads nothing', g.scaler_before)
                                       ELSE 'an optimizer with fused=True (Adam, AdamW, SGD) checks in its kernel and GradScaler reads nothing' END
                               || '; or train under bf16 autocast, which needs no GradScaler, on a GPU with BF16 (Ampere and later)'
            WHEN 'shape' THEN 'size the output without the GPU''s data: for a boolean index (x[mask], a loss over masked elements) multiply by the mask or use torch.where(mask, x, 0), and divide by mask.sum() on the GPU; where a bound on the size is known, torch.nonzero_static(mask, size=N) or repeat_interleave(..., output_size=N); else move it out of the step'
            WHEN 'copy' THEN 'keep the value on the GPU (torch.where instead of a Python if on a tensor), or copy it into pinned memory with non_blocking=True and read it a step later'
            WHEN 'stall' THEN 'find what holds the launching thread (a sleep, a lock, logging, host-side work) and move it off the step: to another thread, or every N steps'
            WHEN 'host' THEN 'move the host-side work off the step: prepare inputs in DataLoader workers (num_workers > 0, pin_memory=True), or copy the raw batch (uint8, pinned, non_blocking=True) and transform it on the GPU; compute metrics on GPU tensors'
            WHEN 'data' THEN 'load batches in DataLoader workers (num_workers > 0, persistent_workers=True, prefetch_factor) with pin_memory=True, and copy them with non_blocking=True'
            WHEN 'cpu' THEN 'launch less from Python: capture the step in a CUDA graph (torch.cuda.graph, or torch.compile(mode="reduce-overhead")), fuse small ops with torch.compile, use fused optimizers (AdamW(fused=True)), or give each kernel more work (a bigger batch)'
            WHEN 'graph' THEN 'the step already replays a CUDA graph: what holds the GPU back is the host''s work around each replay (torch.compile''s CUDA graph trees copy inputs that are not static and check guards; a torch.cuda.CUDAGraph needs its inputs copied in): keep inputs in the graph''s static buffers, move host work off the step, or replay more work per launch (a bigger batch)'
            WHEN 'queued' THEN 'look at what the work waited on: a stream wait, an event, a collective on another stream'
            ELSE 'profile with ProfilerActivity.CPU so the launches are in the trace' END AS fix,
       -- Not per step where the trace has none: a whole trace's idle time is no step's saving.
       CASE g.cause WHEN 'sync' THEN 'drop-sync:' || g.sync_targets
                    WHEN 'scaler' THEN CASE WHEN g.scaler_fusable THEN 'fuse-optimizer' ELSE 'drop-scaler-checks' END
                    -- by the sizing op, in the forward and in the backward alike
                    WHEN 'shape' THEN 'drop-sync:' || g.shape_ops
                    WHEN 'copy' THEN CASE WHEN g.pageable THEN 'pin-copies' ELSE 'drop-sync:' || g.copy_targets END
                    -- the advice's pinned memory too, where the loaded batches are copied from pageable memory
                    WHEN 'data' THEN 'drop-cpu:(?i)dataloader'
                                     || CASE WHEN EXISTS (SELECT 1 FROM memcpy m WHERE m.trace = g.trace AND m.kind = 'HtoD'
                                                                                  AND m.name ILIKE '%pageable%')
                                             THEN '; pin-copies' ELSE '' END
                    WHEN 'host' THEN 'drop-host-ops:' || $min_host_op_us
                    -- the stalls' own range (a µs either side: the replay counts whole nanoseconds, these
                    -- are microseconds as doubles): the thread's longer stretches of work are no stall this finding saw
                    WHEN 'stall' THEN 'drop-cpu-gaps:' || CAST(greatest(floor(g.shortest_stall_us) - 1, 1) AS BIGINT) || '-'
                                      || CAST(ceil(g.longest_stretch_us) + 1 AS BIGINT)
                    -- the launch rate alone: stalls stay (they are the stall finding's)
                    WHEN 'cpu' THEN 'cuda-graph:' || $min_stall_us END AS whatif,
       CASE WHEN s.has_steps THEN g.idle_us / g.steps END AS estimate_us_per_step,
       g.evidence
FROM groups g
JOIN tops x USING (trace, cause)
-- The step's time: its ProfilerStep span, or, without steps, the GPU's busy and counted idle time.
JOIN (SELECT t.trace, coalesce(t.cpu_us_per_step, t.gpu_us_per_step + i.idle_us / t.steps) AS step_us,
             t.cpu_us_per_step IS NOT NULL AS has_steps
      FROM step_totals t JOIN (SELECT trace, sum(round(idle_us * 1e3)) / 1e3 AS idle_us FROM groups GROUP BY trace) i USING (trace)) s USING (trace);
